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
import time
from pathlib import Path
from typing import Optional

from redis_server import free_port

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
        "req", "-x509", "-new", *_EC, "-nodes", "-keyout", key.name, "-out", cert.name,
        "-days", "2", "-subj", f"/CN=ferrolock test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
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
    _openssl("req", "-new", *_EC, "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=dir)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", ca.name, "-CAkey", ca_key.name,
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=dir)
    return Certs(dir=dir, ca=ca, server_cert=dir / "server.pem", server_key=dir / "server.key", other_ca=other_ca)


class TlsRedisServer:
    """A redis-server that listens for TLS only (`--port 0`), on one or more loopback addresses.

    RedisServer's start-up probe PINGs the plain port, which a TLS-only server
    does not have, so this one waits for a TLS handshake and a PONG instead.
    """

    def __init__(self, certs: Certs, password: Optional[str] = None, bind: tuple = ("127.0.0.1",), extra: tuple = ()):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (run `make test`, which installs it)")
        self.binary = binary
        self.certs = certs
        self.password = password
        self.bind = bind
        self.extra = extra
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="ferrolock-redis-tls-")
        self.proc: Optional[subprocess.Popen] = None

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.certs.ca))
        return ctx

    def start(self) -> "TlsRedisServer":
        args = [
            self.binary, "--port", "0", "--tls-port", str(self.port), "--bind", *self.bind,
            "--tls-cert-file", str(self.certs.server_cert), "--tls-key-file", str(self.certs.server_key),
            "--tls-ca-cert-file", str(self.certs.ca), "--tls-auth-clients", "no",
            "--save", "", "--appendonly", "no", "--dir", self.dir,
        ]
        if self.password:
            args += ["--requirepass", self.password]
        args += list(self.extra)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server (TLS) exited with {self.proc.returncode}")
            try:
                if self.command("PING").startswith((b"+PONG", b"-NOAUTH")):
                    return self
            except (OSError, ssl.SSLError):
                time.sleep(0.02)  # the server is starting: nothing to await but its port
        raise RuntimeError("redis-server (TLS) did not start within 10 s")

    def command(self, *args: str) -> bytes:
        """One command in RESP over TLS (trusting the test CA); the raw reply."""
        payload = f"*{len(args)}\r\n".encode()
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            payload += b"$%d\r\n%s\r\n" % (len(b), b)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw:
            with self.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1") as s:
                if self.password:
                    auth = self.password.encode()
                    s.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(auth), auth))
                    s.recv(64)
                s.sendall(payload)
                return s.recv(1 << 20)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def remove(certs: Certs) -> None:
    shutil.rmtree(certs.dir, ignore_errors=True)


if __name__ == "__main__":  # manual check: print the server certificate
    c = make_certs()
    os.system(f"{OPENSSL} x509 -in {c.server_cert} -noout -text")
    remove(c)
