"""The asyncio API: async with, the a* methods, many tasks, a handle shared
by tasks, cancellation (waiting, mid-acquire, mid-release), and the
synchronized decorator on coroutines."""

from __future__ import annotations

import asyncio
import inspect
import re
import time

import pytest

import ferrolock
from ferrolock import LockNotAcquired, LockNotOwned, Retry
from support.helpers import cancelled_after, hold_field, next_comer_gets, postponed

TOKEN_RE = re.compile(r"[0-9a-f]{32}")


def key_of(prefix: str, name: str) -> str:
    escaped = name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{prefix}{{{escaped}}}"


async def wait_unlocked(lock: ferrolock.Lock, limit: float = 2.0) -> bool:
    """Poll until nobody holds `lock`; False if it is still held after `limit` s.

    An acquire already in flight in Rust when Python cancelled it may still
    land, and is then undone in the background: the first `alocked` goes
    after it on the same connection (`sent_before`), so from then on the
    lock can only become free."""
    deadline = time.monotonic() + limit
    while await lock.alocked():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.005)
    return True


# --------------------------------------------------------------------------
# basics


async def test_async_with_acquires_and_releases(client, raw, prefix):
    lock = client.lock("a", ttl=10.0, metadata="async")
    async with lock as held:
        assert held is lock
        assert TOKEN_RE.fullmatch(lock.token)
        assert isinstance(lock.fence, int)
        assert await lock.aowned() is True
        assert raw.keys(prefix + "*") == [key_of(prefix, "a")]
        assert hold_field(raw("GET", key_of(prefix, "a")), "token").decode() == lock.token
        assert hold_field(raw("GET", key_of(prefix, "a")), "meta") == b"async"
    assert raw.keys(prefix + "*") == []
    assert lock.token is None
    assert await lock.aowned() is False


async def test_async_with_releases_on_exception(client, raw, prefix):
    lock = client.lock("a")
    with pytest.raises(ZeroDivisionError):
        async with lock:
            assert await lock.alocked()
            1 / 0
    assert raw.keys(prefix + "*") == []
    assert lock.token is None


