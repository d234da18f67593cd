"""``python -m history.jepsen`` (``make jepsen DURATION=1200``): the history
checker under partitions, every configuration, and its public report.

Each configuration (CONFIGS: a scenario, and ``replicas`` for Sentinel and
Redis Cluster) runs with every worker and server in a test host of its own
(tests/support/netns.py) while the nemesis cuts and slows links, one way and both,
beside its other faults, for an equal share of ``--duration`` seconds. The
summaries go to target/jepsen-summary.json, and the section of
docs/reliability.md between the REPORT_BEGIN and REPORT_END markers is
written anew from them (``--no-write``: printed only). A configuration
whose harness fails (a deployment that does not come back within its limits,
say) is recorded as failed, with its error, in the summaries and the report,
and the others still run. Exits 1 when a run found an anomaly that its
configuration does not allow, or a configuration failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

from .run import RunConfig, run

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
OUT = ROOT / "target" / "jepsen-summary.json"
REPORT_BEGIN = "<!-- jepsen report: written by `make jepsen`, do not edit by hand -->"
REPORT_END = "<!-- end of the jepsen report -->"
# (scenario, replicas): what each run is; replicas only matter where there are replicas.
CONFIGS = [
    ("lock", 0),
    ("fair-lock", 0),
    ("rwmutex", 0),
    ("fair-rwmutex", 0),
    ("multi-lock", 0),
    ("semaphore", 0),
    ("election", 0),
    ("quorum", 0),
    ("sentinel-lock", 0),
    ("sentinel-lock", 1),
    ("cluster-lock", 0),
    ("cluster-lock", 1),
]
WHAT = {
    "lock": "Lock, one server",
    "fair-lock": "fair Lock, one server",
    "rwmutex": "RWMutex, one server",
    "fair-rwmutex": "fair RWMutex, one server",
    "multi-lock": "multi-lock, one server",
    "semaphore": "semaphore (2 permits), one server",
    "election": "election, one server",
    "quorum": "Lock and multi-lock, quorum of 3",
    "sentinel-lock": "Lock, Sentinel",
    "cluster-lock": "Lock, Redis Cluster",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m history.jepsen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=1200.0, help="total seconds, shared by the configurations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="+", help="the configurations to run, as SCENARIO or SCENARIO:REPLICAS")
    ap.add_argument("--no-write", action="store_true", help="print the report, leave docs/reliability.md alone")
    args = ap.parse_args(argv)

    configs = [c for c in CONFIGS if not args.only or c[0] in args.only or f"{c[0]}:{c[1]}" in args.only]
    each = args.duration / len(configs)
    started = time.time()
    loads = [os.getloadavg()[0]]  # the machine's 1-minute load average, before and after each run
    summaries = []
    for i, (scenario, replicas) in enumerate(configs):
        seed = args.seed + i
        try:
            s = run(RunConfig(scenario=scenario, duration=each, seed=seed, replicas=replicas, partitions=True))
        except Exception as e:  # the harness failed: the run says nothing of the library, the others still run
            traceback.print_exc()
            s = {"scenario": scenario, "seed": seed, "failed": f"{type(e).__name__}: {e}", "anomalies": {}}
        s["replicas"] = replicas
        loads.append(os.getloadavg()[0])
        summaries.append(s)
        print(json.dumps(s, indent=1, default=str), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summaries, indent=1, default=str) + "\n")
    report = render(summaries, args.duration, args.seed, time.time() - started, loads)
    print(report)
    if not args.no_write:
        write_section(DOC, report)
        print(f"written to {DOC.relative_to(ROOT)} and {OUT.relative_to(ROOT)}")
    return 1 if any(s["anomalies"] or s.get("failed") for s in summaries) else 0


def _load(loads: list, summaries: list) -> str:
    """The machine's load, as the run saw it: the load average between runs,
    and how long the workers' ready threads waited to run (their stall probes)."""
    text = ""
    if loads:
        text += f" The machine was shared: load average {min(loads):.1f} to {max(loads):.1f} between runs"
    stalls = [s["stalls"] for s in summaries if s.get("stalls", {}).get("n")]
    if stalls:
        worst = max(st["max"] for st in stalls)
        text += (
            f"{';' if text else ''} the workers' threads were kept from running 20 ms or more "
            f"{sum(st['n'] for st in stalls)} times (longest {worst / 1000:.2f} s)"
        )
    return text + "." if text else ""


