"""max_hold: renewal stops that long after a hold is taken, so a hung holder
(a stuck job that never releases) frees the name by then, and learns it lost
the hold like any loss: `lost`, `on_lost`, `LockLost` at the end of its block,
a `lost` event with cause "expired"."""

from __future__ import annotations

import time

import pytest

import ferrolock
from ferrolock import LockLost, LockNotOwned
from support.helpers import LostProbe, ThreadLag, key

TTL = 0.6
MAX_HOLD = 1.5


def primitives(client, name: str, on_lost, **options):
    """A handle of each kind that takes max_hold, and what takes it after."""
    mutex = client.rwmutex(name + "-rw")
    election = client.election(name + "-el", **options)
    options["on_lost"] = on_lost
    return {
        "lock": (client.lock(name, **options), lambda: client.lock(name)),
        "fair": (client.lock(name + "-f", fair=True, **options), lambda: client.lock(name + "-f", fair=True)),
        "write": (mutex.write(**options), mutex.write),
        "read": (mutex.read(**options), mutex.write),
        "permit": (client.semaphore(name + "-s", 1, **options), lambda: client.semaphore(name + "-s", 1)),
        "term": (election._candidate("a", on_lost), lambda: client.election(name + "-el")._candidate("b", None)),
    }


@pytest.mark.parametrize("kind", ["lock", "fair", "write", "read", "permit", "term"])
def test_a_hold_ends_at_its_max_hold_and_is_reported_lost(client, events, kind):
    probe = LostProbe()
    held, other = primitives(client, "mh-" + kind, probe, ttl=TTL, max_hold=MAX_HOLD)[kind]
    with ThreadLag() as lag:
        taken = time.monotonic()
        assert held.acquire()
        # The holder never releases: renewal alone would keep it forever.
        assert probe.wait(MAX_HOLD + 10)
    ended = probe.at
    assert held.lost and probe.calls == 1
    # on_lost is called from a thread of its own: on a busy machine it runs
    # as late as any Python thread ran meanwhile; the runtime's timer that
    # ends the hold is late by as much again, which ThreadLag does not see.
    # A quarter second is still well inside the next ttl the hold would have.
    assert ended - taken <= MAX_HOLD + 0.25 + lag.worst, "reported lost after max_hold"
    assert ended - taken >= MAX_HOLD - TTL, "renewed until its last stretch"
    assert events.wait(lambda at, kind_, detail, names: kind_ == "lost", 5)
    assert [detail for _, kind_, detail, _ in events.seen if kind_ == "lost"] == ["expired"]
    # Another handle takes it once Redis lets it go (within a ttl's drift of max_hold).
    successor = other()
    assert successor.acquire(timeout=TTL)
    successor.release()
    with pytest.raises(LockNotOwned):
        held.release()


def test_renewal_never_carries_the_hold_past_max_hold(client, raw, prefix):
    """The key never outlives the hold's max_hold. The hold began before
    acquire returned, and PTTL is read after `asked`: so at most
    MAX_HOLD - (asked - acquired) is left when Redis answers, however slow
    the machine is between the steps, but for the last renewal's way to
    Redis: it is cut to end at max_hold when it is sent, and Redis sets
    the ttl when it arrives, within its round trip (its `renewed` event's
    seconds), which a loaded machine draws out (27 ms seen)."""
    probe = LostProbe()
    trips: list = []

    def renewed(event) -> None:
        if event.kind == "renewed" and "mh-pttl" in event.names:
            trips.append(event.seconds)

    ferrolock.add_listener(renewed)
    try:
        lock = client.lock("mh-pttl", ttl=TTL, max_hold=MAX_HOLD, on_lost=probe)
        assert lock.acquire()
        acquired = time.monotonic()
        k = key(prefix, "mh-pttl")
        samples = []
        while raw("EXISTS", k):
            asked = time.monotonic()
            samples.append((raw("PTTL", k), MAX_HOLD - (asked - acquired), asked - acquired))
            time.sleep(0.02)  # sampling until max_hold ends the hold
        assert probe.wait(10) and lock.lost
        ferrolock.flush_events(5)
    finally:
        ferrolock.remove_listener(renewed)
    assert trips, "it was never renewed"
    way_ms = 1000 * max(trips)
    for pttl, left, since in samples:
        assert pttl <= left * 1000 + 20 + way_ms, (pttl, left, way_ms)
    assert any(since > TTL and pttl > 0 for pttl, _, since in samples), "it was renewed until max_hold"


def test_extend_cannot_pass_max_hold(client):
    lock = client.lock("mh-extend", ttl=1, max_hold=2)
    assert lock.acquire()
    lock.extend(30)
    remaining = lock.ttl()
    assert remaining is not None and remaining <= 2.0
    lock.release()


def test_a_block_that_outlives_max_hold_ends_with_lock_lost(client):
    probe = LostProbe()
    lock = client.lock("mh-with", ttl=TTL, max_hold=MAX_HOLD, on_lost=probe)
    with pytest.raises(LockLost, match="max_hold"):
        with lock:
            assert probe.wait(MAX_HOLD + 10)


async def test_an_async_holder_is_cut_off_too(client):
    lock = client.lock("mh-async", ttl=TTL, max_hold=MAX_HOLD)
    assert await lock.aacquire()
    assert await lock.wait_lost() is True
    assert lock.lost
    assert await client.lock("mh-async").aacquire(timeout=TTL)


def test_a_prompt_release_before_max_hold_is_an_ordinary_release(client):
    probe = LostProbe()
    lock = client.lock("mh-prompt", ttl=TTL, max_hold=MAX_HOLD, on_lost=probe)
    with lock:
        pass
    assert not lock.lost and probe.calls == 0


@pytest.mark.parametrize("bad", [0.1, -1])
def test_max_hold_shorter_than_the_ttl_is_refused(client, bad):
    with pytest.raises(ValueError, match="max_hold"):
        client.lock("mh-bad", ttl=1, max_hold=bad)