async def test_async_with_raises_lock_not_acquired(client):
    holder = client.lock("a")
    assert await holder.aacquire()
    waiter = client.lock("a", blocking_timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(LockNotAcquired):
        async with waiter:
            pytest.fail("entered a lock held by another handle")
    assert 0.2 <= time.monotonic() - t0 < 2
    none = client.lock("a", retry=Retry.none())
    with pytest.raises(LockNotAcquired):
        async with none:
            pass
    assert (await client.ainspect("a")).token == holder.token
    await holder.arelease()


async def test_a_methods(client, raw, prefix):
    lock = client.lock("m", ttl=2.0, auto_renew=False)
    other = client.lock("m")
    assert await lock.alocked() is False
    assert await lock.aowned() is False
    assert await lock.attl() is None
    assert await client.ainspect("m") is None

    assert await lock.aacquire() is True
    assert await lock.alocked() is True and await lock.aowned() is True
    assert await other.alocked() is True and await other.aowned() is False
    assert await other.attl() is None
    assert await other.aacquire(blocking=False) is False
    t0 = time.monotonic()
    assert await other.aacquire(timeout=0.2) is False
    assert 0.2 <= time.monotonic() - t0 < 2

    await asyncio.sleep(0.2)  # let some ttl run out
    before = await lock.attl()
    assert before is not None and before < 1.85
    await lock.aextend()
    after = await lock.attl()
    assert after > before and after <= 2.0
    await lock.aextend(ttl=5)
    assert 4.5 < await lock.attl() <= 5.0

    info = await client.ainspect("m")
    assert isinstance(info, ferrolock.LockInfo)
    assert (info.name, info.token, info.fence) == ("m", lock.token, lock.fence)
    assert 4.5 < info.ttl <= 5.0

    await lock.arelease()
    assert raw.keys(prefix + "*") == []
    with pytest.raises(LockNotOwned):
        await lock.arelease()
    with pytest.raises(LockNotOwned):
        await lock.aextend()
    assert await lock.attl() is None


async def test_aforce_release(client, raw, prefix):
    assert await client.aforce_release("f") is False
    holder = client.lock("f")
    assert await holder.aacquire()
    assert await client.aforce_release("f") is True
    assert await client.ainspect("f") is None
    assert raw.keys(prefix + "*") == []
    with pytest.raises(LockNotOwned):
        await holder.aextend()
    with pytest.raises(LockNotOwned):
        await holder.arelease()


# --------------------------------------------------------------------------
# many tasks, shared handles


async def test_fifty_tasks_exclude_each_other(client, raw, prefix):
    state = {"count": 0, "inside": 0, "max": 0}

    async def bump():
        async with client.lock("x"):
            state["inside"] += 1
            state["max"] = max(state["max"], state["inside"])
            n = state["count"]
            await asyncio.sleep(0)
            state["count"] = n + 1
            state["inside"] -= 1

    await asyncio.wait_for(asyncio.gather(*(bump() for _ in range(50))), 30)
    assert state["count"] == 50
    assert state["max"] == 1
    assert raw.keys(prefix + "*") == []


async def test_shared_handle_second_task_waits(client):
    lock = client.lock("shared")
    held, go_release = asyncio.Event(), asyncio.Event()
    tokens = []

    async def first():
        async with lock:
            tokens.append(lock.token)
            held.set()
            await go_release.wait()

    async def second():
        assert await lock.aacquire() is True
        tokens.append(lock.token)

    t1 = asyncio.create_task(first())
    await held.wait()
    # not a shared hold: the same handle refuses a non-blocking acquire
    assert await lock.aacquire(blocking=False) is False
    t2 = asyncio.create_task(second())
    done, _ = await asyncio.wait({t2}, timeout=0.3)
    assert not done, "the second task shared the first task's hold"
    assert (await client.ainspect("shared")).token == tokens[0]
    go_release.set()
    await asyncio.wait_for(t1, 5)
    await asyncio.wait_for(t2, 5)
    assert len(tokens) == 2 and tokens[0] != tokens[1]
    assert (await client.ainspect("shared")).token == tokens[1]
    await lock.arelease()
    assert await client.ainspect("shared") is None


async def test_token_is_per_handle_not_per_task_or_thread(client):
    lock = client.lock("per-handle")

    async def take():
        assert await lock.aacquire()
        return lock.token

    token = await asyncio.create_task(take())
    assert lock.token == token
    assert (await client.ainspect("per-handle")).token == token

    async def give_back():
        await lock.arelease()

    await asyncio.create_task(give_back())
    assert await client.ainspect("per-handle") is None

    # taken in a thread, released on the event loop
    assert await asyncio.to_thread(lock.acquire) is True
    assert (await client.ainspect("per-handle")).token == lock.token
    await lock.arelease()
    assert await client.ainspect("per-handle") is None


# --------------------------------------------------------------------------
# cancellation


async def test_cancel_waiting_aacquire_leaves_nothing(client, raw, prefix):
    holder = client.lock("c")
    assert await holder.aacquire()
    waiter = client.lock("c", retry=Retry.fixed(0.01))
    if hasattr(asyncio, "timeout"):  # Python 3.11+
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await waiter.aacquire()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(waiter.aacquire(), 0.2)
    assert waiter.token is None
    await holder.arelease()
    # Let several retry intervals pass: a cancelled waiter must not take it now.
    await asyncio.sleep(0.1)
    assert await waiter.alocked() is False
    assert raw.keys(prefix + "*") == []
    assert waiter.token is None
    # and the handle is usable again
    assert await waiter.aacquire(blocking=False) is True
    await waiter.arelease()


async def test_cancel_aacquire_on_free_lock_at_each_step(client, raw, prefix):
    async def take(lock):
        return await lock.aacquire()

    for rep in range(3):
        for k in range(6):
            lock = client.lock(f"free-{rep}-{k}")
            result = await cancelled_after(take(lock), k)
            if result is True:
                await lock.arelease()
                continue
            assert result is None
            assert await wait_unlocked(lock), f"lock left behind (step {k})"
            assert lock.token is None
            assert await lock.alocked() is False, f"lock left behind (step {k})"
    assert raw.keys(prefix + "*") == []


@pytest.mark.parametrize("how", ["aacquire", "async with"])
async def test_cancel_after_acquire_completed_leaves_nothing(client, how):
    """Deterministic version of the race in the step test: the event loop is
    busy (blocked here on a synchronous poll) while the acquire completes, so
    the cancel lands before the result is delivered. The lock is held when
    the task starts, so its first step cannot already take it."""
    lock = client.lock("window")
    holder = client.lock("window")
    assert holder.acquire()

    async def take():
        if how == "aacquire":
            return await lock.aacquire()
        async with lock:
            await asyncio.sleep(3600)

    task = asyncio.create_task(take())
    await asyncio.sleep(0)  # the task starts: its first attempt finds the lock held
    assert not task.done()
    holder.release()  # the waiter is woken and takes it, while the loop is blocked
    deadline = time.monotonic() + 5
    while client.inspect("window") is None:  # blocks the loop on purpose
        assert time.monotonic() < deadline
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    try:
        # Correct behaviour: a cancelled acquire leaves no lock behind.
        assert await wait_unlocked(lock, 1.0), "lock still held after its acquire was cancelled"
        assert lock.token is None
    finally:
        if lock.token is not None:
            await lock.arelease()


async def test_cancelled_acquire_raises_only_once_its_attempt_is_undone(server, prefix):
    """An acquire cancelled while its attempt is on its way (held in Redis by
    CLIENT PAUSE): CancelledError comes out only once that attempt has run and
    been undone, so when the task sees it nothing the acquire sent is still
    pending, the lock is free, and nothing of the acquire takes it later."""
    client = ferrolock.Client(server.url, prefix=prefix)
    client.connect()
    lock = client.lock("paused", ttl=10.0)
    seen = {}

    async def acquire():
        try:
            await lock.aacquire()
        except asyncio.CancelledError:
            # What Redis has at the moment the cancellation is raised.
            seen.update(pending=postponed(server), keys=server.command("KEYS", prefix + "*"))
            raise

    # Writes wait in Redis until UNPAUSE (10 s at most: a safety net).
    server.command("CLIENT", "PAUSE", "10000", "WRITE")
    try:
        task = asyncio.create_task(acquire())
        deadline = time.monotonic() + 5
        while postponed(server) != 1:  # the attempt is held in Redis
            assert time.monotonic() < deadline, "the attempt never reached Redis"
            await asyncio.sleep(0.005)
        task.cancel()
        # A few steps of the loop (no time passes): a cancellation raised at
        # once is recorded now, while Redis still holds the attempt back.
        for _ in range(10):
            await asyncio.sleep(0)
        server.command("CLIENT", "UNPAUSE")
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        server.command("CLIENT", "UNPAUSE")
    assert seen == {"pending": 0, "keys": []}
    assert lock.token is None
    await next_comer_gets(client, lock)
    assert server.command("KEYS", prefix + "*") == []


async def test_cancelled_arelease_still_releases(client, raw, prefix):
    # a task running arelease cancelled before its first step
    lock = client.lock("r1")
    assert await lock.aacquire()
    task = asyncio.ensure_future(lock.arelease())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_unlocked(lock)
    assert lock.token is None

    # a task awaiting arelease cancelled right after it starts
    lock = client.lock("r2")
    assert await lock.aacquire()

    async def give_back():
        await lock.arelease()

    task = asyncio.create_task(give_back())
    await asyncio.sleep(0)
    task.cancel()  # a no-op if the release was answered in the task's first step
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert await wait_unlocked(lock)
    assert raw.keys(prefix + "*") == []

    # the coroutine thrown into while its release is in flight: it raises, and
    # the release completes all the same
    for _ in range(50):
        assert await lock.aacquire()
        coro = lock.arelease()
        try:
            coro.send(None)
        except StopIteration:
            continue  # answered within the first step: try again
        with pytest.raises(asyncio.CancelledError):
            coro.throw(asyncio.CancelledError())
        assert await wait_unlocked(lock)
        assert lock.token is None
        break
    else:
        pytest.fail("every release was answered within its first step")
    # the handle is free for another hold
    assert await lock.aacquire(blocking=False)
    await lock.arelease()


async def test_cancel_inside_async_with_releases(client, raw, prefix):
    lock = client.lock("body")
    entered = asyncio.Event()

    async def body():
        async with lock:
            entered.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_unlocked(lock)
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# synchronized


async def test_synchronized_async_function(client, raw, prefix):
    state = {"inside": 0, "max": 0}

    @client.synchronized("async-fn", retry=Retry.exponential(0.001, 0.01))
    async def critical(x):
        """Async doubling."""
        state["inside"] += 1
        state["max"] = max(state["max"], state["inside"])
        assert (await client.ainspect("async-fn")) is not None
        await asyncio.sleep(0.001)
        state["inside"] -= 1
        return x * 2

    assert inspect.iscoroutinefunction(critical)
    assert critical.__name__ == "critical"
    assert critical.__doc__ == "Async doubling."
    results = await asyncio.wait_for(asyncio.gather(*(critical(i) for i in range(20))), 30)
    assert results == [i * 2 for i in range(20)]
    assert state["max"] == 1
    assert raw.keys(prefix + "*") == []


async def test_synchronized_async_releases_on_exception(client):
    @client.synchronized("async-raises")
    async def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        await boom()
    assert await client.ainspect("async-raises") is None
