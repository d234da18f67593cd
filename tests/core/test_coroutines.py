"""The a* methods are coroutines, as `asyncio.Lock`'s are: nothing reaches
Redis until one is awaited, one never awaited takes nothing, and tasks,
task groups, wait_for, timeout, shield and cancellation treat them as they
treat any coroutine; under uvloop as under the default loop."""

from __future__ import annotations

import asyncio
import gc
import sys
import time

import pytest

import ferrolock
from ferrolock import Retry
from support.helpers import cancelled_after, sent_before

uvloop = pytest.importorskip("uvloop", reason="uvloop is in tests/requirements.txt")

LOOPS = ["asyncio", "uvloop"]


def run(loop: str, main):
    """Runs `main()` in a fresh event loop of the kind `loop`."""
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main())
    event_loop = factory()
    try:
        return event_loop.run_until_complete(main())
    finally:
        event_loop.close()


def coroutines_of(client: ferrolock.Client, lock: ferrolock.Lock, rw: ferrolock.RWMutex) -> dict:
    return {
        "Lock.aacquire": lock.aacquire(),
        "Lock.atake_over": lock.atake_over("t"),
        "Lock.arelease": lock.arelease(),
        "Lock.aextend": lock.aextend(),
        "Lock.alocked": lock.alocked(),
        "Lock.aowned": lock.aowned(),
        "Lock.attl": lock.attl(),
        "Lock.wait_lost": lock.wait_lost(),
        "Lock.__aexit__": lock.__aexit__(None, None, None),
        "Client.aforce_release": client.aforce_release("x"),
        "Client.ainspect": client.ainspect("x"),
        "RWMutex.areaders": rw.areaders(),
        "RWMutex.alocked": rw.alocked(),
    }


@pytest.mark.parametrize("loop", LOOPS)
def test_every_a_method_is_a_coroutine_that_does_nothing_unawaited(loop, client, raw, prefix):
    async def main():
        lock, rw = client.lock("c"), client.rwmutex("rw")
        made = coroutines_of(client, lock, rw)
        made["Lock.__aenter__"] = lock.__aenter__()
        for name, coro in made.items():
            assert asyncio.iscoroutine(coro), name
            assert coro.__qualname__ == name
            coro.close()
        holder = client.lock("held")
        assert await holder.aacquire()
        before = raw.keys(prefix + "*")
        # never awaited: no acquire, no release, and Python's warning, as for
        # any coroutine never awaited
        with pytest.warns(RuntimeWarning, match="coroutine 'Lock.aacquire' was never awaited"):
            client.lock("never").aacquire()
            gc.collect()
        with pytest.warns(RuntimeWarning, match="never awaited"):
            holder.arelease()
            client.aforce_release("held")
            gc.collect()
        await asyncio.sleep(0.05)
        assert raw.keys(prefix + "*") == before
        assert holder.token is not None and await holder.aowned()
        await holder.arelease()
        assert raw.keys(prefix + "*") == []

    run(loop, main)


def test_awaiting_twice_is_refused(client):
    async def main():
        coro = client.lock("twice").alocked()
        assert await coro is False
        with pytest.raises(RuntimeError, match="cannot reuse"):
            await coro

    asyncio.run(main())


@pytest.mark.parametrize("loop", LOOPS)
def test_create_task_taskgroup_gather(loop, client, raw, prefix):
    async def main():
        lock = client.lock("t")
        task = asyncio.create_task(lock.aacquire())
        assert await task is True
        assert await asyncio.create_task(lock.aowned()) is True
        await asyncio.create_task(lock.arelease())
        assert raw.keys(prefix + "*") == []

        state = {"inside": 0, "most": 0, "count": 0}

        async def bump(i):
            async with client.lock("group"):
                state["inside"] += 1
                state["most"] = max(state["most"], state["inside"])
                await asyncio.sleep(0)
                state["count"] += 1
                state["inside"] -= 1
            return i

        if hasattr(asyncio, "TaskGroup"):
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(bump(i)) for i in range(20)]
                tasks.append(tg.create_task(client.lock("tg-other").alocked()))
            assert [t.result() for t in tasks[:-1]] == list(range(20))
            assert tasks[-1].result() is False
        assert await asyncio.gather(*(bump(i) for i in range(20))) == list(range(20))
        assert state["most"] == 1 and state["count"] == (40 if hasattr(asyncio, "TaskGroup") else 20)
        assert raw.keys(prefix + "*") == []

    run(loop, main)


@pytest.mark.parametrize("loop", LOOPS)
def test_wait_for_timeout_and_cancel_leave_nothing(loop, client, raw, prefix):
    async def main():
        holder = client.lock("w")
        assert await holder.aacquire()
        waiter = client.lock("w", retry=Retry.fixed(0.01))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(waiter.aacquire(), 0.1)
        if hasattr(asyncio, "timeout"):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.1):
                    async with waiter:
                        pytest.fail("entered a held lock")
        task = asyncio.create_task(waiter.aacquire())
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert waiter.token is None
        await holder.arelease()
        await asyncio.sleep(0.05)  # a cancelled waiter must not take it now
        assert raw.keys(prefix + "*") == []
        # wait_for with time to spare returns the result
        assert await asyncio.wait_for(waiter.aacquire(), 5) is True
        await waiter.arelease()

    run(loop, main)


@pytest.mark.parametrize("loop", LOOPS)
def test_shield_keeps_the_acquire_running(loop, client, raw, prefix):
    async def main():
        holder = client.lock("s")
        assert await holder.aacquire()
        lock = client.lock("s")
        inner = asyncio.ensure_future(lock.aacquire())
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(inner), 0.1)
        assert not inner.done(), "the shielded acquire was cancelled"
        await holder.arelease()
        assert await asyncio.wait_for(inner, 5) is True
        assert (await client.ainspect("s")).token == lock.token
        await lock.arelease()
        assert raw.keys(prefix + "*") == []

    run(loop, main)


@pytest.mark.parametrize("loop", LOOPS)
def test_cancel_at_each_step_under_each_loop(loop, client, raw, prefix):
    async def main():
        for steps in range(8):
            lock = client.lock(f"step-{steps}")
            if await cancelled_after(lock.aacquire(), steps):
                await lock.arelease()
            await sent_before(lock)
            deadline = time.monotonic() + 2  # the undo runs in the background
            while raw.keys(prefix + "*") and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert raw.keys(prefix + "*") == [], f"left behind after {steps} steps"

    run(loop, main)


def test_loops_one_after_another_on_one_thread(client):
    """Each loop gets its own wake-up socket; a closed loop's is let go."""

    async def main():
        lock = client.lock("seq")
        assert await lock.aacquire()
        assert await lock.aowned()
        await lock.arelease()
        return True

    for loop in LOOPS * 3:
        assert run(loop, main) is True
