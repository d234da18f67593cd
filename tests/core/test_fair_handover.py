"""Fair hand-over under timing faults: a hold handed to a waiter lasts as
long as that waiter expects (its own patience, not the releaser's), a grant
counts only for the attempt it answered (a late wake-up from an earlier
attempt is not a hold), fences increase in grant order, and a queued
waiter that gives up passes its turn on at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import ferrolock
from support.fault_proxy import FaultProxy
from support.helpers import hold_field, wait_for

SLOW = ferrolock.Retry.fixed(10.0)  # wake-ups only: a poll would hide a missed one


def start(fn) -> dict:
    """Runs `fn` in a thread; the dict gets "result" (or "error") and "at"."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out["error"] = e
        out["at"] = time.monotonic()

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def finished(out: dict, limit: float) -> dict:
    out["thread"].join(limit)
    assert not out["thread"].is_alive(), "still waiting"
    if "error" in out:
        raise out["error"]
    return out


def fair_lock(client, name, **kw):
    return client.lock(name, fair=True, **kw)


def fair_writer(client, name, **kw):
    return client.rwmutex(name, fair=True).write(**kw)


KINDS = [pytest.param(fair_lock, "", id="lock"), pytest.param(fair_writer, ":rw:w", id="rw-writer")]
QUEUE = {"": ":q", ":rw:w": ":rw:qw"}
ALIVE = {"": ":qx", ":rw:w": ":rw:qx"}


@pytest.mark.parametrize("make, suffix", KINDS)
def test_a_handed_hold_outlasts_a_short_lived_releaser(client, raw, prefix, make, suffix):
    """The releaser's ttl is 20 ms; the waiter's is 30 s. The hand-over must
    last the waiter's patience and be renewed at once, every time."""
    key = f"{prefix}{{h}}{suffix}"
    handed = 0
    queue = f"{prefix}{{h}}{QUEUE[suffix]}"
    for round_ in range(40):  # 8 hand-overs; a round whose 20 ms holder lapsed on a busy machine is redone
        holder = make(client, "h", ttl=0.02)
        assert holder.acquire()
        waiter = make(client, "h", ttl=30.0, retry=SLOW)
        got = start(lambda: waiter.acquire(timeout=10))
        wait_for(lambda: holder.lost or raw("ZCARD", queue) == 1, 5, "the waiter in the queue")
        queued = raw("ZCARD", queue) == 1  # else the holder lapsed first: the waiter takes a free lock
        try:
            holder.release()
        except ferrolock.LockNotOwned:
            assert holder.lost  # its own hold lapsed before the release: no hand-over this round
        else:
            handed += queued
        assert finished(got, 5)["result"] is True
        wait_for(lambda: waiter.lost or raw("PTTL", key) > 10_000, 5, "the waiter's first renewal")
        assert not waiter.lost, f"round {round_}: the handed hold was lost"
        assert hold_field(raw("GET", key), "token").decode() == waiter.token
        waiter.release()
        if handed == 8:
            break
    assert handed == 8
    assert raw.keys(prefix + "*") == []


