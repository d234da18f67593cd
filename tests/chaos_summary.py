"""Summarize a chaos report (JSON lines from chaos_report.record) as a
markdown table: `python tests/chaos_summary.py [target/chaos-report.jsonl]`."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from chaos_report import report_path


def main() -> None:
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
        print(f"| {scenario} | {variant} | {len(rs)} | {holds:,} | {faults} | {overlaps} | {fence} | {left} | {rate_s} |")
    failovers = {variant: rs for (scenario, variant), rs in sorted(by.items()) if scenario == "cluster-failover"}
    if failovers:
        print()
        print("| Cluster fault | runs | fault to first acquire, ms (median, range) | release to waiter woken, ms (max) |")
        print("|---|---|---|---|")
        for variant, rs in failovers.items():
            ms = sorted(r["first_acquire_ms"] for r in rs)
            woke = [r["wake_ms"] for r in rs if "wake_ms" in r]
            print(f"| {variant} | {len(rs)} | {ms[len(ms) // 2]:,.0f} ({ms[0]:,.0f}–{ms[-1]:,.0f}) | "
                  f"{max(woke) if woke else '—'} |")


if __name__ == "__main__":
    main()
