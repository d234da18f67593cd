"""Samples who Redis says holds each name, from a thread of the parent.

A token seen in Redis that no worker was ever given belongs to an acquire
that reported failure (timeout, Ctrl-C, cancellation). Its clean-up should
remove it within a round trip; otherwise it blocks the name until it expires
(or for good, if a watchdog keeps renewing it). The checker compares.

The keys read here follow the layout of src/keys/layout.rs: ``{prefix}{name}``,
a hash whose ``token`` field is the exclusive holder's; for an RWMutex the
writer's hash ``...:rw:w`` and the readers' sorted set ``...:rw:r`` (token ->
expiry in server milliseconds); a semaphore's holders ``...:sem:h`` (token
-> expiry); an election's term, the hash ``...:el``. A run that samples nothing shows the layout
moved. On a quorum each master is asked, and a token counts as holding a
name where a majority of the masters name it. On a Redis Cluster
(``per_name``) each name is asked of the master serving its slot, followed
through MOVED when a failover moves it.
"""

from __future__ import annotations

import threading

from . import resp
from .events import now_ns
from support.helpers import hold_field

INTERVAL_S = 0.01


QUORUM_TIMEOUT_S = 0.05  # a stopped master is skipped, not waited for


class HolderMonitor:
    def __init__(self, ports: list, prefix: str, names: tuple, layout: str, per_name: bool = False):
        """`ports`: each server's (the masters of a quorum), or a function
        giving the current master's (a Sentinel deployment: it may move); with
        `per_name`, the port of the master serving each name (a Cluster).
        `layout`: "lock", "rw", "semaphore" or "election" (scenarios.layout)."""
        self.per_name = per_name
        timeout = QUORUM_TIMEOUT_S if len(ports) > 1 and not per_name else 1.0
        self.port_of = [p if callable(p) else (lambda p=p: p) for p in ports]
        self.masters = [resp.Connection(port(), timeout) for port in self.port_of]
        self.keys = [(n, f"{prefix}{{{n}}}") for n in names]
        self.layout = layout
        self.samples: list = []  # {"t0", "t", "name", "token"}: Redis answered between t0 and t
        # {"t0", "t", "name"}: every server asked about the name answered
        # between t0 and t, so a token not sampled then was not holding it.
        self.rounds: list = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "HolderMonitor":
        self._thread.start()
        return self

    def stop(self) -> list:
        self._done.set()
        if self._thread.ident is not None:
            self._thread.join()
        for m in self.masters:
            m.close()
        return self.samples

    def _run(self) -> None:
        while not self._done.wait(INTERVAL_S):
            try:
                ports = [port() for port in self.port_of]
            except (OSError, resp.RespError):
                continue  # nobody to ask where the master is right now
            for i, port in enumerate(ports):
                if port != self.masters[i].port:
                    self.masters[i].close()
                    self.masters[i] = resp.Connection(port, self.masters[i].timeout)
            for i, (name, key) in enumerate(self.keys):
                t0 = now_ns()
                seen, answered = [], True
                for redis in [self.masters[i]] if self.per_name else self.masters:
                    try:
                        seen += self._holders(redis, key)
                    except resp.RespError as e:
                        answered = False
                        self._follow(i, str(e))
                    except OSError:
                        answered = False
                        continue  # the server is down or stalled: a fault, not a finding
                t = now_ns()
                if answered:
                    self.rounds.append({"t0": t0, "t": t, "name": name})
                majority = 1 if self.per_name else len(self.masters) // 2 + 1
                tokens = [tok for tok in set(seen) if seen.count(tok) >= majority]
                self.samples += [{"t0": t0, "t": t, "name": name, "token": tok.decode()} for tok in tokens]

    def _follow(self, i: int, error: str) -> None:
        """A Cluster's MOVED: ask the node it names from the next sample on."""
        if self.per_name and error.startswith("MOVED "):
            port = int(error.rsplit(":", 1)[1])
            self.masters[i].close()
            self.masters[i] = resp.Connection(port, self.masters[i].timeout)
            self.port_of[i] = lambda port=port: port

    def _holders(self, redis, key: str) -> list:
        if self.layout in ("lock", "election"):
            hold = key if self.layout == "lock" else f"{key}:el"
            return [tok for tok in [hold_field(redis("GET", hold), "token")] if tok]
        seconds, micros = redis("TIME")
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        if self.layout == "semaphore":
            return redis("ZRANGEBYSCORE", f"{key}:sem:h", f"({now_ms}", "+inf")  # live ones only
        writer = hold_field(redis("GET", f"{key}:rw:w"), "token")
        readers = redis("ZRANGEBYSCORE", f"{key}:rw:r", f"({now_ms}", "+inf")
        return ([writer] if writer else []) + readers
