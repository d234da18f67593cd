"""What ferrolock's events (the hook behind ferrolock.otel) cost: nothing when
nobody listens, and how much a listener and the OpenTelemetry layer add.

    .venv/bin/python benches/events.py [--cycles 200] [--rounds 40] [--out FILE]

Against a throwaway redis-server (loopback, free port, no persistence),
uncontended acquire+release cycles of one lock from one thread, in three
configurations:

* off: no listener (each emission point of the core is one relaxed atomic
  load that finds nobody listening, and nothing is measured);
* listener: a Python listener that does nothing (every event goes to
  ferrolock's listeners' thread and into Python);
* otel: ferrolock.otel.instrument() with the OpenTelemetry SDK, an in-memory
  metric reader and span exporter.

One process switches between them every `--cycles` cycles, round after round
(a listener added and removed leaves exactly the state of never having had
one: the core's flag is off again), so drift of a busy machine spreads over
all three. Each block gives a mean time per cycle; the table shows each
configuration's fastest block (the least disturbed) and its median block.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ferrolock
import ferrolock.otel
from ferrolock.throwaway import RedisServer

CONFIGS = ["off", "listener", "otel"]


def noop(event: ferrolock.LockEvent) -> None:
    pass


class Switch:
    """Puts the process in one configuration at a time."""

    def __init__(self) -> None:
        self.meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
        self.spans = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.spans))
        self.telemetry = None
        self.listening = False

    def to(self, config: str) -> None:
        ferrolock.flush_events()  # the last block's events are not this one's work
        if self.listening:
            ferrolock.remove_listener(noop)
            self.listening = False
        if self.telemetry is not None:
            self.telemetry.close()
            self.telemetry = None
            self.spans.clear()
        if config == "listener":
            ferrolock.add_listener(noop)
            self.listening = True
        elif config == "otel":
            self.telemetry = ferrolock.otel.instrument(self.meters, self.tracers)


def block(lock: ferrolock.Lock, cycles: int) -> float:
    start = time.perf_counter()
    for _ in range(cycles):
        lock.acquire()
        lock.release()
    return (time.perf_counter() - start) / cycles * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=200, help="cycles per block")
    p.add_argument("--rounds", type=int, default=40, help="blocks per configuration")
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = p.parse_args()
    results: dict = {c: [] for c in CONFIGS}
    with RedisServer() as redis:
        lock = ferrolock.Client(redis.url, prefix="bench:").lock("events")
        block(lock, 500)  # warm up: connection, scripts loaded, caches
        switch = Switch()
        for _ in range(args.rounds):
            for config in CONFIGS:
                switch.to(config)
                results[config].append(block(lock, args.cycles))
        switch.to("off")
    fastest, median = min(results["off"]), statistics.median(results["off"])
    lines = [
        f"acquire+release of one lock, one thread: {args.rounds} blocks of {args.cycles} cycles per "
        f"configuration ({platform.python_implementation()} {platform.python_version()}, {platform.machine()})",
        "",
        "| configuration | fastest block, us/cycle | vs off | median block, us/cycle | vs off |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in CONFIGS:
        f, m = min(results[c]), statistics.median(results[c])
        lines.append(
            f"| {c} | {f:.1f} | {(f / fastest - 1) * 100:+.1f} % | {m:.1f} | {(m / median - 1) * 100:+.1f} % |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
