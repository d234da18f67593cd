"""The RWMutex: readers together or one writer, against a real Redis.

Concurrency of readers (threads, tasks), exclusion of writers (threads,
processes, tasks), writer preference and its intent key (bound on a writer's
wait, expiry of a dead writer's intent, withdrawal on timeout/cancel), each
reader's own expiry, the watchdog, loss reporting, fences, state queries,
storage layout and argument checking."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ferrolock
from ferrolock import LockLost, LockNotAcquired, LockNotOwned, Retry
from ferrolock.testing import read_reply
from support.helpers import hold_field, hold_of, key, LostProbe, marked, until, wait_for

FAST = Retry.exponential(0.001, 0.01)


# --------------------------------------------------------------------------
# helpers


def rw_keys(prefix: str, name: str) -> tuple:
    """The writer hash, readers zset and intent keys of RWMutex `name`."""
    base = key(prefix, name) + ":rw"
    return f"{base}:w", f"{base}:r", f"{base}:i"


def server_ms(raw) -> int:
    sec, usec = raw("TIME")
    return int(sec) * 1000 + int(usec) // 1000


def zscores(raw, k: str) -> dict:
    flat = raw("ZRANGE", k, 0, -1, "WITHSCORES")
    return {flat[i].decode(): float(flat[i + 1]) for i in range(0, len(flat), 2)}


class Checker:
    """Counts who is inside the critical sections and every forbidden overlap."""

    def __init__(self):
        self.mutex = threading.Lock()
        self.readers = 0
        self.writers = 0
        self.overlaps = 0
        self.reads = 0
        self.writes = 0
        self.max_readers = 0

    def enter(self, write: bool) -> None:
        with self.mutex:
            if write:
                self.writers += 1
                self.writes += 1
                if self.writers > 1 or self.readers > 0:
                    self.overlaps += 1
            else:
                self.readers += 1
                self.reads += 1
                self.max_readers = max(self.max_readers, self.readers)
                if self.writers > 0:
                    self.overlaps += 1

    def exit(self, write: bool) -> None:
        with self.mutex:
            if write:
                self.writers -= 1
            else:
                self.readers -= 1


def start_child(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def expect_line(child: subprocess.Popen, expected: str, limit: float = 20.0) -> None:
    ready, _, _ = select.select([child.stdout], [], [], limit)
    assert ready, f"the child printed nothing within {limit} s"
    line = child.stdout.readline()
    if not line:
        child.wait(5)
        pytest.fail(f"the child exited with {child.returncode}: {child.stderr.read()}")
    assert line.strip() == expected


def kill_child(child: subprocess.Popen) -> None:
    if child.poll() is None:
        os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    child.stdout.close()
    child.stderr.close()


# --------------------------------------------------------------------------
# 1. readers overlap


def test_reader_threads_are_inside_together(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=10.0)
    barrier = threading.Barrier(4, timeout=5)
    seen, errors = [], []

    def reader():
        try:
            with rw.read() as h:
                barrier.wait()  # only passes when all four hold the read side at once
                seen.append((h.token, rw.readers()))
                barrier.wait()  # nobody leaves before everyone counted
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert errors == []
    assert len(seen) == 4
    assert len({tok for tok, _ in seen}) == 4  # four distinct holds
    assert all(n == 4 for _, n in seen), seen
    assert rw.readers() == 0
    assert raw.keys(prefix + "*") == []


async def test_reader_tasks_are_inside_together(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=10.0)
    all_in = asyncio.Event()
    inside = 0
    counts = []

    async def reader():
        nonlocal inside
        async with rw.read():
            inside += 1
            if inside == 4:
                all_in.set()
            await asyncio.wait_for(all_in.wait(), 5)
            counts.append(await rw.areaders())
            await asyncio.sleep(0)

    await asyncio.gather(*(reader() for _ in range(4)))
    assert inside == 4
    assert len(counts) == 4 and max(counts) == 4, counts
    assert await rw.areaders() == 0
    assert await rw.alocked() is False
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 2. writers exclude everyone


def test_mixed_threads_never_overlap_a_writer(client, raw, prefix):
    rw = client.rwmutex("mixed", ttl=10.0, retry=FAST)
    check = Checker()
    errors = []
    stop_at = time.monotonic() + 1.5

    def worker(seed: int):
        rnd = random.Random(seed)
        try:
            while time.monotonic() < stop_at:
                write = rnd.random() < 0.35
                with rw.write() if write else rw.read():
                    check.enter(write)
                    time.sleep(rnd.uniform(0.0005, 0.003))  # hold time: widen the windows
                    check.exit(write)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert check.overlaps == 0
    assert check.reads > 0 and check.writes > 0, (check.reads, check.writes)
    assert check.readers == 0 and check.writers == 0
    assert raw.keys(prefix + "*") == []


def _rw_process(url, prefix, path, kind, barrier, duration):
    client = ferrolock.Client(url, prefix=prefix)
    rw = client.rwmutex("shared", ttl=10.0, retry=FAST)
    barrier.wait(30)
    stop_at = time.monotonic() + duration
    spans = []
    while time.monotonic() < stop_at:
        with rw.write() if kind == "w" else rw.read():
            start = time.time_ns()
            time.sleep(0.002 if kind == "r" else 0.001)  # hold time
            end = time.time_ns()
        spans.append(f"{kind} {start} {end}\n")
    with open(path, "w") as f:
        f.writelines(spans)


def test_processes_writer_intervals_never_intersect(redis_url, prefix, raw, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    kinds = ["r", "r", "r", "w", "w"]
    barrier = ctx.Barrier(len(kinds))
    paths = [tmp_path / f"{i}.txt" for i in range(len(kinds))]
    procs = [
        ctx.Process(target=_rw_process, args=(redis_url, prefix, str(p), k, barrier, 1.0)) for p, k in zip(paths, kinds)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * len(kinds)

    spans = []  # (start, end, kind, process)
    for i, path in enumerate(paths):
        for line in path.read_text().splitlines():
            kind, start, end = line.split()
            spans.append((int(start), int(end), kind, i))
    writes = [s for s in spans if s[2] == "w"]
    reads = [s for s in spans if s[2] == "r"]
    assert writes and reads, (len(writes), len(reads))
    # Every writer's interval is disjoint from every other interval (same
    # machine, same clock). Sorted by start, a pair overlaps when the later one
    # starts before the earlier one ends: a writer must start after every
    # earlier span ended, and every span after every earlier writer ended.
    spans.sort()
    latest_end = latest_writer_end = 0
    for s in spans:
        if s[2] == "w":
            assert s[0] >= latest_end, f"writer {s} starts inside an earlier hold"
        assert s[0] >= latest_writer_end, f"{s} starts inside an earlier writer's hold"
        latest_end = max(latest_end, s[1])
        if s[2] == "w":
            latest_writer_end = max(latest_writer_end, s[1])
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 3. writer preference


def _reader_stream(rw, n: int, stop: threading.Event, started: threading.Barrier, counts: list, errors: list):
    def loop(i):
        try:
            first = True
            while not stop.is_set():
                with rw.read():
                    time.sleep(0.005)  # hold time
                counts[i] += 1
                if first:
                    started.wait()
                    first = False
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def test_writer_preference_bounds_a_writers_wait(client, raw, prefix):
    rw = client.rwmutex("hot", ttl=10.0)
    assert rw.writer_preference is True
    stop, started = threading.Event(), threading.Barrier(9, timeout=10)
    counts, errors = [0] * 8, []
    threads = _reader_stream(rw, 8, stop, started, counts, errors)
    try:
        started.wait()  # every reader has completed a read: the stream is flowing
        before = sum(counts)
        t0 = time.monotonic()
        w = rw.write(blocking_timeout=10)
        with w:
            waited = time.monotonic() - t0
            assert rw.readers() == 0  # exclusive: the stream is held back
            assert w.fence is not None
        after_write = sum(counts)
        # the readers resume after the writer (no lasting block)
        wait_for(lambda: sum(counts) > after_write + 8, 5, "readers resuming")
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert errors == []
    assert sum(counts) > before
    print(f"writer waited {waited * 1000:.1f} ms behind 8 looping readers")
    assert waited < 2.0, f"writer waited {waited:.3f} s behind a stream of readers"
    assert raw.keys(prefix + "*") == []


def _while_writer_waits(w, timeout: float, check) -> bool:
    """Run `check()` repeatedly while `w.acquire(timeout=timeout)` waits in a thread."""
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("got", w.acquire(timeout=timeout)))
    t.start()
    try:
        while t.is_alive():
            check()
            time.sleep(0.01)  # sampling during the writer's wait
    finally:
        t.join(10)
    return result["got"]


def test_no_writer_preference_readers_keep_joining(client, raw, prefix):
    rw = client.rwmutex("hot", ttl=10.0, writer_preference=False)
    assert rw.writer_preference is False
    assert "writer_preference=False" in repr(rw)
    _, _, intent = rw_keys(prefix, "hot")
    stop, started = threading.Event(), threading.Barrier(9, timeout=10)
    counts, errors = [0] * 8, []
    # A reader that stays for the writer's whole wait, so the wait is the full
    # timeout whenever the stream's readers happen to leave a gap.
    anchor = rw.try_read()
    assert anchor is not None
    threads = _reader_stream(rw, 8, stop, started, counts, errors)
    w = rw.write()
    try:
        started.wait()
        # No starvation bound without preference: only that a waiting writer
        # leaves no intent and holds nobody back.
        mark = sum(counts)

        def no_intent():
            assert raw("EXISTS", intent) == 0

        assert _while_writer_waits(w, 0.5, no_intent) is False
        assert sum(counts) > mark + 8  # the readers kept going meanwhile
    finally:
        anchor.release()
        stop.set()
        for t in threads:
            t.join(10)
    assert errors == []
    with rw.write(blocking_timeout=5) as w2:  # the readers gone, a writer gets in
        assert rw.readers() == 0
        assert w2.owned()
    assert raw.keys(prefix + "*") == []


def test_no_writer_preference_reader_joins_while_writer_waits(client, raw, prefix):
    rw = client.rwmutex("nopref", writer_preference=False)
    _, _, intent = rw_keys(prefix, "nopref")
    first = rw.try_read()
    assert first is not None
    joined = []

    def join_now():
        assert raw("EXISTS", intent) == 0
        r = rw.try_read()
        assert r is not None, "a reader was held back without writer preference"
        joined.append(r.token)
        r.release()

    assert _while_writer_waits(rw.write(), 0.4, join_now) is False
    assert len(joined) >= 5
    assert rw.readers() == 1
    first.release()
    assert raw.keys(prefix + "*") == []


def test_writer_preference_reader_refused_while_writer_waits(client, raw, prefix):
    """The same scenario with preference: once the writer's intent stands
    (waited for, not sampled), a reader is refused; the writer then gets in
    when the first reader leaves, and takes its intent away."""
    rw = client.rwmutex("pref")
    _, _, intent = rw_keys(prefix, "pref")
    first = rw.try_read()
    assert first is not None
    writer = rw.write()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("got", writer.acquire(timeout=10)))
    t.start()
    try:
        wait_for(lambda: raw("EXISTS", intent) == 1, 5, "the waiting writer's intent")
        assert rw.try_read() is None
        first.release()
    finally:
        t.join(15)
    assert result["got"] is True
    assert raw("EXISTS", intent) == 0
    writer.release()
    assert raw.keys(prefix + "*") == []


def test_waiting_writer_holds_new_readers_back(client, raw, prefix):
    rw = client.rwmutex("pref", ttl=1.5)
    _, _, intent = rw_keys(prefix, "pref")
    reader = rw.read(ttl=0.9)  # auto-renewing, keeps reading while the writer waits
    assert reader.acquire()
    w = rw.write(ttl=1.5)
    result = {}
    inside = threading.Event()

    def write():
        result["got"] = w.acquire(timeout=10)
        inside.set()

    t = threading.Thread(target=write)
    t.start()
    try:
        wait_for(lambda: raw("EXISTS", intent) == 1, 5, "the writer's intent")
        intent_token = raw("GET", intent).decode()
        assert len(intent_token) == 32 and w.token is None  # the waiting writer's token
        # The intent is re-asserted (every ttl/3 at least) for as long as the writer waits.
        start, pttls = time.monotonic(), []
        while time.monotonic() - start < 2.5:  # > 1.5 writer ttls
            pttls.append(raw("PTTL", intent))
            assert rw.try_read() is None  # new readers wait behind the writer
            time.sleep(0.02)  # sampling over ttl time
        assert min(pttls) > 375, pttls
        assert max(pttls) <= 1500, pttls
        assert reader.owned() and not reader.lost  # the old reader keeps renewing
        assert not inside.is_set()
        reader.release()
        assert inside.wait(5)
    finally:
        t.join(10)
    assert result["got"] is True
    assert raw("EXISTS", intent) == 0  # taken: the intent is gone
    assert w.token == intent_token
    assert rw.try_read() is None
    w.release()
    late = rw.try_read()
    assert late is not None
    late.release()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 4, 5. processes that die


READER_CHILD = """
    import sys, time, ferrolock
    url, prefix = sys.argv[1], sys.argv[2]
    rw = ferrolock.Client(url, prefix=prefix).rwmutex("doc", ttl=1.0)
    h = rw.read()
    assert h.acquire(timeout=10)
    print("reading", flush=True)
    time.sleep(60)  # holds until the test kills it
