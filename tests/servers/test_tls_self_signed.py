"""TLS as people set it up: the one-line ``openssl req -x509`` self-signed
certificate, a URL without ``ca_file``, ``redis://`` aimed at a TLS port,
and redis-py's ``ssl_*`` URL parameters. A refusal is a
LockConfigurationError naming the fix, never rustls's debug text."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

import ferrolock
from ferrolock import LockConfigurationError
from support.tls_certs import OPENSSL, Certs, TlsRedisServer, make_certs


def self_signed(dir: Path, *extra: str) -> Certs:
    """The certificate most people make: RSA, self-signed, CA:TRUE unless `extra` says otherwise."""
    subprocess.run(
        [
            OPENSSL,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "self.key",
            "-out",
            "self.pem",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            *extra,
        ],
        cwd=dir,
        check=True,
        capture_output=True,
    )
    cert = dir / "self.pem"
    return Certs(dir=dir, ca=cert, server_cert=cert, server_key=dir / "self.key", other_ca=cert)


@pytest.fixture(scope="module")
def self_signed_server(tmp_path_factory):
    certs = self_signed(tmp_path_factory.mktemp("self-signed"))
    with TlsRedisServer(certs) as server:
        yield server


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    """A CA and a server certificate it signed, in the module's own directory."""
    return make_certs(tmp_path_factory.mktemp("ca-signed"))


@pytest.fixture(scope="module")
def tls_server(certs):
    with TlsRedisServer(certs) as server:
        yield server


def refusal(url: str, **options) -> str:
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(url, connect_timeout=3, **options).connect()
    msg = str(info.value)
    assert "Other(" not in msg and "OtherError" not in msg, msg
    return msg


def test_the_one_line_self_signed_certificate_as_ca_file_is_refused_naming_the_fix(self_signed_server):
    msg = refusal(f"rediss://127.0.0.1:{self_signed_server.port}/0", ca_file=str(self_signed_server.certs.ca))
    assert "basicConstraints CA:TRUE" in msg and "openssl req -x509" in msg, msg
    assert "basicConstraints=critical,CA:FALSE" in msg and "ssl_cert_reqs=none" in msg, msg


def test_a_self_signed_certificate_made_as_the_message_says_is_accepted(tmp_path, prefix):
    """The fix the refusal names works: CA:FALSE, given as its own ca_file."""
    certs = self_signed(
        tmp_path,
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "-addext",
        "extendedKeyUsage=serverAuth",
    )
    with TlsRedisServer(certs) as server:
        with ferrolock.Client(f"rediss://127.0.0.1:{server.port}/0", ca_file=str(certs.ca), prefix=prefix) as c:
            with c.lock("self-signed", ttl=5) as lock:
                assert c.inspect("self-signed").token == lock.token


def test_without_ca_file_the_message_says_to_give_one(tls_server):
    msg = refusal(f"rediss://127.0.0.1:{tls_server.port}/0")
    assert "not signed by this machine's trusted authorities" in msg and "ca_file=PATH" in msg, msg


def test_a_self_signed_certificate_without_ca_file_says_to_give_one(tmp_path, self_signed_server):
    """Made as the message says (CA:FALSE), or the one-line default: checked
    against this machine's authorities, which did not sign it (rustls says
    BadSignature for the first): the message says to give ca_file."""
    certs = self_signed(
        tmp_path,
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "-addext",
        "extendedKeyUsage=serverAuth",
    )
    with TlsRedisServer(certs) as server:
        msg = refusal(f"rediss://127.0.0.1:{server.port}/0")
        assert "ca_file=PATH" in msg and "this machine's trusted authorities" in msg, msg
    msg = refusal(f"rediss://127.0.0.1:{self_signed_server.port}/0")
    assert "ca_file" in msg, msg


def test_plain_url_to_a_tls_port_says_use_rediss(tls_server):
    msg = refusal(f"redis://127.0.0.1:{tls_server.port}/0")
    assert "answers TLS only" in msg and "use rediss://" in msg, msg
    assert "reset by peer" not in msg, msg


def test_ssl_cert_reqs_none_skips_the_certificate_check(self_signed_server, prefix):
    """redis-py's ?ssl_cert_reqs=none: encrypted, certificate not checked (as #insecure)."""
    url = f"rediss://127.0.0.1:{self_signed_server.port}/0?ssl_cert_reqs=none"
    with ferrolock.Client(url, prefix=prefix) as client:
        with client.lock("none", ttl=5):
            assert client.inspect("none") is not None
    with pytest.raises(ValueError, match="ssl_cert_reqs=none skips the certificate check"):
        ferrolock.Client(url, ca_file=str(self_signed_server.certs.ca))


def test_ssl_ca_certs_is_the_ca_file(tls_server, certs, prefix):
    url = f"rediss://127.0.0.1:{tls_server.port}/0?ssl_ca_certs={certs.ca}&ssl_cert_reqs=required"
    with ferrolock.Client(url, prefix=prefix) as client:
        client.connect()
    with pytest.raises(ValueError, match=r"ca_file= and the Redis URL's \?ssl_ca_certs= disagree"):
        ferrolock.Client(url, ca_file=str(certs.other_ca))


def test_ssl_check_hostname_false_checks_the_certificate_not_the_name(certs, prefix):
    """127.0.0.2 is not in the certificate: refused by name, accepted with ssl_check_hostname=false."""
    with TlsRedisServer(certs, bind=("127.0.0.1", "127.0.0.2")) as server:
        url = f"rediss://127.0.0.2:{server.port}/0"
        msg = refusal(url, ca_file=str(certs.ca))
        assert "not valid for name" in msg and "subjectAltName" in msg, msg
        with ferrolock.Client(url + "?ssl_check_hostname=false", ca_file=str(certs.ca), prefix=prefix) as c:
            c.connect()
        # the certificate itself is still checked
        msg = refusal(url + "?ssl_check_hostname=false", ca_file=str(certs.other_ca))
        assert "not signed by the authorities in ca_file" in msg, msg


def test_ssl_certfile_and_keyfile_are_a_client_certificate(certs, prefix):
    """A server that wants client certificates (tls-auth-clients yes): refused without one, naming
    ssl_certfile; accepted with one its CA signed."""
    d = certs.dir
    subprocess.run(
        [
            OPENSSL,
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
            "-subj",
            "/CN=ferrolock client",
        ],
        cwd=d,
        check=True,
        capture_output=True,
    )
    (d / "client.ext").write_text("basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n")
    subprocess.run(
        [
            OPENSSL,
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "client.pem",
            "-days",
            "2",
            "-extfile",
            "client.ext",
        ],
        cwd=d,
        check=True,
        capture_output=True,
    )

    class WantsClientCertificates(TlsRedisServer):
        def ssl_context(self) -> ssl.SSLContext:
            context = super().ssl_context()
            context.load_cert_chain(d / "client.pem", d / "client.key")
            return context

    with WantsClientCertificates(certs, extra=("--tls-auth-clients", "yes")) as server:
        url = f"rediss://127.0.0.1:{server.port}/0"
        with pytest.raises(ferrolock.LockConfigurationError) as info:
            ferrolock.Client(url, ca_file=str(certs.ca), connect_timeout=3).connect()
        assert "ssl_certfile" in str(info.value), str(info.value)
        with_cert = f"{url}?ssl_certfile={d / 'client.pem'}&ssl_keyfile={d / 'client.key'}"
        with ferrolock.Client(with_cert, ca_file=str(certs.ca), prefix=prefix) as client:
            with client.lock("mtls", ttl=5):
                assert client.inspect("mtls") is not None
