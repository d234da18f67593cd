"""The history's format: one JSON object per line, one file per worker process.

Every event carries ``w`` (worker label), ``seq`` (attempt number of that
worker), ``pid``, ``ev`` and ``t`` (``time.monotonic_ns()``; CLOCK_MONOTONIC is
system-wide on Linux, so times from different processes compare); those of
an attempt also ``how`` (acquire, with, aacquire, async-with), ``kind``
(lock, read, write) and ``names``. Attempt events: ``granted`` (with
``ttl``, ``fence``, ``token``, and ``t_ask``, when the attempt began),
``valid`` (``t`` is the last time the holder saw ``lost == False``;
``t_rel`` when it began to release), ``released``, ``lost`` (``src``:
``on_lost``, ``property``, ``release``, ``exit`` or ``aexit``),
``interrupted`` (Ctrl-C), ``timeout`` (``cancelled`` for an async time
limit), ``error``, ``left`` (the handle still held after the attempt
failed). A worker begins with ``clock`` (``skew``: the offset its wall
clock was started with, ``skew_ms``: its measured offset from the server's
clock) and ends with ``exit``, or ``crash`` with its traceback. A
``stall`` (``t`` to ``t_end``) is a stretch in which a ready thread of the
worker's process did not get to run (see StallProbe).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Iterable

now_ns = time.monotonic_ns


class EventLog:
    """Appends events as JSON lines; safe to share with the on_lost thread."""

    def __init__(self, path: str):
        self.pid = os.getpid()
        self._file = open(path, "w", buffering=1, encoding="utf-8")  # line-buffered: one write per event
        self._lock = threading.Lock()

    def write(self, w: str, seq: int, ev: str, t: int | None = None, **fields) -> None:
        entry = {"w": w, "seq": seq, "pid": self.pid, "ev": ev, "t": now_ns() if t is None else t, **fields}
        line = json.dumps(entry) + "\n"
        with self._lock:
            self._file.write(line)

    def close(self) -> None:
        with self._lock:
            self._file.close()


# The stall probe's period, and the shortest stall it logs.
PROBE_PERIOD_NS = 10_000_000
STALL_LOG_NS = 20_000_000


class StallProbe:
    """A thread of the worker's process that wakes every PROBE_PERIOD_NS and
    logs each time it woke STALL_LOG_NS or more past its due time: from the
    due time to its waking, a thread of the process that was ready to run
    did not (the machine's other processes had the cores, or another thread
    held the GIL). on_lost runs on such a thread, which must wait alike: the
    checker does not count those stretches against a loss report
    (checker.report_lateness)."""

    def __init__(self, log: EventLog, w: str):
        self.log, self.w = log, w
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-probe", daemon=True)

    def start(self) -> "StallProbe":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        due = now_ns() + PROBE_PERIOD_NS
        while not self._done.wait(max(0, due - now_ns()) / 1e9):  # the probe's own period, measured
            woke = now_ns()
            if woke - due >= STALL_LOG_NS:
                self.log.write(self.w, 0, "stall", due, t_end=woke)
            due = woke + PROBE_PERIOD_NS


def read_events(paths: Iterable[Path]) -> tuple[list, int]:
    """Every event of every file, sorted by time, and the count of unreadable lines
    (a torn last line of a worker that was killed)."""
    events, torn = [], 0
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                torn += 1
    events.sort(key=lambda e: e["t"])
    return events, torn
