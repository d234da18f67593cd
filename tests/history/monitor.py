"""Samples who Redis says holds each name, from a thread of the parent.

A token seen in Redis that no worker was ever given belongs to an acquire
that reported failure (timeout, Ctrl-C, cancellation). Its clean-up should
remove it within a round trip; otherwise it blocks the name until it expires
(or for good, if a watchdog keeps renewing it). The checker compares.

The keys read here follow the layout of src/keys.rs: ``{prefix}{name}``, a
hash whose ``token`` field is the exclusive holder's; for an RWMutex the
writer's hash ``...:rw:w`` and the readers' sorted set ``...:rw:r`` (token ->
expiry in server milliseconds). A run that samples nothing shows the layout
moved.
"""

from __future__ import annotations

import threading

from . import resp
from .events import now_ns

INTERVAL_S = 0.01


class HolderMonitor:
    def __init__(self, port, prefix: str, names: tuple, rw: bool):
        """`port`: the server's, or a function giving the current master's (it may move)."""
        self.port_of = port if callable(port) else (lambda: port)
        self.redis = resp.Connection(self.port_of())
        self.keys = [(n, f"{prefix}{{{n}}}") for n in names]
        self.rw = rw
        self.samples: list = []  # {"t0", "t", "name", "token"}: Redis answered between t0 and t
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "HolderMonitor":
        self._thread.start()
        return self

    def stop(self) -> list:
        self._done.set()
        if self._thread.ident is not None:
            self._thread.join()
        self.redis.close()
        return self.samples

    def _run(self) -> None:
        while not self._done.wait(INTERVAL_S):
            try:
                port = self.port_of()
            except (OSError, resp.RespError):
                continue  # nobody to ask where the master is right now
            if port != self.redis.port:
                self.redis.close()
                self.redis = resp.Connection(port)
            for name, key in self.keys:
                t0 = now_ns()
                try:
                    tokens = self._holders(key)
                except (OSError, resp.RespError):
                    continue  # the server is down or stalled: a fault, not a finding
                t = now_ns()
                self.samples += [{"t0": t0, "t": t, "name": name, "token": tok.decode()} for tok in tokens]

    def _holders(self, key: str) -> list:
        if not self.rw:
            return [tok for tok in [self.redis("HGET", key, "token")] if tok]
        writer = self.redis("HGET", f"{key}:rw:w", "token")
        seconds, micros = self.redis("TIME")
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        readers = self.redis("ZRANGEBYSCORE", f"{key}:rw:r", f"({now_ms}", "+inf")  # live ones only
        return ([writer] if writer else []) + readers
