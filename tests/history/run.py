"""One run end to end: a private redis-server, the workers, the nemesis, the checks."""

from __future__ import annotations

import json
import multiprocessing
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.chaos_report import record
from ferrolock.testing import RedisServer

from . import checker, resp
from .board import Board
from .clock import skewed_env
from .events import now_ns, read_events
from .monitor import HolderMonitor
from .nemesis import FIRST_SENTINEL, MASTER_ONLY, SPLIT_KINDS, WINDOW, Nemesis, Worker, allowed_kinds, schedule
from .scenarios import MASTERS, NAMES, SKEWED_SCENARIOS, SKEWS, fair, layout, topology
from .storage import records
from .summary import summarize
from .workers import WorkerSpec, async_worker, sync_worker

# Acknowledged writes must survive kill -9: losing holds to a restart without
# persistence is a documented limit, not what this run checks.
PERSIST = ("--appendonly", "yes", "--appendfsync", "always")
SHM = Path("/dev/shm")  # the append-only file on tmpfs: fsync costs nothing, kill -9 loses nothing
# Mean seconds between two faults of a kind; a run gets at least one of each.
FAULT_PERIOD_S = {
    "client-kill": 4,
    "pubsub-kill": 6,
    "sigstop": 8,
    "server-restart": 10,
    "debug-sleep": 6,
    "sigint": 2,
    "master-stop": 5,
    "restart-empty": 5,
    "waiter-master-stop": 5,
}
# Against a Sentinel deployment: failovers (each waits for the deployment to be
# ready, about 10 s after a SENTINEL FAILOVER), a Sentinel frozen, and the faults aimed at the master.
SENTINEL_FAULT_PERIOD_S = {
    "failover": 16,
    "master-kill": 16,
    "sentinel-stop": 12,
    "client-kill": 6,
    "sigstop": 10,
    "sigint": 3,
}
# Against a Redis Cluster: failovers (each waits for every node to agree on the layout).
CLUSTER_FAULT_PERIOD_S = {
    "cluster-failover": 12,
    "cluster-master-kill": 12,
    "client-kill": 6,
    "sigstop": 10,
    "sigint": 3,
}
# With partitions, besides: links cut or slowed between workers and servers,
# and a failover by a partition (each waits for the deployment to settle after).
LINK_FAULT_PERIOD_S = {"partition": 3, "cut-requests": 5, "cut-replies": 5, "latency": 6}
SPLIT_FAULT_PERIOD_S = {"split-brain": 20, "master-isolated": 16}
PATIENCE_NS = 2_000_000_000  # a fair waiter's patience: its ttl, at most 2 s (src/primitive/mod.rs)
EXIT_GRACE_S = 20  # a worker's last attempt: acquire timeout, a long hold, the on_lost wait
# How far past the run's duration the workers go on while the nemesis has
# faults of its plan left: on a loaded machine a fault that waits (a server's
# restart, a waiter for Ctrl-C, a failover) puts the rest of the plan behind.
# Every fault is then injected into running workers, whatever the load; one
# still left after this many seconds is recorded as skipped, and the run fails.
NEMESIS_LATE_S = 30  # within the tests' 120 s: setup, the run, the workers' exit, the checks
SENTINELS = 3  # sentinel-stop freezes one; a failover needs a majority of them


def default_faults(duration: float, scenario: str = "lock", partitions: bool = False, latency: bool = True) -> dict:
    """kind -> how many, for a run of `duration` s: each kind at least once.
    With `partitions`, the network's faults too (`latency` only where the
    machine can add it)."""
    where = topology(scenario)
    periods = {"sentinel": SENTINEL_FAULT_PERIOD_S, "cluster": CLUSTER_FAULT_PERIOD_S}.get(where)
    if periods is None:
        quorum = MASTERS.get(scenario, 1) > 1
        periods = {k: p for k, p in FAULT_PERIOD_S.items() if quorum or k not in MASTER_ONLY}
    if partitions:
        periods = {**periods, **{k: p for k, p in LINK_FAULT_PERIOD_S.items() if latency or k != "latency"}}
        periods.update({k: SPLIT_FAULT_PERIOD_S[k] for k in SPLIT_KINDS.get(where, ())})
    return {k: max(1, round(duration / p)) for k, p in periods.items()}