"""

WRITER_CHILD = """
    import sys, ferrolock
    url, prefix = sys.argv[1], sys.argv[2]
    rw = ferrolock.Client(url, prefix=prefix).rwmutex("doc", ttl=3.0)
    w = rw.write()
    print("waiting", flush=True)
    w.acquire()
    print("writing", flush=True)
"""


def test_killed_reader_expires_alone(client, raw, prefix, redis_url):
    rw = client.rwmutex("doc", ttl=1.0)
    _, readers_key, intent = rw_keys(prefix, "doc")
    child = start_child(READER_CHILD, redis_url, prefix)
    try:
        expect_line(child, "reading")
        probe = LostProbe()
        live = rw.read(on_lost=probe)
        assert live.acquire(timeout=5)
        assert rw.readers() == 2
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
    finally:
        kill_child(child)
    took = wait_for(lambda: rw.readers() == 1, 2.5, "the dead reader's expiry")
    assert time.monotonic() - killed < 1.5, took
    now, scores = server_ms(raw), zscores(raw, readers_key)
    # Only the live reader's own expiry is still ahead (the dead one waits to be pruned).
    assert [tok for tok, exp in scores.items() if exp > now] == [live.token], (now, scores)
    assert live.owned() and not live.lost
    assert rw.try_write() is None  # the live reader still excludes writers

    w = rw.write()
    result = {}

    def write():
        result["got"] = w.acquire(timeout=3)
        result["at"] = time.monotonic()

    t = threading.Thread(target=write)
    t.start()
    wait_for(lambda: raw("EXISTS", intent) == 1, 3, "the writer's intent")
    released = time.monotonic()
    live.release()
    t.join(10)
    assert result["got"] is True
    assert result["at"] - released < 1.0, result["at"] - released
    assert w.owned()
    assert probe.calls == 0 and not live.lost
    w.release()
    assert raw.keys(prefix + "*") == []


def test_killed_waiting_writers_intent_expires(client, raw, prefix, redis_url):
    rw = client.rwmutex("doc")
    _, _, intent = rw_keys(prefix, "doc")
    holder = rw.read()
    assert holder.acquire()
    child = start_child(WRITER_CHILD, redis_url, prefix)
    try:
        expect_line(child, "waiting")
        wait_for(lambda: raw("EXISTS", intent) == 1, 10, "the child writer's intent")
        assert 0 < raw("PTTL", intent) <= 3000
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
    finally:
        kill_child(child)
    # Renewed every ttl/3 (1 s) while the child waited, the intent stands
    # at least 2 s after the kill: room for a loaded machine to look.
    assert rw.try_read() is None  # the dead writer's intent still stands
    late = None
    while late is None:
        assert time.monotonic() - killed < 4.0, "the dead writer's intent did not expire"
        late = rw.try_read()
        if late is None:
            time.sleep(0.01)  # the intent's PX must run out
    assert raw("EXISTS", intent) == 0
    assert rw.readers() == 2
    late.release()
    holder.release()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 6. a writer that gives up withdraws its intent


@pytest.mark.parametrize("how", ["timeout", "try_write", "with-blocking_timeout", "retry-attempts"])
def test_writer_giving_up_withdraws_intent(client, raw, prefix, how):
    rw = client.rwmutex("doc", ttl=10.0)
    _, _, intent = rw_keys(prefix, "doc")
    reader = rw.read()
    assert reader.acquire()
    if how == "timeout":
        w = rw.write()
        assert w.acquire(timeout=0.2) is False
        assert w.token is None and w.fence is None
    elif how == "try_write":
        assert rw.try_write() is None
    elif how == "with-blocking_timeout":
        with pytest.raises(LockNotAcquired):
            with rw.write(blocking_timeout=0.2):
                pytest.fail("entered a write block with a reader holding")
    else:
        assert rw.write(retry=Retry.fixed(0.02, attempts=4)).acquire(timeout=5) is False
    assert raw("EXISTS", intent) == 0
    other = rw.try_read()
    assert other is not None
    assert rw.readers() == 2
    other.release()
    reader.release()
    assert raw.keys(prefix + "*") == []


class KeyEvents:
    """Keyspace notifications of a private server, for keys under `prefix`."""

    def __init__(self, server, prefix: str):
        server.command("CONFIG", "SET", "notify-keyspace-events", "KA")
        self.conn = server.connect()
        assert self.conn("PSUBSCRIBE", f"__keyspace@0__:{prefix}*")[0] == b"psubscribe"

    def _read(self):
        return read_reply(self.conn.file)

    def until(self, key: str, event: str) -> list:
        """Every (key, event) up to and including `event` on `key`."""
        seen = []
        while True:
            _, _, channel, ev = self._read()
            seen.append((channel.decode().split(":", 1)[1], ev.decode()))
            if seen[-1] == (key, event):
                return seen

    def close(self):
        self.conn.close()


def test_try_write_never_sets_an_intent(server, prefix):
    """A one-shot write attempt must not hold new readers back, even for a moment."""
    client = ferrolock.Client(server.url, prefix=prefix)
    rw = client.rwmutex("doc", ttl=10.0)
    _, _, intent = rw_keys(prefix, "doc")
    marker = prefix + "marker"
    events = KeyEvents(server, prefix)
    try:
        reader = rw.read()
        assert reader.acquire()
        assert rw.try_write() is None
        assert rw.write().acquire(blocking=False) is False
        server.command("SET", marker, "1")
        seen = events.until(marker, "set")
        assert [e for e in seen if e[0] == intent] == [], seen
        # control: a writer that waits does leave (and then withdraw) its intent
        assert rw.write().acquire(timeout=0.05) is False
        server.command("SET", marker, "2")
        seen = events.until(marker, "set")
        assert (intent, "set") in seen, seen
        assert (intent, "del") in seen, seen
        reader.release()
    finally:
        events.close()


async def test_cancelled_write_aacquire_withdraws_intent(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=10.0)
    _, _, intent = rw_keys(prefix, "doc")
    reader = rw.read()
    assert await reader.aacquire()
    w = rw.write()

    async def take():
        return await w.aacquire()

    task = asyncio.create_task(take())
    deadline = time.monotonic() + 5
    while raw("EXISTS", intent) == 0:  # the writer is waiting once its intent is up
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: raw("EXISTS", intent) == 0, 1, "the cancelled writer's intent to go")
    assert w.token is None
    other = rw.try_read()
    assert other is not None
    await other.arelease()
    await reader.arelease()
    # the handle is usable again
    assert await w.aacquire(timeout=2)
    await w.arelease()
    assert raw.keys(prefix + "*") == []


async def test_wait_for_timeout_on_write_aacquire_withdraws_intent(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=10.0)
    _, _, intent = rw_keys(prefix, "doc")
    reader = rw.read()
    assert await reader.aacquire()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(rw.write().aacquire(), 0.3)
    await until(lambda: raw("EXISTS", intent) == 0, 1, "the timed-out writer's intent to go")
    other = rw.try_read()
    assert other is not None
    other.release()
    await reader.arelease()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 7. each reader's own expiry


def test_each_reader_has_its_own_expiry(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=1.0)
    _, readers_key, _ = rw_keys(prefix, "doc")
    probe_a, probe_b = LostProbe(), LostProbe()
    a = rw.read(auto_renew=False, on_lost=probe_a)
    b = rw.read(on_lost=probe_b)
    assert a.acquire() and b.acquire()
    now = server_ms(raw)
    scores = zscores(raw, readers_key)
    assert set(scores) == {a.token, b.token}
    for tok, score in scores.items():
        # server milliseconds: roughly now + ttl
        assert now + 1000 - 500 <= score <= now + 1000 + 5, (tok, score, now)
    assert 0 < raw("PTTL", readers_key) <= 1000

    time.sleep(2.0)  # let A's ttl run out (B keeps renewing)
    assert rw.readers() == 1
    assert a.lost is True
    assert probe_a.wait(1) and probe_a.calls == 1
    assert a.owned() is False and a.ttl() is None
    with pytest.raises(LockNotOwned):
        a.release()
    assert b.owned() is True and b.lost is False
    assert probe_b.calls == 0
    now = server_ms(raw)
    scores = zscores(raw, readers_key)
    assert list(scores) == [b.token]
    assert now < scores[b.token] <= now + 1000 + 5
    assert 0 < b.ttl() <= 1.0
    b.release()
    assert b.lost is False
    assert raw.keys(prefix + "*") == []


def test_a_reader_lengthens_the_readers_ttl_and_never_shortens_it(client, raw, prefix):
    """The set lives as long as its latest lease: a reader that joins with a
    longer one lengthens it, one with a shorter one leaves it."""
    rw = client.rwmutex("len")
    _, readers_key, _ = rw_keys(prefix, "len")
    short, long, again = (rw.read(ttl=ttl, auto_renew=False) for ttl in (1.0, 5.0, 1.0))
    assert short.acquire()
    assert 0 < raw("PTTL", readers_key) <= 1000
    assert long.acquire()
    assert 1000 < raw("PTTL", readers_key) <= 5000
    assert again.acquire()
    assert 1000 < raw("PTTL", readers_key) <= 5000, "a shorter lease shortened the set's"
    for reader in (short, long, again):
        reader.release()
    assert raw.keys(prefix + "*") == []


def test_expired_readers_release_leaves_a_writer_alone(client, raw, prefix):
    rw = client.rwmutex("doc")
    stale = rw.read(ttl=0.2, auto_renew=False)
    assert stale.acquire()
    w = rw.write(ttl=10.0)
    assert w.acquire(timeout=3)  # waits out the stale reader's own ttl only
    with pytest.raises(LockNotOwned):
        stale.release()
    assert w.owned()
    wkey, _, _ = rw_keys(prefix, "doc")
    assert hold_field(raw("GET", wkey), "token").decode() == w.token
    w.release()
    assert raw.keys(prefix + "*") == []


def test_an_expired_readers_late_release_keeps_the_writers_waiters_mark(client, raw, redis_url, prefix):
    """The mark `w` on a holding writer's hash says someone waits for that
    writer: a reader whose lease ran out, released after the writer took
    over, neither removes it nor publishes a wake-up; the writer's own
    release still does."""
    import redis

    rw = client.rwmutex("doc")
    stale = rw.read(ttl=0.2, auto_renew=False)
    assert stale.acquire()
    w = rw.write(ttl=10.0)
    assert w.acquire(timeout=3)
    wkey, _, _ = rw_keys(prefix, "doc")
    raw(
        "SET", wkey, marked(raw("GET", wkey), "w"), "KEEPTTL"
    )  # what a waiter's busy attempt leaves (rw_write.lua / rw_read.lua)
    sub = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    sub.subscribe(key(prefix, "doc") + ":rw:wake")

    def next_message():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = sub.get_message(timeout=deadline - time.monotonic())
            if message is not None:
                return message
        return None

    try:
        with pytest.raises(LockNotOwned):
            stale.release()
        assert hold_field(raw("GET", wkey), "w") == b"1", "the late reader took the writer's waiters' mark"
        # Messages arrive in the order they were published: the probe comes first unless the late release published.
        raw("PUBLISH", key(prefix, "doc") + ":rw:wake", "probe")
        first = next_message()
        assert first is not None and first["data"] == b"probe", f"the late reader woke the writer's waiters: {first}"
        w.release()
        woke = next_message()
        assert woke is not None and woke["data"] == b"", "the writer's release woke nobody"
    finally:
        sub.close()
    assert raw.keys(prefix + "*") == []


def test_waits_are_bounded_by_the_holders_ttl(client, raw, prefix):
    """A slow retry strategy never sleeps past the holder's expiry."""
    rw = client.rwmutex("doc")
    writer = rw.write(ttl=0.4, auto_renew=False)
    assert writer.acquire()
    t0 = time.monotonic()
    reader = rw.read(retry=Retry.fixed(5.0))
    assert reader.acquire(timeout=4)
    waited_reader = time.monotonic() - t0
    assert waited_reader < 0.4 + 1.5, waited_reader  # the holder's ttl, not the 5 s retry
    with pytest.raises(LockNotOwned):
        writer.release()

    reader.release()
    stale = rw.read(ttl=0.4, auto_renew=False)
    assert stale.acquire()
    t0 = time.monotonic()
    w2 = rw.write(retry=Retry.fixed(5.0), ttl=30.0)
    assert w2.acquire(timeout=4)
    waited_writer = time.monotonic() - t0
    assert waited_writer < 0.4 + 1.5, waited_writer
    w2.release()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 8. watchdog


