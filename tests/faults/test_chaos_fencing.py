"""Chaos: fencing tokens in practice, against a holder frozen past its ttl.

A child process takes a lock (ttl 0.5 s, auto_renew) and writes to a fenced
resource. The test freezes it with SIGSTOP, so its watchdog cannot renew;
the hold expires in Redis and a second holder (in the test process) takes the
lock with a higher fence and writes. The child is then thawed (SIGCONT) and,
like a holder that does not know it was paused, writes with its stale fence:
the resource must refuse it. The child must see `lost`, get `on_lost` once,
and its `release()` must raise LockNotOwned without touching the second
holder's lock.

The resource, FencedStore, is a JSON file whose read-compare-write runs under
fcntl.flock, so the child and the test share it. The child imports it from
this module.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ferrolock
from support import TESTS
from support.chaos_report import record
from support.helpers import hold_field

pytestmark = pytest.mark.chaos

# Where the child finds this module (FencedStore) and the support package.
CHILD_PATH = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), str(TESTS)])
CHILD_TTL = 0.5


class FencedStore:
    """A resource that takes `write(value, fence)` only when `fence` is above every
    fence it has seen, and refuses (returns False) otherwise. File-backed, with the
    read-compare-write under an exclusive flock, so several processes can share it."""

    def __init__(self, path):
        self.path = str(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            if not f.read():
                self._dump(f, {"fence": 0, "value": None, "accepted": [], "rejected": []})

    @staticmethod
    def _dump(f, state: dict) -> None:
        f.seek(0)
        f.truncate()
        json.dump(state, f)
        f.flush()

    def write(self, value, fence: int) -> bool:
        if not isinstance(fence, int) or isinstance(fence, bool):
            raise TypeError(f"fence must be an int, not {fence!r}")
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
            state = json.load(f)
            ok = fence > state["fence"]
            if ok:
                state["fence"], state["value"] = fence, value
                state["accepted"].append([value, fence])
            else:
                state["rejected"].append([value, fence])
            f.seek(0)
            self._dump(f, state)
        return ok

    def state(self) -> dict:
        with open(self.path) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            return json.load(f)


CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    url, prefix, name, store_path, kind, path, ttl, write_first = sys.argv[1:9]
    sys.path[:0] = path.split(os.pathsep)
    import ferrolock
    from test_chaos_fencing import FencedStore

    client = ferrolock.Client(url, prefix=prefix)
    lost_calls = []
    on_lost = lambda: lost_calls.append(time.monotonic())
    if kind == "lock":
        lock = client.lock(name, ttl=float(ttl), on_lost=on_lost)
    else:
        lock = client.rwmutex(name, ttl=float(ttl)).write(on_lost=on_lost)
    assert lock.acquire(timeout=10), "the child could not take the lock"
    store = FencedStore(store_path)
    first = store.write("child-while-holding", lock.fence) if write_first == "1" else None
    print("holding " + json.dumps({"fence": lock.fence, "token": lock.token, "first_write": first}), flush=True)

    sys.stdin.readline()  # SIGSTOP lands while the child waits here
    resumed = time.monotonic()
    lost_at_resume = lock.lost
    # A holder that does not check `lost` before writing: only the fence can stop it.
    stale_accepted = store.write("child-stale", lock.fence)
    deadline = resumed + 2.0
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.005)  # polling the property: it has no event of its own
    lost = lock.lost
    lost_after = time.monotonic() - resumed
    while not lost_calls and time.monotonic() < deadline:
        time.sleep(0.005)  # on_lost runs on ferrolock's thread: polled like the property
    on_lost_after = (lost_calls[0] - resumed) if lost_calls else None
    try:
        lock.release()
        release = "returned"
    except ferrolock.LockNotOwned:
        release = "LockNotOwned"
    except Exception as e:
        release = f"{type(e).__name__}: {e}"
    time.sleep(0.05)  # a late on_lost would show up here
    print(json.dumps({
        "lost_at_resume": lost_at_resume,
        "stale_accepted": stale_accepted,
        "lost": lost,
        "lost_after_s": lost_after,
        "on_lost_calls": len(lost_calls),
        "on_lost_after_s": on_lost_after,
        "release": release,
        "lost_after_release": lock.lost,
        "token_after_release": lock.token,
    }), flush=True)
    """
)


