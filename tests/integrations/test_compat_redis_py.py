"""ferrolock.compat.redis_py: redis-py's Lock (and its asyncio twin) on
ferrolock, holding the same key, so old and new processes exclude each other.

- redis-py's own lock tests (adapted from redis-py's tests/test_lock.py and
  tests/test_asyncio/test_lock.py, MIT licence), run against redis-py's Lock
  and the compat Lock alike: the compat class passes what the real one
  passes. Left out: the three that read redis-py's sleeps through a fake
  clock patched into redis.lock (the compat class waits in ferrolock's core;
  its blocking_timeout is checked by test_blocking_timeout_bounds_the_wait).
- Old and new side by side, in both directions: never held by both, nobody
  releases or extends another's hold, a waiter of either gets the lock when
  a holder of the other lets it go; real processes of each contend for one
  name (sync and asyncio).
- What ferrolock adds: the fence, the loss told, renewal.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio
import redis.asyncio.lock
import redis.lock
from redis.exceptions import LockError, LockNotOwnedError

import ferrolock
from ferrolock.compat import client_for
from ferrolock.compat.redis_py import Lock
from ferrolock.compat.redis_py.asyncio import Lock as AsyncLock
from support.helpers import LostProbe, wait_for


@pytest.fixture
def r(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def r_decoded(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def name(prefix, r):
    """A key of this test's own (the compat lock's key is the name itself)."""
    yield f"{prefix}foo"
    r.delete(f"{prefix}foo")


# ------------------------------------------------------- redis-py's own tests


@pytest.fixture(params=[redis.lock.Lock, Lock], ids=["redis-py", "compat"])
def lock_class(request):
    return request.param


class TestRedisPyLockSuite:
    """redis-py's tests/test_lock.py, its key named per test."""

    @pytest.fixture(autouse=True)
    def _setup(self, lock_class, name):
        self.lock_class, self.foo = lock_class, name

    def get_lock(self, redis, *args, **kwargs):
        kwargs["lock_class"] = self.lock_class
        return redis.lock(*args, **kwargs)

    def test_lock(self, r):
        lock = self.get_lock(r, self.foo)
        assert lock.acquire(blocking=False)
        assert r.get(self.foo) == lock.local.token
        assert r.ttl(self.foo) == -1
        lock.release()
        assert r.get(self.foo) is None

    @pytest.mark.parametrize("thread_local", [True, False])
    def test_lock_token(self, r, thread_local):
        lock = self.get_lock(r, self.foo, thread_local=thread_local)
        assert lock.acquire(blocking=False, token="test")
        assert r.get(self.foo) == b"test"
        assert lock.local.token == b"test"
        assert r.ttl(self.foo) == -1
        lock.release()
        assert r.get(self.foo) is None
        assert lock.local.token is None

    def test_locked(self, r):
        lock = self.get_lock(r, self.foo)
        assert lock.locked() is False
        lock.acquire(blocking=False)
        assert lock.locked() is True
        lock.release()
        assert lock.locked() is False

    @pytest.mark.parametrize("decoded", [False, True])
    def test_owned(self, r, r_decoded, decoded):
        client = r_decoded if decoded else r
        lock = self.get_lock(client, self.foo)
        assert lock.owned() is False
        lock.acquire(blocking=False)
        assert lock.owned() is True
        lock.release()
        assert lock.owned() is False
        lock2 = self.get_lock(client, self.foo)
        assert lock.owned() is False
        assert lock2.owned() is False
        lock2.acquire(blocking=False)
        assert lock.owned() is False
        assert lock2.owned() is True
        lock2.release()
        assert lock.owned() is False
        assert lock2.owned() is False

    def test_competing_locks(self, r):
        lock1 = self.get_lock(r, self.foo)
        lock2 = self.get_lock(r, self.foo)
        assert lock1.acquire(blocking=False)
        assert not lock2.acquire(blocking=False)
        lock1.release()
        assert lock2.acquire(blocking=False)
        assert not lock1.acquire(blocking=False)
        lock2.release()

    def test_timeout(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        assert lock.acquire(blocking=False)
        assert 8 < r.ttl(self.foo) <= 10
        lock.release()

    def test_float_timeout(self, r):
        lock = self.get_lock(r, self.foo, timeout=9.5)
        assert lock.acquire(blocking=False)
        assert 8 < r.pttl(self.foo) <= 9500
        lock.release()

    def test_context_manager(self, r):
        with self.get_lock(r, self.foo, blocking_timeout=0.2) as lock:
            assert r.get(self.foo) == lock.local.token
        assert r.get(self.foo) is None

    def test_context_manager_raises_when_locked_not_acquired(self, r):
        r.set(self.foo, "bar")
        with pytest.raises(LockError) as excinfo:
            with self.get_lock(r, self.foo, blocking_timeout=0.1):
                pass
        assert excinfo.value.lock_name == self.foo

    def test_context_manager_not_raise_on_release_lock_not_owned_error(self, r):
        with self.get_lock(r, self.foo, timeout=0.1, raise_on_release_error=False):
            time.sleep(0.15)  # past the 0.1 s timeout on purpose: the release finds the lock gone
        with pytest.raises(LockNotOwnedError):
            with self.get_lock(r, self.foo, timeout=0.1, raise_on_release_error=True):
                time.sleep(0.15)  # past the timeout, as above

    def test_context_manager_not_raise_on_release_lock_error(self, r):
        with self.get_lock(r, self.foo, timeout=0.1, raise_on_release_error=False) as lock:
            lock.release()
        with pytest.raises(LockError):
            with self.get_lock(r, self.foo, timeout=0.1, raise_on_release_error=True) as lock:
                lock.release()

    def test_releasing_unlocked_lock_raises_error(self, r):
        lock = self.get_lock(r, self.foo)
        with pytest.raises(LockError):
            lock.release()

    def test_releasing_lock_no_longer_owned_raises_error(self, r):
        lock = self.get_lock(r, self.foo)
        lock.acquire(blocking=False)
        r.set(self.foo, "a")
        with pytest.raises(LockNotOwnedError):
            lock.release()
        assert lock.local.token is None
        assert r.get(self.foo) == b"a", "the other holder's key is left alone"

    def test_extend_lock(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        assert lock.acquire(blocking=False)
        assert 8000 < r.pttl(self.foo) <= 10000
        assert lock.extend(10)
        assert 16000 < r.pttl(self.foo) <= 20000
        lock.release()

    def test_extend_lock_replace_ttl(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        assert lock.acquire(blocking=False)
        assert 8000 < r.pttl(self.foo) <= 10000
        assert lock.extend(10, replace_ttl=True)
        assert 8000 < r.pttl(self.foo) <= 10000
        lock.release()

    def test_extend_lock_float(self, r):
        lock = self.get_lock(r, self.foo, timeout=10.5)
        assert lock.acquire(blocking=False)
        assert 10000 < r.pttl(self.foo) <= 10500
        old_ttl = r.pttl(self.foo)
        assert lock.extend(10.5)
        assert old_ttl + 10000 < r.pttl(self.foo) <= old_ttl + 10500
        lock.release()

    def test_extending_unlocked_lock_raises_error(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        with pytest.raises(LockError):
            lock.extend(10)

    def test_extending_lock_with_no_timeout_raises_error(self, r):
        lock = self.get_lock(r, self.foo)
        assert lock.acquire(blocking=False)
        with pytest.raises(LockError):
            lock.extend(10)
        lock.release()

    def test_extending_lock_no_longer_owned_raises_error(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        assert lock.acquire(blocking=False)
        r.set(self.foo, "a")
        with pytest.raises(LockNotOwnedError):
            lock.extend(10)

    def test_reacquire_lock(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        assert lock.acquire(blocking=False)
        assert r.pexpire(self.foo, 5000)
        assert r.pttl(self.foo) <= 5000
        assert lock.reacquire()
        assert 8000 < r.pttl(self.foo) <= 10000
        lock.release()

    def test_reacquiring_unlocked_lock_raises_error(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        with pytest.raises(LockError):
            lock.reacquire()

    def test_reacquiring_lock_with_no_timeout_raises_error(self, r):
        lock = self.get_lock(r, self.foo)
        assert lock.acquire(blocking=False)
        with pytest.raises(LockError):
            lock.reacquire()
        lock.release()

    def test_reacquiring_lock_no_longer_owned_raises_error(self, r):
        lock = self.get_lock(r, self.foo, timeout=10)
        assert lock.acquire(blocking=False)
        r.set(self.foo, "a")
        with pytest.raises(LockNotOwnedError):
            lock.reacquire()

    def test_context_manager_reacquiring_lock_with_no_timeout_raises_error(self, r):
        with self.get_lock(r, self.foo, timeout=None, blocking=False) as lock:
            with pytest.raises(LockError):
                lock.reacquire()

    def test_context_manager_reacquiring_lock_no_longer_owned_raises_error(self, r):
        with pytest.raises(LockNotOwnedError):
            with self.get_lock(r, self.foo, timeout=10, blocking=False):
                r.set(self.foo, "a")


@pytest.fixture
async def ar(redis_url):
    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture(params=[redis.asyncio.lock.Lock, AsyncLock], ids=["redis-py", "compat"])
def async_lock_class(request):
    return request.param


class TestRedisPyAsyncLockSuite:
    """redis-py's tests/test_asyncio/test_lock.py, its key named per test."""

    @pytest.fixture(autouse=True)
    def _setup(self, async_lock_class, name):
        self.lock_class, self.foo = async_lock_class, name

    def get_lock(self, redis, *args, **kwargs):
        kwargs["lock_class"] = self.lock_class
        return redis.lock(*args, **kwargs)

    async def test_lock(self, ar):
        lock = self.get_lock(ar, self.foo)
        assert await lock.acquire(blocking=False)
        assert await ar.get(self.foo) == lock.local.token
        assert await ar.ttl(self.foo) == -1
        await lock.release()
        assert await ar.get(self.foo) is None

    @pytest.mark.parametrize("thread_local", [True, False])
    async def test_lock_token(self, ar, thread_local):
        lock = self.get_lock(ar, self.foo, thread_local=thread_local)
        assert await lock.acquire(blocking=False, token="test")
        assert await ar.get(self.foo) == b"test"
        assert lock.local.token == b"test"
        await lock.release()
        assert await ar.get(self.foo) is None
        assert lock.local.token is None

    async def test_owned_and_competing(self, ar):
        lock1 = self.get_lock(ar, self.foo)
        lock2 = self.get_lock(ar, self.foo)
        assert await lock1.acquire(blocking=False)
        assert await lock1.owned() and not await lock2.owned() and await lock2.locked()
        assert not await lock2.acquire(blocking=False)
        await lock1.release()
        assert await lock2.acquire(blocking=False)
        assert not await lock1.acquire(blocking=False)
        await lock2.release()
        assert not await lock2.locked()

    async def test_timeout_and_context_manager(self, ar):
        async with self.get_lock(ar, self.foo, timeout=9.5, blocking_timeout=0.2) as lock:
            assert await ar.get(self.foo) == lock.local.token
            assert 8000 < await ar.pttl(self.foo) <= 9500
        assert await ar.get(self.foo) is None

    async def test_context_manager_raises_when_locked_not_acquired(self, ar):
        await ar.set(self.foo, "bar")
        with pytest.raises(LockError):
            async with self.get_lock(ar, self.foo, blocking_timeout=0.1):
                pass

    async def test_context_manager_not_raise_on_release_lock_not_owned_error(self, ar):
        async with self.get_lock(ar, self.foo, timeout=0.1, raise_on_release_error=False):
            await asyncio.sleep(0.15)
        with pytest.raises(LockNotOwnedError):
            async with self.get_lock(ar, self.foo, timeout=0.1, raise_on_release_error=True):
                await asyncio.sleep(0.15)

    async def test_releasing_lock_no_longer_owned_raises_error(self, ar):
        lock = self.get_lock(ar, self.foo)
        await lock.acquire(blocking=False)
        await ar.set(self.foo, "a")
        with pytest.raises(LockNotOwnedError):
            await lock.release()
        assert lock.local.token is None

    async def test_extend_and_reacquire(self, ar):
        lock = self.get_lock(ar, self.foo, timeout=10)
        with pytest.raises(LockError):
            lock.extend(10)  # raised at the call, nothing to await
        assert await lock.acquire(blocking=False)
        assert await lock.extend(10)
        assert 16000 < await ar.pttl(self.foo) <= 20000
        assert await lock.extend(10, replace_ttl=True)
        assert 8000 < await ar.pttl(self.foo) <= 10000
        assert await ar.pexpire(self.foo, 5000)
        assert await lock.reacquire()
        assert 8000 < await ar.pttl(self.foo) <= 10000
        await ar.set(self.foo, "a")
        with pytest.raises(LockNotOwnedError):
            await lock.extend(10)
        with pytest.raises(LockNotOwnedError):
            await lock.reacquire()

    async def test_extending_lock_with_no_timeout_raises_error(self, ar):
        lock = self.get_lock(ar, self.foo)
        assert await lock.acquire(blocking=False)
        with pytest.raises(LockError):
            await lock.extend(10)
        with pytest.raises(LockError):
            await lock.reacquire()
        await lock.release()

    async def test_release_cancellation_preserves_lock_state(self, ar):
        lock = self.get_lock(ar, self.foo)
        await lock.acquire(blocking=False)
        original_token = lock.local.token
        assert await lock.owned()
        release_task = asyncio.create_task(lock.release())
        release_task.cancel()
        try:
            await release_task
        except asyncio.CancelledError:
            pass
        if lock.local.token is not None:
            assert lock.local.token == original_token
            await lock.release()
        assert await lock.locked() is False


# ------------------------------------------------------ old and new together


def test_a_redis_py_hold_and_a_compat_hold_exclude_each_other(r, name):
    old, new = redis.lock.Lock(r, name, timeout=30), Lock(r, name, timeout=30)
    assert old.acquire(blocking=False)
    assert not new.acquire(blocking=False)
    new.local.token = b"not-the-holder"
    with pytest.raises(LockNotOwnedError):
        new.release()
    new.local.token = b"not-the-holder"
    with pytest.raises(LockNotOwnedError):
        new.extend(100)
    assert r.get(name) == old.local.token and r.pttl(name) <= 30_000, "the old hold is untouched"
    old.release()
    assert new.acquire(blocking=False)
    assert not old.acquire(blocking=False)
    old.local.token = b"not-the-holder"
    with pytest.raises(LockNotOwnedError):
        old.release()
    old.local.token = b"not-the-holder"
    with pytest.raises(LockNotOwnedError):
        old.extend(100)
    assert r.get(name) == new.local.token and r.pttl(name) <= 30_000, "the new hold is untouched"
    assert new.owned() and not new.lost
    new.release()
    assert r.get(name) is None


def test_a_compat_waiter_gets_the_lock_when_a_redis_py_holder_releases(r, name):
    old = redis.lock.Lock(r, name, timeout=30)
    assert old.acquire(blocking=False)
    got = []
    waiter = threading.Thread(
        target=lambda: got.append(Lock(r, name, timeout=30, sleep=0.02).acquire(blocking_timeout=60))
    )
    waiter.start()
    wait_for(lambda: ferrolock._ferrolock._debug_stats()["waiters"] > 0, 10, "the waiter to wait")
    assert not got
    old.release()
    waiter.join(60)
    assert got == [True]
    assert r.get(name) not in (None, old.local.token)


def test_a_redis_py_waiter_gets_the_lock_when_a_compat_holder_releases(r, name):
    new = Lock(r, name, timeout=30)
    assert new.acquire(blocking=False)
    got = []
    waiter = threading.Thread(
        target=lambda: got.append(
            redis.lock.Lock(redis.Redis(connection_pool=r.connection_pool), name, timeout=30, sleep=0.02).acquire(
                blocking_timeout=60
            )
        )
    )
    waiter.start()
    assert not got
    new.release()
    waiter.join(60)
    assert got == [True]


def test_a_compat_waiter_is_woken_by_a_compat_release_not_by_its_poll(r, name):
    """Its poll every 60 s cannot be what let it in: ferrolock's release wakes it."""
    holder = Lock(r, name, timeout=30)
    assert holder.acquire(blocking=False)
    got = []
    waiter = Lock(r, name, timeout=30, sleep=60)
    thread = threading.Thread(target=lambda: got.append((waiter.acquire(blocking_timeout=50), time.monotonic())))
    thread.start()
    wait_for(lambda: ferrolock._ferrolock._debug_stats()["waiters"] > 0, 10, "the waiter to wait")
    released = time.monotonic()
    holder.release()
    thread.join(50)
    assert got and got[0][0] is True
    assert got[0][1] - released < 30, "woken by the release, well before its 60 s poll"


def test_a_redis_py_hold_that_expires_lets_a_compat_waiter_in(r, name):
    old = redis.lock.Lock(r, name, timeout=0.3)
    assert old.acquire(blocking=False)
    assert Lock(r, name, timeout=30, sleep=0.02).acquire(blocking_timeout=30)
    with pytest.raises(LockNotOwnedError):
        old.release()


def test_r_lock_with_lock_class_is_the_compat_lock(r, name):
    lock = r.lock(name, timeout=5, lock_class=Lock)
    assert isinstance(lock, Lock)
    with lock:
        assert 4000 < r.pttl(name) <= 5000 and lock.fence


CONTENDER = textwrap.dedent("""
    import asyncio, sys, time
    import redis, redis.asyncio
    kind, mode, url, name, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    inside = name + ":inside"

    def work(r):
        if r.incr(inside) != 1:
            print("OVERLAP", flush=True)
        time.sleep(0.002)  # hold time: widens the window an overlap would show in
        r.decr(inside)

    if mode == "sync":
        if kind == "old":
            from redis.lock import Lock
        else:
            from ferrolock.compat.redis_py import Lock
        r = redis.Redis.from_url(url)
        for _ in range(rounds):
            with Lock(r, name, timeout=10, sleep=0.005):
                work(r)
    else:
        if kind == "old":
            from redis.asyncio.lock import Lock
        else:
            from ferrolock.compat.redis_py.asyncio import Lock

        async def main():
            r = redis.asyncio.Redis.from_url(url)
            for _ in range(rounds):
                async with Lock(r, name, timeout=10, sleep=0.005):
                    if await r.incr(inside) != 1:
                        print("OVERLAP", flush=True)
                    await asyncio.sleep(0.002)
                    await r.decr(inside)
            await r.aclose()
        asyncio.run(main())
    print("DONE", kind, flush=True)
""")


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_old_and_new_processes_never_hold_at_once(redis_url, r, name, mode):
    """A rolling deploy: processes of redis-py's Lock and of the compat Lock
    contend for one name; the critical section counts who is inside."""
    rounds = 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, kind, mode, redis_url, name, str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in ("old", "new", "old", "new")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    r.delete(name + ":inside")
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert "OVERLAP" not in out, out
        assert "DONE" in out


# ------------------------------------------------------ what ferrolock adds


def test_fences_increase_and_come_from_the_server_clock(r, name):
    fences = []
    lock = Lock(r, name, timeout=5)
    for _ in range(3):
        with lock:
            fences.append(lock.fence)
            assert lock.hold is not None and lock.hold.fence == lock.fence
    assert fences == sorted(set(fences))
    seconds, micros = r.time()
    assert abs(fences[-1] - (seconds * 1_000_000 + micros)) < 60_000_000
    assert lock.fence is None, "no hold, no fence"


def test_a_hold_whose_timeout_runs_out_is_told_lost(r, name):
    probe = LostProbe()
    lock = Lock(r, name, timeout=0.3, on_lost=probe)
    assert lock.acquire(blocking=False)
    assert probe.wait(10)
    assert lock.lost and probe.calls == 1
    wait_for(lambda: r.get(name) is None, 10, "the key to expire (the loss is told a drift margin early)")
    with pytest.raises(LockNotOwnedError):
        lock.release()


def test_auto_renew_keeps_the_hold_past_its_timeout(r, name):
    probe = LostProbe()
    lock = Lock(r, name, timeout=0.5, auto_renew=True, on_lost=probe)
    with lock:
        time.sleep(1.6)  # the work outlasts three timeouts
        assert r.get(name) == lock.local.token and not lock.lost
    assert probe.calls == 0 and r.get(name) is None


def test_a_deleted_hold_is_told_lost_by_the_watchdog(r, name):
    probe = LostProbe()
    lock = Lock(r, name, timeout=0.6, auto_renew=True, on_lost=probe)
    assert lock.acquire(blocking=False)
    r.delete(name)
    assert probe.wait(10) and lock.lost


def test_blocking_timeout_bounds_the_wait(r, name):
    r.set(name, "someone")
    started = time.monotonic()
    assert not Lock(r, name, sleep=0.05, blocking_timeout=0.3).acquire()
    assert 0.25 < time.monotonic() - started < 10
    assert not Lock(r, name).acquire(blocking=False)
    assert r.get(name) == b"someone"


def test_thread_local_tokens_are_each_threads_own(r, name):
    lock = Lock(r, name, timeout=30)
    assert lock.acquire(blocking=False)
    seen = []
    thread = threading.Thread(target=lambda: seen.append((getattr(lock.local, "token", None), lock.fence)))
    thread.start()
    thread.join()
    assert seen == [(None, None)], "another thread sees no token (redis-py sets it in the first thread only)"
    shared = Lock(r, name + ":shared", timeout=30, thread_local=False)
    assert shared.acquire(blocking=False)
    thread = threading.Thread(target=shared.release)
    thread.start()
    thread.join()
    assert r.get(name + ":shared") is None, "without thread_local another thread releases it"
    lock.release()


def test_a_token_set_by_hand_releases_that_hold(r, name):
    taker = Lock(r, name, timeout=30)
    assert taker.acquire(blocking=False)
    other = Lock(r, name, timeout=30)
    other.local.token = taker.local.token
    other.release()
    assert r.get(name) is None


def test_one_ferrolock_client_per_redis_py_pool(r, redis_url):
    assert client_for(r) is client_for(redis.Redis(connection_pool=r.connection_pool))
    assert client_for(r) is not client_for(redis.Redis.from_url(redis_url))


def test_a_name_that_is_not_utf8_is_refused(r):
    with pytest.raises(ValueError, match="UTF-8"):
        Lock(r, b"\xff\xfe")


async def test_cancelling_an_async_acquire_leaves_nothing_held(ar, r, name):
    """Cancelled as the holder lets go, whether or not Redis granted it meanwhile."""
    holder = AsyncLock(ar, name, timeout=30)
    assert await holder.acquire(blocking=False)
    waiter = AsyncLock(ar, name, timeout=30, sleep=0.01)
    task = asyncio.ensure_future(waiter.acquire(blocking_timeout=30))
    while ferrolock._ferrolock._debug_stats()["waiters"] == 0:
        await asyncio.sleep(0.005)
    await holder.release()
    task.cancel()
    try:
        if await task:
            await waiter.release()  # it had returned before the cancel came
    except asyncio.CancelledError:
        pass
    wait_for(lambda: r.get(name) is None, 10, "the cancelled acquire to leave nothing")
    assert waiter.local.token is None or r.get(name) is None


def test_the_command_line_shows_a_plain_hold(redis_url, r, name):
    """`ferrolock inspect NAME --plain` reads the key redis-py's Lock (or python-redis-lock) keeps."""
    ferrolock_cli = str(Path(sys.executable).parent / "ferrolock")

    def inspect(*args):
        return subprocess.run(
            [ferrolock_cli, "--url", redis_url, "inspect", name, *args], capture_output=True, text=True, timeout=60
        )

    old = redis.lock.Lock(r, name, timeout=30)
    assert old.acquire(blocking=False)
    shown = inspect("--plain")
    assert shown.returncode == 0, shown.stderr
    assert old.local.token.decode() in shown.stdout and "redis-py" in shown.stdout and "fence:    -" in shown.stdout
    as_json = json.loads(inspect("--plain", "--json").stdout)
    assert [(h["library"], h["key"], h["token"]) for h in as_json] == [("redis-py", name, old.local.token.decode())]
    assert 0 < as_json[0]["ttl"] <= 30
    plain_only = inspect()
    assert plain_only.returncode == 1 and "--plain" in plain_only.stdout, "the hint names --plain"
    old.release()
    r.set("lock:" + name, "some-id")
    shown = inspect("--plain")
    assert shown.returncode == 0 and "python-redis-lock" in shown.stdout and "never expires" in shown.stdout
    r.delete("lock:" + name)
    r.hset(name, "not", "a string")
    gone = inspect("--plain")
    assert gone.returncode == 1 and "no plain hold" in gone.stdout
