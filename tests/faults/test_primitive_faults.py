"""Semaphores and elections under faults: a holder paused past its ttl, a
server restart, cancellation at every step. They run on the Lock's
machinery, so the Lock's guarantees must hold for them too."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import ferrolock
from support.helpers import LostProbe, wait_for

pytestmark = pytest.mark.chaos

CHILD = textwrap.dedent(
    """
    import sys, ferrolock
    client = ferrolock.Client(sys.argv[1], prefix=sys.argv[2])
    if sys.argv[3] == "permit":
        held = client.semaphore("s", 1, ttl=0.5)
        assert held.acquire()
    else:
        held = client.election("e", ttl=0.5).campaign("paused")
    print("held", flush=True)
    sys.stdin.readline()
    print("lost", held.lost, flush=True)
    """
)


@pytest.mark.parametrize("kind", ["permit", "term"])
def test_a_holder_paused_past_its_ttl_loses_and_is_told(client, redis_url, prefix, kind):
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_url, prefix, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline().strip() == "held"
        os.kill(p.pid, signal.SIGSTOP)
        try:
            if kind == "permit":
                other = client.semaphore("s", 1)
                assert other.acquire(timeout=5), "the paused holder's permit never came free"
            else:
                other = client.election("e", ttl=0.5).campaign("next", timeout=5)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().split() == ["lost", "True"]
        (other.release if kind == "permit" else other.resign)()
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
        p.stdout.close()


def test_a_server_restart_is_reported_to_permits_and_terms(server, prefix):
    c = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    permit_lost, term_lost = LostProbe(), LostProbe()
    permit = c.semaphore("s", 2, ttl=1.0, on_lost=permit_lost)
    assert permit.acquire()
    term = c.election("e", ttl=1.0).campaign("leader", on_lost=term_lost)
    server.kill()
    server.start()  # without persistence: every hold is gone
    assert permit_lost.wait(3.0) and term_lost.wait(3.0)
    assert permit.lost and term.lost
    again = c.semaphore("s", 2)
    assert again.acquire(timeout=5)
    assert c.election("e").leader() is None
    again.release()


async def test_cancelling_at_every_step_leaves_nothing(client, raw, prefix):
    holder = client.semaphore("c", 1)
    assert await holder.aacquire()
    leader = await client.election("c", ttl=30.0).acampaign("first")
    for steps in range(12):
        waiters = [
            asyncio.ensure_future(client.semaphore("c", 1, fair=True).aacquire()),
            asyncio.ensure_future(client.election("c", ttl=30.0).acampaign(f"w{steps}")),
        ]
        for _ in range(steps):
            await asyncio.sleep(0)
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    wait_for(
        lambda: raw("ZCARD", f"{prefix}{{c}}:sem:q") == 0 and raw("ZCARD", f"{prefix}{{c}}:el:q") == 0,
        5,
        "the cancelled waiters out of both queues",
    )
    await holder.arelease()
    await leader.aresign()
    wait_for(lambda: raw.keys(prefix + "*") == [], 5, "nothing left")
