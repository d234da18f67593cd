"""``python -m history`` (with ``tests`` on sys.path): the history checker under faults.

``--duration`` is the total time, shared evenly by the scenarios. Prints each
scenario's summary, writes them all as JSON, appends each to the chaos
report, and exits 1 when any anomaly was found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .run import RunConfig, run
from .scenarios import ALL_SCENARIOS, SCENARIOS

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "target" / "history-summary.json"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m history", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=60.0, help="total seconds, shared by the scenarios")
    ap.add_argument(
        "--scenarios",
        nargs="+",
        choices=ALL_SCENARIOS,
        default=list(SCENARIOS),
        help="the single-server and quorum scenarios unless told (sentinel-lock, cluster-lock: failovers)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON summaries go")
    ap.add_argument("--keep", type=Path, help="keep the event logs under this directory")
    args = ap.parse_args(argv)

    each = args.duration / len(args.scenarios)
    summaries = []
    for i, scenario in enumerate(args.scenarios):
        workdir = str(args.keep / scenario) if args.keep else None
        s = run(RunConfig(scenario=scenario, duration=each, seed=args.seed + i, workdir=workdir))
        summaries.append(s)
        print(json.dumps(s, indent=1, default=str), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summaries, indent=1, default=str) + "\n")
    print(f"\n{'scenario':<14} {'seed':>5} {'holds':>7} {'valid':>7} faults / anomalies")
    for s in summaries:
        row = f"{s['scenario']:<14} {s['seed']:>5} {s['holds']:>7} {s['holds_valid']:>7}"
        print(f"{row} {s['faults']} / {s['anomalies']}")
    print(f"written to {args.out}")
    return 1 if any(s["anomalies"] for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
