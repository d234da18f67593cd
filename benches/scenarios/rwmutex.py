"""Scenario 5: RWMutex, reader processes and a writer process."""

from __future__ import annotations

import bisect
import json
import multiprocessing
import signal
import time
from pathlib import Path

from scenarios.common import TTL, WORK, pct, quiet_logs, run_procs


def rw_worker(role: str, url: str, name: str, duration: float, barrier, out: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_logs()
    import ferrolock

    client = ferrolock.Client(url, prefix="bench:")
    rw = client.rwmutex(name, ttl=TTL)
    side = rw.read if role == "reader" else rw.write
    warm = side()
    warm.acquire()
    warm.release()
    holds = []
    barrier.wait(120)
    end = time.perf_counter() + duration
    while time.perf_counter() < end:
        h = side()
        asked = time.perf_counter()
        h.acquire()
        got = time.perf_counter()
        time.sleep(WORK)  # 1 ms held, as in scenario 2
        done = time.perf_counter()
        h.release()
        holds.append((asked, got, done))
        if role == "writer":
            time.sleep(0.01)  # a write every ~10 ms
    Path(out).write_text(json.dumps({"role": role, "holds": holds}))


def rwmutex(url: str, workdir: Path, readers: int, duration: float) -> dict:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(readers + 1)
    roles = ["reader"] * readers + ["writer"]
    outs = [workdir / f"rw-{i}.json" for i in range(len(roles))]
    procs = [
        ctx.Process(target=rw_worker, args=(role, url, "rw", duration, barrier, str(outs[i])))
        for i, role in enumerate(roles)
    ]
    ok = run_procs(procs, timeout=duration + 120)
    reads: list[list[float]] = []
    writes: list[list[float]] = []
    for o in outs:
        if o.exists():
            data = json.loads(o.read_text())
            (reads if data["role"] == "reader" else writes).extend(data["holds"])
            o.unlink()
    if not reads or not writes:
        return {"ok": False, "error": "a worker did not finish"}
    start = min(h[0] for h in reads + writes)
    end = max(h[2] for h in reads + writes)
    wall = end - start
    # a writer's hold must not overlap any reader's hold (client-side intervals lie
    # inside the server-side holds, so an overlap here would be a real one)
    reads.sort(key=lambda h: h[1])
    starts = [h[1] for h in reads]
    longest = max(h[2] - h[1] for h in reads)
    overlaps = 0
    for w in writes:
        i = bisect.bisect_left(starts, w[1] - longest)
        while i < len(reads) and reads[i][1] < w[2]:
            if reads[i][2] > w[1]:
                overlaps += 1
            i += 1
    wwait = [(h[1] - h[0]) * 1000 for h in writes]
    rwait = [(h[1] - h[0]) * 1000 for h in reads]
    return {
        "ok": ok,
        "wall_s": wall,
        "reads": len(reads),
        "writes": len(writes),
        "reads_per_s": len(reads) / wall,
        "writes_per_s": len(writes) / wall,
        "writer_wait_p50_ms": pct(wwait, 50),
        "writer_wait_p99_ms": pct(wwait, 99),
        "writer_wait_max_ms": max(wwait),
        "reader_wait_p99_ms": pct(rwait, 99),
        "reader_wait_max_ms": max(rwait),
        "overlaps": overlaps,
    }