@pytest.mark.parametrize("make, suffix", KINDS)
def test_a_late_grant_for_an_earlier_attempt_is_not_a_hold(redis_url, client, raw, prefix, make, suffix):
    """W is partitioned while a release hands it the lock; the hand-over
    lapses and V takes the lock. W's later attempts find V holding; then the
    old hand-over message reaches W. W must not believe it holds."""
    queue = f"{prefix}{{g}}{QUEUE[suffix]}"
    alive = f"{prefix}{{g}}{ALIVE[suffix]}"
    key = f"{prefix}{{g}}{suffix}"
    proxy = FaultProxy(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    try:
        behind = ferrolock.Client(proxy.url, prefix=prefix)
        holder = make(client, "g", ttl=30.0)
        assert holder.acquire()
        # W's ttl (and so its patience, how long a hand-over to it lasts) is
        # long enough to be renewed in time while the process is not
        # scheduled for a few hundred milliseconds: the partition below, not
        # a busy machine, is what makes the hand-over lapse.
        w = make(behind, "g", ttl=2.0, retry=ferrolock.Retry.fixed(0.03))
        w_got = start(lambda: w.acquire(timeout=15))
        wait_for(lambda: raw("ZCARD", queue) == 1, 5, "W in the queue")
        channel = f"{prefix}{{g}}:rw:wake" if suffix else f"{key}:wake"
        wait_for(lambda: raw("PUBSUB", "NUMSUB", channel)[1] == 1, 5, "W subscribed")
        v = make(client, "g", ttl=5.0, retry=SLOW)
        v_got = start(lambda: v.acquire(timeout=15))
        wait_for(lambda: raw("ZCARD", queue) == 2, 5, "V in the queue")
        w_token = raw("ZRANGE", queue, 0, 0)[0].decode()

        proxy.hold("command", "up")  # W's attempts stop reaching Redis
        proxy.hold("pubsub", "down")  # and the hand-over message stops reaching W
        holder.release()
        assert hold_field(raw("GET", key), "token").decode() == w_token  # handed to W, who cannot claim it
        assert finished(v_got, 15)["result"] is True  # the hand-over lapsed (W's 2 s patience); V is next
        proxy.resume("command", "up")
        wait_for(lambda: raw("ZSCORE", queue, w_token) is not None, 5, "W back in the queue")
        # W's next attempt (a fresh one, sent just now) re-asserts its place:
        # the stale grant must not be taken as an answer to it.
        seen = float(raw("ZSCORE", alive, w_token))
        wait_for(lambda: float(raw("ZSCORE", alive, w_token) or 0) > seen, 5, "a fresh attempt of W")
        proxy.resume("pubsub", "down")  # now the stale grant arrives
        w_got["thread"].join(1.0)
        assert "result" not in w_got, "W believed it held the lock while V held it"
        assert v.owned()
        v_fence = v.fence
        v.release()
        assert finished(w_got, 10)["result"] is True
        assert w.fence > v_fence  # fences follow grant order
        w.release()
    finally:
        proxy.close()
    wait_for(lambda: raw.keys(prefix + "*") == [], 5, "no keys left")


def test_a_writer_that_gives_up_lets_the_readers_behind_it_in_at_once(client, raw, prefix):
    """Fair RWMutex: a reader holds, a writer queues, a reader queues behind
    it. The writer times out: the reader behind must get in at once."""
    rw = client.rwmutex("doc", fair=True)
    reading = rw.read()
    assert reading.acquire()
    writer = rw.write(retry=SLOW)
    w_got = start(lambda: writer.acquire(timeout=1.5))  # long enough for the reader to queue behind it
    wait_for(lambda: raw("ZCARD", f"{prefix}{{doc}}:rw:qw") == 1, 5, "the writer in the queue")
    reader = rw.read(retry=SLOW)
    r_got = start(lambda: reader.acquire(timeout=10))
    wait_for(lambda: raw("ZCARD", f"{prefix}{{doc}}:rw:qr") == 1, 5, "the reader in the queue")
    gave_up = finished(w_got, 5)
    assert gave_up["result"] is False
    got = finished(r_got, 5)
    assert got["result"] is True
    # At once: woken by the withdrawal, not by its own 10 s poll (the bound
    # leaves room for a busy machine).
    assert got["at"] - gave_up["at"] < 2.0, "the reader slept past the writer's withdrawal"
    reader.release()
    reading.release()
    assert raw.keys(prefix + "*") == []


def election_campaigner(client, name, **kw):
    return client.election(name, ttl=30.0)._core.candidate(name, **kw)


HEADS = KINDS + [pytest.param(election_campaigner, ":el", id="election")]


@pytest.mark.parametrize("make, suffix", HEADS)
async def test_the_head_withdrawing_from_a_free_name_wakes_the_next_at_once(client, raw, prefix, make, suffix):
    """The name is free (its holder's hold lapsed: nothing was announced)
    while B, the head of the queue, and C behind it wait on a 10 s retry.
    B is cancelled: C must be woken by a message (a hand-over, or a wake-up
    to claim it), not by its own next look (a fair waiter looks again every
    patience / 3, 0.67 s here, to keep its place), and hold within a round trip."""
    key = f"{prefix}{{w}}{suffix}"
    queue = f"{prefix}{{w}}{QUEUE.get(suffix, ':el:q')}"
    tags = f"{prefix}{{w}}{ALIVE.get(suffix, ':el:qx')[:-1]}t"  # each waiter's '<attempt> <patience_ms>'

    def attempts() -> list:
        return sorted(int(t.split()[0]) for t in raw("HVALS", tags))

    events: list = []
    listen = events.append
    ferrolock.add_listener(listen)
    try:
        holder = make(client, "w", ttl=30.0)
        assert await holder.aacquire()
        b, c = make(client, "w", ttl=30.0, retry=SLOW), make(client, "w", ttl=30.0, retry=SLOW)
        b_task = asyncio.ensure_future(b.aacquire(timeout=30))
        await asyncio.sleep(0)
        wait_for(lambda: raw("ZCARD", queue) == 1, 5, "B in the queue")
        c_task = asyncio.ensure_future(c.aacquire(timeout=30))
        await asyncio.sleep(0)
        # Each waiter's second attempt follows its subscription; after it,
        # both sleep until a message or their next look.
        wait_for(lambda: attempts() == [2, 2], 5, "B and C subscribed, asleep in the queue")
        assert raw("DEL", key) == 1  # the holder's hold lapses: no release is announced
        withdrawn = time.monotonic()
        b_task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b_task
        assert await asyncio.wait_for(c_task, 9) is True
        assert time.monotonic() - withdrawn < 2.0, "C slept to its retry after the head withdrew"
        assert ferrolock.flush_events(10)
    finally:
        ferrolock.remove_listener(listen)
    kinds = [(e.kind, e.detail) for e in events if e.names == ("w",)]
    taken = max(i for i, (kind, _) in enumerate(kinds) if kind == "acquired")
    woken = [detail for kind, detail in kinds[:taken] if kind == "woken"]
    assert woken[-1] in ("pubsub", "handover"), f"C found the name free by itself: {kinds}"
    assert hold_field(raw("GET", key), "token").decode() == c.token
    await c.arelease()
    wait_for(lambda: raw.keys(prefix + "*") == [], 5, "no keys left")