def _replicas(s: dict) -> str:
    return str(s["replicas"]) if s["scenario"] in ("sentinel-lock", "cluster-lock") else "-"


def _ms(d: dict, key: str) -> str:
    return "-" if d.get(key) is None else f"{d[key] / 1000:.2f}"


def _count(d: dict, key: str) -> int:
    return int(d.get(key, 0))


def render(summaries: list, duration: float, seed: int, wall_s: float, loads: list = ()) -> str:
    """The report's markdown, from the runs' summaries (`loads`: the machine's
    1-minute load average before and after each run)."""
    machine = f"{platform.system()} {platform.release()}, {platform.machine()}"
    try:
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
        server = "Redis " + version.removeprefix("v=")
    except (OSError, IndexError):
        server = "redis-server"
    rows, failed = [], []
    for s in summaries:
        if s.get("failed"):
            first = s["failed"].splitlines()[0]  # the whole message is in the summaries
            failed.append(f"{WHAT[s['scenario']]}, replicas={s['replicas']} (seed {s['seed']}): {first}")
            rows.append(f"| {WHAT[s['scenario']]} | {_replicas(s)} | the run failed (below) | | | | | | | |")
            continue
        w = s["writes"]
        allowed = sum(n for t, n in s["failover_allowed"].items() if t != "stray-behind-wait")
        behind_waits = s["failover_allowed"].get("stray-behind-wait", 0)
        overlaps = s["anomalies"].get("overlap", 0) + s["anomalies"].get("over-permits", 0)
        told = s["told_after_cut_ms"]
        longest = f" (longest {s['failover_overlap_max_ms'] / 1000:.2f} s)" if allowed else ""
        cuts = sum(
            n
            for k, n in s["faults"].items()
            if k in ("partition", "cut-requests", "cut-replies", "split-brain", "master-isolated")
        )
        rows.append(
            f"| {WHAT[s['scenario']]} | {_replicas(s)} "
            f"| {s['holds_valid']} | {s['faults_injected']} ({cuts} cuts) "
            f"| {overlaps} | {allowed}{longest} "
            f"| {_count(w['in_hold'], 'written')} / {_count(w['in_hold'], 'refused')} "
            f"| {_count(w['late'], 'refused')} of {sum(w['late'].values())} "
            f"| {told.get('n', 0)}: {_ms(told, 'p50')} / {_ms(told, 'max')} "
            f"| {sum(v for k, v in s['anomalies'].items() if k not in ('overlap', 'over-permits'))}"
            f"{f' ({behind_waits} undone late behind WAITs, allowed)' if behind_waits else ''} |"
        )
    kinds: dict = {}
    for s in summaries:
        for k, n in s.get("faults", {}).items():
            kinds[k] = kinds.get(k, 0) + n
    faults = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    return "\n".join(
        [
            REPORT_BEGIN,
            "",
            f"Run with `make jepsen DURATION={duration:g}` on {time.strftime('%Y-%m-%d')} (seed {seed}; "
            f"{len(summaries)} configurations of {duration / len(summaries):.0f} s each, {wall_s / 60:.0f} min in all) "
            f"on {machine} ({os.cpu_count()} cores), {server}: 5 worker processes each (3 taking one hold at a time, "
            "2 asyncio ones with 2 tasks), ttls of 0.5 to 1 s, every worker and server in a network namespace of "
            f"its own.{_load(loads, summaries)}",
            "",
            "| configuration | replicas | holds | faults | overlaps found | failover overlaps (allowed) "
            "| writes as holder: taken / refused | late writes refused | told after a cut: n, median / worst (s) "
            "| other anomalies |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Faults over all runs: {faults}.",
            "",
            *([f"Failed runs (the harness, not the library: no result): {'; '.join(failed)}.", ""] if failed else []),
            REPORT_END,
        ]
    )


def write_section(path: Path, report: str) -> None:
    """Replaces the report between its markers in `path` (they must be there)."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(REPORT_BEGIN) + r".*?" + re.escape(REPORT_END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path}: the report's markers are missing")
    path.write_text(pattern.sub(lambda _: report, text), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
