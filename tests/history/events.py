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
clock) and ends with ``exit``, or ``crash`` with its traceback.
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
