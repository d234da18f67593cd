"""Figures of the chaos suite, one JSON line per scenario run.

``record("stress-lock", processes=8, cycles=250, ...)`` appends
``{"ts": ..., "scenario": ..., <figures>}`` to the file named by
``FERROLOCK_CHAOS_REPORT``, or to ``target/chaos-report.jsonl`` under the
repository root. Standard library only.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

ENV = "FERROLOCK_CHAOS_REPORT"
DEFAULT = Path(__file__).resolve().parent.parent / "target" / "chaos-report.jsonl"


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
