"""The events hook (ferrolock.add_listener) and the OpenTelemetry instruments
built on it, read back with the SDK's in-memory reader and span exporter."""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
import time

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ferrolock
import ferrolock.otel
from ferrolock import Retry


class Events:
    """A listener that keeps the events of one test's locks, and can be awaited."""

    def __init__(self, prefix_names: str):
        self.names = prefix_names
        self.queue: "queue.Queue[ferrolock.LockEvent]" = queue.Queue()
        self.seen: list = []
        self.threads: set = set()

    def __call__(self, event):
        self.threads.add(threading.get_ident())
        if all(n.startswith(self.names) for n in event.names):
            self.queue.put(event)

    def next(self, kind: str, timeout: float = 10.0):
        """The next event of `kind` (earlier ones of other kinds are kept in `seen`)."""
        while True:
            event = self.queue.get(timeout=timeout)
            self.seen.append(event)
            if event.kind == kind:
                return event


@pytest.fixture
def events(request):
    listener = Events(request.node.name[:30])
    ferrolock.add_listener(listener)
    yield listener
    ferrolock.remove_listener(listener)


@pytest.fixture
def names(request):
    return request.node.name[:30]


def test_listeners_are_told_of_acquires_releases_losses_and_renewals(client, events, names, ferrolock_helpers):
    lock = client.lock(f"{names}:a", ttl=1)
    assert lock.acquire()
    acquired = events.next("acquired")
    assert acquired.names == (f"{names}:a",)
    assert (acquired.lock_kind, acquired.fair, acquired.detail, acquired.blocking) == ("lock", False, "acquired", True)
    assert acquired.seconds >= 0 and acquired.hold is not None
    renewed = events.next("renewed")
    assert renewed.hold == acquired.hold and renewed.seconds > 0
    lock.release()
    released = events.next("released")
    assert released.hold == acquired.hold and released.seconds >= 0.1

    other = client.lock(f"{names}:a")
    assert other.acquire(blocking=False)
    assert not client.lock(f"{names}:a").acquire(blocking=False)
    assert events.next("acquired").hold is not None
    failed = events.next("acquire_failed")
    assert (failed.detail, failed.blocking, failed.hold) == ("not_acquired", False, None)
    assert not client.lock(f"{names}:a").acquire(timeout=0.05)
    assert events.next("acquire_failed").detail == "timed_out"
    ferrolock_helpers.expire_now(other)
    lost = events.next("lost")
    assert lost.detail == "taken_over" and lost.names == (f"{names}:a",)
    assert threading.main_thread().ident not in events.threads, "listeners run on ferrolock's thread"
    assert repr(lost).startswith("LockEvent(kind='lost'")


def test_rwmutex_events_say_read_or_write(client, events, names):
    rw = client.rwmutex(f"{names}:doc", fair=True)
    with rw.read():
        event = events.next("acquired")
        assert (event.lock_kind, event.fair) == ("read", True)
    assert events.next("released").lock_kind == "read"
    with rw.write():
        assert events.next("acquired").lock_kind == "write"


def test_listener_errors_are_reported_not_raised(client, names, monkeypatch):
    reported = queue.Queue()
    monkeypatch.setattr(sys, "unraisablehook", reported.put)

    def broken(event):
        raise RuntimeError("listener bug")

    after = Events(names)
    ferrolock.add_listener(broken)
    ferrolock.add_listener(after)
    try:
        with client.lock(f"{names}:x"):
            pass
        assert after.next("released").kind == "released", "the next listener is called all the same"
        unraisable = reported.get(timeout=10)
        assert isinstance(unraisable.exc_value, RuntimeError) and unraisable.object is broken
    finally:
        ferrolock.remove_listener(broken)
        ferrolock.remove_listener(after)
    with pytest.raises(ValueError, match="not added"):
        ferrolock.remove_listener(broken)
    with pytest.raises(TypeError, match="callable"):
        ferrolock.add_listener(42)


@pytest.fixture
def telemetry():
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[reader])
    yield reader, exporter, meters, tracer_provider
    meters.shutdown()


def points(reader) -> dict:
    """{instrument name: [(attributes, value or (count, sum))]} of what was collected."""
    out: dict = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    value = (p.count, p.sum) if hasattr(p, "count") else p.value
                    out.setdefault(metric.name, []).append((dict(p.attributes), value))
    return out


