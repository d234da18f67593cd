"""Chaos: mutual exclusion under stress, across processes.

Eight spawned processes hammer ONE lock (then ONE RWMutex), each with its own
Client. Inside the critical section a worker does a deliberately non-atomic
read-modify-write of a counter file and notes its hold as
(start_ns, end_ns, fence) on CLOCK_MONOTONIC, which Linux keeps system-wide,
so intervals from different processes are comparable. The recorded interval
lies inside the real hold (taken after acquire returned, before release was
sent), so a recorded overlap is a real one.

Afterwards: no two holds overlap (no writer overlaps anything, for the
RWMutex), fences strictly increase in hold order, the counter is exact, and
Redis holds no key of the test's prefix.

Waiting is by polling (exponential 2-100 ms by default). Throughput stays high
(a few thousand holds/s here, on 2 cores) because a releasing worker usually
takes the lock again before the sleeping waiters wake: few holds change
hands, and single waits reach hundreds of ms. The tight-retry variants make
waiters poll every 0.5-2 ms, so far more holds change hands (the moment
exclusion is at stake). Throughput, waits and hand-overs go to chaos_report.

Default: 8 processes x 1,000 cycles. With --heavy: 8 x 10,000.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import statistics
import time
from pathlib import Path

import pytest

import ferrolock
from support.chaos_report import record

pytestmark = pytest.mark.chaos

PROCESSES = 8
COUNTER_WIDTH = 20  # the counter file is a fixed-width decimal: a torn write cannot shorten it
CYCLES = [
    pytest.param(1000, id="8x1000"),
    # ~20 s (lock) to ~55 s (RWMutex, default retry) here: more than the suite's 120 s default allows on a busy machine
    pytest.param(10000, id="8x10000", marks=[pytest.mark.heavy, pytest.mark.timeout(600)]),
]
# The default retry (exponential 2-100 ms) lets a releasing worker take the lock
# again before the sleeping waiters wake, so few holds change hands. A tight
# retry makes every release a race between the waiters.
RETRIES = {"default-retry": None, "tight-retry": (0.0005, 0.002)}
RETRY = pytest.mark.parametrize("retry", list(RETRIES), ids=list(RETRIES))


# --------------------------------------------------------------------------
# workers (module top level: the spawn start method imports them by name)


def _read_counter(fd: int) -> int:
    return int(os.pread(fd, COUNTER_WIDTH, 0))


def _write_counter(fd: int, value: int) -> None:
    os.pwrite(fd, b"%0*d" % (COUNTER_WIDTH, value), 0)


def _retry(spec):
    return None if spec is None else ferrolock.Retry.exponential(*spec)


def _lock_worker(url, prefix, name, cycles, counter_path, result_path, worker, barrier, retry):
    client = ferrolock.Client(url, prefix=prefix)
    lock = client.lock(name, retry=_retry(retry))  # ttl 30 s and auto_renew: the defaults
    fd = os.open(counter_path, os.O_RDWR)
    lines = []
    barrier.wait(60)
    for _ in range(cycles):
        asked = time.monotonic_ns()
        with lock:
            start = time.monotonic_ns()
            n = _read_counter(fd)  # read ...
            _write_counter(fd, n + 1)  # ... then write: only the lock keeps this exact
            fence = lock.fence
            end = time.monotonic_ns()
        lines.append(f"{start} {end} {fence} {worker} {start - asked}\n")
    os.close(fd)
    with open(result_path, "w") as f:  # the holds are kept short: no file I/O for them until now
        f.writelines(lines)
        f.flush()


def _rw_worker(url, prefix, name, cycles, counter_path, result_path, worker, barrier, retry, p_write, seed, fair):
    client = ferrolock.Client(url, prefix=prefix)
    rw = client.rwmutex(name, retry=_retry(retry), fair=fair)
    rng = random.Random(seed)
    fd = os.open(counter_path, os.O_RDWR)
    lines = []
    seen = 0  # a reader never sees the writers' counter go back
    barrier.wait(60)
    for _ in range(cycles):
        write = rng.random() < p_write
        handle = rw.write() if write else rw.read()
        asked = time.monotonic_ns()
        with handle:
            start = time.monotonic_ns()
            n = _read_counter(fd)
            if write:
                _write_counter(fd, n + 1)
            else:
                time.sleep(0.0002)  # readers linger a little, so that they meet
            fence = handle.fence
            end = time.monotonic_ns()
        back = int(n < seen)
        seen = max(seen, n)
        kind = "w" if write else "r"
        lines.append(f"{kind} {start} {end} {fence} {worker} {start - asked} {back}\n")
    os.close(fd)
    with open(result_path, "w") as f:
        f.writelines(lines)
        f.flush()


# --------------------------------------------------------------------------
# analysis


def overlapping_pairs(holds: list) -> list:
    """Every pair of holds whose intervals intersect; holds are tuples starting (start, end, ...)."""
    holds = sorted(holds)
    pairs = []
    for i, a in enumerate(holds):
        for b in holds[i + 1 :]:
            if b[0] >= a[1]:
                break  # sorted by start: nothing later starts inside `a`
            pairs.append((a, b))
    return pairs


def run_workers(target, args_for, n: int, limit: float) -> float:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=target, args=args_for(i, barrier)) for i in range(n)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(max(0.1, limit - (time.monotonic() - t0)))
        assert all(p.exitcode is not None for p in procs), f"workers still running after {limit} s"
        assert [p.exitcode for p in procs] == [0] * n
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(10)
    return time.monotonic() - t0


def percentile(values: list, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def wait_figures(waits_ns: list) -> dict:
    ms = [w / 1e6 for w in waits_ns]
    return {
        "wait_p50_ms": round(statistics.median(ms), 2),
        "wait_p99_ms": round(percentile(ms, 0.99), 2),
        "wait_max_ms": round(max(ms), 2),
    }


def new_counter(tmp_path) -> str:
    path = tmp_path / "counter"
    path.write_bytes(b"0" * COUNTER_WIDTH)
    return str(path)


# --------------------------------------------------------------------------
# one exclusive lock


@pytest.mark.parametrize("cycles", CYCLES)
@RETRY
def test_processes_hammer_one_lock(redis_url, prefix, raw, tmp_path, cycles, retry):
    hammer_one_lock("stress-lock", redis_url, prefix, raw.keys, tmp_path, cycles, retry)


def test_processes_hammer_one_lock_in_a_cluster(cluster, cluster_raw, prefix, tmp_path):
    hammer_one_lock("stress-lock-cluster", cluster.url, prefix, cluster_raw.keys, tmp_path, 1000, "default-retry")


def hammer_one_lock(label, url, prefix, keys, tmp_path, cycles, retry):
    counter = new_counter(tmp_path)
    results = [tmp_path / f"holds-{i}.txt" for i in range(PROCESSES)]
    wall = run_workers(
        _lock_worker,
        lambda i, barrier: (url, prefix, "stress", cycles, counter, str(results[i]), i, barrier, RETRIES[retry]),
        PROCESSES,
        limit=60 + cycles * 0.5,
    )

    holds = []  # (start, end, fence, worker, wait)
    for path in results:
        for line in path.read_text().splitlines():
            holds.append(tuple(int(x) for x in line.split()))
    holds.sort()
    expected = PROCESSES * cycles
    window = (max(h[1] for h in holds) - holds[0][0]) / 1e9
    overlaps = overlapping_pairs(holds)
    fence_faults = [(a, b) for a, b in zip(holds, holds[1:]) if not b[2] > a[2]]
    final = int(Path(counter).read_bytes())
    keys_left = keys(prefix + "*")
    per_worker = [sum(1 for h in holds if h[3] == i) for i in range(PROCESSES)]
    runs = 1 + sum(1 for a, b in zip(holds, holds[1:]) if a[3] != b[3])  # hand-overs between workers + 1
    record(
        label,
        retry=retry,
        processes=PROCESSES,
        cycles=cycles,
        holds=len(holds),
        wall_s=round(wall, 2),
        contention_s=round(window, 2),
        holds_per_s=round(len(holds) / window, 1),
        overlaps=len(overlaps),
        fence_order_faults=len(fence_faults),
        counter=final,
        expected=expected,
        keys_left=len(keys_left),
        handovers=runs - 1,
        **wait_figures([h[4] for h in holds]),
    )

    assert len(holds) == expected
    assert per_worker == [cycles] * PROCESSES
    assert not overlaps, f"{len(overlaps)} overlapping holds, first: {overlaps[:3]}"
    assert not fence_faults, f"fences not strictly increasing in hold order: {fence_faults[:3]}"
    assert final == expected
    assert keys_left == []


# --------------------------------------------------------------------------
# one RWMutex


P_WRITE = 0.2


@pytest.mark.parametrize("cycles", CYCLES)
@pytest.mark.parametrize("fair", [False, True], ids=["", "fair"])
@RETRY
def test_processes_hammer_one_rwmutex(redis_url, prefix, raw, tmp_path, cycles, retry, fair):
    counter = new_counter(tmp_path)
    results = [tmp_path / f"holds-{i}.txt" for i in range(PROCESSES)]
    seed = 20260101 + cycles
    wall = run_workers(
        _rw_worker,
        lambda i, barrier: (
            redis_url,
            prefix,
            "stress-rw",
            cycles,
            counter,
            str(results[i]),
            i,
            barrier,
            RETRIES[retry],
            P_WRITE,
            seed + i,
            fair,
        ),
        PROCESSES,
        limit=60 + cycles * 0.5,
    )

    holds = []  # (start, end, kind, fence or None, worker, wait, went_back)
    for path in results:
        for line in path.read_text().splitlines():
            kind, start, end, fence, worker, wait, back = line.split()
            holds.append(
                (int(start), int(end), kind, None if fence == "None" else int(fence), int(worker), int(wait), int(back))
            )
    holds.sort()
    writes = [h for h in holds if h[2] == "w"]
    reads = [h for h in holds if h[2] == "r"]
    window = (max(h[1] for h in holds) - holds[0][0]) / 1e9
    pairs = overlapping_pairs(holds)
    writer_overlaps = [(a, b) for a, b in pairs if "w" in (a[2], b[2])]
    reader_overlaps = len(pairs) - len(writer_overlaps)
    fence_faults = [(a, b) for a, b in zip(writes, writes[1:]) if not b[3] > a[3]]
    final = int(Path(counter).read_bytes())
    keys_left = raw.keys(prefix + "*")
    record(
        "stress-rwmutex-fair" if fair else "stress-rwmutex",
        retry=retry,
        processes=PROCESSES,
        cycles=cycles,
        holds=len(holds),
        writes=len(writes),
        reads=len(reads),
        wall_s=round(wall, 2),
        contention_s=round(window, 2),
        holds_per_s=round(len(holds) / window, 1),
        writer_overlaps=len(writer_overlaps),
        reader_reader_overlaps=reader_overlaps,
        fence_order_faults=len(fence_faults),
        counter=final,
        keys_left=len(keys_left),
        **wait_figures([h[5] for h in holds]),
        write_wait_max_ms=round(max(h[5] for h in writes) / 1e6, 2),
    )

    assert len(holds) == PROCESSES * cycles
    assert writes and reads
    assert all(h[3] is None for h in reads), "a reader got a fence"
    assert all(isinstance(h[3], int) for h in writes), "a writer got no fence"
    assert not writer_overlaps, f"{len(writer_overlaps)} overlaps with a writer, first: {writer_overlaps[:3]}"
    assert reader_overlaps > 0, "readers never held together: the read side acts exclusive"
    assert not fence_faults, f"writer fences not strictly increasing: {fence_faults[:3]}"
    assert sum(h[6] for h in reads) == 0, "a reader saw the counter go back"
    assert final == len(writes)
    assert keys_left == []
