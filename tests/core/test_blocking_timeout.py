"""A handle's blocking_timeout bounds acquire()/aacquire() called without a
timeout, as redis-py's Lock.acquire does, on every handle that has the
option; a `with` that ran out of retry attempts says so; `blocking` takes
0 / 1 as threading.Lock does."""

from __future__ import annotations

import threading

import pytest

from ferrolock import LockNotAcquired, Retry


def busy(client, name: str):
    holder = client.lock(name)
    assert holder.acquire(blocking=False)
    return holder


def handles(client, name: str, **options):
    """One handle of every kind that takes blocking_timeout, on `name`'s kind."""
    return {
        "lock": lambda: client.lock(name, **options),
        "multi": lambda: client.multi_lock([name, name + "-2"], **options),
        "rlock": lambda: client.rlock(name, **options),
    }


@pytest.mark.parametrize("kind", ["lock", "multi", "rlock"])
def test_acquire_without_a_timeout_waits_up_to_blocking_timeout(client, kind):
    holder = busy(client, "bt")
    waiter = handles(client, "bt", blocking_timeout=0.2)[kind]()
    assert waiter.acquire() is False  # it waited forever before
    holder.release()
    assert waiter.acquire() is True
    waiter.release()


async def test_aacquire_without_a_timeout_waits_up_to_blocking_timeout(client):
    holder = busy(client, "abt")
    waiter = client.lock("abt", blocking_timeout=0.2)
    assert await waiter.aacquire() is False
    rlock = client.rlock("abt", blocking_timeout=0.2)
    assert await rlock.aacquire() is False
    await holder.arelease()
    assert await waiter.aacquire() is True
    await waiter.arelease()


def test_a_semaphores_permit_and_an_rwmutexs_handles_use_it_too(client):
    permit = client.semaphore("sem", 1)
    assert permit.acquire(blocking=False)
    assert client.semaphore("sem", 1, blocking_timeout=0.1).acquire() is False
    permit.release()

    rw = client.rwmutex("rw", blocking_timeout=0.1)  # the handles' default
    writer = rw.write()
    assert writer.acquire(blocking=False)
    assert rw.read().acquire() is False
    assert rw.write(blocking_timeout=0.05).acquire() is False
    writer.release()


def test_an_explicit_timeout_overrides_it_and_minus_one_waits_forever(client):
    holder = busy(client, "override")
    waiter = client.lock("override", blocking_timeout=0)
    assert waiter.acquire(timeout=0.1) is False
    got = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=-1)))
    thread.start()
    thread.join(0.5)
    assert thread.is_alive(), "timeout=-1 waits past blocking_timeout=0"
    holder.release()
    thread.join(30)
    assert got == [True]
    waiter.release()


def test_a_with_that_ran_out_of_retry_attempts_says_so(client):
    holder = busy(client, "tries")
    with pytest.raises(LockNotAcquired, match="retry strategy gave up after its only attempt"):
        with client.lock("tries", retry=Retry.none(), blocking_timeout=30):
            pass
    with pytest.raises(LockNotAcquired, match="gave up after all 2 attempts"):
        with client.lock("tries", retry=Retry.fixed(0.01, attempts=2)):
            pass
    with pytest.raises(LockNotAcquired, match=r"was not acquired within 0\.05 s$"):
        with client.lock("tries", blocking_timeout=0.05):
            pass
    holder.release()


async def test_an_async_with_that_ran_out_of_retry_attempts_says_so(client):
    holder = busy(client, "atries")
    with pytest.raises(LockNotAcquired, match="retry strategy gave up after its only attempt"):
        async with client.lock("atries", retry=Retry.none()):
            pass
    await holder.arelease()


def test_retry_none_with_a_timeout_returns_at_once_as_documented(client):
    holder = busy(client, "none")
    assert client.lock("none", retry=Retry.none()).acquire(timeout=30) is False
    from ferrolock import Lock

    assert "``retry=Retry.none()`` (one attempt)" in Lock.acquire.__doc__
    assert "returns ``False`` at once" in Retry.__doc__
    holder.release()


def test_blocking_takes_zero_and_one_as_threading_lock_does(client):
    holder = busy(client, "ints")
    other = client.lock("ints")
    assert other.acquire(blocking=0) is False
    assert other.acquire(0) is False
    holder.release()
    assert other.acquire(blocking=1) is True
    other.release()
    threading.Lock().acquire(blocking=0)  # what it mirrors


@pytest.mark.parametrize(
    "bad,error,words",
    [
        (2, ValueError, "blocking must be True or False (or 1 / 0), got 2"),
        ("yes", TypeError, "blocking must be a bool (or 1 / 0), got str"),
        (1.0, TypeError, "blocking must be a bool (or 1 / 0), got float"),
    ],
)
def test_other_blockings_are_refused_naming_the_argument(client, bad, error, words):
    lock = client.lock("bad-blocking")
    with pytest.raises(error) as raised:
        lock.acquire(blocking=bad)
    assert str(raised.value) == words
    with pytest.raises(error):
        lock.aacquire(bad)