def total(pts, name, **attrs) -> float:
    return sum(
        (v[0] if isinstance(v, tuple) else v)
        for a, v in pts.get(name, [])
        if all(a.get(k) == want for k, want in attrs.items())
    )


def test_otel_instruments_count_and_time_every_step(client, telemetry, events, names, ferrolock_helpers):
    reader, exporter, meters, tracers = telemetry
    with ferrolock.otel.instrument(meters, tracers, lock_name=ferrolock.otel.prefix(":")) as otel:
        holder = client.lock(f"{names}:job", ttl=1)
        assert holder.acquire()
        waiter = client.lock(f"{names}:job", retry=Retry.fixed(0.2))
        got = []
        t = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=10)))
        t.start()
        events.next("renewed")
        # Just after a poll, the waiter is subscribed and has 0.2 s to its
        # next: the release wakes it by pub/sub first.
        assert events.next("woken").detail == "poll"
        holder.release()
        t.join()
        assert got == [True]
        assert not client.lock(f"{names}:job").acquire(timeout=0.01)
        events.next("acquire_failed")
        ferrolock_helpers.expire_now(waiter)
        events.next("lost")
        held_gauge = total(points(reader), "ferrolock.held")
        probe = client.lock(f"{names}:gauge")
        assert probe.acquire()
        assert total(points(reader), "ferrolock.held") == held_gauge + 1
        probe.release()
        events.next("released")
        pts = points(reader)
    name = f"{names}:"
    # holder, waiter and the gauge's probe
    assert total(pts, "ferrolock.acquisitions", outcome="acquired", **{"lock.name": name}) == 3
    assert total(pts, "ferrolock.acquisitions", outcome="timed_out", **{"lock.name": name}) == 1
    assert total(pts, "ferrolock.acquire.duration", outcome="acquired", **{"lock.name": name}) == 3
    # holder, probe, and expire_now's (a release under the waiter's token)
    assert total(pts, "ferrolock.releases", **{"lock.name": name}) == 3
    assert total(pts, "ferrolock.losses", cause="taken_over", **{"lock.name": name}) == 1
    assert total(pts, "ferrolock.hold.duration", end="lost", **{"lock.name": name}) == 1
    assert total(pts, "ferrolock.renewals", **{"lock.name": name}) >= 1
    assert total(pts, "ferrolock.renewal.duration", **{"lock.name": name}) >= 1
    assert total(pts, "ferrolock.wakeups", kind="pubsub", **{"lock.name": name}) >= 1, pts["ferrolock.wakeups"]
    assert "ferrolock.waiters" in pts
    assert all(a["lock.kind"] == "lock" and a["lock.fair"] is False for a, _ in pts["ferrolock.acquisitions"])

    spans = [s for s in exporter.get_finished_spans() if s.attributes.get("lock.name") == name]
    acquires = [s for s in spans if s.name == "ferrolock.acquire"]
    holds = [s for s in spans if s.name == "ferrolock.hold"]
    assert sorted(s.attributes["ferrolock.outcome"] for s in acquires) == ["acquired"] * 3 + ["timed_out"]
    waited = max(acquires, key=lambda s: s.attributes["ferrolock.wait"])
    assert waited.end_time - waited.start_time == pytest.approx(waited.attributes["ferrolock.wait"] * 1e9, rel=0.01)
    assert len(holds) == 3
    lost_hold = [h for h in holds if h.status.status_code == StatusCode.ERROR]
    assert len(lost_hold) == 1
    assert [link.context.span_id for link in lost_hold[0].links] == [waited.context.span_id]
    assert otel._closed


def test_otel_names_are_off_by_default_and_templates_bound_them(client, telemetry, names):
    reader, _, meters, tracers = telemetry
    with ferrolock.otel.instrument(meters, tracers):
        with client.lock(f"{names}:1"):
            pass
    assert all("lock.name" not in a for a, _ in points(reader)["ferrolock.acquisitions"])

    reader2 = InMemoryMetricReader()
    meters2 = MeterProvider(metric_readers=[reader2])
    seen = threading.Event()
    with ferrolock.otel.instrument(meters2, tracers, lock_name=[f"{names}:orders:*"]):
        ferrolock.add_listener(lambda e: e.kind == "released" and e.names == (f"{names}:misc",) and seen.set())
        for n in (f"{names}:orders:1", f"{names}:orders:2", f"{names}:misc"):
            with client.lock(n):
                pass
        assert seen.wait(10)
    acquired = {a["lock.name"]: v for a, v in points(reader2)["ferrolock.acquisitions"]}
    assert acquired == {f"{names}:orders:*": 2, "other": 1}
    meters2.shutdown()
    assert ferrolock.otel.prefix("/", 2)("a/b/c") == "a/b/"
    assert ferrolock.otel.prefix(":")("plain") == "plain"
    with pytest.raises(ValueError):
        ferrolock.otel.prefix(":", 0)
    with pytest.raises(TypeError):
        ferrolock.otel.templates([])
    with pytest.raises(TypeError, match="lock_name must be"):
        ferrolock.otel.instrument(meters2, tracers, lock_name=42)


