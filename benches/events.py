"""What ferrolock's events (the hook behind ferrolock.otel) cost: nothing when
nobody listens, and how much a listener and the OpenTelemetry layer add.

    .venv/bin/python benches/events.py [--cycles 3000] [--rounds 7] [--out FILE]

Against a throwaway redis-server (loopback, free port, no persistence),
uncontended acquire+release cycles of one lock from one thread, in four
configurations, each in a fresh process:

* off: no listener was ever added (each emission point of the core is one
  relaxed atomic load that finds nobody listening);
* off again: a listener was added and removed before measuring;
* listener: a Python listener that does nothing (every event crosses to
  ferrolock's listeners' thread and into Python);
* otel: ferrolock.otel.instrument() with the OpenTelemetry SDK, an in-memory
  metric reader and span exporter.

The configurations take turns, round after round, so drift of the machine
spreads over all of them. Each round gives a mean time per cycle; the table
shows the fastest round (the one least disturbed by the rest of the machine)
and the median round of each configuration.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from throwaway_redis import start_redis, stop_redis  # noqa: E402

CONFIGS = ["off", "off again", "listener", "otel"]

ONE_RUN = textwrap.dedent(
    """
    import json, sys, time
    import ferrolock
    config, url, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
    telemetry = None
    if config == "off again":
        noop = lambda event: None
        ferrolock.add_listener(noop)
        ferrolock.remove_listener(noop)
    elif config == "listener":
        ferrolock.add_listener(lambda event: None)
    elif config == "otel":
        import ferrolock.otel
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        tracers = TracerProvider()
        tracers.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        telemetry = ferrolock.otel.instrument(MeterProvider(metric_readers=[InMemoryMetricReader()]), tracers)
    lock = ferrolock.Client(url, prefix="bench:").lock("events")
    for _ in range(300):  # warm up: connection, scripts loaded, caches
        lock.acquire(); lock.release()
    start = time.perf_counter()
    for _ in range(cycles):
        lock.acquire(); lock.release()
    elapsed = time.perf_counter() - start
    if telemetry is not None:
        ferrolock.flush_events()
    print(json.dumps({"us_per_cycle": elapsed / cycles * 1e6}))
    """
)


def measure(config: str, url: str, cycles: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN, config, url, str(cycles)], capture_output=True, text=True, timeout=600
    )
    if out.returncode != 0:
        raise RuntimeError(f"{config}: {out.stderr}")
    return json.loads(out.stdout)["us_per_cycle"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ferrolock-bench-events-"))
    redis, port = start_redis(workdir)
    url = f"redis://127.0.0.1:{port}/0"
    results: dict = {c: [] for c in CONFIGS}
    try:
        for r in range(args.rounds):
            for config in CONFIGS:
                results[config].append(measure(config, url, args.cycles))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{c} {results[c][-1]:.1f} us" for c in CONFIGS),
                  file=sys.stderr)
    finally:
        stop_redis(redis)
        shutil.rmtree(workdir, ignore_errors=True)
    base = statistics.median(results["off"])
    lines = [
        f"acquire+release, one thread, {args.cycles} cycles x {args.rounds} rounds per configuration "
        f"({platform.python_implementation()} {platform.python_version()}, {platform.machine()})",
        "",
        "| configuration | fastest round, us/cycle | vs off | median round, us/cycle | vs off |",
        "|---|---:|---:|---:|---:|",
    ]
    fastest = min(results["off"])
    for c in CONFIGS:
        f, m = min(results[c]), statistics.median(results[c])
        lines.append(
            f"| {c} | {f:.1f} | {(f / fastest - 1) * 100:+.1f} % | {m:.1f} | {(m / base - 1) * 100:+.1f} % |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
