"""Process life and watchdog races: fork, multiprocessing, interpreter exit
while holding, release racing a renewal, many cycles leaving nothing behind,
and asyncio cancellation at every step."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time

import pytest

import ferrolock
from support.chaos_report import record
from support.helpers import wait_for
from ferrolock._ferrolock import _debug_stats

pytestmark = pytest.mark.chaos


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_gets_fresh_runtime_and_no_inherited_hold(client, raw, prefix):
    held = client.lock("parent", ttl=5)
    assert held.acquire()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 1
        try:
            results = [
                held.token is None,  # the parent's hold is not the child's
                held.acquire(timeout=0.2) is False,  # and the parent still holds it
                _debug_stats()["watchdogs"] == 0,
            ]
            own = client.lock("child", ttl=5)
            results.append(own.acquire(timeout=2))
            results.append(own.owned())
            own.release()
            results.append(client.inspect("child") is None)
            os.write(write, ",".join(str(r) for r in results).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    report = os.read(read, 1000).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert report == ",".join(["True"] * 6), report
    assert held.owned(), "the child touched the parent's hold"
    held.release()
    assert raw.keys(prefix + "*") == []


def _worker(url: str, prefix: str, name: str, rounds: int, out) -> None:
    client = ferrolock.Client(url, prefix=prefix)
    fences = []
    for _ in range(rounds):
        with client.lock(name, ttl=5) as lock:
            fences.append(lock.fence)
    out.put(fences)


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_multiprocessing_start_methods(redis_url, raw, prefix, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"{method} not available")
    # A client made in the parent before the workers start: fork must cope.
    parent_client = ferrolock.Client(redis_url, prefix=prefix)
    assert parent_client.lock("warm").acquire()
    ctx = multiprocessing.get_context(method)
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(redis_url, prefix, "mp", 20, out)) for _ in range(3)]
    for p in procs:
        p.start()
    fences = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    everything = sorted(f for fs in fences for f in fs)
    assert len(set(everything)) == 60, "two holds got the same fence"
    assert parent_client.inspect("warm") is not None
    parent_client.force_release("warm")
    assert raw.keys(prefix + "*") == []


EXIT_SCRIPT = textwrap.dedent(
    """
    import sys, threading, ferrolock
    url, prefix, how = sys.argv[1:4]
    client = ferrolock.Client(url, prefix=prefix)
    lock = client.lock("at-exit", ttl=1.0, on_lost=lambda: None)
    assert lock.acquire()
    rw = client.rwmutex("at-exit-rw", ttl=1.0)
    reader = rw.read(); assert reader.acquire()
    print(lock.token, flush=True)
    if how == "with":
        with client.lock("at-exit-with", ttl=1.0):
            sys.exit(0)
    elif how == "thread":
        # A daemon thread blocked in acquire when the interpreter exits.
        assert client.lock("busy", ttl=1.0).acquire()
        waiting = threading.Event()
        def wait_for_it():
            waiting.set()
            client.lock("busy", ttl=1.0).acquire()
        threading.Thread(target=wait_for_it, daemon=True).start()
        waiting.wait(5)
    sys.exit(0)
    """
)


@pytest.mark.parametrize("how", ["plain", "with", "thread"])
def test_interpreter_exit_while_holding(redis_url, raw, prefix, how):
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, redis_url, prefix, how],
        capture_output=True,
        text=True,
        timeout=30,
    )
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr, proc.stderr
    assert took < 10, f"exit took {took:.1f} s"
    # A hold left by the dead process goes within its ttl (nothing renews it).
    wait_for(lambda: raw.keys(prefix + "{at-exit}*") == [], 3.0, "the at-exit hold's keys gone")
    wait_for(lambda: raw.keys(prefix + "*") == [], 3.0, "every key gone")


def test_release_racing_renewal_never_leaves_the_key(client, raw, prefix):
    """ttl 30 ms: a renewal is in flight every 10 ms; release at every phase."""
    k = f"{prefix}{{race}}"
    for i in range(300):
        lock = client.lock("race", ttl=0.03)
        assert lock.acquire()
        time.sleep((i % 15) / 1000)  # sweep the release across the renewal cycle
        try:
            lock.release()
        except ferrolock.LockNotOwned:
            pass  # renewal lost a race against a 30 ms ttl: released anyway
        assert raw("EXISTS", k) == 0, f"key alive after release (round {i})"
    time.sleep(0.05)  # a renewal still in flight would bring the key back within this
    assert raw("EXISTS", k) == 0
    # A released hold's watchdog task is aborted; the runtime drops it soon after.
    wait_for(lambda: _debug_stats()["watchdogs"] == 0, 5, "no watchdog left")
    record("release-vs-renewal", holds=300, keys_left=0, watchdogs_left=_debug_stats()["watchdogs"])


def test_many_cycles_leave_no_keys_and_no_tasks(client, raw, prefix):
    before = _debug_stats()["watchdogs"]
    lock = client.lock("cycles", ttl=5)
    start = time.monotonic()
    for _ in range(10_000):
        assert lock.acquire(blocking=False)
        lock.release()
    took = time.monotonic() - start
    assert raw.keys(prefix + "*") == []
    wait_for(lambda: _debug_stats()["watchdogs"] == before, 5, "every watchdog task to end with its hold")
    record(
        "cycles-auto-renew",
        holds=10_000,
        keys_left=len(raw.keys(prefix + "*")),
        watchdogs_left=_debug_stats()["watchdogs"] - before,
        holds_per_s=round(10_000 / took, 1),
    )


async def test_cancel_at_every_step_leaves_nothing(client, raw, prefix):
    """Cancel acquire and release after 0..30 event-loop steps, on a free lock
    and on one that frees up mid-wait."""
    for contended in (False, True):
        for steps in range(31):
            name = f"steps-{contended}-{steps}"
            holder = client.lock(name)
            if contended:
                assert await holder.aacquire()
            lock = client.lock(name)
            task = asyncio.ensure_future(lock.aacquire())
            for _ in range(steps):
                await asyncio.sleep(0)
                if contended and steps // 2 == _:
                    await holder.arelease()
            task.cancel()
            try:
                got = await task
            except asyncio.CancelledError:
                got = False
            if contended and holder.token is not None:
                await holder.arelease()
            if got:
                release = asyncio.ensure_future(lock.arelease())
                for _ in range(steps % 4):
                    await asyncio.sleep(0)
                release.cancel()
                try:
                    await release
                except asyncio.CancelledError:
                    pass
            # An acquire already in flight in Rust when Python cancelled may
            # still land, and is then undone: let that settle before judging.
            await asyncio.sleep(0.05)
            deadline = time.monotonic() + 2
            while raw.keys(prefix + "*") and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            left = raw.keys(prefix + "*")
            info = client.inspect(name)
            assert left == [], (
                f"left behind: contended={contended} steps={steps} got={got} "
                f"handle token={lock.token} holder token={holder.token} redis={info}"
            )
    assert _debug_stats()["watchdogs"] == 0
