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

``waiter-master-stop`` (quorum) aims at the moment a worker waits in
acquire: it waits for one, then freezes a master past the longest ttl (the
waiter must go on with the majority left). Against a Sentinel deployment of
three Sentinels, ``sentinel-stop`` freezes the Sentinel that clients ask
first (not the one the harness asks) and cuts the master's client connections, so clients reconnect
through the Sentinels while that one does not answer; SIGCONT after
SENTINEL_STOP_S. Against a Redis Cluster with a replica per master,
``cluster-failover`` (CLUSTER FAILOVER on a master's replica) and
``cluster-master-kill`` (kill -9 of a master, its replica promoted, the old
master restarted as a replica), each once every node agrees on the layout;
``client-kill`` goes to the master serving one of the names.

With the workers and servers each in a test host of their own
(tests/support/netns.py, a run with ``partitions``), links are cut and slowed in
the router between them, one way or both, beside every other fault:
``partition`` (one or two workers cut off both ways from the server they
use: the master of a name on Sentinel or a Cluster; on a quorum from one
master, a minority, or from a majority), ``cut-requests`` (what one
worker sends to it dropped), ``cut-replies`` (what it sends back dropped),
``latency`` (one or two workers' links slowed, 20-120 ms each way with a
jitter of half that), each for a drawn length (LINK_CUT_S, LATENCY_S), then
healed. Against a Sentinel deployment, ``split-brain``: the master, one
Sentinel and maybe some workers cut off from the replica, the other
Sentinels and the other workers, until the majority has promoted the
replica and a little longer; then healed, and the old master demoted.
Against a Redis Cluster, ``master-isolated``: a master (and maybe a
worker) cut off from its replica, the other masters and the other
workers, until its replica is promoted; then healed, and the old master
rejoins as a replica. Each is logged with the workers and servers it cut.

Each fault draws its own choices (target, length) from a generator seeded
with the run's nemesis seed and the fault's place in the plan, so a seed
gives the same schedule and the same draws whatever the workers do.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field

from support.redis_sentinel import SERVICE

from . import resp
from .events import now_ns

KINDS = (
    "client-kill",
    "pubsub-kill",
    "sigstop",
    "server-restart",
    "debug-sleep",
    "sigint",
    "master-stop",
    "restart-empty",
    "waiter-master-stop",
)
MASTER_ONLY = ("master-stop", "restart-empty", "waiter-master-stop")  # faults of a quorum's masters
# What applies to a deployment with failovers as well as to single servers.
COMMON_KINDS = ("client-kill", "sigstop", "sigint")
# With a Sentinel deployment: SENTINEL FAILOVER, the master killed (kill -9,
# promoted replica, the old master restarted as its replica), a Sentinel frozen.
SENTINEL_KINDS = ("failover", "master-kill", "sentinel-stop")
# With a Redis Cluster: CLUSTER FAILOVER, and a master killed (its replica promoted).
CLUSTER_KINDS = ("cluster-failover", "cluster-master-kill")
# With workers and servers in test hosts: links cut or slowed, on every topology...
LINK_KINDS = ("partition", "cut-requests", "cut-replies", "latency")
# ... and those that make a failover by a partition.
SPLIT_KINDS = {"sentinel": ("split-brain",), "cluster": ("master-isolated",)}
LINK_CUT_S = (0.3, 2.5)  # a cut's length: from under the shortest ttl to over two of the longest
LATENCY_S = (1.0, 4.0)
LATENCY_MS = (20, 120)  # each way, with a jitter of half of it
SPLIT_EXTRA_S = (0.5, 2.0)  # a split brain lasts this much longer than the promotion it brings
SENTINEL_STOP_S = 3.0  # longer than the workers' connect timeout (2 s)
FIRST_SENTINEL = 1  # the Sentinel first in the workers' URL, which sentinel-stop freezes
WAITER_WAIT_S = 4.0  # how long a waiter-master-stop looks for a worker waiting in acquire
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


def allowed_kinds(topology: str, partitions: bool = False) -> set:
    """The fault kinds of a topology (scenarios.topology), with the network
    faults when its processes run in test hosts."""
    kinds = set(COMMON_KINDS) | set({"sentinel": SENTINEL_KINDS, "cluster": CLUSTER_KINDS}.get(topology, KINDS))
    if partitions:
        kinds |= set(LINK_KINDS) | set(SPLIT_KINDS.get(topology, ()))
    return kinds


@dataclass
class Nemesis:
    servers: list  # each with a .port: one server, a quorum's masters, the master serving each name
    workers: list
    board: object  # a Board: who waits in acquire, who holds
    seed: int  # each fault's draws come from this and its place in the plan
    stop_s: float  # how long a SIGSTOP lasts
    rng: random.Random = field(default_factory=random.Random)
    log: list = field(default_factory=list)
    _stopped: set = field(default_factory=set)
    _threads: list = field(default_factory=list)
    _down: set = field(default_factory=set)
    _lasting: list = field(default_factory=list)
    _slowed: set = field(default_factory=set)  # workers whose link a latency fault slows now
    _failed: list = field(default_factory=list)  # what faults on their own threads raised
    _tilt_seen: list = field(default_factory=list)  # (when, [Sentinels in TILT mode]) seen while waiting
    # One failover at a time (a partition's included, and a frozen Sentinel):
    # two at once can leave no majority to elect a leader or promote a replica.
    _failing_over: threading.Lock = field(default_factory=threading.Lock)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    deployment: object = None  # a SentinelDeployment or a RedisCluster, for the failover faults
    net: object = None  # the test network (tests/support/netns.py) of a run with partitions
    hosts: dict = field(default_factory=dict)  # worker index -> its Host, in a run with partitions
    names: tuple = ()  # the names the workers take (a Cluster's faults aim at the master of one)
    prefix: str = ""
    behind_s: float = 0.0  # how far behind its plan a fault was started at most

    def run(self, plan: list, t0_ns: int, until_ns: int | None = None) -> None:
        """Each fault of `plan` at its offset from `t0_ns`, or as soon after as
        the faults before it are done (on a loaded machine a restart or a
        wait for a waiter runs long); one whose turn comes at or after
        `until_ns`, when the workers stop, is recorded as skipped."""
        try:
            for n, (offset, kind) in enumerate(plan):
                delay = t0_ns / 1e9 + offset - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # the schedule itself, not a synchronisation
                self.behind_s = max(self.behind_s, -delay)
                if until_ns is not None and now_ns() >= until_ns:
                    self._record(kind, now_ns(), skipped=f"the workers had stopped ({-delay:.1f} s behind the plan)")
                    continue
                self.rng = random.Random(f"{self.seed}:{n}")
                fault = getattr(self, "_" + kind.replace("-", "_"))
                if kind in SENTINEL_KINDS + CLUSTER_KINDS:
                    with self._failing_over:  # not while a partition's failover runs
                        fault()
                else:
                    fault()
        finally:
            for t in self._threads:
                t.join()
        if self._failed:
            raise self._failed[0]

    def _thread(self, fault, *args, **kwargs) -> threading.Thread:
        """A fault on a thread of its own, started; what it raises fails the run
        (at its end) instead of vanishing with the thread."""

        def run() -> None:
            try:
                fault(*args, **kwargs)
            except BaseException as e:
                with self._lock:
                    self._failed.append(e)
                raise

        thread = threading.Thread(target=run)
        thread.start()
        self._threads.append(thread)
        return thread

    def resume_all(self) -> None:
        """SIGCONT to every worker still frozen, and every link healed (after an error in the run)."""
        with self._lock:
            for pid in self._stopped:
                os.kill(pid, signal.SIGCONT)
        if self.net is not None:
            self.net.heal()
            for host in self.hosts.values():
                if host.ip in self.net.delays:
                    self.net.delay(host)

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
        self._end_lasting()
        self._in_background(self._stop_master, *self._server(), self.stop_s * self.rng.uniform(1.0, 1.3))

    def _waiter_master_stop(self) -> None:
        """A master frozen past the longest ttl just as a worker waits in acquire."""
        self._end_lasting()
        waiting = self._await_waiters(0, WAITER_WAIT_S)
        seconds = self.stop_s * self.rng.uniform(1.0, 1.3)
        labels = [w.label for _, w in waiting]
        self._in_background(self._stop_master, *self._server(), seconds, "waiter-master-stop", waiting=labels)

    def _stop_master(self, i: int, server, seconds: float, kind: str = "master-stop", **fields) -> None:
        t = now_ns()
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)  # the fault's length, from the schedule
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        self._record(kind, t, master=i, **fields)

    def _restart_empty(self) -> None:
        self._end_lasting()
        self._in_background(self._empty_restart, *self._server())

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

    def _end_lasting(self) -> None:
        """Lasting faults go one at a time (the next waits for the last to
        end), so that a majority of the masters stands."""
        for t in self._lasting:
            t.join()

    def _in_background(self, fault, i: int, server, *args, **fields) -> None:
        """A fault that lasts, on its own thread so others land meanwhile."""
        with self._lock:
            self._down.add(i)

        def run() -> None:
            try:
                fault(i, server, *args, **fields)
            finally:
                with self._lock:
                    self._down.discard(i)

        self._lasting.append(self._thread(run))

    def _sentinel_ready(self) -> bool:
        """A replica ready for a failover, and every Sentinel knowing the others
        (a killed master's failover needs a majority of them to elect a leader)."""
        d = self.deployment
        others = len(d.sentinels) - 1
        return d.ready_for_failover() and all(len(s("SENTINEL", "SENTINELS", SERVICE)) == others for s in d.sentinels)

    def _failover(self) -> None:
        d = self.deployment
        self._sentinel_wait(self._sentinel_ready, "a replica ready for a failover")
        t = now_ns()
        old = d.sentinel_failover()
        asked = 1

        def named_or_asked_again() -> bool:
            """The new master named; or, the failover aborted (the master
            unchanged), asked for again once a replica is ready. Seen in a
            long run: a split brain's old master, demoted by the Sentinels
            11 s after the heal, is "ready" (in sync, counted) 0.1 s later;
            SENTINEL FAILOVER picks it while the Sentinel's own link to it is
            still unsettled (it marks it down 0.8 s later), the promotion is
            never seen, and the Sentinel aborts after its failover-timeout
            (-failover-abort-slave-timeout): waiting on for a new master
            that will never come only times out."""
            nonlocal asked
            if d.failover_named(old):
                return True
            if not d.failing_over() and d.master_port() == old:
                self._sentinel_wait(self._sentinel_ready, "a replica ready for a failover")
                d.sentinel_failover()
                asked += 1
            return False

        self._sentinel_wait(named_or_asked_again, "the new master")
        named = now_ns()
        self._sentinel_wait(lambda: d.failover_done(old), "the failover's end")
        self._record("failover", t, old=old, new=d.master_port(), t_named=named, asked=asked, **self._tilts(t))

    def _sentinel_wait(self, predicate, what: str) -> None:
        """Polls `predicate` for FAILOVER_LIMIT_S, not counting time any
        Sentinel spends in TILT mode. A Sentinel whose timer runs 2 s late
        (it was starved of CPU: the machine is loaded) enters TILT and for
        its tilt-period (7.5 s with the runs' down-after of 1.5 s) acts on
        nothing (it starts, carries on and ends no failover, and sees no
        promotion); a failover it was carrying on is then past its
        failover-timeout and aborted. Neither is a fault the run injects, and
        a fixed limit would turn a busy machine into a failed run."""
        d = self.deployment
        d.wait_for(
            predicate,
            FAILOVER_LIMIT_S,
            what,
            paused=self._tilted,
            detail=lambda: f" (not counting TILT); the Sentinels' logs end:\n{d.log_tails()}",
        )

    def _tilted(self) -> bool:
        """Some Sentinel is in TILT mode now (noted with the time, for the fault log)."""
        d = self.deployment
        tilted = []
        for i in range(len(d.sentinels)):
            try:
                if d.in_tilt(i):
                    tilted.append(i)
            except (OSError, RuntimeError):
                pass
        if tilted:
            with self._lock:
                self._tilt_seen.append((now_ns(), tilted))
        return bool(tilted)

    def _tilts(self, since: int) -> dict:
        """The Sentinels seen in TILT mode since `since`, for a fault's record."""
        with self._lock:
            seen = sorted({i for t, ii in self._tilt_seen if t >= since for i in ii})
        return {"tilted": seen} if seen else {}

    def _master_kill(self) -> None:
        d = self.deployment
        self._sentinel_wait(self._sentinel_ready, "a replica ready for a failover")
        t = now_ns()
        node = d.kill_master()
        down = now_ns()
        self._sentinel_wait(lambda: d.failover_done(node.port), "the replica promoted")
        named = now_ns()
        d.restart_as_replica(node)
        self._record("master-kill", t, old=node.port, new=d.master_port(), t_down=down, t_named=named, **self._tilts(t))

    def _sentinel_stop(self) -> None:
        """The Sentinel clients ask first (FIRST_SENTINEL) frozen, and the
        master's client connections cut meanwhile: every client reconnects
        through the Sentinels while that one does not answer. The harness asks
        Sentinel 0, which a stop would put in TILT mode (no failover for its tilt-period)."""
        d = self.deployment
        node = d.sentinels[FIRST_SENTINEL]
        t = now_ns()
        os.kill(node.proc.pid, signal.SIGSTOP)
        try:
            killed = resp.command(d.master_port(), "CLIENT", "KILL", "TYPE", "normal")
            time.sleep(SENTINEL_STOP_S)  # the fault's length
        finally:
            os.kill(node.proc.pid, signal.SIGCONT)
        self._record("sentinel-stop", t, sentinel=node.port, killed=killed)

    def _cluster_failover(self) -> None:
        c = self.deployment
        layout = c.await_topology(FAILOVER_LIMIT_S)
        old = self.rng.choice(sorted(layout))
        new = layout[old][0]
        t = now_ns()
        c.raw(new)("CLUSTER", "FAILOVER")
        self._cluster_promoted("cluster-failover", t, old, new)

    def _cluster_master_kill(self) -> None:
        c = self.deployment
        layout = c.await_topology(FAILOVER_LIMIT_S)
        old = self.rng.choice(sorted(layout))
        t = now_ns()
        c.kill(old)
        self._cluster_promoted("cluster-master-kill", t, old, layout[old][0], t_down=now_ns(), restart=True)

    def _cluster_promoted(self, kind: str, t: int, old: int, new: int, restart: bool = False, **fields) -> None:
        """Waits for `new` to serve `old`'s slots (and a killed `old` back as a
        replica), then for every node to agree on the layout."""
        c = self.deployment
        c._await(lambda: new in c.masters() and old not in c.masters(), FAILOVER_LIMIT_S, f"{new} promoted")
        named = now_ns()
        if restart:
            c.restart(old)
        c.await_topology(FAILOVER_LIMIT_S)
        self._record(kind, t, old=old, new=new, t_named=named, **fields)

    def _sigstop(self) -> None:
        with self._lock:
            candidates = [w for w in self.workers if w.pid not in self._stopped]
            holders = [w for w in candidates if self.board.holding[w.index] > 0]
            if not candidates:
                return
            # Mostly a holder, whose hold then expires and passes on while it is frozen.
            worker = self.rng.choice(holders if holders and self.rng.random() < HIT_HOLDER_P else candidates)
            self._stopped.add(worker.pid)
        self._thread(self._freeze, worker, self.stop_s * self.rng.uniform(1.0, 1.3))

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

    def _waiters(self) -> list:
        """(since, worker) of the sync workers waiting in acquire now, not frozen."""
        with self._lock:
            return [
                (self.board.waiting[w.index], w)
                for w in self.workers
                if w.sync and w.pid not in self._stopped and self.board.waiting[w.index]
            ]

    def _await_waiters(self, min_ns: int, limit_s: float) -> list:
        """The waiters, as soon as one has waited `min_ns`; after `limit_s`, whoever waits (maybe nobody)."""
        give_up = time.monotonic() + limit_s
        while True:
            waiters = self._waiters()
            if any(now_ns() - since >= min_ns for since, _ in waiters) or time.monotonic() >= give_up:
                return waiters
            time.sleep(0.002)  # shared memory has no event to await: poll it

    def _sigint(self) -> None:
        """Ctrl-C to the sync worker waiting longest in acquire, preferably one that
        has waited SIGINT_MIN_WAIT_NS; after SIGINT_WAIT_S any waiter will do."""
        waiters = self._await_waiters(SIGINT_MIN_WAIT_NS, SIGINT_WAIT_S) or self._await_waiters(0, SIGINT_WAIT_S)
        if not waiters:
            self._record("sigint", now_ns(), skipped="no worker was waiting in acquire")
            return
        since, worker = min(waiters, key=lambda x: x[0])
        t = now_ns()
        os.kill(worker.pid, signal.SIGINT)
        self._record("sigint", t, pid=worker.pid, w=worker.label, waited_ms=(t - since) / 1e6)

    # -- the network (a run with partitions) -----------------------------------------

    def _master_hosts(self) -> list:
        """The hosts of the servers a worker's steps go to now: every master
        of a quorum (or the one server), the master a Sentinel names, or on
        a Cluster the master serving one of the names, drawn."""
        d = self.deployment
        if d is None:
            return [s.where for s in self.servers]
        if hasattr(d, "owner"):
            port = d.owner(f"{self.prefix}{{{self.rng.choice(self.names)}}}")
            return [d.host_of(port)]
        return [d.master.where]

    def _targets(self) -> list:
        """The servers a link fault cuts a worker from: on a quorum one
        master, or a minority, or a majority, drawn; else the one it uses."""
        masters = self._master_hosts()
        if len(masters) > 1:
            return self.rng.sample(masters, self.rng.randint(1, len(masters) // 2 + 1))
        return masters

    def _workers(self, most: int, among: list | None = None, rng: random.Random | None = None) -> list:
        """One to `most` workers (of `among`, default all), drawn, as (index,
        Host): mostly among those holding now, whose holds the fault then hits."""
        rng = rng or self.rng
        among = sorted(self.hosts) if among is None else among
        holders = [i for i in among if self.board.holding[i] > 0]
        if holders and rng.random() < HIT_HOLDER_P:
            among = holders
        if not among:
            return []
        picked = rng.sample(among, rng.randint(1, min(most, len(among))))
        return [(i, self.hosts[i]) for i in picked]

    def _labels(self, picked: list) -> list:
        return [w.label for w in self.workers if w.index in {i for i, _ in picked}]

    def _link_fault(self, kind: str) -> None:
        picked = self._workers(2 if kind == "partition" else 1)
        targets = self._targets()
        seconds = self.rng.uniform(*LINK_CUT_S)
        workers = [h for _, h in picked]
        cuts = []
        for w in workers:
            for m in targets:
                if kind in ("partition", "cut-requests"):
                    cuts.append((w, m))
                if kind in ("partition", "cut-replies"):
                    cuts.append((m, w))
        # Cut from a majority of a quorum's masters (or from its one master), a holder loses its hold.
        cuts_off = len(targets) > len(self._master_hosts()) // 2
        self._in_flight(
            self._cut_for,
            kind,
            cuts,
            seconds,
            workers=self._labels(picked),
            servers=[m.role for m in targets],
            cuts_off=cuts_off,
        )

    def _partition(self) -> None:
        self._link_fault("partition")

    def _cut_requests(self) -> None:
        self._link_fault("cut-requests")

    def _cut_replies(self) -> None:
        self._link_fault("cut-replies")

    def _cut_for(self, kind: str, cuts: list, seconds: float, **fields) -> None:
        t = now_ns()
        pairs = [p for a, b in cuts for p in self.net.cut(a, b, both=False)]
        try:
            time.sleep(seconds)  # the fault's length, from the schedule
        finally:
            self.net.restore(pairs)
        self._record(kind, t, seconds=round(seconds, 3), **fields)

    def _latency(self) -> None:
        if not self.net.can_delay:
            self._record("latency", now_ns(), skipped="no TUN device for added latency")
            return
        with self._lock:
            picked = self._workers(2, [i for i in sorted(self.hosts) if i not in self._slowed])
            self._slowed.update(i for i, _ in picked)  # one latency fault at a time on a link
        if not picked:
            self._record("latency", now_ns(), skipped="every worker's link is slowed already")
            return
        seconds = self.rng.uniform(*LATENCY_S)
        base = self.rng.uniform(*LATENCY_MS) / 1000
        self._in_flight(self._slow_for, picked, base, seconds)

    def _slow_for(self, picked: list, base: float, seconds: float) -> None:
        t = now_ns()
        try:
            for _, h in picked:
                self.net.delay(h, out=(base, base / 2), into=(base, base / 2))
            time.sleep(seconds)  # the fault's length, from the schedule
        finally:
            for _, h in picked:
                self.net.delay(h)
            with self._lock:
                self._slowed.difference_update(i for i, _ in picked)
        self._record(
            "latency", t, seconds=round(seconds, 3), each_way_ms=round(base * 1000, 1), workers=self._labels(picked)
        )

    def _in_flight(self, fault, *args, **fields) -> None:
        """A network fault on its own thread, so others land meanwhile."""
        self._thread(fault, *args, **fields)

    def _split_brain(self) -> None:
        self._in_flight(self._one_split, self._split_brain_now, self.rng)

    def _master_isolated(self) -> None:
        self._in_flight(self._one_split, self._master_isolated_now, self.rng)

    def _one_split(self, split, rng: random.Random) -> None:
        """A failover by a partition, on its own thread (it lasts ~10 s: the
        schedule goes on meanwhile), one at a time; its draws from `rng`,
        its own generator."""
        with self._failing_over:
            split(rng)

    def _split_brain_now(self, rng: random.Random) -> None:
        """The master, the last Sentinel and maybe some workers, cut off from the rest."""
        d = self.deployment
        self._sentinel_wait(self._sentinel_ready, "a replica ready for a failover")
        old = d.master
        picked = self._workers(2, rng=rng) if rng.random() < 0.5 else []
        minority = [old.where, d.sentinels[-1].where] + [h for _, h in picked]
        extra = rng.uniform(*SPLIT_EXTRA_S)
        t = now_ns()
        pairs = self.net.partition(minority)
        try:
            # Sentinel 0 is on the majority's side: it names the promoted replica.
            self._sentinel_wait(lambda: d.master_port() != old.port, "the majority to promote the replica")
            named = now_ns()
            time.sleep(extra)  # the split's length past the promotion, from the schedule
        finally:
            self.net.restore(pairs)
        healed = now_ns()
        self._sentinel_wait(lambda: d.failover_done(old.port), "the Sentinels to agree")
        self._sentinel_wait(self._sentinel_ready, "the old master back as a replica")
        self._record(
            "split-brain",
            t,
            old=old.port,
            new=d.master_port(),
            t_named=named,
            t_healed=healed,
            workers=self._labels(picked),
            **self._tilts(t),
        )

    def _master_isolated_now(self, rng: random.Random) -> None:
        """A master (and maybe a worker) cut off from every other node and worker."""
        c = self.deployment
        layout = c.await_topology(FAILOVER_LIMIT_S)
        old = rng.choice(sorted(layout))
        picked = self._workers(1, rng=rng) if rng.random() < 0.5 else []
        majority = next(p for p in sorted(layout) if p != old)  # a master on the other side, to ask
        extra = rng.uniform(*SPLIT_EXTRA_S)
        t = now_ns()
        pairs = self.net.partition([c.host_of(old)] + [h for _, h in picked])
        try:
            c._await(lambda: old not in c.masters_seen_by(majority), FAILOVER_LIMIT_S, f"{old}'s replica promoted")
            named = now_ns()
            time.sleep(extra)  # the split's length past the promotion, from the schedule
        finally:
            self.net.restore(pairs)
        healed = now_ns()
        c.await_topology(FAILOVER_LIMIT_S)
        self._record(
            "master-isolated",
            t,
            old=old,
            new=layout[old][0],
            t_named=named,
            t_healed=healed,
            workers=self._labels(picked),
        )
