"""Leased semaphores: up to N holders of one name, each permit its own lease
with the Lock's watchdog, loss reporting, fencing, restore-from-token and
wake-ups; fair mode in arrival order; a clear error for disagreeing counts."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import ferrolock
from support.helpers import LostProbe, wait_for

SLOW = ferrolock.Retry.fixed(10.0)  # wake-ups only: a poll would hide a missed one


def test_at_most_n_holders_and_each_gets_a_fence(client, raw, prefix):
    handles = [client.semaphore("api", 3, ttl=5.0, metadata=f"worker-{i}") for i in range(4)]
    for h in handles[:3]:
        assert h.acquire(blocking=False)
    assert handles[3].acquire(blocking=False) is False
    fences = [h.fence for h in handles[:3]]
    assert fences == sorted(set(fences))
    holders = handles[0].inspect()
    assert sorted(i.metadata for i in holders) == ["worker-0", "worker-1", "worker-2"]
    assert all(i.name == "api" and 0 < i.ttl <= 5.0 for i in holders)
    handles[1].release()
    assert handles[3].acquire(timeout=1)
    assert handles[3].fence > max(fences)
    for h in (handles[0], handles[2], handles[3]):
        h.release()
    assert raw.keys(prefix + "*") == []


def test_with_blocks_and_a_release_wakes_a_waiter(client, raw, prefix):
    first = client.semaphore("w", 1, ttl=30.0)
    assert first.acquire()
    waiter = client.semaphore("w", 1, retry=SLOW)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("at", (waiter.acquire(timeout=5), time.monotonic())))
    t.start()
    wait_for(lambda: raw("PUBSUB", "NUMSUB", f"{prefix}{{w}}:sem:wake")[1] == 1, 5, "the waiter subscribed")
    released = time.monotonic()
    first.release()
    t.join(5)
    assert got["at"][0] is True
    assert got["at"][1] - released < 0.5, "woken by the release, not by a poll"
    waiter.release()
    with client.semaphore("w", 1) as held:
        assert held.owned()
    assert raw.keys(prefix + "*") == []


def test_a_dead_holder_frees_its_permit_after_its_ttl_and_nobody_elses(client, raw, prefix):
    dead = client.semaphore("d", 2, ttl=0.4, auto_renew=False)
    live = client.semaphore("d", 2, ttl=1.2)  # renewed in time on a busy machine too
    assert dead.acquire() and live.acquire()
    third = client.semaphore("d", 2)
    started = time.monotonic()
    assert third.acquire(timeout=3)
    assert time.monotonic() - started > 0.25, "a permit freed before its ttl"
    assert dead.lost and not live.lost
    assert live.owned()
    live.release()
    third.release()
    assert raw.keys(prefix + "*") == []


def test_a_release_from_any_place_in_line_keeps_the_other_permits(client, raw, prefix):
    """A release reads the first two leases (earliest expiry first) to tell
    whether its own is the only one: one further back is found by its own
    score, one of two leaves the other, the only one takes both keys."""
    held = [client.semaphore("b", 4, ttl=ttl, metadata=f"m{i}") for i, ttl in enumerate((10.0, 20.0, 30.0))]
    for h in held:
        assert h.acquire(blocking=False)
    seen = {h.token: (f"m{i}", h.fence) for i, h in enumerate(held)}

    def left():
        return {i.token: (i.metadata, i.fence) for i in held[0].inspect()}

    held[2].release()  # the latest lease: third in line
    assert left() == {h.token: seen[h.token] for h in held[:2]}
    held[0].release()  # the first of two
    assert left() == {held[1].token: seen[held[1].token]}
    assert held[1].owned()
    held[1].release()  # the only one
    assert raw.keys(prefix + "*") == []


def test_a_lost_permit_is_reported(client, raw, prefix):
    probe = LostProbe()
    sem = client.semaphore("l", 2, ttl=0.6, on_lost=probe)
    with pytest.raises(ferrolock.LockLost):
        with sem:
            raw("DEL", f"{prefix}{{l}}:sem:h")  # an operator wipes the holders
            assert probe.wait(2.0)
    assert sem.lost


def test_restore_a_permit_in_another_client(client, redis_url, prefix):
    sem = client.semaphore("r", 2, ttl=30.0)
    assert sem.acquire()
    other = ferrolock.Client(redis_url, prefix=prefix)
    restored = other.semaphore("r", 2, token=sem.token)
    restored.release()
    assert sem.owned() is False


def test_disagreeing_permit_counts_are_refused(client):
    two = client.semaphore("n", 2)
    assert two.acquire()
    with pytest.raises(ValueError, match="same permits"):
        client.semaphore("n", 5).acquire(blocking=False)
    two.release()
    five = client.semaphore("n", 5)
    assert five.acquire(blocking=False)
    five.release()
    with pytest.raises(ValueError, match="permits"):
        client.semaphore("n", 0)
    with pytest.raises(ValueError, match="permits"):  # OverflowError before: issue 21
        client.semaphore("n", -1)


def test_fair_permits_in_arrival_order(client, raw, prefix):
    holder = client.semaphore("f", 1, fair=True)
    assert holder.acquire()
    order, threads = [], []
    # Each waiter keeps its permit until the newcomer has tried: otherwise on
    # a busy machine all three could be served and done before the newcomer's
    # try, which would then rightly find the permit free.
    newcomer_tried = threading.Event()
    for i in range(3):
        h = client.semaphore("f", 1, fair=True, retry=SLOW)

        def run(h=h, i=i):
            assert h.acquire(timeout=10)
            order.append(i)
            newcomer_tried.wait(10)
            h.release()

        threads.append(threading.Thread(target=run))
        threads[-1].start()
        wait_for(lambda i=i: raw("ZCARD", f"{prefix}{{f}}:sem:q") == i + 1, 5, f"waiter {i} queued")
    newcomer = client.semaphore("f", 1, fair=True)
    holder.release()
    assert newcomer.acquire(blocking=False) is False  # no barging past the queue
    newcomer_tried.set()
    for t in threads:
        t.join(10)
    assert order == [0, 1, 2]
    assert raw.keys(prefix + "*") == []


async def test_async_permits(client, raw, prefix):
    inside, peak = 0, 0

    async def work():
        nonlocal inside, peak
        async with client.semaphore("a", 2):
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.wait_for(asyncio.gather(*(work() for _ in range(10))), 30)
    assert peak == 2
    assert raw.keys(prefix + "*") == []


def test_semaphore_on_a_cluster(cluster, cluster_raw, prefix):
    c = ferrolock.Client(cluster.url, prefix=prefix)
    names = [f"s{i}" for i in range(6)]  # spread over the three masters
    held = [c.semaphore(n, 2) for n in names] + [c.semaphore(n, 2) for n in names]
    for h in held:
        assert h.acquire(timeout=2)
    assert not any(c.semaphore(n, 2).acquire(blocking=False) for n in names)  # no third permit
    assert len({cluster.node_port_for(f"{prefix}{{{n}}}") for n in names}) > 1
    for h in held:
        h.release()
    wait_for(lambda: cluster_raw.keys(prefix + "*") == [], 5, "every permit given back")


def test_permits_out_of_range_or_of_another_type_name_permits(client):
    for bad in (-1, 0, 1_000_001, 2**70):
        with pytest.raises(ValueError, match=f"^permits must be between 1 and 1000000, got {bad}$"):
            client.semaphore("p", bad)
    with pytest.raises(TypeError, match="^permits must be an int, got str$"):
        client.semaphore("p", "3")
    with pytest.raises(TypeError, match="^permits must be an int, got bool$"):
        client.semaphore("p", True)


async def test_disagreeing_permit_counts_name_the_semaphore(client):
    async with client.semaphore("named", 2):
        other = client.semaphore("named", 5)
        with pytest.raises(ValueError) as refused:
            await other.aacquire(timeout=0)
    assert str(refused.value).startswith('semaphore "named": the semaphore has 2 permits while held, not 5')
