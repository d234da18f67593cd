"""A closed Sentinel client goes quiet. While it is in use (a hold renewing,
a waiter waiting) it asks the Sentinels every second whether the master
moved (src/transport/backend/follow.rs); once close() has returned, neither
a hold's watchdog nor a waiter opens another connection to a Sentinel or to
the master."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

import ferrolock
from ferrolock import Retry
from support.redis_sentinel import SentinelDeployment

pytestmark = pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel not installed")

RECHECK = 1.0  # src/transport/sentinel.rs: how often a client in use asks the Sentinels
SLOW = Retry.fixed(30.0)  # the waiter's next attempt is far off: only the close ends its wait


@pytest.fixture(scope="module")
def deployment():
    d = SentinelDeployment().start()
    yield d
    d.close()


def accepted(kept) -> int:
    """The connections the servers of `kept` have accepted so far, asked over
    those kept connections (which add none)."""
    total = 0
    for conn in kept:
        info = conn("INFO", "stats").decode()
        total += int(info.split("total_connections_received:", 1)[1].split()[0])
    return total


def connect(d: SentinelDeployment, prefix: str) -> ferrolock.Client:
    return ferrolock.Client(d.url(), prefix=prefix, connect_timeout=5, command_timeout=2)


def assert_quiet_after_close(d: SentinelDeployment, client: ferrolock.Client, kept_sentinels, kept_nodes) -> None:
    """`client` asks the Sentinels while in use; once closed, within half a
    RECHECK, nothing of it reaches a Sentinel or a data node for three."""
    asked = accepted(kept_sentinels)
    d.wait_for(lambda: accepted(kept_sentinels) > asked, 5 * RECHECK, "the client in use to ask the Sentinels")
    client.close()
    time.sleep(RECHECK / 2)  # the bound: a question asked just before close() may still be answered
    sentinels, nodes = accepted(kept_sentinels), accepted(kept_nodes)
    time.sleep(3 * RECHECK)  # no event marks a connection not made: watch for three rechecks
    assert accepted(kept_sentinels) == sentinels, "the closed client still asks the Sentinels"
    assert accepted(kept_nodes) == nodes, "the closed client still connects to the data nodes"


# The hold is left to its ttl, as close() says, and its handle then collected.
@pytest.mark.filterwarnings('ignore:unreleased ferrolock.Lock "held":ResourceWarning')
def test_a_closed_client_with_a_hold_asks_nothing_more(deployment, prefix):
    """The hold's watchdog outlives close() (the hold ends at its ttl, which
    is far off here): the Sentinel follower it started does not."""
    d = deployment
    kept_sentinels, kept_nodes = [s.connect() for s in d.sentinels], [n.connect() for n in d.nodes]
    client = connect(d, prefix)
    holder = client.lock("held", ttl=30.0)
    assert holder.acquire()
    try:
        assert_quiet_after_close(d, client, kept_sentinels, kept_nodes)
    finally:
        for c in kept_sentinels + kept_nodes:
            c.close()
    d.master("DEL", f"{prefix}{{held}}")


def test_a_closed_client_with_a_waiter_asks_nothing_more(deployment, prefix):
    """A waiter of the closed client is woken, and fails; nothing of it
    follows the master afterwards."""
    d = deployment
    kept_sentinels, kept_nodes = [s.connect() for s in d.sentinels], [n.connect() for n in d.nodes]
    # Held with no watchdog: the holder's client sends nothing while the waiter waits.
    holder = connect(d, prefix).lock("waited", ttl=30.0, auto_renew=False)
    assert holder.acquire()
    client = connect(d, prefix)
    waiter = client.lock("waited", retry=SLOW)
    failed: dict = {}

    def wait() -> None:
        try:
            waiter.acquire(timeout=30)
        except ValueError as e:
            failed["error"] = e

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        channel = f"{prefix}{{waited}}:wake"
        d.wait_for(lambda: channel in d.master("PUBSUB", "CHANNELS", f"{prefix}*"), 5, "the waiter subscribed")
        assert_quiet_after_close(d, client, kept_sentinels, kept_nodes)
        thread.join(5)
        assert "closed" in str(failed.get("error")), "the waiter did not fail when its client was closed"
    finally:
        holder.release()
        thread.join(30)
        for c in kept_sentinels + kept_nodes:
            c.close()
