"""Leader election: campaign / proclaim / leader / observe / resign, terms
that strictly increase across leaders, loss like a Lock's, pushed changes,
take-over within a round trip of a resignation and within the ttl of a
death."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ferrolock
from support.helpers import wait_for


def test_campaign_leads_and_terms_increase(client, raw, prefix):
    e = client.election("cron", ttl=5.0)
    assert e.leader() is None
    with e.campaign("host-a") as term:
        leader = e.leader()
        assert (leader.value, leader.term) == ("host-a", term.number)
        assert 0 < leader.ttl <= 5.0
        first = term.number
        term.proclaim("host-a:v2")
        assert e.leader().value == "host-a:v2"
        e.proclaim("host-a:v3")  # the same, on the election
        assert e.leader().value == "host-a:v3"
        assert e.leader().term == first  # same term
    assert e.leader() is None
    with e.campaign("host-b") as second:
        assert second.number > first
    assert raw.keys(prefix + "*") == []


def test_a_resignation_hands_over_within_a_round_trip_in_arrival_order(client):
    e = client.election("r", ttl=30.0)
    leader = e.campaign("a")
    order, started = [], []

    def campaign(value):
        term = e.campaign(value, timeout=10)
        order.append((value, time.monotonic(), term.number))
        term.resign()

    for v in ("b", "c"):
        t = threading.Thread(target=campaign, args=(v,))
        t.start()
        started.append(t)
        wait_for(lambda n=len(started): ferrolock._ferrolock._debug_stats()["waiters"] >= n, 5, f"{v} waiting")
    first = leader.number
    resigned = time.monotonic()
    leader.resign()
    for t in started:
        t.join(10)
    assert [v for v, _, _ in order] == ["b", "c"]
    assert order[0][1] - resigned < 0.5, "the next campaigner did not take over at once"
    assert order[0][2] > first and order[1][2] > order[0][2]


def test_observe_yields_every_change_as_it_happens(client):
    e = client.election("o", ttl=30.0)
    seen, done = [], threading.Event()

    def watch():
        for change in e.observe():
            seen.append(None if change is None else change.value)
            if len(seen) == 4:
                done.set()
                return

    threading.Thread(target=watch, daemon=True).start()
    wait_for(lambda: len(seen) == 1, 5, "the current state")
    term = e.campaign("x")
    wait_for(lambda: len(seen) == 2, 5, "the new leader")
    term.proclaim("y")
    wait_for(lambda: len(seen) == 3, 5, "the new value")
    term.resign()
    assert done.wait(5)
    assert seen == [None, "x", "y", None]


CHILD = textwrap.dedent(
    """
    import sys, ferrolock
    client = ferrolock.Client(sys.argv[1], prefix=sys.argv[2])
    term = client.election("d", ttl=float(sys.argv[3])).campaign("doomed")
    print("leading", term.number, flush=True)
    sys.stdin.readline()
    """
)


def test_a_dead_leader_is_replaced_within_its_ttl(client, redis_url, prefix):
    ttl = 1.0
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_url, prefix, str(ttl)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stdout.readline().split()
        assert line[0] == "leading"
        e = client.election("d", ttl=ttl)
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("term", e.campaign("heir", timeout=10)))
        t.start()
        wait_for(lambda: ferrolock._ferrolock._debug_stats()["waiters"] >= 1, 5, "the heir waiting")
        os.kill(p.pid, signal.SIGKILL)
        killed = time.monotonic()
        t.join(10)
        took = time.monotonic() - killed
        assert got["term"].number > int(line[1])
        assert took < ttl + 0.5, f"took over after {took:.2f} s"
        got["term"].resign()
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
        p.stdout.close()


def test_a_lost_term_is_reported(client, raw, prefix):
    lost = threading.Event()
    e = client.election("l", ttl=0.6)
    term = e.campaign("v", on_lost=lost.set)
    raw("DEL", f"{prefix}{{l}}:el")  # an operator wipes the term
    assert lost.wait(2)
    assert term.lost
    with pytest.raises(ferrolock.LockNotOwned):
        term.proclaim("too late")
    with pytest.raises(ferrolock.LockLost):
        with term:
            pass


async def test_async_campaign_and_observe(client):
    e = client.election("a", ttl=30.0)
    seen = []

    async def watch():
        async for change in e.aobserve():
            seen.append(None if change is None else change.value)
            if len(seen) == 3:
                return

    watcher = asyncio.ensure_future(watch())
    while not seen:
        await asyncio.sleep(0.005)
    term = await e.acampaign("async-leader")
    assert (await e.aleader()).value == "async-leader"
    await term.aproclaim("v2")
    await asyncio.wait_for(watcher, 5)
    assert seen == [None, "async-leader", "v2"]
    await term.aresign()
    assert await e.aleader() is None


def test_election_on_a_cluster(cluster, cluster_raw, prefix):
    c = ferrolock.Client(cluster.url, prefix=prefix)
    terms = [c.election(f"e{i}", ttl=5.0).campaign(f"v{i}") for i in range(4)]
    assert [c.election(f"e{i}").leader().value for i in range(4)] == ["v0", "v1", "v2", "v3"]
    for t in terms:
        t.resign()
    wait_for(lambda: cluster_raw.keys(prefix + "*") == [], 5, "no key left")


def test_a_too_long_value_is_named_value(client):
    e = client.election("long")
    with pytest.raises(ValueError, match="^value is 100000 bytes long, longer than 65536 bytes"):
        e.campaign("x" * 100_000)
    with e.campaign("short") as term:
        with pytest.raises(ValueError, match="^value is 65537 bytes long"):
            term.proclaim("x" * 65_537)
        assert e.leader().value == "short"


def test_leader_repr_is_pythons(client):
    e = client.election("repr", ttl=30.0)
    with e.campaign("it's") as term:
        leader = e.leader()
        text = repr(leader)
        assert text == f'Leader(value="it\'s", term={term.number}, ttl={leader.ttl!r})'
        assert "Some(" not in text and isinstance(leader.ttl, float)
