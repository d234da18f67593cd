"""Waiters are woken by the release (pub/sub), not by polling: a retry
interval of 10 s never shows up in how long they wait."""

from __future__ import annotations

import random
import threading
import time


import ferrolock
from ferrolock import Retry
from support.helpers import command_calls, script_calls, wait_for, waiting

SLOW = Retry.fixed(10.0)  # polling alone would take 10 s: only a wake-up is fast


def test_waiter_is_woken_by_the_release(client, raw, prefix):
    holder = client.lock("w")
    assert holder.acquire()
    waiter = client.lock("w", retry=SLOW)
    got = {}

    def wait():
        t = time.monotonic()
        got["ok"] = waiter.acquire(timeout=5)
        got["at"] = time.monotonic()
        got["waited"] = got["at"] - t

    t = threading.Thread(target=wait)
    t.start()
    wait_for(lambda: waiting(raw, f"{prefix}{{w}}:wake"), 5, "the waiter to fail once and subscribe")
    released = time.monotonic()
    holder.release()
    t.join(5)
    assert got["ok"]
    assert got["at"] - released < 0.2, f"woken {1000 * (got['at'] - released):.1f} ms after the release"
    waiter.release()


def test_no_missed_wakeup_whatever_the_timing(client):
    """The release lands at every moment of the waiter's first attempts,
    including between its failed try and its subscription."""
    rng = random.Random(7)
    for i in range(150):
        holder = client.lock(f"m{i}")
        assert holder.acquire()
        waiter = client.lock(f"m{i}", retry=SLOW)
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("ok", waiter.acquire(timeout=3)))
        t.start()
        time.sleep(rng.random() * 0.004)  # sweep 0-4 ms: before, during, after subscribing
        holder.release()
        t.join(5)
        assert result.get("ok") is True, f"round {i}: a wake-up was missed"
        waiter.release()


def test_one_release_wakes_one_local_waiter(server):
    """No herd in one process: N waiters, N releases, about 3 attempts each
    (first try, the retry after subscribing, the one after its wake-up)."""
    client = ferrolock.Client(server.url, prefix="herd:")
    n = 10
    holder = client.lock("h")
    assert holder.acquire()
    inside = threading.Lock()
    done = []
    started = threading.Barrier(n + 1)

    def work():
        lock = client.lock("h", retry=SLOW)
        started.wait(5)
        assert lock.acquire(timeout=10)
        with inside:
            done.append(time.monotonic())
        lock.release()

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    started.wait(5)
    wait_for(lambda: waiting(server, "herd:{h}:wake", n), 10, "every waiter to fail once and subscribe")
    before = script_calls(server)
    start = time.monotonic()
    holder.release()
    for t in threads:
        t.join(15)
    took = time.monotonic() - start
    calls = script_calls(server) - before
    assert len(done) == n
    assert took < 2, f"{n} hand-overs took {took:.2f} s"
    # Each release wakes one waiter: attempts grow linearly, not as n².
    assert calls <= 3 * n + 5, f"{calls} script calls for {n} hand-overs"


def test_writer_release_wakes_every_reader(client, raw, prefix):
    rw = client.rwmutex("doc", retry=SLOW)
    writer = rw.write()
    assert writer.acquire()
    n = 5
    inside = threading.Barrier(n, timeout=5)
    got = []

    def read():
        with rw.read(blocking_timeout=5):
            got.append(time.monotonic())
            inside.wait()  # all readers inside together

    threads = [threading.Thread(target=read) for _ in range(n)]
    for t in threads:
        t.start()
    wait_for(lambda: waiting(raw, f"{prefix}{{doc}}:rw:wake", n), 5, "every reader to fail once and subscribe")
    released = time.monotonic()
    writer.release()
    for t in threads:
        t.join(10)
    assert len(got) == n
    assert max(got) - released < 0.5, f"last reader in after {max(got) - released:.3f} s"


def test_last_reader_out_wakes_the_writer(client, raw, prefix):
    rw = client.rwmutex("doc2", retry=SLOW)
    r1, r2 = rw.read(), rw.read()
    assert r1.acquire() and r2.acquire()
    w = rw.write()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("at", (w.acquire(timeout=5), time.monotonic())))
    t.start()
    wait_for(lambda: waiting(raw, f"{prefix}{{doc2}}:rw:wake"), 5, "the writer to fail once and subscribe")
    r1.release()
    time.sleep(0.05)  # the chance of a wrong grant: a writer let in now would show below
    assert "at" not in got  # one reader still holds
    released = time.monotonic()
    r2.release()
    t.join(5)
    ok, at = got["at"]
    assert ok and at - released < 0.2
    w.release()


