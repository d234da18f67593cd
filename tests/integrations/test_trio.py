"""The a* API under trio and under anyio on both backends: acquire and
release, `async with`, contention between tasks, trio's cancellation
(move_on_after, fail_after, a cancelled nursery) leaving nothing in Redis,
a release that completes though cancelled, a lost hold cancelling the block,
RWMutex / semaphore / election / RLock, OpenTelemetry spans, and the error
under no supported library (none, or curio)."""

from __future__ import annotations

import contextlib
import threading

import anyio
import curio
import pytest
import trio
import trio.testing

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ferrolock
import ferrolock.otel
from ferrolock import LockLost
from support.helpers import hold_field, key, next_comer_gets, postponed, until

BACKENDS = ["asyncio", "trio"]


def held_elsewhere(client, name: str) -> ferrolock.Lock:
    """A hold taken with the blocking API: the lock the tasks wait for."""
    holder = client.lock(name, ttl=10.0)
    assert holder.acquire()
    return holder


# --------------------------------------------------------------------------
# basics


def test_aacquire_and_arelease_under_trio(client, raw, prefix):
    lock = client.lock("basic", ttl=10.0)

    async def main():
        assert await lock.alocked() is False
        assert await lock.aacquire() is True
        assert await lock.aowned() is True
        assert 0 < await lock.attl() <= 10.0
        assert raw.keys(prefix + "*") == [key(prefix, "basic")]
        assert hold_field(raw("GET", key(prefix, "basic")), "token").decode() == lock.token
        await lock.arelease()
        assert lock.token is None
        assert await lock.alocked() is False

    trio.run(main)
    assert raw.keys(prefix + "*") == []


def test_async_with_under_trio(client, raw, prefix):
    lock = client.lock("with", ttl=10.0)

    async def main():
        async with lock as held:
            assert held is lock
            assert await lock.aowned()
            assert raw.keys(prefix + "*") == [key(prefix, "with")]
        assert raw.keys(prefix + "*") == []
        with pytest.raises(ValueError, match="boom"):
            async with lock:
                raise ValueError("boom")
        assert raw.keys(prefix + "*") == []

    trio.run(main)


def counting_worker(client, name, rounds, state, sleep):
    """A task taking lock `name` `rounds` times; inside, a read-sleep-write of
    `state["count"]` that loses updates if two are inside at once, and
    `state["most"]`, the most tasks seen inside together."""

    async def worker():
        lock = client.lock(name, ttl=10.0)
        for _ in range(rounds):
            async with lock:
                state["inside"] += 1
                state["most"] = max(state["most"], state["inside"])
                seen = state["count"]
                await sleep(0.001)
                state["count"] = seen + 1
                state["inside"] -= 1

    return worker


def test_contention_between_trio_tasks(client, raw, prefix):
    """One task inside at a time, and the counter exact: each read-sleep-write
    would lose updates if two were inside at once."""
    tasks, rounds = 6, 5
    state = {"count": 0, "inside": 0, "most": 0}
    worker = counting_worker(client, "contended", rounds, state, trio.sleep)

    async def main():
        async with trio.open_nursery() as nursery:
            for _ in range(tasks):
                nursery.start_soon(worker)

    trio.run(main)
    assert state == {"count": tasks * rounds, "inside": 0, "most": 1}
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# cancellation


def test_move_on_after_while_waiting_leaves_nothing(client, raw, prefix):
    holder = held_elsewhere(client, "busy")
    waiter = client.lock("busy", ttl=10.0)

    async def main():
        with trio.move_on_after(0.3) as scope:
            await waiter.aacquire()
        assert scope.cancelled_caught
        assert waiter.token is None
        # Only the holder's hold is there, no trace of the waiter's try.
        assert raw.keys(prefix + "*") == [key(prefix, "busy")]
        assert hold_field(raw("GET", key(prefix, "busy")), "token").decode() == holder.token
        holder.release()
        # The next to come gets it at once.
        later = client.lock("busy", ttl=10.0)
        with trio.fail_after(10):
            assert await later.aacquire()
        await later.arelease()

    trio.run(main)
    assert raw.keys(prefix + "*") == []


