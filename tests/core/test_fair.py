"""fair=True: the lock goes to waiters in arrival order, across processes;
a release hands it straight to the head of the queue, so nobody barges in;
a waiter that dies or gives up loses its place."""

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
from ferrolock._ferrolock import _debug_stats
from support.helpers import hand_over_ms, hold_field, script_calls, until, wait_for, WOKEN_WITHIN_MS

CHILD = textwrap.dedent(
    """
    import sys, time, ferrolock
    url, prefix, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
    client = ferrolock.Client(url, prefix=prefix)
    lock = client.lock("q", fair=True, ttl=ttl, retry=ferrolock.Retry.fixed(10.0))
    print("waiting", flush=True)
    assert lock.acquire(timeout=20)
    print("got", time.monotonic(), lock.fence, flush=True)
    sys.stdin.readline()
    lock.release()
    """
)


def queue_len(raw, prefix) -> int:
    return raw("ZCARD", f"{prefix}{{q}}:q")


def spawn(redis_url, prefix, ttl=5.0):
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_url, prefix, str(ttl)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "waiting"
    return p


def close(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()
    for f in (p.stdin, p.stdout):
        if f:
            f.close()


def test_fifo_across_processes_and_no_barging(client, raw, redis_url, prefix):
    holder = client.lock("q", fair=True)
    assert holder.acquire()
    children = []
    try:
        for i in range(4):  # queue them in a known order
            children.append(spawn(redis_url, prefix))
            wait_for(lambda: queue_len(raw, prefix) == i + 1, 10, f"waiter {i} in the queue")
        newcomer = client.lock("q", fair=True)
        holder.release()
        # Handed to the head inside the release: the lock is never free to grab.
        assert newcomer.acquire(blocking=False) is False
        fences = []
        for i, child in enumerate(children):
            line = child.stdout.readline().split()
            assert line[0] == "got", line
            fences.append(int(line[2]))
            for later in children[i + 1 :]:
                assert later.poll() is None
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(10) == 0
        assert fences == sorted(fences) and len(set(fences)) == 4
    finally:
        for c in children:
            close(c)
    assert newcomer.acquire(blocking=False)
    newcomer.release()
    assert raw.keys(prefix + "*") == []


def settled(raw):
    """A `waiting()` for hand_over_ms that is 1 once the waiter made its two
    attempts (the one before subscribing, and the one after), so a release
    now finds it waiting for the wake-up. Counts every script this test's
    server runs, so it is meant for one waiter and nothing else running."""
    base = script_calls(raw)
    return lambda: int(script_calls(raw) >= base + 2)


def test_hand_over_is_one_round_trip_after_the_release(client, raw, prefix):
    holder = client.lock("q", fair=True)
    assert holder.acquire()
    waiter = client.lock("q", fair=True, retry=ferrolock.Retry.fixed(10.0))
    before = _debug_stats()["handed_over"]
    ms = hand_over_ms(holder, waiter, settled(raw))
    assert ms < WOKEN_WITHIN_MS, f"hand-over took {ms:.1f} ms"
    # The waiter held from the wake-up on, without a round trip to claim.
    assert _debug_stats()["handed_over"] == before + 1


@pytest.mark.parametrize("kind", ["lock", "election"])
def test_a_hold_is_marked_waited_on_while_anyone_queues_behind_it(client, raw, prefix, kind):
    """A fair release reads the queue only for a hold marked waited on (field
    `w`): the waiters queueing behind the holder mark its hold, the first of
    them gets the lock (handed over; an election's head claims it) with the
    second behind it, so its hold is marked in that same step, and the
    second's, with nobody behind it, is not."""
    slow = ferrolock.Retry.fixed(10.0)

    def handle(**options):
        if kind == "lock":
            return client.lock("chain", fair=True, ttl=30.0, **options)
        return client.election("chain", ttl=30.0)._core.candidate("v", **options)

    lock = f"{prefix}{{chain}}" + ("" if kind == "lock" else ":el")
    holder = handle()
    assert holder.acquire()
    assert hold_field(raw("GET", lock), "w") is None
    held = [threading.Event(), threading.Event()]
    done = [threading.Event(), threading.Event()]

    def wait(i: int) -> None:
        waiter = handle(retry=slow)
        assert waiter.acquire(timeout=20)
        held[i].set()
        done[i].wait(20)
        waiter.release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(2)]
    for i, t in enumerate(threads):  # queued in a known order
        t.start()
        wait_for(lambda: raw("ZCARD", f"{lock}:q") == i + 1, 10, f"waiter {i} in the queue")
    assert hold_field(raw("GET", lock), "w") == b"1"
    holder.release()
    assert held[0].wait(10)
    assert hold_field(raw("GET", lock), "w") == b"1", "the first waiter's hold, with the second behind it"
    done[0].set()
    assert held[1].wait(10)
    assert hold_field(raw("GET", lock), "w") is None, "the last waiter's hold, with nobody behind it"
    done[1].set()
    for t in threads:
        t.join(10)
    assert raw.keys(prefix + "*") == []