class Master:
    """The current master of a Sentinel deployment, where the nemesis's
    connection faults and the final scan go."""

    def __init__(self, deployment):
        self.deployment = deployment

    @property
    def port(self) -> int:
        return self.deployment.master_port()


class Serving:
    """The master of a Redis Cluster serving one name's slot now."""

    def __init__(self, cluster, key: str):
        self.cluster, self.key = cluster, key

    @property
    def port(self) -> int:
        return self.cluster.owner(self.key)


@dataclass
class RunConfig:
    scenario: str
    duration: float = 10.0
    seed: int = 1
    sync_workers: int = 3
    async_workers: int = 2
    async_tasks: int = 2
    ttl: tuple = (0.5, 1.0)
    long_every_s: tuple = (1.0, 3.0)  # worker 0's long holds
    faults: dict = field(default_factory=dict)  # kind -> count; empty: default_faults(duration)
    slack_s: float = 0.1
    workdir: str | None = None
    record: bool = True
    # Each worker under its own key prefix, so nothing excludes anything: a
    # broken lock, to show that the checker finds what it is looking for.
    isolate: bool = False
    # Client(replicas=...) for the sentinel scenarios (0: replication unacknowledged).
    replicas: int = 0
    # The run goes on past its duration until the workers confirmed this many
    # holds valid (a loaded machine makes fewer in the time), within NEMESIS_LATE_S.
    min_holds: int = 0
    # Worker index -> libfaketime offset of its wall clock; None: SKEWS in the skewed scenarios.
    skews: dict | None = None
    # Every worker and server in a test host of its own (tests/support/netns.py), and
    # the nemesis cutting and slowing the links between them too.
    partitions: bool = False


def planned_faults(cfg: RunConfig) -> dict:
    if cfg.faults:
        return cfg.faults
    if not cfg.partitions:
        return default_faults(cfg.duration, cfg.scenario)
    from support import netns

    return default_faults(cfg.duration, cfg.scenario, partitions=True, latency=netns.tun_unavailable() is None)


def fault_plan(cfg: RunConfig) -> tuple:
    """(nemesis seed, [(offset s, kind)]): from the seed alone, whatever the run does."""
    faults = planned_faults(cfg)
    kinds = allowed_kinds(topology(cfg.scenario), cfg.partitions)
    assert set(faults) <= kinds, f"unknown fault kinds for {cfg.scenario}: {set(faults) - kinds}"
    seed = random.Random(f"nemesis:{cfg.seed}").randrange(2**32)
    return seed, schedule(random.Random(seed), cfg.duration, faults)


