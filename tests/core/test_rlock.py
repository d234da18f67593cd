"""The reentrant lock, client.rlock(name): one hold in Redis per owner
(thread or asyncio task), counted takes, released at a count of zero; other
threads, tasks and processes wait for it as for a Lock; everything that reads
a Lock (ls, inspect, scan, the pytest plugin) reads it unchanged."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest

import ferrolock
from ferrolock import LockLost, LockNotAcquired, LockNotOwned, RLock
from support.helpers import wait_for


def run_in_thread(target) -> list:
    """Runs `target` in a thread, joined; returns [its result] or raises its exception."""
    out: list = []

    def body():
        try:
            out.append(target())
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the thread did not finish"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out


# --------------------------------------------------------------------------
# one owner: nested takes, one hold


def test_nested_takes_keep_one_hold_released_at_count_zero(client, raw, prefix):
    rl = client.rlock("job", ttl=10.0)
    assert isinstance(rl, RLock) and rl.count == 0 and rl.token is None and not rl.owned()
    assert rl.acquire() is True
    token, fence = rl.token, rl.fence
    assert rl.acquire() is True and rl.acquire(blocking=False) is True
    assert rl.count == 3 and rl.owned() and rl.locked()
    assert (rl.token, rl.fence) == (token, fence), "a nested take keeps the same hold"
    assert len(raw.keys(prefix + "*")) == 1
    assert client.inspect("job").token == token

    rl.release()
    rl.release()
    assert rl.count == 1 and client.inspect("job").token == token, "held until the count is zero"
    rl.release()
    assert rl.count == 0 and rl.token is None and rl.fence is None and not rl.owned()
    assert client.inspect("job") is None and raw.keys(prefix + "*") == []
    assert not rl.locked()


def test_nested_with_blocks(client):
    rl = client.rlock("job")
    with rl as entered:
        assert entered is rl
        token = rl.token
        with rl:
            assert rl.count == 2 and rl.token == token
        assert rl.count == 1 and client.inspect("job").token == token
    assert rl.count == 0 and client.inspect("job") is None


def test_each_first_take_is_a_new_hold(client):
    rl = client.rlock("job")
    with rl:
        first = rl.fence
    with rl:
        assert rl.fence > first


def test_fair_rlock_nests_and_excludes(client):
    rl = client.rlock("fair-job", fair=True)
    with rl, rl:
        assert rl.count == 2
        assert not client.lock("fair-job", fair=True).acquire(blocking=False)
    assert client.lock("fair-job", fair=True).acquire(blocking=False)


# --------------------------------------------------------------------------
# other owners wait


def test_another_thread_waits_until_the_count_is_zero(client):
    rl = client.rlock("job")
    assert rl.acquire() and rl.acquire()
    token = rl.token
    step = [threading.Event() for _ in range(4)]
    seen: dict = {}

    def other():
        step[0].wait(30)
        seen["at two"] = (rl.acquire(blocking=False), rl.owned(), rl.count)
        step[1].set()
        step[2].wait(30)
        seen["at one"] = rl.acquire(blocking=False)
        step[3].set()
        seen["waited"] = rl.acquire(timeout=30)
        seen["count"], seen["token"] = rl.count, rl.token
        rl.release()

    t = threading.Thread(target=other)
    t.start()
    step[0].set()
    assert step[1].wait(30)
    rl.release()
    step[2].set()
    assert step[3].wait(30)
    rl.release()  # count zero: the other thread gets it
    t.join(30)
    assert not t.is_alive()
    assert seen["at two"] == (False, False, 2)
    assert seen["at one"] is False
    assert seen["waited"] is True and seen["count"] == 1 and seen["token"] not in (None, token)
    assert client.inspect("job") is None


def test_threads_sharing_one_rlock_exclude_each_other(client):
    rl = client.rlock("job")
    inside, most, errors = [0], [0], []
    start = threading.Barrier(4)

    def worker():
        try:
            start.wait(30)
            for _ in range(5):
                with rl:
                    with rl:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                        assert rl.owned() and rl.count == 2
                        inside[0] -= 1
        except BaseException as e:  # noqa: BLE001 - checked below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert errors == [] and most[0] == 1
    assert rl.count == 0 and client.inspect("job") is None


def test_another_process_cannot_take_it_meanwhile(client, redis_url, prefix):
    other = ferrolock.Client(redis_url, prefix=prefix)
    rl = client.rlock("job")
    with rl:
        with rl:
            assert not other.lock("job").acquire(blocking=False)
            assert not other.rlock("job").acquire(blocking=False)
        assert not other.rlock("job").acquire(blocking=False)
    theirs = other.rlock("job")
    assert theirs.acquire(blocking=False)
    assert not rl.acquire(blocking=False) and rl.count == 0
    theirs.release()


def test_release_by_a_non_owner_raises_and_leaves_the_hold(client):
    rl = client.rlock("job")
    with pytest.raises(RuntimeError, match="cannot release un-acquired lock"):
        rl.release()
    assert rl.acquire()
    with pytest.raises(RuntimeError, match="cannot release un-acquired lock"):
        run_in_thread(rl.release)
    assert rl.count == 1 and client.inspect("job").token == rl.token
    rl.release()
    assert client.inspect("job") is None


# --------------------------------------------------------------------------
# asyncio: the task is the owner


async def test_nested_async_with_in_one_task_and_a_second_task_waits(client):
    rl = client.rlock("job")
    held, go = asyncio.Event(), asyncio.Event()
    seen: dict = {}

    async def first():
        async with rl:
            token = rl.token
            async with rl:
                assert rl.count == 2 and rl.token == token
                held.set()
                await go.wait()
            assert rl.count == 1 and client.inspect("job").token == token
        seen["first"] = token

    async def second():
        await held.wait()
        seen["tried"] = await rl.aacquire(blocking=False)
        seen["owned"] = rl.owned()
        go.set()
        async with rl:
            seen["second"] = rl.token
            assert rl.owned() and rl.count == 1

    await asyncio.wait_for(asyncio.gather(first(), second()), 30)
    assert seen["tried"] is False and seen["owned"] is False
    assert seen["second"] not in (None, seen["first"])
    assert rl.count == 0 and client.inspect("job") is None


async def test_aacquire_and_arelease_count(client):
    rl = client.rlock("job")
    assert await rl.aacquire() and await rl.aacquire(timeout=5)
    assert rl.count == 2 and await rl.alocked()
    await rl.arelease()
    assert client.inspect("job") is not None
    await rl.arelease()
    assert client.inspect("job") is None
    with pytest.raises(RuntimeError, match="cannot release un-acquired lock"):
        await rl.arelease()


async def test_the_sync_api_in_a_task_counts_for_that_task(client):
    rl = client.rlock("job")
    async with rl:
        with rl:  # same task: a nested take, not a wait that would block the loop
            assert rl.count == 2
        assert rl.acquire(blocking=False) and rl.count == 2
        rl.release()
    assert client.inspect("job") is None


# --------------------------------------------------------------------------
# timeouts, loss, bad input


async def test_timeouts_return_false_and_leave_nothing(client, redis_url, prefix):
    other = ferrolock.Client(redis_url, prefix=prefix).lock("job")
    assert other.acquire()
    rl = client.rlock("job", blocking_timeout=0.05)
    assert rl.acquire(timeout=0.05) is False
    assert await rl.aacquire(timeout=0.05) is False
    assert rl.count == 0 and rl.token is None
    with pytest.raises(LockNotAcquired):
        with rl:
            pass
    with pytest.raises(LockNotAcquired):
        async with rl:
            pass
    assert rl.count == 0 and client.inspect("job").token == other.token
    other.release()


def test_a_lost_hold_is_reported(client, ferrolock_helpers):
    lost = threading.Event()
    rl = client.rlock("job", on_lost=lost.set)
    assert not rl.lost
    with pytest.raises(LockLost):
        with rl:
            with rl:
                ferrolock_helpers.expire_now(rl._hold)
                assert rl.lost and lost.wait(10)
            assert rl.count == 1
    assert rl.count == 0 and not rl.lost

    assert rl.acquire() and rl.acquire()
    ferrolock_helpers.expire_now(rl._hold)
    rl.release()
    with pytest.raises(LockNotOwned):
        rl.release()
    assert rl.count == 0


def test_a_nested_take_of_a_lost_hold_raises_and_runs_nothing_unguarded(client, ferrolock_helpers):
    """The loss is known (validity run out, or the watchdog told): a nested
    take does not return True on the count alone; it raises LockLost, the
    count stays, and the outermost exit still ends in LockLost."""
    rl = client.rlock("job")
    ran = []
    with pytest.raises(LockLost) as outer:
        with rl:
            ferrolock_helpers.expire_now(rl._hold)
            assert rl.lost
            for take in (rl.acquire, lambda: rl.acquire(blocking=False)):
                with pytest.raises(LockLost, match="nested take"):
                    take()
                assert rl.count == 1
            with rl:
                ran.append("nested block")
    assert ran == [] and "nested take" in str(outer.value)
    assert rl.count == 0 and not rl.owned()
    # Taken afresh, it nests again.
    with rl:
        with rl:
            assert rl.count == 2 and not rl.lost


async def test_a_nested_async_take_of_a_lost_hold_raises(client, ferrolock_helpers):
    rl = client.rlock("job")
    assert await rl.aacquire()
    ferrolock_helpers.expire_now(rl._hold)
    with pytest.raises(LockLost, match="nested take"):
        await rl.aacquire()
    with pytest.raises(LockLost, match="nested take"):
        async with rl:
            pytest.fail("the nested block ran on a lost hold")
    assert rl.count == 1
    with pytest.raises(LockNotOwned):
        await rl.arelease()
    assert rl.count == 0


def test_bad_input_raises_the_locks_errors(client):
    with pytest.raises(ValueError, match="ttl"):
        client.rlock("job", ttl=-1)
    with pytest.raises(TypeError):
        client.rlock("job", ttll=1)
    with pytest.raises(ValueError, match="token"):
        client.rlock("job", token="abc")
    rl = client.rlock("job")
    for held in (False, True):  # checked on the first take and on a nested one alike
        with pytest.raises(ValueError, match="non-negative"):
            rl.acquire(timeout=-2)
        with pytest.raises(ValueError, match="non-blocking"):
            rl.acquire(blocking=False, timeout=1)
        with pytest.raises(ValueError, match="non-negative"):
            rl.aacquire(timeout=-2)  # at the call, before any await
        assert rl.count == int(held)
        if not held:
            assert rl.acquire(timeout=-1)  # -1: no limit, as for a Lock
    rl.release()
    assert client.inspect("job") is None


# --------------------------------------------------------------------------
# what reads a Lock reads it


def test_ls_inspect_scan_and_the_plugin_see_a_plain_lock(client, redis_url, prefix, ferrolock_helpers):
    rl = client.rlock("jobs:nightly", metadata="host-a", ttl=0.6)
    with rl, rl:

        def cli(*args):
            done = subprocess.run(
                [sys.executable, "-m", "ferrolock", "--url", redis_url, "--prefix", prefix, *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        rows = cli("ls").splitlines()[1:]
        assert len(rows) == 1 and rows[0].split()[:3] == ["jobs:nightly", "lock", rl.token]
        # Its first renewal (ttl/3) records its fence.
        wait_for(lambda: client.inspect("jobs:nightly").fence == rl.fence, 5, "the fence recorded")
        assert json.loads(cli("inspect", "jobs:nightly", "--json"))[0]["holder"]["fence"] == rl.fence
        info = client.inspect("jobs:nightly")
        assert (info.token, info.metadata, info.fence) == (rl.token, "host-a", rl.fence)
        assert [(s.name, s.kind) for s in client.scan("*")] == [("jobs:nightly", "lock")]
        ferrolock_helpers.assert_held("jobs:nightly", kind="lock", token=rl.token)
    ferrolock_helpers.assert_free("jobs:nightly")


def test_repr(client):
    rl = client.rlock("job")
    assert repr(rl) == '<ferrolock.RLock "job">'
    with rl, rl:
        assert repr(rl) == f'<ferrolock.RLock "job" held count=2 fence={rl.fence}>'