def test_handed_over_lock_gets_its_full_ttl_and_metadata(client, raw, prefix):
    holder = client.lock("q", fair=True)
    assert holder.acquire()
    slow = ferrolock.Retry.fixed(10.0)  # no timed retry racing the wake-up
    plain = client.lock("q", fair=True, ttl=20, retry=slow)
    tagged = client.lock("q", fair=True, ttl=20, metadata="worker-9", retry=slow)
    before = _debug_stats()["handed_over"]
    # No claim: the release gives a short hold, the first renewal (at once) the full ttl.
    hand_over_ms(holder, plain, settled(raw), keep=True)
    assert _debug_stats()["handed_over"] == before + 1
    wait_for(lambda: raw("PTTL", f"{prefix}{{q}}") > 10_000, 5, "the full ttl")
    info = client.inspect("q")
    assert (info.token, info.metadata) == (plain.token, None)
    # With metadata to store, the waiter claims with one more attempt.
    hand_over_ms(plain, tagged, lambda: queue_len(raw, prefix), keep=True)
    assert _debug_stats()["handed_over"] == before + 1
    info = client.inspect("q")
    assert (info.token, info.metadata) == (tagged.token, "worker-9") and info.ttl > 10
    tagged.release()


def past_a_dead_waiter(dead, holder, alive, waiting) -> float:
    """`dead` (a child process) queues behind `holder` and is killed; then
    `alive` queues too and `holder` releases. Returns the seconds until
    `alive` holds: the dead waiter's place must lapse, not block the line."""
    wait_for(lambda: waiting() == 1, 10, "the doomed waiter in the queue")
    os.kill(dead.pid, signal.SIGKILL)
    close(dead)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ok", alive.acquire(timeout=5)))
    t.start()
    # The dead waiter's place may lapse already: then only the live one counts.
    wait_for(lambda: waiting() >= 1, 5, "the live waiter")
    start = time.monotonic()
    holder.release()  # may hand to the dead head: that lapses after its patience (0.5 s)
    t.join(5)
    assert got.get("ok") is True
    took = time.monotonic() - start
    alive.release()
    return took


def test_dead_waiter_loses_its_place(client, raw, redis_url, prefix):
    # Only the dead waiter's patience (its 0.5 s ttl) is short: the live
    # holds renew in time on a busy machine too.
    holder = client.lock("q", fair=True, ttl=5)
    assert holder.acquire()
    dead = spawn(redis_url, prefix, ttl=0.5)
    alive = client.lock("q", fair=True, ttl=5)
    assert past_a_dead_waiter(dead, holder, alive, lambda: queue_len(raw, prefix)) < 2.0
    assert raw.keys(prefix + "*") == []


def test_a_waiter_that_gives_up_leaves_the_queue(client, raw, prefix):
    holder = client.lock("q", fair=True)
    assert holder.acquire()
    quitter = client.lock("q", fair=True)
    assert quitter.acquire(timeout=0.2) is False
    assert queue_len(raw, prefix) == 0
    holder.release()
    assert raw.keys(prefix + "*") == []


async def cancel_after_hand_over(holder, first, second, waiting) -> None:
    """`holder` releases, handing over to `first`, which is cancelled right
    then: its turn must pass on to `second`. `waiting()` counts the queue."""
    assert await holder.aacquire()
    t1 = asyncio.ensure_future(first.aacquire())
    await until(lambda: waiting() == 1, 5, "the first waiter in the queue")
    t2 = asyncio.ensure_future(second.aacquire())
    await until(lambda: waiting() == 2, 5, "the second waiter in the queue")
    await holder.arelease()  # handed to `first`...
    t1.cancel()  # ...which is cancelled now: the lock goes on to `second`
    try:
        got_first = await t1
    except asyncio.CancelledError:
        got_first = False
    if got_first:
        await first.arelease()
    assert await asyncio.wait_for(t2, 5) is True


async def test_cancelled_waiter_leaves_and_passes_on(client, raw, prefix):
    holder = client.lock("q", fair=True)
    first = client.lock("q", fair=True)
    second = client.lock("q", fair=True, retry=ferrolock.Retry.fixed(10.0))
    await cancel_after_hand_over(holder, first, second, lambda: queue_len(raw, prefix))
    await second.arelease()
    await until(lambda: raw.keys(prefix + "*") == [], 5, "no keys left")


def test_fair_mode_refuses_what_it_cannot_do(client):
    with pytest.raises(ValueError, match="one name"):
        client.multi_lock(["a", "b"], fair=True)
    with pytest.raises(TypeError):
        client.lock("x", fair="yes")