def test_watchdog_keeps_read_and_write_holds(client, raw, prefix):
    rw_r = client.rwmutex("reader-side", ttl=1.2)
    rw_w = client.rwmutex("writer-side", ttl=1.2)
    probe_r, probe_w = LostProbe(), LostProbe()
    r = rw_r.read(on_lost=probe_r)
    w = rw_w.write(on_lost=probe_w)
    assert r.acquire() and w.acquire()
    fence = w.fence
    wkey, _, _ = rw_keys(prefix, "writer-side")
    _, rkey, _ = rw_keys(prefix, "reader-side")
    start = time.monotonic()
    while time.monotonic() - start < 3.6:  # 3 ttls
        assert 0 < raw("PTTL", wkey) <= 1200
        assert 0 < raw("PTTL", rkey) <= 1200
        time.sleep(0.05)  # sampling while ttl time passes
    assert r.owned() and w.owned()
    assert not r.lost and not w.lost
    assert r.ttl() > 0.45 and w.ttl() > 0.45  # renewed, not decaying
    assert w.fence == fence  # renewal keeps the fence
    assert rw_r.readers() == 1
    assert probe_r.calls == 0 and probe_w.calls == 0
    r.release()
    w.release()
    assert not r.lost and not w.lost
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 9. lost holds