class Child:
    """The holder child process, its stdout read line by line on a thread."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self, limit: float) -> str:
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            pytest.fail(f"the child printed nothing within {limit} s")
        if line is None:
            self.proc.wait(5)
            pytest.fail(f"the child exited with {self.proc.returncode}: {self.proc.stderr.read()}")
        return line.strip()

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)  # also ends a stopped process
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


def hget(raw, key: str, field: str):
    value = hold_field(raw("GET", key), field)
    return None if value is None else value.decode()


def ms(seconds):
    """A child's delay for the report, in ms (None stays None; a race at the resume reads as 0)."""
    return None if seconds is None else round(max(0.0, seconds) * 1000, 1)


def lock_key(prefix: str, name: str, kind: str) -> str:
    base = f"{prefix}{{{name}}}"
    return base if kind == "lock" else base + ":rw:w"


def second_handle(client, name: str, kind: str):
    if kind == "lock":
        return client.lock(name, ttl=10.0)
    return client.rwmutex(name, ttl=10.0).write()


# How long the child has held before it is frozen. 0: right after the acquire.
# The heavy variants freeze it around its watchdog's renewals (every ttl/3),
# so that the stop can land with a renewal in flight.
PAUSE_AFTER = [
    pytest.param(0.0, id="stop-at-once"),
    pytest.param(CHILD_TTL / 3, id="stop-at-renewal", marks=pytest.mark.heavy),
    pytest.param(2 * CHILD_TTL / 3 + 0.002, id="stop-after-2nd-renewal", marks=pytest.mark.heavy),
]


def start_holder(redis_url, prefix, name, store, kind, raw, key, write_first=True):
    """Start the holder child and wait until it holds (and, with `write_first`, has
    written once with its fence); returns (child, its fence, its token)."""
    child = Child(
        redis_url,
        prefix,
        name,
        store.path,
        "lock" if kind == "lock" else "rw",
        CHILD_PATH,
        str(CHILD_TTL),
        "1" if write_first else "0",
    )
    try:
        line = child.next_line(20)
        assert line.startswith("holding "), line
        held = json.loads(line.split(" ", 1)[1])
        assert held["first_write"] is (True if write_first else None)
        assert hget(raw, key, "token") == held["token"]
    except BaseException:
        child.kill()
        raise
    return child, held["fence"], held["token"]


def thaw(child, stopped: float) -> tuple:
    """SIGCONT the stale holder, let it act, and return (seconds stopped, its report)."""
    os.kill(child.proc.pid, signal.SIGCONT)
    stopped_for = time.monotonic() - stopped
    child.send("go")
    report = json.loads(child.next_line(10))
    assert child.proc.wait(10) == 0, child.proc.stderr.read()
    return stopped_for, report


