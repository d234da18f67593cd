"""The faults, injected from the parent on a seeded schedule, each logged with its time.

Kinds: ``client-kill`` (CLIENT KILL TYPE normal), ``pubsub-kill`` (TYPE
pubsub: the wake-up subscriptions), ``sigstop`` (a worker frozen for longer
than the longest ttl, then SIGCONT), ``server-restart`` (kill -9, then a new
server on the same port reading the append-only file), ``debug-sleep``
(DEBUG SLEEP: the server stalls), ``sigint`` (Ctrl-C to a sync worker that
is waiting in acquire). SIGSTOPs run on their own threads, so other faults
land while a worker is frozen.

With several masters (a quorum), each server fault hits one of them, and two
more kinds apply: ``master-stop`` (a master frozen past the longest ttl,
then SIGCONT) and ``restart-empty`` (kill -9, its data deleted, and a new
empty server on the same port once the longest ttl has passed: the delayed
restart Redlock asks for, so the holds it had have expired everywhere).

Against a Sentinel deployment (a master, a
replica, a Sentinel), ``failover`` (SENTINEL FAILOVER) and ``master-kill``
(kill -9 of the master, then, once the replica is promoted, the old master
restarted as its replica); each waits for the deployment to be ready first
(a replica in sync that the Sentinel counts), and other faults go to
whichever node is master.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field

from . import resp
from .events import now_ns

KINDS = (
    "client-kill", "pubsub-kill", "sigstop", "server-restart", "debug-sleep", "sigint", "master-stop",
    "restart-empty",
)
MASTER_ONLY = ("master-stop", "restart-empty")  # faults of a quorum's masters
# With a Sentinel deployment: SENTINEL FAILOVER, and the master killed (kill -9,
# promoted replica, the old master restarted as its replica).
SENTINEL_KINDS = ("failover", "master-kill")
FAILOVER_LIMIT_S = 30  # a failover, and the deployment ready for the next one
WINDOW = (0.05, 0.8)  # faults fall in this part of the run, so the workers can recover before it ends
DEBUG_SLEEP_S = 0.2
HIT_HOLDER_P = 0.8
SIGINT_WAIT_S = 2.0  # how long to look for a worker waiting in acquire
SIGINT_MIN_WAIT_NS = 20_000_000  # prefer a waiter this old: acquire checks for signals every 50 ms


@dataclass(frozen=True)
class Worker:
    index: int
    label: str
    pid: int
    sync: bool


def schedule(rng: random.Random, duration: float, counts: dict) -> list:
    """(offset in seconds, kind), sorted: `counts[kind]` faults of each kind, spread over the window."""
    lo, hi = WINDOW[0] * duration, WINDOW[1] * duration
    plan = [(rng.uniform(lo, hi), kind) for kind, n in counts.items() for _ in range(n)]
    return sorted(plan)


@dataclass
class Nemesis:
    servers: list  # RedisServers: one, or the masters of a quorum
    workers: list
    board: object  # a Board: who waits in acquire, who holds
    rng: random.Random
    stop_s: float  # how long a SIGSTOP lasts
    log: list = field(default_factory=list)
    _stopped: set = field(default_factory=set)
    _threads: list = field(default_factory=list)
    _down: set = field(default_factory=set)
    _lasting: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    deployment: object = None  # a SentinelDeployment, for the failover faults

    def run(self, plan: list, t0_ns: int) -> None:
        try:
            for offset, kind in plan:
                delay = t0_ns / 1e9 + offset - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # the schedule itself, not a synchronisation
                getattr(self, "_" + kind.replace("-", "_"))()
        finally:
            for t in self._threads:
                t.join()

    def resume_all(self) -> None:
        """SIGCONT to every worker still frozen (after an error in the run)."""
        with self._lock:
            for pid in self._stopped:
                os.kill(pid, signal.SIGCONT)

    def _record(self, kind: str, t: int, **fields) -> None:
        with self._lock:
            self.log.append({"fault": kind, "t": t, "t_end": now_ns(), **fields})

    def _server(self) -> tuple:
        """(index, server) the next server fault hits: never a master that a
        lasting fault holds down."""
        with self._lock:
            up = [i for i in range(len(self.servers)) if i not in self._down]
        i = self.rng.choice(up)
        return i, self.servers[i]

    def _redis(self, kind: str, *args) -> None:
        i, server = self._server()
        t = now_ns()
        try:
            reply = resp.command(server.port, *args)
            self._record(kind, t, master=i, reply=reply if isinstance(reply, (int, str)) else repr(reply))
        except (OSError, resp.RespError) as e:
            self._record(kind, t, master=i, skipped=f"{type(e).__name__}: {e}")

    def _client_kill(self) -> None:
        self._redis("client-kill", "CLIENT", "KILL", "TYPE", "normal")

    def _pubsub_kill(self) -> None:
        self._redis("pubsub-kill", "CLIENT", "KILL", "TYPE", "pubsub")

    def _debug_sleep(self) -> None:
        self._redis("debug-sleep", "DEBUG", "SLEEP", str(DEBUG_SLEEP_S))

    def _server_restart(self) -> None:
        i, server = self._server()
        t = now_ns()
        server.kill()
        down = now_ns()
        server.start()
        self._record("server-restart", t, master=i, t_down=down)

    def _master_stop(self) -> None:
        self._in_background("master-stop", self._stop_master, *self._server())

    def _stop_master(self, i: int, server) -> None:
        t = now_ns()
        os.kill(server.proc.pid, signal.SIGSTOP)
        time.sleep(self.stop_s * self.rng.uniform(1.0, 1.3))  # the fault's length, from the schedule
        os.kill(server.proc.pid, signal.SIGCONT)
        self._record("master-stop", t, master=i)

    def _restart_empty(self) -> None:
        self._in_background("restart-empty", self._empty_restart, *self._server())

    def _empty_restart(self, i: int, server) -> None:
        t = now_ns()
        server.kill()
        down = now_ns()
        data = server.extra[server.extra.index("--dir") + 1]
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        time.sleep(self.stop_s)  # Redlock's delayed restart: every hold it had has expired
        server.start()
        self._record("restart-empty", t, master=i, t_down=down)

    def _in_background(self, kind: str, fault, i: int, server) -> None:
        """A fault that lasts, on its own thread so others land meanwhile;
        one at a time (the next waits for the last to end), so that a
        majority of the masters stands."""
        for t in self._lasting:
            t.join()
        with self._lock:
            self._down.add(i)

        def run() -> None:
            try:
                fault(i, server)
            finally:
                with self._lock:
                    self._down.discard(i)

        thread = threading.Thread(target=run)
        thread.start()
        self._threads.append(thread)
        self._lasting.append(thread)

    def _failover(self) -> None:
        d = self.deployment
        d.wait_for(d.ready_for_failover, FAILOVER_LIMIT_S, "a replica ready for a failover")
        t = now_ns()
        old = d.sentinel_failover()
        d.wait_for(lambda: d.failover_named(old), FAILOVER_LIMIT_S, "the new master")
        named = now_ns()
        d.wait_for(lambda: d.failover_done(old), FAILOVER_LIMIT_S, "the failover's end")
        self._record("failover", t, old=old, new=d.master_port(), t_named=named)

    def _master_kill(self) -> None:
        d = self.deployment
        d.wait_for(d.ready_for_failover, FAILOVER_LIMIT_S, "a replica ready for a failover")
        t = now_ns()
        node = d.kill_master()
        down = now_ns()
        d.wait_for(lambda: d.failover_done(node.port), FAILOVER_LIMIT_S, "the replica promoted")
        named = now_ns()
        d.restart_as_replica(node)
        self._record("master-kill", t, old=node.port, new=d.master_port(), t_down=down, t_named=named)

    def _sigstop(self) -> None:
        with self._lock:
            candidates = [w for w in self.workers if w.pid not in self._stopped]
            holders = [w for w in candidates if self.board.holding[w.index] > 0]
            if not candidates:
                return
            # Mostly a holder, whose hold then expires and passes on while it is frozen.
            worker = self.rng.choice(holders if holders and self.rng.random() < HIT_HOLDER_P else candidates)
            self._stopped.add(worker.pid)
        thread = threading.Thread(target=self._freeze, args=(worker, self.stop_s * self.rng.uniform(1.0, 1.3)))
        thread.start()
        self._threads.append(thread)

    def _freeze(self, worker: Worker, seconds: float) -> None:
        t = now_ns()
        os.kill(worker.pid, signal.SIGSTOP)
        # Await the stop itself (WNOWAIT: the exit status, if any, stays for multiprocessing).
        info = os.waitid(os.P_PID, worker.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
        if info.si_code != os.CLD_STOPPED:
            with self._lock:
                self._stopped.discard(worker.pid)
            self._record("sigstop", t, pid=worker.pid, w=worker.label, skipped="worker had exited")
            return
        stopped = now_ns()
        time.sleep(seconds)  # the fault's length, from the schedule
        with self._lock:
            os.kill(worker.pid, signal.SIGCONT)
            self._stopped.discard(worker.pid)
        self._record("sigstop", t, pid=worker.pid, w=worker.label, t_stopped=stopped)

    def _sigint(self) -> None:
        """Ctrl-C to the sync worker waiting longest in acquire, preferably one that
        has waited SIGINT_MIN_WAIT_NS; after SIGINT_WAIT_S any waiter will do."""
        any_waiter = time.monotonic() + SIGINT_WAIT_S
        give_up = any_waiter + SIGINT_WAIT_S
        while time.monotonic() < give_up:
            with self._lock:
                waiters = [
                    (self.board.waiting[w.index], w) for w in self.workers
                    if w.sync and w.pid not in self._stopped and self.board.waiting[w.index]
                ]
            since, worker = min(waiters, key=lambda x: x[0], default=(0, None))
            if worker and (now_ns() - since >= SIGINT_MIN_WAIT_NS or time.monotonic() >= any_waiter):
                t = now_ns()
                os.kill(worker.pid, signal.SIGINT)
                self._record("sigint", t, pid=worker.pid, w=worker.label, waited_ms=(t - since) / 1e6)
                return
            time.sleep(0.002)  # shared memory has no event to await: poll it
        self._record("sigint", now_ns(), skipped="no worker was waiting in acquire")
