"""A Sentinel that accepts connections but never answers (SIGSTOPped, so
the kernel still queues connections to its port) costs a client a short
slice of its connect budget, not the whole of it: the next Sentinel is
asked, as Redis's Sentinel client guidelines advise. A new Client connects,
a connected one whose connection is killed reconnects and keeps its hold,
and with every Sentinel silent the error comes within connect_timeout,
diagnosis included. Plain, and over TLS with ACL users."""

from __future__ import annotations

import shutil
import time

import pytest

import ferrolock
from support.redis_sentinel import SentinelDeployment
from support.helpers import hold_field

pytestmark = pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel not installed")

CONNECT_TIMEOUT = 5.0
TTL = 6.0


@pytest.fixture(scope="module", params=["plain", "tls-acl"])
def deployment(request):
    tls = request.param == "tls-acl"
    d = SentinelDeployment(tls=tls, acl=tls, sentinels=2).start()
    yield d
    d.close()


@pytest.fixture
def first_silent(deployment):
    """The first Sentinel of the URL SIGSTOPped for the test's length."""
    deployment.sentinels[0].pause()
    yield deployment
    deployment.sentinels[0].resume()


def connect(d: SentinelDeployment, prefix: str, connect_timeout: float = CONNECT_TIMEOUT) -> ferrolock.Client:
    client = ferrolock.Client(
        d.url(), ca_file=d.ca_file, prefix=prefix, connect_timeout=connect_timeout, command_timeout=2
    )
    client.connect()  # a Client connects at first use: this is it
    return client


def test_a_silent_first_sentinel_does_not_stop_a_client_connecting(first_silent, prefix):
    d = first_silent
    started = time.monotonic()
    client = connect(d, prefix)
    took = time.monotonic() - started
    # A slice of the budget (0.5 s) for the silent one, then the second answers;
    # given the whole budget, the silent one would use all of it and fail.
    assert took < CONNECT_TIMEOUT / 2, f"connecting took {took:.3f} s of a {CONNECT_TIMEOUT} s budget"
    master = d.node(d.master_port(sentinel=1))  # the first Sentinel answers nobody
    with client.lock("job", ttl=TTL) as lock:
        assert hold_field(master("GET", f"{prefix}{{job}}"), "token") == lock.token


def test_a_killed_connection_reconnects_past_a_silent_sentinel_and_the_hold_renews(deployment, prefix, events):
    d = deployment
    client = connect(d, prefix)  # both Sentinels answering
    holder = client.lock("job", ttl=TTL)
    assert holder.acquire()
    master = d.master
    d.sentinels[0].pause()
    try:
        killed_at = time.monotonic()
        assert master("CLIENT", "KILL", "TYPE", "normal") >= 1  # the library's connections to the master
        # The watchdog renews every ttl/3: its next renewal finds the connection
        # dropped, reconnects through the second Sentinel, and renews.
        assert events.wait(lambda t, k, _d, n: k == "renewed" and n == ("job",) and t > killed_at, 2 * TTL), (
            "the hold was not renewed after its connection was killed"
        )
        assert not holder.lost
        assert hold_field(master("GET", f"{prefix}{{job}}"), "token") == holder.token
        holder.release()
    finally:
        d.sentinels[0].resume()


def test_with_every_sentinel_silent_the_error_comes_within_connect_timeout(deployment, prefix):
    d = deployment
    for s in d.sentinels:
        s.pause()
    try:
        started = time.monotonic()
        with pytest.raises(ferrolock.LockConnectionError) as info:
            connect(d, prefix, connect_timeout=2.0)
        took = time.monotonic() - started
    finally:
        for s in d.sentinels:
            s.resume()
    # connect_timeout, plus a margin for a loaded machine (diagnosis included).
    assert took < 2.0 + 1.5, f"the error came after {took:.3f} s"
    assert "sentinel" in str(info.value).lower(), info.value
