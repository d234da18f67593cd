"""Before and after: the ferrolock figures of scenarios 1-3 for two builds of
ferrolock (the installed one, and another at a path), measured in turns
against the same redis-server, so that the machine's noise falls on both.

Each turn is a fresh process (`bench.py --probe URL`) that imports whichever
ferrolock comes first on its path."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scenarios.asyncio_tasks import asyncio_run
from scenarios.common import FERRO, FERRO_FAIR, FLOOR, REDISPY, REDISPY_ASYNC
from scenarios.contended import contended
from scenarios.uncontended import uncontended

ASYNC_FERRO = f"{FERRO} (asyncio)"
ASYNC_FLOOR = "floor: 2 x PING (redis.asyncio)"

# (key, label, unit): what each turn reports
METRICS = [
    ("sync_us", "sync acquire+release, median", "us"),
    ("floor_us", "floor: 2 x PING (redis-py + hiredis)", "us"),
    ("redispy_us", "redis-py Lock acquire+release", "us"),
    ("async_us", "asyncio aacquire+arelease, median", "us"),
    ("async_floor_us", "floor: 2 awaited PINGs (redis.asyncio)", "us"),
    ("redispy_async_us", "redis.asyncio Lock acquire+release", "us"),
    ("tasks_per_s", "asyncio, 200 tasks on one key", "cycles/s"),
    ("fair_utilisation", "fair=True, 4 processes x 1 ms holds: utilisation", ""),
    ("fair_wait_max_ms", "fair=True, 4 processes x 1 ms holds: max wait", "ms"),
]
# ratios taken within each turn, so that a burst of noise on one turn cancels out
RATIOS = [
    ("sync_x_floor", "sync acquire+release / its floor", "sync_us", "floor_us"),
    ("sync_x_redispy", "sync acquire+release / redis-py Lock", "sync_us", "redispy_us"),
    ("async_x_redispy", "asyncio acquire+release / redis.asyncio Lock", "async_us", "redispy_async_us"),
    ("async_x_floor", "asyncio acquire+release / its floor", "async_us", "async_floor_us"),
]


def probe(url: str, cycles: int) -> dict:
    """One turn, in this process: what METRICS lists."""
    import asyncio
    import ferrolock

    un = uncontended(url, [FERRO, REDISPY], rounds=1, cycles=cycles, warmup=cycles // 3)["rows"]
    tasks = asyncio.run(asyncio_run(url, FERRO, 200, 20, 15.0))
    with tempfile.TemporaryDirectory() as workdir:
        fair = contended(url, FERRO_FAIR, Path(workdir), 4, 200)
    return {
        "ferrolock": str(Path(ferrolock.__file__).parent),
        "sync_us": un[FERRO]["median_us"],
        "floor_us": un[FLOOR]["median_us"],
        "redispy_us": un[REDISPY]["median_us"],
        "async_us": un[ASYNC_FERRO]["median_us"],
        "async_floor_us": un[ASYNC_FLOOR]["median_us"],
        "redispy_async_us": un[REDISPY_ASYNC]["median_us"],
        "tasks_per_s": tasks["cycles_per_s"],
        "fair_utilisation": fair.get("utilisation"),
        "fair_wait_max_ms": fair.get("wait_max_ms"),
    }


def compare(url: str, baseline: str, rounds: int, cycles: int) -> dict:
    """`rounds` turns of each build, alternating which goes first."""
    bench = str(Path(__file__).resolve().parent.parent / "bench.py")
    turns: dict[str, list[dict]] = {"before": [], "after": []}
    for rnd in range(rounds):
        order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
        for which in order:
            env = dict(os.environ)
            if which == "before":
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [baseline, env.get("PYTHONPATH")]))
            out = subprocess.run(
                [sys.executable, bench, "--probe", url, "--probe-cycles", str(cycles)],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if out.returncode != 0:
                raise RuntimeError(f"probe of the {which} build failed: {out.stderr[-2000:]}")
            turns[which].append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary = {}
    for which, results in turns.items():
        summary[which] = {k: statistics.median(r[k] for r in results if r.get(k) is not None) for k, _, _ in METRICS}
        for key, _, num, den in RATIOS:
            summary[which][key] = statistics.median(r[num] / r[den] for r in results)
        summary[which]["ferrolock"] = results[0]["ferrolock"]
    if summary["before"]["ferrolock"] == summary["after"]["ferrolock"]:
        raise RuntimeError(f"--baseline {baseline} did not put another ferrolock first on the path")
    return {"rounds": rounds, "cycles": cycles, "baseline": baseline, **summary}
