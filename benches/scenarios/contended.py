"""Scenario 2: processes contending for one lock, 1 ms of work inside each hold."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

from scenarios.common import WORK, make_factory, pct, quiet_logs, run_procs


def contended_worker(lib: str, url: str, name: str, cycles: int, counter, barrier, out: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # on Ctrl-C the parent stops us
    quiet_logs()
    new = make_factory(lib, url, name)
    warm = make_factory(lib, url, name + ":warm")()  # connect and load scripts first
    warm.acquire()
    warm.release()
    holds = []
    barrier.wait(120)
    for _ in range(cycles):
        handle = new()
        asked = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        handle.acquire()
        got = time.perf_counter()
        value = counter.value  # a non-atomic read-modify-write of shared memory
        time.sleep(WORK)
        counter.value = value + 1
        done = time.perf_counter()
        handle.release()
        holds.append((asked, got, done))
    Path(out).write_text(json.dumps({"pid": os.getpid(), "holds": holds}))


def contended(url: str, lib: str, workdir: Path, procs_n: int, cycles: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.RawValue("q", 0)  # shared memory, no lock of its own
    barrier = ctx.Barrier(procs_n)
    outs = [workdir / f"contended-{abs(hash(lib))}-{i}.json" for i in range(procs_n)]
    procs = [
        ctx.Process(target=contended_worker, args=(lib, url, f"c:{lib}", cycles, counter, barrier, str(outs[i])))
        for i in range(procs_n)
    ]
    ok = run_procs(procs, timeout=180)
    holds = []
    for o in outs:
        if o.exists():
            data = json.loads(o.read_text())
            holds += [(data["pid"], *h) for h in data["holds"]]
            o.unlink()
    expected = procs_n * cycles
    if not holds:
        return {"ok": False, "error": "no worker finished"}
    holds.sort(key=lambda h: h[2])  # by the time the lock was got
    wall = max(h[3] for h in holds) - min(h[1] for h in holds)
    held = sum(h[3] - h[2] for h in holds)
    waits = [(h[2] - h[1]) * 1000 for h in holds]
    overlaps = sum(b[2] < a[3] for a, b in zip(holds, holds[1:]))
    handoffs = sum(a[0] != b[0] for a, b in zip(holds, holds[1:]))
    return {
        "ok": ok and len(holds) == expected,
        "cycles": len(holds),
        "expected": expected,
        "wall_s": wall,
        "cycles_per_s": len(holds) / wall,
        "utilisation": held / wall,
        "hold_mean_ms": held / len(holds) * 1000,
        "wait_p50_ms": pct(waits, 50),
        "wait_p99_ms": pct(waits, 99),
        "wait_max_ms": max(waits),
        "counter": counter.value,
        "counter_ok": counter.value == expected == len(holds),
        "overlaps": overlaps,
        "handoffs": handoffs,
    }