def run(cfg: RunConfig) -> dict:
    masters = MASTERS.get(cfg.scenario, 1)
    faults = planned_faults(cfg)
    where = topology(cfg.scenario)
    plan = fault_plan(cfg)
    rng = random.Random(cfg.seed)
    workdir = Path(cfg.workdir or tempfile.mkdtemp(prefix="ferrolock-history-"))
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = f"history:{cfg.scenario}:{cfg.seed}:"
    aof_dirs = [
        tempfile.mkdtemp(prefix="ferrolock-history-aof-", dir=SHM if SHM.is_dir() else None) for _ in range(masters)
    ]
    deployment, servers, net, routed = None, [], None, {}
    storage = RedisServer(unix_socket=True).start()  # where the fenced writes go
    try:
        if cfg.partitions:
            from support import netns

            net = netns.Net(seed=cfg.seed)
        deployment, servers, url = _deploy(cfg, net, prefix, aof_dirs)
        routed = _routes(deployment, servers) if net else {}
        resp.route(routed)
        specs = _specs(cfg, url, prefix, workdir, rng, servers[0].port, net, routed, storage.socket)
        hosts = {s.index: net.by_role(f"worker-{s.index}") for s in specs} if net else {}
        events_at, wall, exits, fault_log, samples, rounds, t0, late = _execute(
            cfg,
            specs,
            servers,
            prefix,
            plan,
            deployment,
            net=net,
            hosts=hosts,
        )
        keys = _settle([s.port for s in servers], prefix, cfg.ttl[1] + cfg.slack_s + 2.0)
        written = records(storage.socket, prefix, NAMES[cfg.scenario])
    finally:
        resp.forget(routed)
        for s in [deployment] if deployment else servers:
            s.close()
        storage.close()
        if net is not None:
            net.close()
        for d in aof_dirs:
            shutil.rmtree(d, ignore_errors=True)
    for name, rows in (("nemesis", fault_log), ("holders", samples), ("rounds", rounds)):
        (workdir / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    events, torn = read_events(events_at)
    max_ttl_ns = int(cfg.ttl[1] * 1e9)
    anomalies = checker.check(
        events,
        fault_log,
        keys,
        samples,
        int(cfg.slack_s * 1e9),
        max_ttl_ns,
        t0,
        written,
        handover_ns=2 * min(max_ttl_ns, PATIENCE_NS) if fair(cfg.scenario) else 0,
        rounds=rounds,
    )
    # Without replica acknowledgement a failover may lose a hold: allowed only
    # inside its window (see checker.failover_overlaps).
    allowed = []
    if where != "servers" and not cfg.replicas:
        for kind in ("overlap", "fence-order"):
            if kind in anomalies:
                ok, rest = checker.failover_overlaps(
                    anomalies.pop(kind), fault_log, max_ttl_ns, int(cfg.slack_s * 1e9), t0
                )
                allowed += ok
                if rest:
                    anomalies[kind] = rest
    # With replica acknowledgement, a grant the replicas did not acknowledge is
    # undone on the connection the WAITs in flight hold (docs/reliability.md,
    # "A WAIT holds its connection"): its hold may stay past the stray check's
    # round trip, never past the longest ttl.
    if cfg.replicas and "stray-hold" in anomalies:
        waited = [a for a in anomalies["stray-hold"] if a["alive_ms"] <= cfg.ttl[1] * 1000]
        allowed += [{**a, "type": "stray-behind-wait"} for a in waited]
        rest = [a for a in anomalies.pop("stray-hold") if a not in waited]
        if rest:
            anomalies["stray-hold"] = rest
    crashes = {e["w"]: e["error"] for e in events if e["ev"] == "crash"}
    failed = [
        {"type": "worker-failed", "w": s.label, "exitcode": c, "error": crashes.get(s.label)}
        for s, c in zip(specs, exits)
        if c != 0
    ]
    if failed:
        anomalies["worker-failed"] = failed
    summary = summarize(
        scenario=cfg.scenario,
        seed=cfg.seed,
        duration=cfg.duration,
        wall_s=wall,
        events=events,
        torn=torn,
        faults=fault_log,
        anomalies=anomalies,
        keys=keys,
        exits=exits,
        samples=samples,
        t0=t0,
    )
    summary["faults_scheduled"] = faults
    # How long the workers ran (past the duration when the nemesis ran late), and how late it ran.
    summary.update(late)
    summary["plan"] = [[round(at, 3), kind] for at, kind in plan[1]]
    # Anomalies a setting allows, apart: overlaps inside a failover's window
    # without replica acknowledgement, holds undone late behind WAITs with it.
    summary["failover_allowed"] = {t: sum(1 for a in allowed if a["type"] == t) for t in {a["type"] for a in allowed}}
    summary["failover_allowed_examples"] = allowed[:3]
    summary["failover_overlap_max_ms"] = round(max((a.get("overlap_ms", 0) for a in allowed), default=0), 1)
    # Sentinel faults that waited out a Sentinel in TILT mode, and SENTINEL
    # FAILOVERs asked again after the Sentinel aborted them (nemesis._sentinel_wait).
    summary["sentinel_tilts_waited"] = sum(1 for f in fault_log if f.get("tilted"))
    summary["failovers_asked_again"] = sum(f.get("asked", 1) - 1 for f in fault_log if f["fault"] == "failover")
    summary["failover_s"] = [
        round((f["t_named"] - f["t"]) / 1e9, 3) for f in fault_log if f["fault"] in checker.FAILOVERS
    ]
    if cfg.record:
        record(
            f"history-{cfg.scenario}",
            variant="under faults",
            **{
                k: summary[k]
                for k in (
                    "seed",
                    "duration_s",
                    "holds",
                    "holds_valid",
                    "holds_per_s",
                    "faults_injected",
                    "faults",
                    "anomalies",
                )
            },
            overlaps=summary["anomalies"].get("overlap", 0),
            fence_order_faults=summary["anomalies"].get("fence-order", 0),
            keys_left=len(keys),
        )
    if not cfg.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return summary


def _deploy(cfg, net, prefix, aof_dirs) -> tuple:
    """(deployment or None, servers, the workers' URL): one server or a
    quorum's masters (their data on `aof_dirs`), a Sentinel deployment or a
    Redis Cluster; each process in a host of `net` of its own when given."""
    where = topology(cfg.scenario)
    if where == "sentinel":
        from support.redis_sentinel import SentinelDeployment

        # down-after 1.5 s: no failover of its own under load
        options = {"sentinels": SENTINELS, "down_after_ms": 1500}
        if net is None:
            deployment = SentinelDeployment(**options).start()
        else:
            from support import netns

            deployment = netns.HostedSentinels(net, **options).start()
        ports = [s.port for s in deployment.sentinels]
        first = ports.pop(FIRST_SENTINEL)  # the one sentinel-stop freezes
        return deployment, [Master(deployment)], deployment.url(sentinels=[first] + ports)
    if where == "cluster":
        from support.redis_cluster import RedisCluster

        if net is None:
            deployment = RedisCluster(nodes=3, replicas=1).start()
        else:
            from support import netns

            deployment = netns.HostedCluster(net, nodes=3, replicas=1).start()
        servers = [Serving(deployment, f"{prefix}{{{n}}}") for n in NAMES[cfg.scenario]]
        return deployment, servers, deployment.url
    if net is None:
        servers = [RedisServer(extra=PERSIST + ("--dir", d)).start() for d in aof_dirs]
    else:
        from support import netns

        servers = []
        for i, d in enumerate(aof_dirs):
            servers.append(netns.HostedServer(net.host(f"master-{i}"), net.port(), extra=PERSIST + ("--dir", d)))
            servers[-1].start()
    return None, servers, servers[0].url if len(servers) == 1 else [s.url for s in servers]


def _routes(deployment, servers) -> dict:
    """port -> unix socket of every server in a test host."""
    nodes = servers if deployment is None else getattr(deployment, "sentinels", []) + deployment.nodes
    return {n.port: n.socket for n in nodes}


def _specs(cfg, url, prefix, workdir, rng, time_port, net=None, routes=None, storage=None) -> list:
    modes = ["sync"] * cfg.sync_workers + ["async"] * cfg.async_workers
    skews = cfg.skews if cfg.skews is not None else SKEWS if cfg.scenario in SKEWED_SCENARIOS else {}
    return [
        WorkerSpec(
            index=i,
            label=f"{mode[0]}{i}",
            mode=mode,
            scenario=cfg.scenario,
            url=url,
            prefix=f"{prefix}{i}:" if cfg.isolate else prefix,
            seed=rng.randrange(2**32),
            log_path=str(workdir / f"worker-{i}.jsonl"),
            ttl=cfg.ttl,
            tasks=cfg.async_tasks,
            long_every_s=cfg.long_every_s if i == 0 else None,
            replicas=cfg.replicas,
            skew=skews.get(i),
            time_port=time_port,
            netns=net.host(f"worker-{i}").ns if net else None,
            routes=routes or None,
            storage=storage,
        )
        for i, mode in enumerate(modes)
    ]


def _execute(cfg, specs, servers, prefix, plan, deployment=None, net=None, hosts=None):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(specs) + 1)
    go = ctx.Event()
    deadline = ctx.Value("q", 0, lock=False)
    board = Board(ctx, len(specs))
    procs = [
        ctx.Process(
            target=sync_worker if s.mode == "sync" else async_worker,
            args=(s, barrier, go, deadline, board),
            name=s.label,
            daemon=True,
        )
        for s in specs
    ]
    for s, p in zip(specs, procs):
        with skewed_env(s.skew):
            p.start()
    workers = [Worker(s.index, s.label, p.pid, s.mode == "sync") for s, p in zip(specs, procs)]
    seed, faults = plan
    nemesis = Nemesis(
        servers,
        workers,
        board,
        seed,
        stop_s=cfg.ttl[1] * 1.3,
        deployment=deployment,
        net=net,
        hosts=hosts or {},
        names=NAMES[cfg.scenario],
        prefix=prefix,
    )
    cluster = topology(cfg.scenario) == "cluster"
    ports = [s.port if cluster or not deployment else (lambda s=s: s.port) for s in servers]
    monitor = HolderMonitor(ports, prefix, NAMES[cfg.scenario], layout(cfg.scenario), per_name=cluster)
    try:
        barrier.wait(120)  # every worker connected
        t0 = now_ns()
        deadline.value = t0 + int((cfg.duration + NEMESIS_LATE_S) * 1e9)  # until the nemesis is done
        go.set()
        monitor.start()
        nemesis.run(faults, t0, until_ns=deadline.value)
        # The workers end at the run's duration, or, when the nemesis ran
        # late, once they had as long after its last fault as the plan
        # leaves after its window (WINDOW) to recover; and not before they
        # confirmed cfg.min_holds holds valid, within the same bound.
        end = max(t0 + int(cfg.duration * 1e9), now_ns() + int((1 - WINDOW[1]) * cfg.duration * 1e9))
        while now_ns() < deadline.value and (now_ns() < end or sum(board.valid) < cfg.min_holds):
            time.sleep(0.02)  # shared memory has no event to await: poll it
        deadline.value = min(deadline.value, now_ns())
        for p in procs:
            p.join(max(0.1, (deadline.value - now_ns()) / 1e9 + EXIT_GRACE_S))
        wall = (now_ns() - t0) / 1e9
    finally:
        nemesis.resume_all()
        samples = monitor.stop()
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(10)
    exits = [p.exitcode for p in procs]
    for p in procs:
        p.close()
    late = {"ran_s": round((deadline.value - t0) / 1e9, 2), "nemesis_behind_s": round(nemesis.behind_s, 2)}
    return [Path(s.log_path) for s in specs], wall, exits, nemesis.log, samples, monitor.rounds, t0, late


def _settle(ports: list, prefix: str, wait_s: float) -> list:
    """Keys of the prefix left on any server once they had `wait_s` to
    expire: (key, pttl ms) pairs."""
    give_up = time.monotonic() + wait_s
    while True:
        keys = [(port, k) for port in ports for k in resp.scan(port, prefix + "*")]
        if not keys or time.monotonic() >= give_up:
            return [(k, resp.command(port, "PTTL", k)) for port, k in keys]
        time.sleep(0.05)  # expiry is Redis's own timer: nothing to await but the keys going