def test_cancelled_nursery_mid_acquire_leaves_nothing(client, raw, prefix):
    holder = held_elsewhere(client, "nursery")
    outcome = {}

    async def waiter(lock):
        try:
            await lock.aacquire()
            outcome["acquired"] = True
        except trio.Cancelled:
            outcome["cancelled"] = True
            raise

    async def main():
        locks = [client.lock("nursery", ttl=10.0) for _ in range(3)]
        async with trio.open_nursery() as nursery:
            for lock in locks:
                nursery.start_soon(waiter, lock)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert outcome == {"cancelled": True}
        assert all(lock.token is None for lock in locks)
        # Already cancelled when it parks: cancelled at once, its try undone.
        late = client.lock("nursery", ttl=10.0)
        with trio.CancelScope() as scope:
            scope.cancel()
            await late.aacquire()
        assert scope.cancelled_caught
        assert late.token is None
        holder.release()
        await until(lambda: raw.keys(prefix + "*") == [], 5.0, "nothing left in Redis")
        # Nobody took it meanwhile: the next comer gets it at once.
        assert await late.aacquire(blocking=False)
        await late.arelease()

    trio.run(main)


def test_cancelled_acquire_reports_cancelled_only_once_its_attempt_is_undone(server, prefix):
    """An acquire cancelled while its attempt is on its way (held in Redis by
    CLIENT PAUSE): Cancelled comes out only once that attempt has run and been
    undone, so when the caller sees it nothing the acquire sent is still
    pending, the lock is free, and nothing of the acquire takes it later."""
    client = ferrolock.Client(server.url, prefix=prefix)
    lock = client.lock("paused", ttl=10.0)
    seen = {}

    async def acquire(task_status=trio.TASK_STATUS_IGNORED):
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await lock.aacquire()
        # What Redis has at the moment the cancellation is reported.
        seen.update(cancelled=scope.cancelled_caught, pending=postponed(server))
        seen.update(keys=server.command("KEYS", prefix + "*"))

    async def main():
        client.connect()
        # Writes wait in Redis until UNPAUSE (10 s at most: a safety net).
        server.command("CLIENT", "PAUSE", "10000", "WRITE")
        try:
            async with trio.open_nursery() as nursery:
                scope = await nursery.start(acquire)
                await until(lambda: postponed(server) == 1, 5.0, "the attempt held in Redis")
                scope.cancel()
                # The acquire's task runs as far as it can: a cancellation
                # reported at once is recorded now, while Redis still holds
                # the attempt back.
                await trio.testing.wait_all_tasks_blocked()
                server.command("CLIENT", "UNPAUSE")
        finally:
            server.command("CLIENT", "UNPAUSE")
        assert seen == {"cancelled": True, "pending": 0, "keys": []}
        assert lock.token is None
        await next_comer_gets(client, lock)

    trio.run(main)
    assert server.command("KEYS", prefix + "*") == []


def test_fail_after_while_waiting(client, raw, prefix):
    holder = held_elsewhere(client, "slow")
    waiter = client.lock("slow", ttl=10.0)

    async def main():
        with pytest.raises(trio.TooSlowError):
            with trio.fail_after(0.3):
                await waiter.aacquire()

    trio.run(main)
    assert waiter.token is None
    assert hold_field(raw("GET", key(prefix, "slow")), "token").decode() == holder.token
    holder.release()
    assert raw.keys(prefix + "*") == []


def test_cancelled_block_still_releases(client, raw, prefix):
    """The body is cancelled: `async with`'s exit, awaited inside the cancelled
    scope, still releases (a release refuses trio's abort and runs to its end)."""
    lock = client.lock("exit", ttl=10.0)

    async def main():
        with trio.move_on_after(0.2) as scope:
            async with lock:
                await trio.sleep(30)
        assert scope.cancelled_caught
        assert lock.token is None
        assert raw.keys(prefix + "*") == []
        # A release awaited in an already-cancelled scope completes too.
        assert await lock.aacquire()
        with trio.CancelScope() as scope:
            scope.cancel()
            await lock.arelease()
        assert lock.token is None
        assert raw.keys(prefix + "*") == []

    trio.run(main)


def test_lost_hold_cancels_the_block_under_trio(client, raw, prefix):
    lock = client.lock("lost", ttl=0.6)
    body = {"cancelled": False, "finished": False}

    async def main():
        with pytest.raises(LockLost):
            async with lock:
                assert raw("DEL", key(prefix, "lost")) == 1
                try:
                    with trio.fail_after(30):
                        await trio.sleep(20)
                    body["finished"] = True
                except trio.Cancelled:
                    body["cancelled"] = True
                    raise
        assert lock.lost
        # The task is not left cancelled: it goes on awaiting normally.
        await trio.sleep(0.01)
        async with lock:
            assert await lock.aowned()

    trio.run(main)
    assert body == {"cancelled": True, "finished": False}
    assert raw.keys(prefix + "*") == []


