"""OpenTelemetry metrics and traces for ferrolock (``pip install ferrolock[otel]``).

Only OpenTelemetry's API is used: your SDK, readers and exporters (Prometheus,
OTLP, the console) decide where the figures go. Nothing is measured until
:func:`instrument` is called, and :meth:`Instrumentation.close` stops it again
(then the locks cost what they cost before)::

    import ferrolock.otel
    telemetry = ferrolock.otel.instrument(lock_name=ferrolock.otel.prefix(":"))

Instruments (``lock.kind`` is ``lock``, ``read`` or ``write``; ``lock.fair``
a bool; ``lock.name`` only when ``lock_name`` is given):

==========================================  ==========  =========================================
``ferrolock.acquire.duration``              histogram   seconds an acquire waited, by ``outcome``
``ferrolock.hold.duration``                 histogram   seconds a hold lasted, by ``end`` (released, lost)
``ferrolock.renewal.duration``              histogram   seconds a watchdog renewal took
``ferrolock.acquisitions``                  counter     acquires by ``outcome``: acquired, timed_out,
                                                        not_acquired, error, cancelled
``ferrolock.releases``                      counter     releases
``ferrolock.losses``                        counter     losses by ``cause``: expired, taken_over, unreachable,
                                                        unreplicated
``ferrolock.renewals``                      counter     successful renewals
``ferrolock.wakeups``                       counter     waiters woken, by ``kind``: pubsub, handover, poll
``ferrolock.replication.unacknowledged``    counter     steps fewer replicas than the client's ``replicas``
                                                        acknowledged in time, by ``step``: acquire,
                                                        renewal, extend
``ferrolock.held``                          gauge       locks this process holds now
``ferrolock.waiters``                       gauge       acquires of this process waiting now
==========================================  ==========  =========================================

Spans: one ``ferrolock.acquire`` per blocking acquire (attributes ``lock.kind``,
``lock.fair``, ``ferrolock.outcome``, ``ferrolock.wait``, and ``lock.name`` as
above), and for each hold taken a ``ferrolock.hold`` span from the acquire to
the release or loss, linked to its acquire span (an error status when lost).
Both are recorded when the step ends, with its real start and end times, as
children of the span current where the acquire was called (``with``,
``acquire()``, ``async with``, ``aacquire()``): a lock's wait and hold show in
the request's trace. An acquire made while no span is current starts a trace
of its own.

Metrics are delivered to OpenTelemetry on ferrolock's listeners' thread; a
metric reader's collection (``get_metrics_data()``, a periodic export) first
waits until every event so far is counted, so a block that has finished is in
the figures without a call to :func:`ferrolock.flush_events`. Spans end on that
thread as their events come in (call ``flush_events()`` before reading an
in-memory span exporter).

One instrumentation at a time: :func:`instrument` called again while one is
open returns that one when given the same arguments, and raises
``RuntimeError`` when given others (close the first to change them); events
are never counted twice.
"""

from __future__ import annotations

import fnmatch
import threading
from typing import Callable, Dict, Iterable, Optional, Sequence, Union

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

import ferrolock
from ferrolock._ferrolock import _debug_stats

__all__ = ["Instrumentation", "instrument", "prefix", "templates"]

NameAttribute = Callable[[str], Optional[str]]

SCOPE = "ferrolock"

# The instrumentation open now (at most one), and its guard.
_current: Optional["Instrumentation"] = None
_current_lock = threading.RLock()


def prefix(separator: str = ":", parts: int = 1) -> NameAttribute:
    """Report a name by its first ``parts`` fields: ``prefix(":")`` turns
    ``orders:42`` into ``orders:`` (a name without ``separator`` as it is)."""
    if parts < 1:
        raise ValueError("parts must be 1 or more")

    def attribute(name: str) -> str:
        fields = name.split(separator)
        if len(fields) <= parts:
            return name
        return separator.join(fields[:parts]) + separator

    return attribute


def templates(patterns: Iterable[str], other: str = "other") -> NameAttribute:
    """Report a name by the first glob of ``patterns`` it matches (``orders:*``),
    and names matching none as ``other``."""
    patterns = list(patterns)
    if not patterns or not all(isinstance(p, str) for p in patterns):
        raise TypeError("templates takes a non-empty list of glob patterns (str)")

    def attribute(name: str) -> str:
        for p in patterns:
            if fnmatch.fnmatchcase(name, p):
                return p
        return other

    return attribute


