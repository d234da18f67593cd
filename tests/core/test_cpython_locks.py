"""CPython's own lock tests, run against ferrolock.

`test.lock_tests.LockTests` (the contract of `threading.Lock`) with a fresh
ferrolock `Lock` as the lock type, and `test.test_asyncio.test_locks.LockTests`
(the contract of `asyncio.Lock`) with ferrolock behind `asyncio.Lock`'s
interface. Both come from the interpreter's own `test` package; where it is
not installed (Debian's python3 has it in `libpython3.X-testsuite`) they are skipped.

Skipped, with the reason on each: tests of CPython internals (the repr
format, `_at_fork_reinit`, the `_waiters` deque) and tests that expect a lock
handed over within one event-loop step (`asyncio.Lock` passes the lock to the
next waiter synchronously in `release()`; a Redis lock is taken by the
waiter's own round trip, a few loop turns later).
"""

from __future__ import annotations

import asyncio
import sys
import unittest
import uuid

import pytest

import ferrolock

try:
    from test import lock_tests
except ImportError:  # pragma: no cover - depends on the interpreter's packaging
    lock_tests = None

try:
    from test.test_asyncio import test_locks as asyncio_lock_tests
except ImportError:  # pragma: no cover
    asyncio_lock_tests = None

NOT_INSTALLED = (
    "CPython's `test` package is not installed for this interpreter "
    f"(Debian's python3: apt-get install libpython3.{sys.version_info[1]}-testsuite)"
)
INTERNALS = "checks a CPython internal"
SAME_STEP = "expects the lock handed to a waiter within one event-loop step (a Redis hand-over takes a round trip)"


def _skip(case: type, reasons: dict[str, str]) -> None:
    """Skips the named tests of `case`, each with its reason."""
    for name, reason in reasons.items():
        assert hasattr(case, name), f"{case.__name__} has no {name} to skip"
        setattr(case, name, unittest.skip(reason)(getattr(case, name)))


def _skipped(case: unittest.TestCase, request) -> bool:
    return getattr(getattr(case, request.node.name), "__unittest_skip__", False)


class _Locks:
    """Fresh ferrolock locks, each on a name of its own."""

    def __init__(self, url: str):
        self.client = ferrolock.Client(url, prefix=f"cpython:{uuid.uuid4().hex[:12]}:")
        self.made = 0

    def new(self) -> ferrolock.Lock:
        self.made += 1
        return self.client.lock(f"lock-{self.made}", ttl=30.0)


if lock_tests is not None:

    class TestThreadingLockContract(lock_tests.LockTests):
        """`threading.Lock`'s contract: a ferrolock Lock as the lock type."""

        @pytest.fixture(autouse=True)
        def _ferrolock_locks(self, redis_url, request):
            locks = _Locks(redis_url)
            self.locktype = locks.new
            yield
            assert locks.made or _skipped(self, request), "the test made no ferrolock lock"

    _skip(
        TestThreadingLockContract,
        {
            "test_repr": f"{INTERNALS}: the repr format",
            "test_locked_repr": f"{INTERNALS}: the repr format",
            "test_at_fork_reinit": f"{INTERNALS}: _at_fork_reinit",
        },
    )

else:

    @pytest.mark.skip(reason=NOT_INSTALLED)
    def test_threading_lock_contract():
        pass


class FerrolockAsyncioLock:
    """ferrolock behind `asyncio.Lock`'s interface: `await acquire()`,
    synchronous `release()` and `locked()`, `async with`."""

    locks: _Locks | None = None

    def __init__(self):
        assert FerrolockAsyncioLock.locks is not None, "set by the fixture"
        self._lock = FerrolockAsyncioLock.locks.new()

    async def acquire(self) -> bool:
        return await self._lock.aacquire()

    def release(self) -> None:
        self._lock.release()  # LockNotOwned, a RuntimeError, when not held

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc) -> None:
        self.release()


FerrolockAsyncioLock.__name__ = FerrolockAsyncioLock.__qualname__ = "Lock"

if asyncio_lock_tests is not None:

    class TestAsyncioLockContract(asyncio_lock_tests.LockTests):
        """`asyncio.Lock`'s contract, with `asyncio.Lock` standing for ferrolock."""

        @pytest.fixture(autouse=True)
        def _ferrolock_behind_asyncio_lock(self, redis_url, monkeypatch, request):
            locks = FerrolockAsyncioLock.locks = _Locks(redis_url)
            monkeypatch.setattr(asyncio, "Lock", FerrolockAsyncioLock)
            yield
            FerrolockAsyncioLock.locks = None
            refuses = request.node.name == "test_lock_doesnt_accept_loop_parameter"  # before making one
            assert locks.made or refuses or _skipped(self, request), "the test made no ferrolock lock"

    _skip(
        TestAsyncioLockContract,
        {
            "test_repr": f"{INTERNALS}: the repr format",
            "test_acquire_cancel": f"{INTERNALS}: the _waiters deque",
            "test_cancel_race": f"{INTERNALS}: the _waiters deque",
            "test_finished_waiter_cancelled": f"{INTERNALS}: the _waiters deque",
            "test_acquire": SAME_STEP,
            "test_cancel_release_race": SAME_STEP,
        },
    )

else:

    @pytest.mark.skip(reason=NOT_INSTALLED)
    def test_asyncio_lock_contract():
        pass


def test_the_adapter_is_what_the_asyncio_suite_sees(redis_url, monkeypatch):
    """The asyncio suite only proves something if `asyncio.Lock()` makes ours."""
    FerrolockAsyncioLock.locks = _Locks(redis_url)
    try:
        monkeypatch.setattr(asyncio, "Lock", FerrolockAsyncioLock)
        made = asyncio.Lock()
        assert isinstance(made, FerrolockAsyncioLock)
        assert isinstance(made._lock, ferrolock.Lock)
    finally:
        FerrolockAsyncioLock.locks = None