def test_outside_cancellation_is_not_lock_lost_under_trio(client, raw, prefix):
    lock = client.lock("outside", ttl=10.0)

    async def main():
        with trio.move_on_after(0.2) as scope:
            async with lock:
                await trio.sleep(30)
        assert scope.cancelled_caught
        assert not lock.lost

    trio.run(main)
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# the other primitives


def test_rwmutex_and_semaphore_under_trio(client, raw, prefix):
    rw = client.rwmutex("rw", ttl=10.0)
    sem_a = client.semaphore("sem", 2, ttl=10.0)
    sem_b = client.semaphore("sem", 2, ttl=10.0)
    sem_c = client.semaphore("sem", 2, ttl=10.0)

    async def main():
        first, second = rw.read(), rw.read()
        async with first, second:
            assert await rw.areaders() == 2
            writer = rw.write()
            with trio.move_on_after(0.2) as scope:
                await writer.aacquire()
            assert scope.cancelled_caught
        async with rw.write():
            assert await rw.alocked()
        assert await rw.areaders() == 0
        assert await sem_a.aacquire() and await sem_b.aacquire()
        assert await sem_c.aacquire(blocking=False) is False
        with trio.move_on_after(0.2) as scope:
            await sem_c.aacquire()
        assert scope.cancelled_caught
        await sem_a.arelease()
        with trio.fail_after(10):
            assert await sem_c.aacquire()
        await sem_b.arelease()
        await sem_c.arelease()

    trio.run(main)
    assert raw.keys(prefix + "*") == []


def test_election_under_trio(client, raw, prefix):
    election = client.election("vote", ttl=10.0)
    rival = client.election("vote", ttl=10.0)

    async def main():
        seen = []
        saw_b = trio.Event()

        async def observe(task_status=trio.TASK_STATUS_IGNORED):
            task_status.started()
            async with contextlib.aclosing(election.aobserve()) as changes:
                async for leader in changes:
                    seen.append(None if leader is None else leader.value)
                    if seen[-1] == "b":
                        saw_b.set()
                        return

        async with trio.open_nursery() as nursery:
            await nursery.start(observe)
            term = await election.acampaign("a")
            assert (await election.aleader()).value == "a"
            await term.aproclaim("a2")
            with trio.move_on_after(0.2) as scope:
                await rival.acampaign("b")
            assert scope.cancelled_caught
            await term.aresign()
            with trio.fail_after(10):
                other = await rival.acampaign("b")
                await saw_b.wait()  # the observer follows every change
            await other.aresign()
        assert seen[-1] == "b"
        assert set(seen) <= {None, "a", "a2", "b"}

    trio.run(main)
    assert raw.keys(prefix + "*") == []


def test_rlock_under_trio(client, raw, prefix):
    rlock = client.rlock("re", ttl=10.0)
    order = []

    async def owner(ready: trio.Event, go_on: trio.Event):
        async with rlock:
            assert await rlock.aacquire()  # the same task takes it again
            assert rlock.count == 2
            ready.set()
            await go_on.wait()
            await rlock.arelease()
            order.append("owner out")

    async def other():
        async with rlock:  # another trio task: waits for the owner
            order.append("other in")
            assert rlock.count == 1

    async def main():
        ready, go_on = trio.Event(), trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(owner, ready, go_on)
            await ready.wait()
            nursery.start_soon(other)
            await trio.testing.wait_all_tasks_blocked()
            assert order == []
            go_on.set()

    trio.run(main)
    assert order == ["owner out", "other in"]
    assert raw.keys(prefix + "*") == []


def test_otel_spans_under_trio(client):
    """The spans of a trio task's calls are children of its current span."""
    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    app = tracers.get_tracer("app")

    async def handler():
        with app.start_as_current_span("trio request"):
            async with client.lock("otel-with"):
                pass
            lock = client.lock("otel-aacquire")
            assert await lock.aacquire(timeout=5)
            await lock.arelease()

    try:
        with ferrolock.otel.instrument(meters, tracers):
            trio.run(handler)
    finally:
        meters.shutdown()
    spans = exporter.get_finished_spans()
    request = next(s for s in spans if s.name == "trio request")
    ours = [s for s in spans if s.name.startswith("ferrolock.")]
    assert len(ours) == 4, [s.name for s in ours]
    assert all(s.parent is not None and s.parent.span_id == request.context.span_id for s in ours)


