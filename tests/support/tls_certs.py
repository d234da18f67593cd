"""Throwaway certificates made with the openssl CLI, and a TLS-only redis-server.

The certificates are what rustls (through webpki) insists on: X.509 v3, a CA
with basicConstraints CA:TRUE and keyCertSign, and a server (leaf)
certificate with a subjectAltName (rustls ignores the CN), keyUsage
digitalSignature/keyEncipherment and extendedKeyUsage serverAuth. Keys are
ECDSA P-256: as widely supported as RSA and generated in milliseconds.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from ferrolock.testing import RedisServer

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]


@dataclasses.dataclass
class Certs:
    dir: Path
    ca: Path  # the CA that signed the server certificate (PEM)
    server_cert: Path
    server_key: Path
    other_ca: Path  # an unrelated CA: trusting it must not make the server trusted


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


def make_ca(dir: Path, name: str) -> tuple:
    """A self-signed v3 CA certificate and its key: (cert, key)."""
    cert, key = dir / f"{name}.pem", dir / f"{name}.key"
    _openssl(
        "req",
        "-x509",
        "-new",
        *_EC,
        "-nodes",
        "-keyout",
        key.name,
        "-out",
        cert.name,
        "-days",
        "2",
        "-subj",
        f"/CN=ferrolock test {name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-addext",
        "subjectKeyIdentifier=hash",
        cwd=dir,
    )
    return cert, key


def make_certs(dir: Optional[Path] = None, san: str = "IP:127.0.0.1,DNS:localhost") -> Certs:
    """A CA, a server certificate it signed for `san`, and an unrelated second CA."""
    dir = Path(dir or tempfile.mkdtemp(prefix="ferrolock-tls-"))
    ca, ca_key = make_ca(dir, "ca")
    other_ca, _ = make_ca(dir, "other-ca")
    (dir / "server.ext").write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={san}\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
    )
    _openssl(
        "req", "-new", *_EC, "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=dir
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        ca.name,
        "-CAkey",
        ca_key.name,
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        cwd=dir,
    )
    return Certs(dir=dir, ca=ca, server_cert=dir / "server.pem", server_key=dir / "server.key", other_ca=other_ca)


class TlsRedisServer(RedisServer):
    """A redis-server that listens for TLS only (`--port 0`), on one or more
    loopback addresses; its start-up probe and `command` speak TLS."""

    def __init__(self, certs: Certs, password: Optional[str] = None, bind: tuple = ("127.0.0.1",), extra: tuple = ()):
        super().__init__(password=password, extra=extra)
        self.certs = certs
        self.bind = bind

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs.ca))

    def _args(self) -> list:
        args = [
            self.binary,
            "--port",
            "0",
            "--tls-port",
            str(self.port),
            "--bind",
            *self.bind,
            "--tls-cert-file",
            str(self.certs.server_cert),
            "--tls-key-file",
            str(self.certs.server_key),
            "--tls-ca-cert-file",
            str(self.certs.ca),
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
        ]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self.extra)

    def _open(self) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        return self.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")


def remove(certs: Certs) -> None:
    shutil.rmtree(certs.dir, ignore_errors=True)


if __name__ == "__main__":  # manual check: print the server certificate
    c = make_certs()
    os.system(f"{OPENSSL} x509 -in {c.server_cert} -noout -text")
    remove(c)
