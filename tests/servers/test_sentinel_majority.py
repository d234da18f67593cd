"""When the Sentinels disagree on the master, the client takes the one most
of them name. A Sentinel that lags behind a failover does this for real: one
stopped for over 2 s enters TILT mode and, for 30 s, keeps naming the master
it knew, which keeps answering ROLE as a master until its own Sentinel
reconfigures it. Asking the first Sentinel that answers then splits the
clients. Here the odd Sentinel monitors a stray master under the same
service name and comes first in the URL: every hold still lands on the
master the other two name, at connect and across the rechecks a client in
use makes every second."""

from __future__ import annotations

import shutil
import time

import pytest

import ferrolock
from support.redis_sentinel import SERVICE, Node, SentinelDeployment
from support.helpers import hold_field

pytestmark = pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel not installed")


@pytest.fixture(scope="module")
def disagreeing():
    """A deployment with two Sentinels, and a third, first in the URL, that
    names a stray master of its own."""
    d = SentinelDeployment(sentinels=2).start()
    stray, odd = Node(None, None), Node(None, None)
    try:
        stray.start(
            stray.tls_lines() + ["bind 127.0.0.1", f"dir {stray.dir}", 'save ""'],
            shutil.which("redis-server") or "redis-server",
        )
        odd.start(
            odd.tls_lines()
            + [
                "bind 127.0.0.1",
                f"dir {odd.dir}",
                f"sentinel monitor {SERVICE} 127.0.0.1 {stray.port} 1",
            ],
            shutil.which("redis-sentinel") or "redis-sentinel",
        )
        assert int(odd("SENTINEL", "get-master-addr-by-name", SERVICE)[1]) == stray.port
        yield d, stray, odd
    finally:
        odd.close()
        stray.close()
        d.close()


def test_the_master_most_sentinels_name_wins_over_a_first_sentinel_that_lags(disagreeing, prefix):
    d, stray, odd = disagreeing
    url = d.url(sentinels=[odd.port] + [s.port for s in d.sentinels])
    client = ferrolock.Client(url, prefix=prefix, connect_timeout=5)
    master = d.master
    assert master.port != stray.port
    # A client in use asks the Sentinels again every second (sentinel::RECHECK):
    # holds over 2.5 s go through at least two rechecks, and none moves it.
    until = time.monotonic() + 2.5
    n = 0
    while time.monotonic() < until or n < 3:
        with client.lock(f"job-{n}", ttl=5) as lock:
            assert hold_field(master("GET", f"{prefix}{{job-{n}}}"), "token") == lock.token
            assert stray("EXISTS", f"{prefix}{{job-{n}}}") == 0
        n += 1
    assert stray("DBSIZE") == 0, "a hold went to the master only the first Sentinel names"