@pytest.mark.parametrize("pause_after", PAUSE_AFTER)
@pytest.mark.parametrize("second_state", ["holding", "released"])
@pytest.mark.parametrize("kind", ["lock", "rwmutex-writer"])
def test_stale_holder_after_sigstop_is_fenced_off(
    redis_url, prefix, raw, client, tmp_path, kind, second_state, pause_after
):
    name = "fenced"
    key = lock_key(prefix, name, kind)
    store = FencedStore(tmp_path / "store.json")
    child, old_fence, old_token = start_holder(redis_url, prefix, name, store, kind, raw, key)
    second = None
    try:
        time.sleep(pause_after)  # holding, with the watchdog renewing
        # The fault: freeze the holder. Its watchdog cannot renew any more.
        stopped = time.monotonic()
        os.kill(child.proc.pid, signal.SIGSTOP)
        deadline = stopped + 3.0
        while hget(raw, key, "token") == old_token:
            assert time.monotonic() < deadline, "the frozen holder's key outlived 3 s"
            time.sleep(0.01)  # Redis expiry has no event to await
        expired_after = time.monotonic() - stopped

        second = second_handle(client, name, kind)
        assert second.acquire(timeout=5)
        second_fence = second.fence
        assert second_fence > old_fence
        assert store.write("second", second_fence) is True
        if second_state == "released":
            second.release()

        # Thaw the stale holder and let it act as if nothing happened.
        stopped_for, report = thaw(child, stopped)
        state = store.state()
        record(
            "fencing-sigstop",
            lock=kind,
            second=second_state,
            ttl_s=CHILD_TTL,
            stopped_after_holding_s=pause_after,
            faults_injected=1,
            stopped_s=round(stopped_for, 3),
            key_gone_after_stop_s=round(expired_after, 3),
            stale_writes=1,
            stale_writes_rejected=int(not report["stale_accepted"]),
            store_rejections=len(state["rejected"]),
            lost_at_resume=report["lost_at_resume"],
            lost_seen_after_ms=ms(report["lost_after_s"]),
            on_lost_calls=report["on_lost_calls"],
            on_lost_after_ms=ms(report["on_lost_after_s"]),
            release=report["release"],
        )

        # The resource refused the stale write and kept the second holder's.
        assert report["stale_accepted"] is False
        assert state["value"] == "second" and state["fence"] == second_fence
        assert state["rejected"] == [["child-stale", old_fence]]
        assert [v for v, _ in state["accepted"]] == ["child-while-holding", "second"]
        # The stale holder was told.
        assert report["lost_at_resume"] is True, "validity deadline passed while stopped, yet not lost"
        assert report["lost"] is True
        assert report["on_lost_calls"] == 1
        assert report["release"] == "LockNotOwned"
        assert report["lost_after_release"] is True
        # ... and touched nobody else.
        if second_state == "holding":
            assert hget(raw, key, "token") == second.token
            assert second.owned()
            assert not second.lost
            second.release()
        assert raw.keys(prefix + "*") == []
    finally:
        child.kill()
        if second is not None and second.token is not None:
            try:
                second.release()
            except ferrolock.LockError:
                pass


@pytest.mark.parametrize("kind", ["lock", "rwmutex-writer"])
def test_short_sigstop_is_survived(redis_url, prefix, raw, client, tmp_path, kind):
    """The control: a pause well inside the ttl loses nothing. Meanwhile nobody
    else gets in, and once thawed the holder still holds, writes with its fence
    (accepted, it is the latest) and releases normally."""
    name = "fenced"
    key = lock_key(prefix, name, kind)
    store = FencedStore(tmp_path / "store.json")
    # No write before the pause: the store takes each fence once (strictly greater).
    child, fence, token = start_holder(redis_url, prefix, name, store, kind, raw, key, write_first=False)
    try:
        stopped = time.monotonic()
        os.kill(child.proc.pid, signal.SIGSTOP)
        other = second_handle(client, name, kind)
        assert other.acquire(timeout=0.1) is False  # the frozen holder still holds
        time.sleep(max(0.0, stopped + 0.15 - time.monotonic()))  # the fault: frozen for 0.15 s, short of a ttl
        assert hget(raw, key, "token") == token
        stopped_for, report = thaw(child, stopped)
        state = store.state()
        record(
            "fencing-short-sigstop",
            lock=kind,
            ttl_s=CHILD_TTL,
            faults_injected=1,
            stopped_s=round(stopped_for, 3),
            late_write_accepted=report["stale_accepted"],
            lost=report["lost"],
            release=report["release"],
        )
        assert stopped_for < CHILD_TTL * 0.6, f"the pause ran long ({stopped_for:.3f} s): the control is void"
        assert report["lost_at_resume"] is False
        assert report["stale_accepted"] is True
        assert state["value"] == "child-stale" and state["fence"] == fence and state["rejected"] == []
        assert report["lost"] is False  # polled for 2 s, across several renewals
        assert report["on_lost_calls"] == 0
        assert report["release"] == "returned"
        assert report["lost_after_release"] is False
        assert report["token_after_release"] is None
        assert raw.keys(prefix + "*") == []
    finally:
        child.kill()