def test_otel_spans_are_children_of_the_span_current_at_the_call(client, telemetry, names):
    _, exporter, meters, tracers = telemetry
    app = tracers.get_tracer("app")
    with ferrolock.otel.instrument(meters, tracers):
        with app.start_as_current_span("request") as request:
            with client.lock(f"{names}:with"):
                pass
            lock = client.lock(f"{names}:acquire")
            assert lock.acquire(timeout=5)
            lock.release()

        async def handler() -> None:
            with app.start_as_current_span("async request"):
                async with client.lock(f"{names}:async with"):
                    pass
                lock = client.lock(f"{names}:aacquire")
                assert await lock.aacquire(timeout=5)
                await lock.arelease()

        asyncio.run(handler())
        with client.lock(f"{names}:outside"):  # no span current: a trace of its own
            pass
    spans = exporter.get_finished_spans()
    request = next(s for s in spans if s.name == "request")
    arequest = next(s for s in spans if s.name == "async request")
    ours = [s for s in spans if s.name.startswith("ferrolock.")]
    assert len(ours) == 10, [s.name for s in ours]
    by_parent: dict = {}
    for s in ours:
        by_parent.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    assert len(by_parent[request.context.span_id]) == 4, "acquire + hold of `with` and of acquire()"
    assert len(by_parent[arequest.context.span_id]) == 4, "acquire + hold of `async with` and of aacquire()"
    assert len(by_parent[None]) == 2, "the acquire outside any span is a root"
    assert {s.context.trace_id for s in by_parent[request.context.span_id]} == {request.context.trace_id}
    assert {s.context.trace_id for s in by_parent[arequest.context.span_id]} == {arequest.context.trace_id}


def test_otel_instrument_twice_counts_once(client, telemetry, names):
    reader, _, meters, tracers = telemetry
    first = ferrolock.otel.instrument(meters, tracers)
    try:
        assert ferrolock.otel.instrument(meters, tracers) is first, "the same arguments: the open one"
        with pytest.raises(RuntimeError, match="instrumented already.*close"):
            ferrolock.otel.instrument(MeterProvider(metric_readers=[InMemoryMetricReader()]), tracers)
        with pytest.raises(RuntimeError, match="instrumented already"):
            ferrolock.otel.Instrumentation(meters, tracers, None)
        with client.lock(f"{names}:once"):
            pass
        ferrolock.flush_events()
        assert total(points(reader), "ferrolock.acquisitions", outcome="acquired") == 1
        assert total(points(reader), "ferrolock.releases") == 1
    finally:
        first.close()
    again = ferrolock.otel.instrument(meters, tracers)
    assert again is not first, "once closed, a new one"
    again.close()


def test_otel_readers_see_a_finished_block_without_a_flush(client, telemetry, names):
    reader, _, meters, tracers = telemetry

    def slow(event):  # a listener that takes its time: events reach OpenTelemetry late
        time.sleep(0.05)

    ferrolock.add_listener(slow)
    try:
        with ferrolock.otel.instrument(meters, tracers):
            with client.lock(f"{names}:sync"):
                pass
            pts = points(reader)
            assert total(pts, "ferrolock.acquisitions", outcome="acquired") == 1, pts
            assert total(pts, "ferrolock.releases") == 1

            async def block() -> None:
                async with client.lock(f"{names}:async"):
                    pass

            asyncio.run(block())
            pts = points(reader)
            assert total(pts, "ferrolock.acquisitions", outcome="acquired") == 2, pts
            assert total(pts, "ferrolock.releases") == 2
    finally:
        ferrolock.remove_listener(slow)
