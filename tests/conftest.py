"""Fixtures: a real redis-server on a free loopback port (or REDIS_URL), and
clients whose keys live under a prefix unique to each test."""

from __future__ import annotations

import socket
import uuid

import pytest

import ferrolock
from redis_cluster import RedisCluster
from redis_server import RedisServer, env_url


def pytest_addoption(parser):
    parser.addoption("--heavy", action="store_true", help="also run the long variants of the chaos suite")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--heavy"):
        return
    skip = pytest.mark.skip(reason="heavy variant: run with --heavy")
    for item in items:
        if "heavy" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def redis_url():
    url = env_url()
    if url:
        yield url
        return
    server = RedisServer().start()
    yield server.url
    server.close()


@pytest.fixture(scope="session")
def cluster():
    """A throwaway Redis Cluster: 3 primaries on free loopback ports."""
    c = RedisCluster().start()
    yield c
    c.close()


class ClusterRaw:
    """Raw access to each node of a cluster, to look behind ferrolock's back."""

    def __init__(self, cluster: RedisCluster):
        self.cluster = cluster
        self.nodes = {port: Raw(f"redis://127.0.0.1:{port}/0") for port in cluster.ports}

    def node(self, key: str) -> "Raw":
        """The node that owns `key`'s slot."""
        return self.nodes[self.cluster.node_port_for(key)]

    def keys(self, pattern: str) -> list:
        return sorted(k for raw in self.nodes.values() for k in raw.keys(pattern))


@pytest.fixture
def cluster_raw(cluster) -> ClusterRaw:
    return ClusterRaw(cluster)


@pytest.fixture
def prefix() -> str:
    return f"test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def client(redis_url, prefix):
    return ferrolock.Client(redis_url, prefix=prefix)


@pytest.fixture
def raw(redis_url):
    """A minimal RESP client for looking at Redis behind ferrolock's back."""
    return Raw(redis_url)


@pytest.fixture
def server():
    """A private redis-server this test may kill or restart."""
    s = RedisServer().start()
    yield s
    s.close()


class Raw:
    def __init__(self, url: str):
        rest = url.split("://", 1)[1]
        auth, _, hostpart = rest.rpartition("@")
        self.password = auth.split(":", 1)[1] if ":" in auth else None
        hostport = hostpart.split("/", 1)[0]
        host, _, port = hostport.rpartition(":")
        self.addr = (host, int(port))

    def __call__(self, *args):
        with socket.create_connection(self.addr, timeout=10) as s:
            f = s.makefile("rb")
            if self.password:
                s.sendall(_encode(("AUTH", self.password)))
                _read(f)
            s.sendall(_encode(args))
            return _read(f)

    def keys(self, pattern: str) -> list:
        return sorted(k.decode() for k in self("KEYS", pattern))

    def command(self, *args) -> bytes:
        """The same call, named as RedisServer's (for helpers taking either)."""
        return self(*args)


def _encode(args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


def _read(f):
    line = f.readline()
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise RuntimeError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [_read(f) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")