def test_writer_hash_deleted_is_reported_lost(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=0.6)
    wkey, _, _ = rw_keys(prefix, "doc")
    probe = LostProbe()
    w = rw.write(on_lost=probe)
    with pytest.raises(LockLost):
        with w:
            assert raw("DEL", wkey) == 1
            assert probe.wait(3), "the loss was never reported"
    assert probe.calls == 1
    assert w.lost is True
    assert w.token is None
    # someone else can take it at once
    other = rw.try_write()
    assert other is not None
    other.release()
    assert raw.keys(prefix + "*") == []


def test_reader_removed_is_reported_lost(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=0.6)
    _, rkey, _ = rw_keys(prefix, "doc")
    probe = LostProbe()
    kept = rw.read(ttl=5)  # renewed in time on a busy machine too
    assert kept.acquire()
    r = rw.read(on_lost=probe)
    with pytest.raises(LockLost):
        with r:
            assert raw("ZREM", rkey, r.token) == 1
            assert probe.wait(3)
    assert r.lost is True and probe.calls == 1
    assert kept.owned() and not kept.lost  # the other reader is untouched
    kept.release()
    assert raw.keys(prefix + "*") == []


async def test_async_with_write_lost_cancels_body(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=0.6)
    wkey, _, _ = rw_keys(prefix, "doc")
    probe = LostProbe()
    w = rw.write(on_lost=probe)
    cancelled = False
    with pytest.raises(LockLost):
        async with w:
            assert raw("DEL", wkey) == 1
            try:
                await asyncio.wait_for(asyncio.Event().wait(), 5)
            except asyncio.CancelledError:
                cancelled = True
                raise
    assert cancelled, "the body was not cancelled by the loss"
    assert asyncio.current_task().cancelling() == 0  # the loss' cancellation was taken back
    assert probe.wait(5) and probe.calls == 1 and w.lost  # on_lost runs on a thread of its own
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 10. fences, try_*, state queries, storage