def test_killed_subscription_connection_recovers(server, events):
    client = ferrolock.Client(server.url, prefix="kill:")
    holder = client.lock("k")
    assert holder.acquire()
    waiter = client.lock("k", retry=SLOW)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ok", (waiter.acquire(timeout=5), time.monotonic())))
    t.start()
    wait_for(lambda: waiting(server, "kill:{k}:wake"), 5, "the waiter to fail once and subscribe")
    killed = time.monotonic()
    assert server.command("CLIENT", "KILL", "TYPE", "pubsub") == 1  # the one subscription
    # The kill took the subscription off the server at once: one there again is the waiter's new one.
    wait_for(lambda: waiting(server, "kill:{k}:wake"), 5, "the waiter, woken by the loss, to subscribe anew")
    released = time.monotonic()
    holder.release()
    t.join(6)
    ok, at = got["ok"]
    assert ok and at - released < 0.5, "the waiter did not subscribe again after its connection was killed"
    # No message woke it before the release: a wake-up by the loss is reported
    # as what it is (a retry with no message). The loss wakes the waiter only
    # if it was waiting right then, not still in its attempt, and on a busy
    # machine that wake-up may come after the release: either way it
    # subscribes anew, and no pub/sub wake-up comes before the release.
    assert events.wait(lambda when, k, det, n: k == "woken" and n == ("k",) and released <= when, 2)
    with events.cond:
        seen = [(when, det) for when, k, det, n in events.seen if k == "woken" and n == ("k",) and when >= killed]
    assert "pubsub" not in [det for when, det in seen if when < released], seen
    waiter.release()
    # Wake-ups work again afterwards.
    assert holder.acquire()
    fast = client.lock("k", retry=SLOW)
    t = threading.Thread(target=lambda: got.__setitem__("again", (fast.acquire(timeout=5), time.monotonic())))
    t.start()
    wait_for(lambda: waiting(server, "kill:{k}:wake"), 5, "the second waiter to fail once and subscribe")
    released = time.monotonic()
    holder.release()
    t.join(6)
    ok, at = got["again"]
    assert ok and at - released < 0.5
    fast.release()


def test_a_multi_lock_waiter_passes_on_a_wakeup_it_cannot_use(client):
    """A multi-lock waiter on [a, b] is first in line for `a`; a plain
    waiter on `a` is second. `a` is released while `b` stays held: the
    multi-lock waiter cannot proceed, so the plain waiter must get `a` at
    once, not at its next poll (10 s)."""
    slow = Retry.fixed(10.0)
    hold_a, hold_b = client.lock("a", ttl=30.0), client.lock("b", ttl=30.0)
    assert hold_a.acquire() and hold_b.acquire()
    both = client.multi_lock(["a", "b"], retry=slow)
    only_a = client.lock("a", retry=slow)
    got = {}
    t1 = threading.Thread(target=lambda: got.setdefault("both", both.acquire(timeout=20)), daemon=True)
    t1.start()
    wait_for(lambda: _waiters(client) >= 1, 5, "the multi-lock waiting")
    t2 = threading.Thread(
        target=lambda: got.setdefault("a", (only_a.acquire(timeout=20), time.monotonic())), daemon=True
    )
    t2.start()
    wait_for(lambda: _waiters(client) >= 2, 5, "the plain waiter waiting")
    released = time.monotonic()
    hold_a.release()
    t2.join(5)
    assert got["a"][0] is True
    assert got["a"][1] - released < 0.5, f"woken after {got['a'][1] - released:.2f} s"
    only_a.release()
    hold_b.release()
    t1.join(5)
    assert got["both"] is True
    both.release()


def _waiters(client) -> int:
    from ferrolock._ferrolock import _debug_stats

    return _debug_stats()["waiters"]


async def test_a_cancelled_waiter_passes_its_wakeup_on(client):
    """Two local waiters; the first is cancelled as the release arrives: the
    second gets the lock at once, not at its next poll (10 s)."""
    import asyncio

    slow = Retry.fixed(10.0)
    holder = client.lock("c", ttl=30.0)
    assert await holder.aacquire()
    first, second = client.lock("c", retry=slow), client.lock("c", retry=slow)
    t1 = asyncio.ensure_future(first.aacquire())
    await asyncio.sleep(0)  # its first step: from there on the runtime drives it
    wait_for(lambda: _waiters(client) >= 1, 5, "the first waiter")
    t2 = asyncio.ensure_future(second.aacquire())
    await asyncio.sleep(0)
    wait_for(lambda: _waiters(client) >= 2, 5, "the second waiter")
    await holder.arelease()
    t1.cancel()
    await asyncio.wait({t1})
    if not t1.cancelled():  # it won the lock before the cancel landed: a plain release then
        assert t1.result() is True
        await first.arelease()
    assert await asyncio.wait_for(t2, 1.0) is True
    await second.arelease()


def test_a_waiter_whose_subscribing_failed_subscribes_again_soon(server, prefix):
    """Subscribing timed out once (a SUBSCRIBE held back past the command
    timeout: a failover, a partition): the waiter tries again at its next
    short pause, not at its retry's 10 s, so the release still wakes it."""
    from support.fault_proxy import FaultProxy

    def subscribes() -> int:
        return command_calls(server, "subscribe")

    proxy = FaultProxy(server.port)
    client = ferrolock.Client(proxy.url, prefix=prefix, command_timeout=0.5)
    holder = client.lock("w")
    got: dict = {}
    try:
        assert holder.acquire()
        proxy.slow_subscribe(2.0)  # longer than the command timeout: the first SUBSCRIBE fails
        waiter = client.lock("w", retry=SLOW)
        t = threading.Thread(target=lambda: got.update(ok=waiter.acquire(timeout=20), at=time.monotonic()))
        t.start()
        assert proxy.subscribe_seen.wait(10)
        proxy.slow_subscribe(0)
        # The held-back SUBSCRIBE reaches the server late, on a connection the waiter gave up; the next goes through.
        wait_for(lambda: subscribes() >= 2, 5, "the waiter to subscribe again")
        assert "ok" not in got
        released = time.monotonic()
        holder.release()
        t.join(20)
        assert got.get("ok") is True
        assert got["at"] - released < 2.0, f"the waiter took the lock {got['at'] - released:.1f} s after the release"
        waiter.release()
    finally:
        proxy.slow_subscribe(0)
        t.join(20)
        client.close()
        proxy.close()
