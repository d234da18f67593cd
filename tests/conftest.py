"""Fixtures: a real redis-server on a free loopback port (or FERROLOCK_TEST_URL), and
clients whose keys live under a prefix unique to each test, from the
ferrolock.testing plugin; a throwaway Redis Cluster."""

from __future__ import annotations

import os
import signal

import pytest

import ferrolock
from ferrolock.testing import TEST_URL, Raw, server_binary
from support import netns
from support.helpers import Events, announced_server
from support.redis_cluster import RedisCluster

pytest_plugins = ["pytester"]


def pytest_configure(config):
    """A shell runs a background job (`make test &`, `nohup`) with SIGINT
    ignored, and every process it starts inherits that: the children the
    Ctrl-C tests interrupt would never see their SIGINT. Python's own
    handler here makes each child start with the default disposition
    again (a handler is reset at exec, an ignored signal is not)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser):
    parser.addoption("--heavy", action="store_true", help="also run the long variants of the chaos suite")


def pytest_report_header(config):
    """The server this run's tests start (FERROLOCK_TEST_SERVER picks another binary)."""
    if os.environ.get(TEST_URL):
        return f"ferrolock tests: the server {TEST_URL} names"
    try:
        binary = server_binary()
    except RuntimeError as e:
        return f"ferrolock tests: {e}"
    name, version = announced_server(binary)
    return f"ferrolock tests: {name} {version} ({binary})"


# How pytest-xdist shares the tests out among its workers (`-n N --dist
# loadgroup`, see pytest_xdist_make_scheduler): each test goes to the next free
# worker, except those of the files named here (by file name, unique across
# the folders of tests/), which run on one worker, one after the other, as one
# unit. The units start in this order, before the single tests, the longest
# first.
ONE_WORKER = {
    # Suites that keep every core busy on their own (processes hammering one
    # lock, the history checker's workers and nemesis): one at a time.
    "test_chaos_stress.py": "cpu-bound",
    "test_history.py": "cpu-bound",
    # A deployment started once per module (PostgreSQL, Sentinel, TLS
    # servers, quorum masters, a cluster with replicas): started once.
    "test_fencing.py": "test_fencing.py",
    "test_replicas.py": "test_replicas.py",
    "test_chaos_security.py": "test_chaos_security.py",
    "test_sentinel_tls.py": "test_sentinel_tls.py",
    "test_sentinel_unresponsive.py": "test_sentinel_unresponsive.py",
    "test_sentinel_majority.py": "test_sentinel_majority.py",
    "test_newcomer_errors.py": "test_newcomer_errors.py",
    "test_cluster_failover.py": "test_cluster_failover.py",
    "test_tls_self_signed.py": "test_tls_self_signed.py",
}


def _unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its group, or the test alone."""
    return ONE_WORKER.get(nodeid.split("::", 1)[0].rsplit("/", 1)[-1], nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the groups of ONE_WORKER (pytest-xdist's own
    loadgroup reads xdist_group marks through the node ids it rewrites,
    which pytest 9.2's node ids no longer allow: pytest-xdist issue 1386)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # the order pytest_collection_modifyitems gives
    return Grouped(config, log)


def pytest_collection_modifyitems(config, items):
    order = list(dict.fromkeys(ONE_WORKER.values()))
    items.sort(key=lambda item: order.index(_unit(item.nodeid)) if _unit(item.nodeid) in order else len(order))
    if config.getoption("--heavy"):
        return
    skip = pytest.mark.skip(reason="heavy variant: run with --heavy")
    for item in items:
        if "heavy" in item.keywords:
            item.add_marker(skip)


# The fixtures of the ferrolock.testing plugin (loaded through its pytest11
# entry point), under the names this suite has always used.


@pytest.fixture(scope="session")
def redis_url(ferrolock_redis_url):
    return ferrolock_redis_url


@pytest.fixture
def prefix(ferrolock_prefix) -> str:
    return ferrolock_prefix


@pytest.fixture
def client(ferrolock_client):
    return ferrolock_client


@pytest.fixture
def events():
    """This process's LockEvents while the test runs (a helpers.Events)."""
    e = Events()
    ferrolock.add_listener(e)
    yield e
    ferrolock.remove_listener(e)


@pytest.fixture
def raw(redis_url) -> Raw:
    """A minimal RESP client for looking at Redis behind ferrolock's back."""
    return Raw(redis_url)


@pytest.fixture
def server(ferrolock_private_server):
    """A private redis-server this test may kill or restart."""
    return ferrolock_private_server


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
def net(request):
    """A test network (support/netns.py) of the test's own: skipped, saying
    why, where the machine cannot make one; removed at the test's end however
    it ends."""
    netns.skip_unless_available(latency=bool(request.node.get_closest_marker("latency")))
    n = netns.Net(seed=int.from_bytes(request.node.nodeid.encode()[-4:], "big"))
    try:
        yield n
    finally:
        n.close()
