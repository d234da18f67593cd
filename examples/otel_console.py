"""ferrolock's OpenTelemetry metrics and spans, printed by the SDK's console
exporters, against a throwaway redis-server.

    pip install 'ferrolock[otel]' opentelemetry-sdk
    python examples/otel_console.py

Four threads contend for two order locks, a hold outlives its ttl by
renewing, and a hold is taken away (force_release) so its loss shows. The
spans print as they end; the metrics once, at the end.
"""

from __future__ import annotations

import threading
import time

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import ferrolock
import ferrolock.otel
from ferrolock.throwaway import RedisServer


def main() -> None:
    with RedisServer() as redis:
        run(redis.url)


def run(url: str) -> None:
    metrics = PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=3_600_000)
    meter_provider = MeterProvider(metric_readers=[metrics])
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))

    # lock.name by the part before the first ':' ("orders:"), not per order.
    telemetry = ferrolock.otel.instrument(meter_provider, tracer_provider, lock_name=ferrolock.otel.prefix(":"))
    client = ferrolock.Client(url)

    def worker(i: int) -> None:
        for n in range(5):
            with client.lock(f"orders:{n % 2}", ttl=5):
                time.sleep(0.01)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    with client.lock("reports:nightly", ttl=0.3):  # renewed every 0.1 s
        time.sleep(0.5)

    lost = threading.Event()
    victim = client.lock("reports:weekly", ttl=0.3, on_lost=lost.set)
    victim.acquire()
    client.force_release("reports:weekly")  # an operator takes it away
    lost.wait(5)

    ferrolock.flush_events()  # every event so far counted
    meter_provider.shutdown()  # prints the metrics
    tracer_provider.shutdown()
    telemetry.close()


if __name__ == "__main__":
    main()
