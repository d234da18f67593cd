"""ferrolock beside the Python Redis locks people use, measured in one run.

    make bench                                   # installs benches/requirements.txt, builds, runs
    .venv/bin/python benches/bench.py [--quick] [--out docs/benchmarks.md] [--baseline DIR]

Starts its own throwaway redis-server (loopback, free port, no persistence, a
temporary directory; always stopped at the end) and measures, against it:

1. uncontended acquire+release from one thread (and from one event loop),
   beside the floor of two bare round trips (two redis-py + hiredis PINGs, and
   two awaited redis.asyncio PINGs);
2. contended: 4 processes x 500 cycles on one lock, 1 ms of work inside;
3. asyncio: 200 tasks x 20 cycles on one key in one event loop;
4. the watchdog at scale: 100,000 ferrolock locks held with the default ttl;
5. RWMutex: 8 reader processes + 1 writer process.

Each scenario is a module of benches/scenarios/; benches/report.py writes the
report; scenarios/syscalls.py counts the system calls of one cycle (strace)
and the server's time for it. With --baseline DIR (a directory holding another build's `ferrolock`
package, e.g. the previous release), the ferrolock figures of scenarios 1-3
are measured for both builds in turns first (scenarios/compare.py) and the
report gets a before/after table.

The anchors are redis-py `Lock` (sync and `redis.asyncio`), python-redis-lock
(`redis_lock.Lock`) and pottery `Redlock` with a single master, each used the
way its docs show, with its default waiting. Writes a markdown report (tables,
targets, machine, command) and a chart beside it (same name, .png).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from ferrolock.throwaway import RedisServer  # noqa: E402

from report import chart, machine_note, redis_server_version, targets, write_report  # noqa: E402
from scenarios.asyncio_tasks import asyncio_run  # noqa: E402
from scenarios.common import (  # noqa: E402
    FERRO,
    FERRO_FAIR,
    FERRO_WAKEUPS,
    POTTERY,
    PRL,
    REDISPY,
    REDISPY_ASYNC,
    fair_supported,
    flush,
    quiet_logs,
)
from scenarios.compare import METRICS, RATIOS, compare, probe  # noqa: E402
from scenarios.contended import contended  # noqa: E402
from scenarios.rwmutex import rwmutex  # noqa: E402
from scenarios.syscalls import syscalls  # noqa: E402
from scenarios.uncontended import uncontended  # noqa: E402
from scenarios.watchdog import watchdog  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts and shorter holds (~1 minute)")
    ap.add_argument(
        "--out",
        default=str(ROOT / "docs" / "benchmarks.md"),
        help="markdown report to write; the chart goes beside it as .png",
    )
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="a directory holding another build's ferrolock package: report before/after figures",
    )
    ap.add_argument("--report", metavar="JSON", help="write the report again from a run's saved results")
    ap.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)  # one turn of --baseline's comparison
    ap.add_argument("--probe-cycles", type=int, default=1000, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        quiet_logs()
        print(json.dumps(probe(args.probe, args.probe_cycles)))
        return 0
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        saved["targets"] = targets(saved, args)
        chart(saved, Path(args.out).with_suffix(".png"))
        write_report(saved, args, Path(args.out), Path(args.out).with_suffix(".png"))
        return 0
    out = Path(args.out)
    png = out.with_suffix(".png")
    quiet_logs()
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    q = args.quick
    params: dict[str, Any] = {
        "rounds": 6 if q else 15,
        "cycles_un": 150 if q else 200,
        "warmup": 100 if q else 300,
        "procs": 4,
        "cycles": 200 if q else 500,
        "tasks": 200,
        "task_cycles": 20,
        "async_limit": 15.0 if q else 40.0,
        "wd_n": 10_000 if q else 100_000,
        "wd_hold": 10.0 if q else 30.0,
        "wd_ttl": 30.0,
        "wd_prl_ttl": 3.0,
        "wd_prl_n": 200 if q else 1000,
        "wd_hold_prl": 6.0 if q else 10.0,
        "rw_readers": 8,
        "rw_duration": 3.0 if q else 5.0,
    }
    try:
        rel = os.path.relpath(sys.executable, Path.cwd())
        exe = rel if not rel.startswith("..") else sys.executable
    except ValueError:
        exe = sys.executable
    res: dict[str, Any] = {
        "params": params,
        "errors": [],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_note(),
        "load_before": "%.2f %.2f %.2f" % os.getloadavg(),
        "command": shlex.join([exe] + sys.argv),
    }
    workdir = Path(tempfile.mkdtemp(prefix="ferrolock-bench-"))
    server = None
    began = time.monotonic()

    def step(title: str, fn: Callable[[], Any]) -> Any:
        print(f"\n== {title}", flush=True)
        t = time.monotonic()
        try:
            return fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:
            traceback.print_exc()
            res["errors"].append(f"{title}: {type(e).__name__}: {e}")
            return None
        finally:
            print(f"   ({time.monotonic() - t:.1f} s)", flush=True)

    try:
        server = RedisServer(extra=("--maxclients", "10000")).start()
        url = server.url
        print(f"redis-server {redis_server_version()} on {url} (pid {server.proc.pid}); {res['machine']}")
        res["fair"] = fair_supported(url)
        print(f"fair=True available: {res['fair']}")
        ferros = [FERRO] + ([FERRO_FAIR] if res["fair"] else [])

        if args.baseline:
            cmp = step(
                f"0. before/after: {args.baseline} vs this build",
                lambda: compare(url, args.baseline, 2 if args.quick else 6, 1000),
            )
            if cmp:
                res["compare"] = cmp
                for k, label, unit in METRICS:
                    print(f"   {label:58} before {cmp['before'][k]:9.2f}  after {cmp['after'][k]:9.2f} {unit}")
                for k, label, _, _ in RATIOS:
                    print(f"   {label:58} before {cmp['before'][k]:9.2f}x after {cmp['after'][k]:9.2f}x")
            flush(url)

        sc = step(
            "0. where the microseconds go: system calls and server time per cycle",
            lambda: syscalls(url, 1000 if args.quick else 3000),
        )
        if sc:
            res["syscalls"] = sc
            for case, row in sc.get("rows", {}).items():
                print(f"   {case:48} {row['total']:5.1f} system calls, server {row['server_us']:5.1f} us per cycle")
        flush(url)

        # 1
        un = step(
            "1. uncontended",
            lambda: uncontended(
                url, ferros + [REDISPY, PRL, POTTERY], params["rounds"], params["cycles_un"], params["warmup"]
            ),
        )
        if un:
            res["uncontended"] = un
            for name in un["order_sync"] + un["order_async"]:
                r = un["rows"][name]
                print(
                    f"   {name:34} median {r['median_us']:7.0f} us  p99 {r['p99_us']:7.0f} us  "
                    f"{r['x_floor']:.2f}x floor"
                )
        flush(url)

        # 2
        res["contended"] = {}
        for lib in ferros + [REDISPY, PRL, POTTERY]:
            c = step(f"2. contended: {lib}", lambda: contended(url, lib, workdir, params["procs"], params["cycles"]))
            res["contended"][lib] = c or {"error": "see the errors"}
            if c and c.get("cycles"):
                print(
                    f"   {c['cycles_per_s']:.0f} cycles/s, utilisation {c['utilisation']:.2f}, wait p50 "
                    f"{c['wait_p50_ms']:.2f} / p99 {c['wait_p99_ms']:.1f} / max {c['wait_max_ms']:.1f} ms, "
                    f"counter {c['counter']}/{c['expected']}, overlaps {c['overlaps']}, handoffs {c['handoffs']}"
                )
                if not c["counter_ok"] or c["overlaps"]:
                    res["errors"].append(
                        f"contended {lib}: counter {c['counter']} of {c['expected']}, {c['overlaps']} overlaps"
                    )
            flush(url)

        # 3
        res["asyncio"] = {}
        for lib in ferros + [FERRO_WAKEUPS, REDISPY_ASYNC]:
            a = step(
                f"3. asyncio: {lib}",
                lambda: asyncio.run(
                    asyncio_run(url, lib, params["tasks"], params["task_cycles"], params["async_limit"])
                ),
            )
            res["asyncio"][lib] = a or {"error": "see the errors below"}
            if a:
                print(
                    f"   {a['cycles_per_s']:.0f} cycles/s, {a['cycles']}/{a['expected']} cycles in "
                    f"{a['wall_s']:.2f} s, counter ok: {a['counter_ok']}, most inside: {a['most_inside']}"
                )
            flush(url)
        res["asyncio"][PRL] = None
        res["asyncio"][POTTERY] = None

        # 4
        res["watchdog"] = {}
        wd_url = f"redis://127.0.0.1:{server.port}/1"
        w = step(
            f"4. watchdog: ferrolock, {params['wd_n']:,} locks for {params['wd_hold']:.0f} s",
            lambda: watchdog(
                wd_url, FERRO, params["wd_n"], params["wd_hold"], params["wd_ttl"], workdir, server.proc.pid
            ),
        )
        res["watchdog"][FERRO] = w
        if w and w.get("taken") is not None:
            print(
                f"   {w['taken']}/{w['n']} held, lost {w['lost']}, keys at end {w['keys_at_end']}, "
                f"CPU {w['cpu_pct']:.1f} % of one core (redis-server {w['redis_cpu_pct']:.1f} %), "
                f"renewals {w['renewals_per_s']:.0f}/s in {w['evalsha_per_s']:.0f} script calls/s, "
                f"lowest ttl left {w.get('monitor_min_pttl_ms')} ms"
            )
        flush(url)
        w = step(
            f"4. watchdog: python-redis-lock, {params['wd_prl_n']:,} locks for {params['wd_hold_prl']:.0f} s",
            lambda: watchdog(
                wd_url, PRL, params["wd_prl_n"], params["wd_hold_prl"], params["wd_prl_ttl"], workdir, server.proc.pid
            ),
        )
        res["watchdog"][PRL] = w
        if w and w.get("taken") is not None:
            print(
                f"   {w['taken']}/{w['n']} held, keys at end {w['keys_at_end']}, CPU {w['cpu_pct']:.1f} % "
                f"of one core, {w['threads']} threads, renewals {w['evalsha_per_s']:.0f}/s, "
                f"renewal threads died: {w['thread_errors'] or 0}"
            )
        flush(url)

        # 5
        rw = step("5. RWMutex", lambda: rwmutex(url, workdir, params["rw_readers"], params["rw_duration"]))
        if rw:
            res["rwmutex"] = rw
            if rw.get("reads"):
                print(
                    f"   {rw['reads_per_s']:.0f} reads/s, {rw['writes_per_s']:.0f} writes/s, writer wait "
                    f"p50 {rw['writer_wait_p50_ms']:.1f} / max {rw['writer_wait_max_ms']:.1f} ms, "
                    f"overlaps {rw['overlaps']}"
                )
                if rw["overlaps"]:
                    res["errors"].append(f"RWMutex: {rw['overlaps']} reader/writer overlaps")
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(workdir, ignore_errors=True)

    res["elapsed_s"] = time.monotonic() - began
    res["quick"] = args.quick
    res["load_after"] = "%.2f %.2f %.2f" % os.getloadavg()
    res["targets"] = targets(res, args)
    print("\n== targets")
    for t in res["targets"]:
        print(f"   {t[2]:>14}  {t[0]}: {t[1]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        chart(res, png)
    except Exception as e:
        traceback.print_exc()
        res["errors"].append(f"chart: {type(e).__name__}: {e}")
    write_report(res, args, out, png)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=str))
    print(f"\nwrote {out} and {png} ({res['elapsed_s']:.0f} s)")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
