"""When a Client connects, and when it lets go: making one does no network
I/O (every topology), the first use or ``connect()`` connects and raises
what connecting found, and ``close()`` / ``with`` / ``async with`` close its
connections on the server."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time

import pytest

import ferrolock
from ferrolock import LockConfigurationError, LockConnectionError
from ferrolock.testing import free_port
from support.tls_certs import make_certs


class Silent:
    """A listening socket that never accepts: a connection attempt shows as
    a pending connection on it (TCP, or a unix socket)."""

    def __init__(self, family: int = socket.AF_INET):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_UNIX:
            self.dir = tempfile.mkdtemp(prefix="ferrolock-silent-")
            self.path = os.path.join(self.dir, "redis.sock")
            self.sock.bind(self.path)
        else:
            self.sock.bind(("127.0.0.1", 0))
            self.port = self.sock.getsockname()[1]
        self.sock.listen(16)
        self.sock.setblocking(False)

    def attempts(self) -> int:
        """How many connections reached it (each accepted and closed)."""
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def silent():
    made = []

    def make(family: int = socket.AF_INET) -> Silent:
        s = Silent(family)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_making_a_client_does_no_network_io_in_any_topology(silent, tmp_path):
    """Direct, TLS, unix socket, Sentinel, Cluster and quorum URLs: made, and nothing connected."""
    tcp = [silent() for _ in range(3)]
    unix = silent(socket.AF_UNIX)
    ca = make_certs(tmp_path).ca
    a, b, c = (f"127.0.0.1:{s.port}" for s in tcp)
    made = [
        ferrolock.Client(f"redis://{a}/0"),
        ferrolock.Client(f"rediss://{a}/0"),
        ferrolock.Client(f"rediss://{a}/0", ca_file=str(ca)),
        ferrolock.Client(f"unix://{unix.path}?db=0"),
        ferrolock.Client(f"redis+sentinel://{a},{b}/mymaster/0"),
        ferrolock.Client(f"rediss+sentinel://{a}/mymaster/0"),
        ferrolock.Client(f"redis+cluster://{a},{b}"),
        ferrolock.Client(f"rediss+cluster://{a}"),
        ferrolock.Client([f"redis://{a}/0", f"redis://{b}/0", f"redis://{c}/0"]),
        ferrolock.Client(f"redis://{a}/0", replicas=1, replica_fsync=True),
    ]
    assert len(made) == 10
    assert [s.attempts() for s in tcp] == [0, 0, 0]
    assert unix.attempts() == 0


def test_url_and_option_errors_are_still_raised_at_construction():
    with pytest.raises(ValueError, match="timeout"):
        ferrolock.Client("redis://127.0.0.1:1/0", connect_timeout=0)
    with pytest.raises(ValueError, match="Redis URL"):
        ferrolock.Client("redis://127.0.0.1:notaport/0")
    with pytest.raises(ValueError, match="ca_file"):
        ferrolock.Client("redis://127.0.0.1:1/0", ca_file="/nonexistent.pem")


def test_a_client_made_while_redis_is_down_connects_at_first_use(server, prefix):
    """Made while nothing listens (a Django settings module at import); works once Redis is up."""
    server.stop()
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    with pytest.raises(LockConnectionError, match=str(server.port)):
        client.inspect("x")
    with pytest.raises(LockConnectionError, match=str(server.port)):
        client.connect()
    server.start()
    client.connect()
    with client.lock("x", ttl=5) as lock:
        assert client.inspect("x").token == lock.token


def test_first_use_raises_what_connect_raises(redis_url):
    """The precise message connecting gives is what the first use raises, sync or async."""
    url = redis_url.rsplit("/", 1)[0] + "/99"
    with pytest.raises(LockConfigurationError) as connecting:
        ferrolock.Client(url).connect()
    assert "no database 99" in str(connecting.value)
    for first_use in (
        lambda c: c.inspect("x"),
        lambda c: c.lock("x").acquire(blocking=False),
        lambda c: asyncio.run(c.aconnect()),
        lambda c: asyncio.run(c.ainspect("x")),
    ):
        with pytest.raises(LockConfigurationError) as used:
            first_use(ferrolock.Client(url))
        assert str(used.value) == str(connecting.value)


def test_connect_and_aconnect_check_now(redis_url):
    client = ferrolock.Client(redis_url)
    assert client.connect() is None
    assert client.connect() is None  # once connected, nothing more to do
    assert asyncio.run(client.aconnect()) is None


def test_a_dead_port_fails_within_connect_timeout_at_first_use():
    port = free_port()
    client = ferrolock.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5)
    with pytest.raises(LockConnectionError) as info:
        client.lock("x").acquire(timeout=5)
    assert str(port) in str(info.value)


def connections(server) -> int:
    """Client connections on the server, other than the one asking."""
    listing = server.command("CLIENT", "LIST").decode()
    return sum(1 for line in listing.splitlines() if line and "cmd=client|list" not in line)


def wait_for_connections(server, count: int) -> int:
    """Polls CLIENT LIST until it shows `count` connections (a closed
    socket is seen by the server when it reads it), at most 10 s."""
    deadline = time.monotonic() + 10
    while (seen := connections(server)) != count and time.monotonic() < deadline:
        time.sleep(0.02)  # the server's view, seen only by asking it: polled
    return seen


def use(client: ferrolock.Client, name: str) -> None:
    """Commands, a wake-up subscription and an inline connection: every kind it opens."""
    with client.lock(name, ttl=5):
        other = client.lock(name, ttl=5)
        assert not other.acquire(timeout=0.05)
    client.inspect(name)


def test_close_releases_every_connection(server, prefix):
    baseline = connections(server)
    clients = [ferrolock.Client(server.url, prefix=prefix) for _ in range(20)]
    assert connections(server) == baseline  # made: nothing connected yet
    for i, client in enumerate(clients):
        use(client, f"c{i}")
    assert connections(server) >= baseline + 20
    for client in clients:
        client.close()
        client.close()  # twice: nothing more
    assert wait_for_connections(server, baseline) == baseline


def test_with_and_async_with_close_the_client(server, prefix):
    baseline = connections(server)
    with ferrolock.Client(server.url, prefix=prefix) as client:
        assert isinstance(client, ferrolock.Client)
        use(client, "with")
        assert connections(server) > baseline
    assert wait_for_connections(server, baseline) == baseline
    with pytest.raises(ValueError, match="closed"):
        client.inspect("with")

    async def main() -> ferrolock.Client:
        async with ferrolock.Client(server.url, prefix=prefix) as client:
            async with client.lock("async-with", ttl=5):
                assert connections(server) > baseline
        return client

    closed = asyncio.run(main())
    assert wait_for_connections(server, baseline) == baseline
    with pytest.raises(ValueError, match="closed"):
        asyncio.run(closed.ainspect("async-with"))


def test_a_closed_client_refuses_every_use(redis_url, prefix):
    client = ferrolock.Client(redis_url, prefix=prefix)
    client.connect()
    asyncio.run(client.aclose())
    for use_it in (
        client.connect,
        lambda: client.inspect("x"),
        lambda: client.lock("x").acquire(blocking=False),
        lambda: client.scan(),
        lambda: asyncio.run(client.aconnect()),
    ):
        with pytest.raises(ValueError, match="this Client is closed") as info:
            use_it()
        assert "make a new Client" in str(info.value)


def test_a_quorum_connects_at_first_use_and_closes(server, prefix):
    """Two URLs of one server in a quorum: refused at the first use (made without I/O)."""
    base = server.url
    quorum = ferrolock.Client(
        [base, base.rsplit("/", 1)[0] + "/1", f"redis://127.0.0.1:{free_port()}/0"], prefix=prefix, connect_timeout=0.5
    )
    with pytest.raises(LockConfigurationError, match="same server|twice|one server"):
        quorum.lock("q").acquire(blocking=False)
    quorum.close()
    with pytest.raises(ValueError, match="closed"):
        quorum.inspect("q")
