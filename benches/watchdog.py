"""Scenario 4 of bench.py alone: ferrolock's watchdog holding many locks, each
renewed every ttl/3, against a throwaway redis-server.

    .venv/bin/python benches/watchdog.py [--locks 100000] [--hold 30] [--ttl 30] [--server PATH] [--json FILE]
    .venv/bin/python benches/watchdog.py --baseline DIR   # another build's ferrolock package

Prints the holding process's CPU (% of one core), redis-server's CPU, the
renewals per second (and the script calls that carried them), the holds lost
and the lowest ttl left on any lock during the hold: the figures of
docs/benchmarks.md, section 4. With --baseline DIR (a directory holding
another build's `ferrolock` package), that build is measured instead, in the
same conditions, for a before/after comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locks", type=int, default=100_000, help="locks held (100,000)")
    ap.add_argument("--hold", type=float, default=30.0, help="seconds measured while they are held (30)")
    ap.add_argument("--ttl", type=float, default=30.0, help="each lock's ttl in seconds (30, the default)")
    ap.add_argument("--baseline", metavar="DIR", help="measure the ferrolock package in DIR instead")
    ap.add_argument("--server", help="the redis-server (or valkey-server) binary (default: redis-server on PATH)")
    ap.add_argument(
        "--no-sweep",
        action="store_true",
        help="do not sweep the lowest ttl left meanwhile (its SCAN and PTTL cost redis-server CPU)",
    )
    ap.add_argument("--json", metavar="FILE", help="save the figures as JSON")
    args = ap.parse_args()
    if args.baseline:
        sys.path.insert(0, str(Path(args.baseline).resolve()))  # the spawned worker inherits sys.path
    sys.path.insert(0, str(HERE))

    from scenarios.common import FERRO, quiet_logs
    from scenarios.watchdog import watchdog

    from ferrolock.throwaway import RedisServer

    quiet_logs()
    server = RedisServer(extra=("--maxclients", "10000"))
    if args.server:
        server.binary = args.server
    with server, tempfile.TemporaryDirectory() as workdir:
        w = watchdog(
            server.url, FERRO, args.locks, args.hold, args.ttl, Path(workdir), server.proc.pid, not args.no_sweep
        )
    if w.get("taken") is None:
        print(json.dumps(w))
        return 1
    print(
        f"{w['taken']:,}/{w['n']:,} held for {w['window_s']:.1f} s; lost {w['lost']}, on_lost {w['on_lost_calls']}, "
        f"keys at the end {w['keys_at_end']:,}; client CPU {w['cpu_pct']:.1f} % of a core, redis-server "
        f"{w['redis_cpu_pct']:.1f} % (its scripts' command time {w['script_cpu_pct']:.1f} %); "
        f"renewals {w['renewals_per_s']:,.0f}/s in {w['evalsha_per_s']:,.0f} "
        f"script calls/s ({w.get('set_per_s', 0):,.0f} SET/s); lowest ttl left {w.get('monitor_min_pttl_ms')} ms; "
        f"acquiring took {w['acquire_s']:.1f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(w, indent=1))
    return 0 if w.get("ok") and not w["lost"] else 1


if __name__ == "__main__":
    sys.exit(main())
