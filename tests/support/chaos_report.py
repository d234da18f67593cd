"""Figures of the chaos suite, one JSON line per scenario run.

``record("stress-lock", processes=8, cycles=250, ...)`` appends
``{"ts": ..., "scenario": ..., <figures>}`` to the file named by
``FERROLOCK_CHAOS_REPORT``, or to ``target/chaos-report.jsonl`` under the
repository root. ``python tests/support/chaos_report.py [FILE]`` prints a
report as markdown tables (docs/reliability.md shows them). Standard library
only, so that it runs as a script.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ENV = "FERROLOCK_CHAOS_REPORT"
DEFAULT = Path(__file__).resolve().parents[2] / "target" / "chaos-report.jsonl"


def report_path() -> Path:
    configured = os.environ.get(ENV)
    return Path(configured) if configured else DEFAULT


def record(scenario: str, **figures) -> dict:
    """Append one line for `scenario` and return what was written."""
    now = time.time()
    entry = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z",
        "scenario": scenario,
        **figures,
    }
    path = report_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, sort_keys=False, default=str) + "\n"
    # One write of one line in append mode: lines from concurrent writers do not interleave.
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
    return entry


def main() -> None:
    """The report (the file named first on the command line, else report_path())
    summarised as markdown tables."""
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else report_path()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by = defaultdict(list)
    for r in rows:
        by[(r["scenario"], r.get("retry") or r.get("variant") or "")].append(r)
    print("| scenario | variant | runs | holds | faults injected | overlaps | fence faults | keys left | holds/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (scenario, variant), rs in sorted(by.items()):
        holds = sum(r.get("holds", 0) for r in rs)
        faults = sum(r.get("faults_injected", 0) for r in rs)
        overlaps = sum(r.get("overlaps", 0) + r.get("writer_overlaps", 0) for r in rs)
        fence = sum(r.get("fence_order_faults", 0) for r in rs)
        left = sum(r.get("keys_left", 0) for r in rs)
        rate = [r["holds_per_s"] for r in rs if "holds_per_s" in r]
        rate_s = f"{min(rate):,.0f}–{max(rate):,.0f}" if rate else "—"
        print(
            f"| {scenario} | {variant} | {len(rs)} | {holds:,} | {faults} | {overlaps} | {fence} | {left} | {rate_s} |"
        )
    failovers = {variant: rs for (scenario, variant), rs in sorted(by.items()) if scenario == "cluster-failover"}
    if failovers:
        print()
        print(
            "| Cluster fault | runs | fault to first acquire, ms (median, range) | release to waiter woken, ms (max) |"
        )
        print("|---|---|---|---|")
        for variant, rs in failovers.items():
            ms = sorted(r["first_acquire_ms"] for r in rs)
            woke = [r["wake_ms"] for r in rs if "wake_ms" in r]
            print(
                f"| {variant} | {len(rs)} | {ms[len(ms) // 2]:,.0f} ({ms[0]:,.0f}–{ms[-1]:,.0f}) | "
                f"{max(woke) if woke else '—'} |"
            )


if __name__ == "__main__":
    main()