def test_fences_of_successive_writers_strictly_increase(client, raw, prefix):
    rw = client.rwmutex("doc")
    wkey, _, _ = rw_keys(prefix, "doc")
    fences = []
    same = rw.write()
    for i in range(6):
        h = same if i % 2 else rw.write()
        assert h.acquire()
        assert isinstance(h.fence, int)
        assert int(hold_field(raw("GET", wkey), "fence")) == h.fence
        fences.append(h.fence)
        h.release()
        assert h.fence is None
        r = rw.try_read()  # readers in between change nothing
        assert r is not None and r.fence is None
        r.release()
    assert fences == sorted(set(fences)), fences
    sec, usec = raw("TIME")
    assert fences[-1] <= int(sec) * 1_000_000 + int(usec)  # server microseconds
    assert fences[0] > (int(sec) - 60) * 1_000_000


def test_storage_layout(client, raw, prefix):
    rw = client.rwmutex("doc:7", ttl=5.0, metadata="node-a")
    wkey, rkey, ikey = rw_keys(prefix, "doc:7")
    assert wkey == f"{prefix}{{doc:7}}:rw:w"
    r = rw.read()
    assert r.acquire()
    assert raw.keys(prefix + "*") == [rkey]
    assert raw("TYPE", rkey) == "zset"
    assert list(zscores(raw, rkey)) == [r.token]
    assert rw.write().acquire(timeout=0.05) is False
    r.release()
    w = rw.write()
    assert w.acquire()
    assert raw.keys(prefix + "*") == [wkey]
    fields = {f: v.decode() for f, v in hold_of(raw("GET", wkey)).items()}
    assert fields == {"token": w.token, "meta": "node-a", "fence": str(w.fence)}
    assert 4000 < raw("PTTL", wkey) <= 5000
    w.release()
    assert raw.keys(prefix + "*") == []