class Instrumentation:
    """Turns ferrolock's events into OpenTelemetry instruments and spans,
    from :func:`instrument` until :meth:`close`. At most one is open at a
    time: making another raises ``RuntimeError``."""

    def __init__(
        self,
        meter_provider: Optional[metrics.MeterProvider],
        tracer_provider: Optional[trace.TracerProvider],
        lock_name: Optional[Union[NameAttribute, Sequence[str]]],
    ):
        global _current
        self._arguments = (meter_provider, tracer_provider, lock_name)
        with _current_lock:
            if _current is not None:
                raise RuntimeError(
                    "ferrolock is instrumented already, with other providers or lock_name: "
                    "close() the Instrumentation that instrument() returned first, "
                    "or call instrument() with the same arguments to get it back"
                )
            self._start(meter_provider, tracer_provider, lock_name)
            ferrolock.add_listener(self)
            _current = self

    def _start(
        self,
        meter_provider: Optional[metrics.MeterProvider],
        tracer_provider: Optional[trace.TracerProvider],
        lock_name: Optional[Union[NameAttribute, Sequence[str]]],
    ) -> None:
        if isinstance(lock_name, (list, tuple)):
            lock_name = templates(lock_name)
        elif lock_name is not None and not callable(lock_name):
            raise TypeError(
                "lock_name must be None (no lock.name attribute), a function of the name "
                "(e.g. ferrolock.otel.prefix(':')), or a list of glob patterns, "
                f"not {type(lock_name).__name__}"
            )
        self._lock_name = lock_name
        meter = metrics.get_meter(SCOPE, ferrolock.__version__, meter_provider)
        self._tracer = trace.get_tracer(SCOPE, ferrolock.__version__, tracer_provider)
        self._acquire_time = meter.create_histogram(
            "ferrolock.acquire.duration", unit="s", description="How long an acquire waited, by outcome"
        )
        self._hold_time = meter.create_histogram(
            "ferrolock.hold.duration", unit="s", description="How long a hold lasted, until released or lost"
        )
        self._renewal_time = meter.create_histogram(
            "ferrolock.renewal.duration", unit="s", description="How long a watchdog renewal took"
        )
        self._acquisitions = meter.create_counter(
            "ferrolock.acquisitions", unit="{acquire}", description="Acquires by outcome"
        )
        self._releases = meter.create_counter("ferrolock.releases", unit="{release}", description="Releases")
        self._losses = meter.create_counter("ferrolock.losses", unit="{loss}", description="Holds lost, by cause")
        self._renewals = meter.create_counter(
            "ferrolock.renewals", unit="{renewal}", description="Successful watchdog renewals"
        )
        self._wakeups = meter.create_counter(
            "ferrolock.wakeups", unit="{wakeup}", description="Waiters woken for another attempt, by kind"
        )
        self._unreplicated = meter.create_counter(
            "ferrolock.replication.unacknowledged",
            unit="{step}",
            description="Grants, renewals and extends fewer replicas than asked acknowledged in time, by step",
        )
        meter.create_observable_gauge(
            "ferrolock.held",
            [self._observe("watchdogs", flush=True)],
            unit="{lock}",
            description="Locks this process holds",
        )
        meter.create_observable_gauge(
            "ferrolock.waiters",
            [self._observe("waiters")],
            unit="{acquire}",
            description="Acquires of this process waiting for a wake-up",
        )
        # Hold spans in progress, by hold; touched by the listeners' thread only.
        self._holds: Dict[int, trace.Span] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _observe(
        self, stat: str, flush: bool = False
    ) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def callback(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            if self._closed:
                return []
            if flush:
                self._flush(options.timeout_millis / 1000)
            return [metrics.Observation(_debug_stats()[stat])]

        return callback

    @staticmethod
    def _flush(timeout: float) -> None:
        """Count every event so far before a reader collects: the SDK calls
        the observable instruments' callbacks first, then reads the others."""
        try:
            ferrolock.flush_events(timeout=max(min(timeout, 5.0), 0.001))
        except RuntimeError:  # collected by a listener: the events it waits for are behind it
            pass

    def _attributes(self, event: ferrolock.LockEvent) -> Dict[str, Union[str, bool]]:
        attributes: Dict[str, Union[str, bool]] = {"lock.kind": event.lock_kind, "lock.fair": event.fair}
        if self._lock_name is not None:
            names = sorted({self._lock_name(n) or "other" for n in event.names})
            attributes["lock.name"] = ",".join(names)
        return attributes

    def __call__(self, event: ferrolock.LockEvent) -> None:
        """Called by ferrolock with each event, on its listeners' thread."""
        attributes = self._attributes(event)
        seconds = event.seconds or 0.0
        kind = event.kind
        if kind in ("acquired", "acquire_failed"):
            outcome = {**attributes, "outcome": event.detail or "error"}
            self._acquisitions.add(1, outcome)
            self._acquire_time.record(seconds, outcome)
            self._spans_for_acquire(event, attributes)
        elif kind == "released":
            self._releases.add(1, attributes)
            self._hold_time.record(seconds, {**attributes, "end": "released"})
            self._end_hold(event, lost=False)
        elif kind == "lost":
            self._losses.add(1, {**attributes, "cause": event.detail or "taken_over"})
            self._hold_time.record(seconds, {**attributes, "end": "lost"})
            self._end_hold(event, lost=True)
        elif kind == "renewed":
            self._renewals.add(1, attributes)
            self._renewal_time.record(seconds, attributes)
        elif kind == "woken":
            self._wakeups.add(1, {**attributes, "kind": event.detail or "poll"})
        elif kind == "unreplicated":
            self._unreplicated.add(1, {**attributes, "step": event.detail or "acquire"})

    def _spans_for_acquire(self, event: ferrolock.LockEvent, attributes: Dict[str, Union[str, bool]]) -> None:
        end = int(event.time * 1e9)
        links = []
        # The span current where the acquire was called (an empty context: a root).
        parent = event.context.run(otel_context.get_current) if event.context is not None else otel_context.Context()
        if event.blocking:
            start = end - int((event.seconds or 0.0) * 1e9)
            span = self._tracer.start_span(
                "ferrolock.acquire",
                context=parent,
                start_time=start,
                attributes={
                    **attributes,
                    "ferrolock.outcome": event.detail or "",
                    "ferrolock.wait": event.seconds or 0.0,
                },
            )
            if event.kind != "acquired":
                span.set_status(trace.Status(trace.StatusCode.ERROR, event.detail))
            span.end(end_time=end)
            links.append(trace.Link(span.get_span_context()))
        if event.kind == "acquired" and event.hold is not None:
            hold = self._tracer.start_span(
                "ferrolock.hold", context=parent, start_time=end, attributes=attributes, links=links
            )
            with self._lock:
                self._holds[event.hold] = hold

    def _end_hold(self, event: ferrolock.LockEvent, lost: bool) -> None:
        with self._lock:
            span = self._holds.pop(event.hold, None) if event.hold is not None else None
        if span is None:
            return
        if lost:
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"lost: {event.detail}"))
        span.end(end_time=int(event.time * 1e9))

    def close(self) -> None:
        """Stop measuring, once every event so far is counted (holds in
        progress end their spans now)."""
        global _current
        if self._closed:
            return
        ferrolock.flush_events(timeout=10)
        self._closed = True
        ferrolock.remove_listener(self)
        with _current_lock:
            if _current is self:
                _current = None
        with self._lock:
            holds, self._holds = list(self._holds.values()), {}
        for span in holds:
            span.end()

    def __enter__(self) -> "Instrumentation":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def instrument(
    meter_provider: Optional[metrics.MeterProvider] = None,
    tracer_provider: Optional[trace.TracerProvider] = None,
    *,
    lock_name: Optional[Union[NameAttribute, Sequence[str]]] = None,
) -> Instrumentation:
    """Report ferrolock's metrics and spans through OpenTelemetry.

    Args:
        meter_provider: where the instruments come from; ``None`` for the
            global one (``opentelemetry.metrics.set_meter_provider``).
        tracer_provider: where the spans go; ``None`` for the global one.
        lock_name: how a lock's name becomes the ``lock.name`` attribute.
            ``None`` (the default) leaves it out: names are often
            unbounded (``orders:42``), and each value is a time series of its
            own. A callable maps a name to its value (see :func:`prefix`); a
            list of glob patterns reports each name by the first that matches
            (see :func:`templates`).

    Returns:
        The instrumentation; ``close()`` it (or use it as a context manager)
        to stop. While it is open, calling ``instrument`` again with the same
        arguments returns it (events are counted once, whoever asks).

    Raises:
        RuntimeError: an instrumentation with other arguments is open
            (``close()`` it first).
        TypeError: ``lock_name`` is neither ``None``, a callable nor a list
            of glob patterns.
    """
    with _current_lock:
        if _current is not None and _current._arguments == (meter_provider, tracer_provider, lock_name):
            return _current
        return Instrumentation(meter_provider, tracer_provider, lock_name)
