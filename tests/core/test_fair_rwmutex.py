"""RWMutex(fair=True): readers and writers take turns in arrival order,
across processes. A writer's release lets in every reader queued before the
next writer (or else that writer), the last reader out lets in the next
writer, and nobody who arrives later can pass them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ferrolock
from ferrolock._ferrolock import _debug_stats
from support.helpers import WOKEN_WITHIN_MS, hand_over_ms, script_calls, wait_for
from test_fair import cancel_after_hand_over, close, past_a_dead_waiter

CHILD = textwrap.dedent(
    """
    import sys, time, ferrolock
    url, prefix, side, ttl = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    client = ferrolock.Client(url, prefix=prefix)
    rw = client.rwmutex("doc", fair=True, ttl=ttl, retry=ferrolock.Retry.fixed(10.0))
    handle = rw.read() if side == "r" else rw.write()
    print("waiting", flush=True)
    assert handle.acquire(timeout=20)
    print("got", handle.fence, flush=True)
    sys.stdin.readline()
    handle.release()
    """
)


def queued(raw, prefix) -> int:
    return raw("ZCARD", f"{prefix}{{doc}}:rw:qr") + raw("ZCARD", f"{prefix}{{doc}}:rw:qw")


def spawn(redis_url, prefix, side, ttl=5.0):
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_url, prefix, side, str(ttl)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "waiting"
    return p


def got(child) -> list:
    line = child.stdout.readline().split()
    assert line[:1] == ["got"], line
    return line


def finish(child) -> None:
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.wait(10) == 0


def test_turns_in_arrival_order_across_processes(client, raw, redis_url, prefix):
    rw = client.rwmutex("doc", fair=True)
    holder = rw.write()
    assert holder.acquire()
    fence0 = holder.fence
    sides = ["r", "r", "w", "r", "w"]
    children = []
    try:
        for i, side in enumerate(sides):  # queue them in a known order
            children.append(spawn(redis_url, prefix, side))
            wait_for(lambda: queued(raw, prefix) == i + 1, 10, f"waiter {i} in the queue")
        r1, r2, w3, r4, w5 = children

        holder.release()
        # The two readers queued before the first writer come in together...
        got(r1), got(r2)
        assert rw.readers() == 2
        # ...and nobody passes the queued writer: not a new reader, not a new writer.
        assert rw.try_read() is None and rw.try_write() is None
        assert all(c.poll() is None for c in (w3, r4, w5))

        finish(r1)
        assert w3.poll() is None  # one reader still in
        finish(r2)
        fence3 = int(got(w3)[1])  # the last reader out let the writer in
        assert rw.try_read() is None
        assert r4.poll() is None and w5.poll() is None

        finish(w3)
        got(r4)
        assert rw.try_write() is None  # w5 is next, and a reader is in
        finish(r4)
        fence5 = int(got(w5)[1])
        assert fence5 > fence3 > fence0
        finish(w5)
    finally:
        for c in children:
            close(c)
    assert queued(raw, prefix) == 0
    assert raw.keys(prefix + "*") == [f"{prefix}{{doc}}:rw:w"] or raw.keys(prefix + "*") == []


@pytest.mark.parametrize("first", ["write", "read"])
def test_hand_over_is_one_round_trip_after_the_release(client, raw, prefix, first):
    rw = client.rwmutex("doc", fair=True, retry=ferrolock.Retry.fixed(10.0))
    holder = rw.write() if first == "write" else rw.read()
    assert holder.acquire()
    waiter = rw.read() if first == "write" else rw.write()
    ms = hand_over_ms(holder, waiter, lambda: queued(raw, prefix))
    assert ms < WOKEN_WITHIN_MS, f"hand-over took {ms:.1f} ms"


def test_one_release_lets_every_queued_reader_in_at_once(client, raw, prefix):
    rw = client.rwmutex("doc", fair=True, retry=ferrolock.Retry.fixed(10.0))
    holder = rw.write()
    assert holder.acquire()
    readers = [rw.read() for _ in range(3)]
    at = {}

    def read(i):
        assert readers[i].acquire(timeout=5)
        at[i] = time.monotonic()

    base = script_calls(raw)
    threads = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()

    # Each reader tries twice: before it subscribes, and right after; a
    # release between the two would be found by the second attempt, not
    # handed over. So each reader's tag (token -> '<attempt> <patience>')
    # must show its second attempt; the count of scripts alone may include
    # others'.
    def second_attempts() -> int:
        tags = raw("HVALS", f"{prefix}{{doc}}:rw:qt") or []
        return sum(int(t.split(b" ")[0]) >= 2 for t in tags)

    wait_for(
        lambda: (
            script_calls(raw) >= base + 6 and raw("ZCARD", f"{prefix}{{doc}}:rw:qr") == 3 and second_attempts() == 3
        ),
        5,
        "three readers queued, waiting for the wake-up",
    )
    before = _debug_stats()["handed_over"]
    released = time.monotonic()
    holder.release()
    for t in threads:
        t.join(5)
    late = sorted(1000 * (t - released) for t in at.values())
    assert len(late) == 3 and late[-1] < WOKEN_WITHIN_MS, f"readers got in after {late} ms"
    assert _debug_stats()["handed_over"] == before + 3, "a reader claimed with another round trip"
    assert rw.readers() == 3
    for r in readers:
        r.release()


def test_a_stream_of_readers_cannot_starve_a_writer(client, raw, prefix):
    rw = client.rwmutex("doc", fair=True)
    first = rw.read()
    assert first.acquire()
    writer = rw.write()
    done = threading.Event()
    t = threading.Thread(target=lambda: (writer.acquire(timeout=10), done.set()))
    t.start()
    wait_for(lambda: raw("ZCARD", f"{prefix}{{doc}}:rw:qw") == 1, 5, "the writer in the queue")
    late = rw.read()
    late_result = {}
    t2 = threading.Thread(target=lambda: late_result.setdefault("ok", late.acquire(timeout=10)))
    t2.start()
    wait_for(lambda: raw("ZCARD", f"{prefix}{{doc}}:rw:qr") == 1, 5, "the late reader in the queue")
    first.release()
    assert done.wait(5) and writer.owned()
    assert late_result == {}  # still waiting behind the writer
    writer.release()
    t2.join(5)
    assert late_result == {"ok": True}
    late.release()
    t.join(5)


def test_dead_waiter_loses_its_place(client, raw, redis_url, prefix):
    rw = client.rwmutex("doc", fair=True, ttl=5)  # only the dead waiter's patience is short
    holder = rw.read()
    assert holder.acquire()
    dead = spawn(redis_url, prefix, "w", ttl=0.5)
    assert past_a_dead_waiter(dead, holder, rw.write(), lambda: queued(raw, prefix)) < 2.0
    assert queued(raw, prefix) == 0


def test_a_waiter_that_gives_up_leaves_the_queue(client, raw, prefix):
    rw = client.rwmutex("doc", fair=True)
    holder = rw.write()
    assert holder.acquire()
    assert rw.read().acquire(timeout=0.2) is False
    assert rw.write().acquire(timeout=0.2) is False
    assert queued(raw, prefix) == 0
    holder.release()
    assert rw.readers() == 0 and not rw.locked()


async def test_cancelled_reader_passes_its_turn_on(client, raw, prefix):
    rw = client.rwmutex("doc", fair=True)
    reader = rw.read()
    writer = rw.write(retry=ferrolock.Retry.fixed(10.0))
    await cancel_after_hand_over(rw.write(), reader, writer, lambda: queued(raw, prefix))
    assert await rw.areaders() == 0
    await writer.arelease()
    assert queued(raw, prefix) == 0


def test_mixed_threads_exclude_and_all_finish(client):
    rw = client.rwmutex("doc", fair=True, ttl=5)
    state = {"readers": 0, "writers": 0, "faults": 0, "reads": 0, "writes": 0}
    guard = threading.Lock()

    def enter(side):
        with guard:
            if state["writers"] or (side == "w" and state["readers"]):
                state["faults"] += 1
            state["writers" if side == "w" else "readers"] += 1

    def leave(side):
        with guard:
            state["writers" if side == "w" else "readers"] -= 1
            state["writes" if side == "w" else "reads"] += 1

    def worker(side):
        for _ in range(25):
            handle = rw.write() if side == "w" else rw.read()
            with handle:
                enter(side)
                time.sleep(0.001)  # the critical section's work
                leave(side)

    threads = [threading.Thread(target=worker, args=(s,)) for s in "rrrrww"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert state == {"readers": 0, "writers": 0, "faults": 0, "reads": 100, "writes": 50}
    assert not rw.locked()


def test_fair_rwmutex_arguments(client):
    rw = client.rwmutex("doc", fair=True)
    assert rw.fair and rw.writer_preference
    assert "fair=True" in repr(rw)
    assert not client.rwmutex("doc").fair
    with pytest.raises(ValueError, match="writer_preference=False"):
        client.rwmutex("doc", fair=True, writer_preference=False)
    with pytest.raises(TypeError, match="whole RWMutex"):
        rw.read(fair=True)
    with pytest.raises(TypeError, match="whole RWMutex"):
        client.rwmutex("doc").try_write(fair=False)
    with pytest.raises(TypeError):
        ferrolock.RWMutex(client, "doc", fair="yes")


def test_a_fair_lock_and_a_fair_rwmutex_of_one_name_share_no_key(client, raw, prefix):
    """Both kinds on the name "n", each with a waiter queued: their keys are
    disjoint, and each hands over to its own waiter."""
    lock_holder = client.lock("n", fair=True)
    rw = client.rwmutex("n", fair=True)
    writer = rw.write()
    assert lock_holder.acquire() and writer.acquire()
    lock_waiter = client.lock("n", fair=True, retry=ferrolock.Retry.fixed(10.0))
    rw_waiter = rw.write(retry=ferrolock.Retry.fixed(10.0))
    results = {}
    threads = [
        threading.Thread(target=lambda: results.setdefault("lock", lock_waiter.acquire(timeout=10))),
        threading.Thread(target=lambda: results.setdefault("rw", rw_waiter.acquire(timeout=10))),
    ]
    for t in threads:
        t.start()
    wait_for(lambda: len(raw.keys(prefix + "*")) >= 7, 5, "both waiters queued")
    lock_keys = {k for k in raw.keys(prefix + "*") if not k.startswith(f"{prefix}{{n}}:rw:")}
    rw_keys = {k for k in raw.keys(prefix + "*") if k.startswith(f"{prefix}{{n}}:rw:")}
    assert lock_keys == {f"{prefix}{{n}}", f"{prefix}{{n}}:q", f"{prefix}{{n}}:qx", f"{prefix}{{n}}:qt"}
    assert not lock_keys & rw_keys
    lock_holder.release()
    writer.release()
    for t in threads:
        t.join(10)
    assert results == {"lock": True, "rw": True}
    lock_waiter.release()
    rw_waiter.release()
    assert raw.keys(prefix + "*") == []