def test_try_read_try_write_locked_readers(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=5.0)
    assert rw.name == "doc"
    assert rw.locked() is False and rw.readers() == 0

    r1 = rw.try_read()
    assert isinstance(r1, ferrolock.Lock)
    assert r1.fence is None and r1.token is not None
    assert rw.locked() is True and rw.readers() == 1
    r2 = rw.try_read(ttl=2.0)
    assert r2 is not None and rw.readers() == 2
    assert rw.try_write() is None
    assert 1.5 < r2.ttl() <= 2.0
    assert 4.5 < r1.ttl() <= 5.0
    assert r1.owned() and r2.owned()
    r1.release()
    assert rw.readers() == 1 and rw.locked() is True
    assert r1.owned() is False and r1.ttl() is None and r1.token is None
    assert rw.try_write() is None
    r2.release()
    assert rw.locked() is False

    w = rw.try_write(metadata="m")
    assert w is not None
    assert isinstance(w.fence, int)
    assert rw.locked() is True and rw.readers() == 0
    assert rw.try_read() is None
    assert rw.try_write() is None
    assert 4.5 < w.ttl() <= 5.0 and w.owned()
    w.release()
    assert rw.locked() is False
    assert w.owned() is False and w.ttl() is None
    assert raw.keys(prefix + "*") == []