# --------------------------------------------------------------------------
# anyio, on both backends


@pytest.mark.parametrize("backend", BACKENDS)
def test_anyio_contention_and_cancellation(client, raw, prefix, backend):
    tasks, rounds = 4, 4
    state = {"count": 0, "inside": 0, "most": 0}
    holder = held_elsewhere(client, "anyio-busy")
    worker = counting_worker(client, "anyio", rounds, state, anyio.sleep)

    async def acquire(lock):
        await lock.aacquire()

    async def main():
        async with anyio.create_task_group() as group:
            for _ in range(tasks):
                group.start_soon(worker)
        waiter = client.lock("anyio-busy", ttl=10.0)
        with anyio.move_on_after(0.3) as scope:
            await waiter.aacquire()
        assert scope.cancelled_caught
        assert waiter.token is None
        assert raw.keys(prefix + "*") == [key(prefix, "anyio-busy")]
        async with anyio.create_task_group() as group:
            group.start_soon(acquire, waiter)
            await anyio.wait_all_tasks_blocked()
            group.cancel_scope.cancel()
        holder.release()
        await until(lambda: raw.keys(prefix + "*") == [], 5.0, "nothing left in Redis")
        with anyio.fail_after(10):
            async with waiter:
                assert await waiter.aowned()

    anyio.run(main, backend=backend)
    assert state == {"count": tasks * rounds, "inside": 0, "most": 1}
    assert raw.keys(prefix + "*") == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_anyio_lost_hold_cancels_the_block(client, raw, prefix, backend):
    lock = client.lock("anyio-lost", ttl=0.6)
    body = {"cancelled": False, "finished": False}

    async def main():
        with pytest.raises(LockLost):
            async with lock:
                assert raw("DEL", key(prefix, "anyio-lost")) == 1
                try:
                    await anyio.sleep(20)
                    body["finished"] = True
                except anyio.get_cancelled_exc_class():
                    body["cancelled"] = True
                    raise
        # Not left cancelled: the task goes on.
        await anyio.sleep(0.01)
        with anyio.fail_after(10):
            async with lock:
                assert await lock.aowned()

    anyio.run(main, backend=backend)
    assert body == {"cancelled": True, "finished": False}
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# no supported library


def test_no_supported_library_raises_and_leaves_nothing(client, raw, prefix):
    holder = held_elsewhere(client, "bare")
    waiter = client.lock("bare", ttl=10.0)
    coro = waiter.aacquire()
    with pytest.raises(RuntimeError, match=r"asyncio \(and uvloop\), trio, or anyio on either backend, and none runs"):
        coro.send(None)  # must wait, and nothing runs the wait
    assert waiter.token is None
    with pytest.raises(RuntimeError, match="anyio on either backend"):
        waiter.__aenter__()
    # The operation was cancelled with the error: it is over, the hold is the holder's alone.
    with pytest.raises(RuntimeError, match="cannot reuse"):
        coro.send(None)
    assert raw.keys(prefix + "*") == [key(prefix, "bare")]
    assert hold_field(raw("GET", key(prefix, "bare")), "token").decode() == holder.token
    holder.release()
    assert raw.keys(prefix + "*") == []
    # A trio run in another thread does not make this thread's call run under trio.
    errors = []

    def bare():
        try:
            client.lock("bare", ttl=10.0).__aenter__()
        except RuntimeError as e:
            errors.append(e)

    async def main():
        thread = threading.Thread(target=bare)
        thread.start()
        await trio.to_thread.run_sync(thread.join)

    trio.run(main)
    assert len(errors) == 1


def test_curio_is_refused_by_name(client, raw, prefix):
    """Under curio (real, neither asyncio nor trio) a call that must wait
    raises, naming the supported libraries and the one found, and leaves
    nothing behind; `async with` raises before sending anything."""
    holder = held_elsewhere(client, "curio")
    waiter = client.lock("curio", ttl=10.0)
    errors = []

    async def main():
        for attempt in (waiter.aacquire, waiter.__aenter__):
            try:
                await attempt()
            except RuntimeError as e:
                errors.append(str(e))

    curio.run(main)
    assert len(errors) == 2
    assert all("trio, or anyio on either backend, not under curio" in e for e in errors), errors
    assert "Lock.aacquire" in errors[0] and "Lock.__aenter__" in errors[1]
    assert waiter.token is None
    assert raw.keys(prefix + "*") == [key(prefix, "curio")]
    holder.release()
    assert raw.keys(prefix + "*") == []