def test_with_yields_the_handle(client, raw, prefix):
    rw = client.rwmutex("doc")
    handle = rw.read()
    with handle as h:
        assert h is handle
        assert h.owned() and h.fence is None
        assert rw.readers() == 1
    assert not handle.owned() and handle.lost is False
    wh = rw.write()
    with wh as h:
        assert h is wh and isinstance(h.fence, int)
        assert rw.locked() and rw.readers() == 0
    assert rw.locked() is False
    # RWMutex(client, ...) is the same as client.rwmutex(...)
    direct = ferrolock.RWMutex(client, "doc", writer_preference=False)
    assert direct.name == "doc" and direct.writer_preference is False
    assert raw.keys(prefix + "*") == []


def test_handle_overrides_and_defaults(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=7.0, metadata="dflt")
    wkey, _, _ = rw_keys(prefix, "doc")
    with rw.write() as w:
        assert hold_field(raw("GET", wkey), "meta") == b"dflt"
        assert 6.5 < w.ttl() <= 7.0
    with rw.write(ttl=3.0, metadata="over") as w:
        assert hold_field(raw("GET", wkey), "meta") == b"over"
        assert 2.5 < w.ttl() <= 3.0
    with rw.read(ttl=2.0) as r:
        assert 1.5 < r.ttl() <= 2.0
    assert raw.keys(prefix + "*") == []


def test_reader_restored_by_token(client, raw, prefix):
    rw = client.rwmutex("doc")
    original = rw.read()
    assert original.acquire()
    restored = rw.read(token=original.token)
    assert restored.token == original.token
    restored.release()
    assert rw.readers() == 0
    with pytest.raises(LockNotOwned):
        original.release()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 11. asyncio


async def test_async_five_readers_together_and_writers_exclusive(client, raw, prefix):
    rw = client.rwmutex("doc", ttl=10.0, retry=FAST)
    barrier = asyncio.Barrier(5)

    async def reader():
        async with rw.read() as h:
            assert h.fence is None
            await asyncio.wait_for(barrier.wait(), 5)  # all five inside at once

    await asyncio.gather(*(reader() for _ in range(5)))
    assert await rw.areaders() == 0

    state = {"readers": 0, "writers": 0, "overlaps": 0, "writes": 0, "reads": 0}

    async def worker(write: bool):
        for _ in range(5):
            async with rw.write() if write else rw.read():
                if write:
                    state["writers"] += 1
                    state["writes"] += 1
                    if state["writers"] > 1 or state["readers"]:
                        state["overlaps"] += 1
                else:
                    state["readers"] += 1
                    state["reads"] += 1
                    if state["writers"]:
                        state["overlaps"] += 1
                await asyncio.sleep(0.002)  # hold time: let the others run
                state["writers" if write else "readers"] -= 1

    await asyncio.gather(*(worker(i % 2 == 0) for i in range(8)))
    assert state["overlaps"] == 0
    assert state["writes"] == 20 and state["reads"] == 20
    assert await rw.alocked() is False
    assert raw.keys(prefix + "*") == []


async def test_cancelled_waiting_read_leaves_nothing(client, raw, prefix):
    rw = client.rwmutex("doc")
    writer = rw.write()
    assert await writer.aacquire()
    r = rw.read()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(r.aacquire(), 0.3)
    assert r.token is None
    await writer.arelease()
    start = time.monotonic()
    while time.monotonic() - start < 0.3:  # nothing sneaks in after the cancellation
        assert await rw.areaders() == 0
        await asyncio.sleep(0.02)
    assert raw.keys(prefix + "*") == []
    # the handle still works
    async with r:
        assert await rw.areaders() == 1
    assert raw.keys(prefix + "*") == []


async def test_async_with_reader_waits_for_writer(client, raw, prefix):
    rw = client.rwmutex("doc")
    writer = rw.write()
    assert await writer.aacquire()
    entered = asyncio.Event()

    async def read():
        async with rw.read():
            entered.set()

    task = asyncio.create_task(read())
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(entered.wait(), 0.2)
    assert not task.done()
    await writer.arelease()
    await asyncio.wait_for(task, 5)
    assert entered.is_set()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# 12. bad inputs


BAD = [
    # (description, call(client), exception, message fragment)
    ("empty name", lambda c: c.rwmutex(""), ValueError, "must not be empty"),
    ("int name", lambda c: c.rwmutex(7), TypeError, "lock name must be str, got int"),
    ("bytes name", lambda c: c.rwmutex(b"doc"), TypeError, "lock name must be str, got bytes"),
    ("None name", lambda c: c.rwmutex(None), TypeError, "lock name must be str"),
    ("long name", lambda c: c.rwmutex("x" * 5000), ValueError, "limit is 4096"),
    ("lone surrogate", lambda c: c.rwmutex("\ud800"), ValueError, "valid Unicode"),
    ("ttl zero", lambda c: c.rwmutex("d", ttl=0), ValueError, "ttl must be a positive"),
    ("ttl negative", lambda c: c.rwmutex("d", ttl=-1.5), ValueError, "ttl must be a positive"),
    ("ttl nan", lambda c: c.rwmutex("d", ttl=float("nan")), ValueError, "NaN"),
    ("ttl inf", lambda c: c.rwmutex("d", ttl=float("inf")), ValueError, "ttl must be a positive, finite"),
    ("ttl str", lambda c: c.rwmutex("d", ttl="5"), TypeError, "ttl must be a number of seconds, got str"),
    ("ttl bool", lambda c: c.rwmutex("d", ttl=True), TypeError, "got bool"),
    ("token on mutex", lambda c: c.rwmutex("d", token="abc"), TypeError, "pass it to read() or write()"),
    ("unknown kwarg", lambda c: c.rwmutex("d", tll=5), TypeError, 'unexpected keyword argument "tll"'),
    ("unknown kwarg on read", lambda c: c.rwmutex("d").read(bogus=1), TypeError, "bogus"),
    ("unknown kwarg on try_write", lambda c: c.rwmutex("d").try_write(bogus=1), TypeError, "bogus"),
    ("auto_renew int", lambda c: c.rwmutex("d", auto_renew=1), TypeError, "auto_renew must be bool"),
    ("retry not Retry", lambda c: c.rwmutex("d", retry=0.1), TypeError, "retry must be a ferrolock.Retry"),
    ("on_lost not callable", lambda c: c.rwmutex("d", on_lost=3), TypeError, "on_lost must be callable"),
    ("metadata int", lambda c: c.rwmutex("d", metadata=3), TypeError, "metadata must be str"),
    (
        "blocking_timeout negative",
        lambda c: c.rwmutex("d", blocking_timeout=-1),
        ValueError,
        "blocking_timeout must be a non-negative",
    ),
    ("writer_preference int", lambda c: c.rwmutex("d", writer_preference=1), TypeError, "bool"),
    ("client not a Client", lambda c: ferrolock.RWMutex("redis://x", "d"), TypeError, "Client"),
    ("read ttl override zero", lambda c: c.rwmutex("d").read(ttl=0), ValueError, "ttl must be a positive"),
    ("write ttl too small", lambda c: c.rwmutex("d").write(ttl=0.0001), ValueError, "ttl must be between"),
    ("empty token on read", lambda c: c.rwmutex("d").read(token=""), ValueError, "token must be 1 to 512"),
    (
        "timeout with blocking=False",
        lambda c: c.rwmutex("d").read().acquire(blocking=False, timeout=1),
        ValueError,
        "can't specify a timeout",
    ),
    (
        "negative timeout",
        lambda c: c.rwmutex("d").write().acquire(timeout=-2),
        ValueError,
        "timeout must be a non-negative",
    ),
    ("release unheld", lambda c: c.rwmutex("d").read().release(), LockNotOwned, "not held by this handle"),
]


@pytest.mark.parametrize("what,call,exc,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs(client, raw, prefix, what, call, exc, fragment):
    with pytest.raises(exc) as info:
        call(client)
    assert fragment in str(info.value), str(info.value)
    assert raw.keys(prefix + "*") == []  # nothing was written


@pytest.mark.parametrize(
    "options,fragment",
    [
        ({"ttl": 0.0001}, "ttl must be between"),
        ({"ttl": 1e12}, "ttl must be between"),
        ({"metadata": "m" * 70000}, "metadata is longer"),
    ],
    ids=["ttl-below-1ms", "ttl-above-366-days", "metadata-too-long"],
)
def test_rwmutex_rejects_out_of_range_defaults_at_once(client, options, fragment):
    with pytest.raises(ValueError, match=fragment):
        client.rwmutex("d", **options)
