"""How far ferrolock's lock throughput scales: one redis-server beside a
3-master Redis Cluster, measured in one run on this machine.

    python benches/scale.py [--quick] [--procs 1,2,4,8] [--threads 4] [--names 1000] [--seconds 3]
    make bench-scale                       # the same, BENCH_ARGS=--quick for a short run

Starts its own servers on free loopback ports (a redis-server, and a Redis
Cluster of 3 primaries; no persistence, temporary directories, stopped at
the end) and, for each target and each number of client processes (each with
several threads), runs for a few seconds:

- lock: acquire() + release() cycles of ferrolock on names drawn uniformly
  from `--names` names (default ttl and renewal, blocking acquire);
- floor: the same processes and threads doing SET + DEL with redis-py and
  hiredis (two round trips a cycle, as a lock cycle: the network and client
  floor without the scripts);
- and once per target, redis-benchmark's SET at the same concurrency (the
  server's ceiling for the cheapest write, from a C client).

For each run it prints cycles/s, each server's CPU (from /proc/<pid>/stat,
in % of one core, and in microseconds per cycle), the server's command time
per cycle (INFO commandstats: the scripts alone, without the network), the
clients' CPU, and the whole machine's busy share, so the limit shows: one
server thread at 100 % of a core, the clients, or the machine's cores all
busy with clients and servers together. `--json FILE` saves the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))  # the throwaway Redis Cluster of the test suite

TICK = os.sysconf("SC_CLK_TCK")
# The commands a cycle sends itself (INFO commandstats also counts, apart,
# the calls a script makes, whose time is in the script's).
OWN = {"lock": {"evalsha", "eval"}, "floor": {"set", "del"}}


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) the process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> tuple:
    """(busy, total) jiffies of every core, from /proc/stat."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    total = sum(parts[:8])
    return total - idle, total


def command_usec(port: int) -> Dict[str, tuple]:
    """{command: (calls, usec)} from INFO commandstats of the server on `port`."""
    import redis

    r = redis.Redis(port=port)
    try:
        out = {}
        for name, stats in r.info("commandstats").items():
            out[name.replace("cmdstat_", "")] = (stats["calls"], stats["usec"])
        return out
    finally:
        r.close()


# ------------------------------------------------------------------ workers


def worker(kind: str, url: str, names: int, threads: int, start: Any, until: Any, out: Any) -> None:
    """One client process: `threads` threads cycling until the shared end time."""
    import redis

    stop = threading.Event()
    counts = [0] * threads
    errors: List[str] = []
    if kind == "lock":
        import ferrolock

        client = ferrolock.Client(url, prefix="scale:")

        def cycle_factory():
            def cycle(name: str) -> None:
                lock = client.lock(name)
                lock.acquire()
                lock.release()

            return cycle
    else:
        if url.startswith("redis+cluster://"):
            host, port = url.split("://", 1)[1].split(",")[0].split(":")
            conn = redis.RedisCluster(host=host, port=int(port))
        else:
            conn = redis.Redis.from_url(url)

        def cycle_factory():
            def cycle(name: str) -> None:
                key = "scale:{%s}" % name
                conn.set(key, "x", px=10_000)
                conn.delete(key)

            return cycle

    def run(i: int) -> None:
        cycle = cycle_factory()
        rng = random.Random(os.getpid() * 100 + i)
        try:
            for _ in range(20):  # warm up: connections open, scripts loaded
                cycle(f"n{rng.randrange(names)}")
            ready.wait()
            end = until.value
            n = 0
            while time.monotonic() < end:
                cycle(f"n{rng.randrange(names)}")
                n += 1
            counts[i] = n
        except Exception as e:  # reported with the figures
            errors.append(f"{type(e).__name__}: {e}")
            stop.set()

    ready = threading.Event()
    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    cpu0 = sum(os.times()[:2])
    ready.set()
    for t in pool:
        t.join()
    cpu = sum(os.times()[:2]) - cpu0
    out.put({"cycles": sum(counts), "cpu_s": cpu, "errors": errors})


def measure(kind: str, url: str, pids: Dict[int, int], procs: int, threads: int, names: int, seconds: float) -> dict:
    """One run: `procs` processes x `threads` threads of `kind` against `url`
    for `seconds`; the servers' CPU (`pids`: port -> pid) over the same window."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    until = ctx.Value("d", 0.0)
    workers = [ctx.Process(target=worker, args=(kind, url, names, threads, start, until, out)) for _ in range(procs)]
    for p in workers:
        p.start()
    try:
        time.sleep(1.0 + 0.3 * procs)  # the workers start and warm up; then all begin together
        stats0 = {port: command_usec(port) for port in pids}
        cpu0 = {port: proc_cpu(pid) for port, pid in pids.items()}
        busy0 = machine_busy()
        begin = time.monotonic()
        until.value = begin + seconds
        start.set()
        results = [out.get(timeout=seconds + 60) for _ in workers]
        wall = time.monotonic() - begin
        busy1 = machine_busy()
        cpu1 = {port: proc_cpu(pid) for port, pid in pids.items()}
        stats1 = {port: command_usec(port) for port in pids}
    finally:
        for p in workers:
            p.join(30)
            if p.is_alive():
                p.kill()
    cycles = sum(r["cycles"] for r in results)
    window = min(wall, seconds)
    per_server = {}
    calls_all: Dict[str, int] = {}
    for port in pids:
        # The cycle's own commands: a script's inner calls (HSET, TIME ...) are
        # counted apart by commandstats but are already in the script's time.
        usec = sum(u - stats0[port].get(cmd, (0, 0))[1] for cmd, (_, u) in stats1[port].items() if cmd in OWN[kind])
        calls = {cmd: c - stats0[port].get(cmd, (0, 0))[0] for cmd, (c, _) in stats1[port].items()}
        for cmd, c in calls.items():
            calls_all[cmd] = calls_all.get(cmd, 0) + c
        per_server[port] = {
            "cpu_s": cpu1[port] - cpu0[port],
            "cpu_pct": 100 * (cpu1[port] - cpu0[port]) / wall,
            "command_usec": usec,
            "evalsha": calls.get("evalsha", 0),
        }
    server_cpu = sum(s["cpu_s"] for s in per_server.values())
    command = sum(s["command_usec"] for s in per_server.values())
    client_cpu = sum(r["cpu_s"] for r in results)
    return {
        "kind": kind,
        "procs": procs,
        "threads": threads,
        "cycles": cycles,
        "cycles_per_s": cycles / window,
        "servers": per_server,
        "server_cpu_pct": [round(s["cpu_pct"], 1) for s in per_server.values()],
        "server_cpu_us_per_cycle": 1e6 * server_cpu / max(cycles, 1),
        "command_us_per_cycle": command / max(cycles, 1),
        "scripts_per_cycle": sum(s["evalsha"] for s in per_server.values()) / max(cycles, 1),
        "calls_per_cycle": {c: round(n / max(cycles, 1), 3) for c, n in sorted(calls_all.items()) if n},
        "client_cpu_pct": 100 * client_cpu / wall,
        "client_cpu_us_per_cycle": 1e6 * client_cpu / max(cycles, 1),
        "machine_busy_pct": 100 * (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1),
        "errors": sorted({e for r in results for e in r["errors"]}),
    }


def redis_benchmark(ports: List[int], cluster: bool, clients: int, requests: int) -> dict:
    """redis-benchmark's SET (no pipelining) at `clients` connections: the
    server's ceiling for the cheapest write, from a C client."""
    binary = shutil.which("redis-benchmark")
    if not binary:
        return {"error": "redis-benchmark is not installed (Debian: redis-tools)"}
    args = [
        binary,
        "-h",
        "127.0.0.1",
        "-p",
        str(ports[0]),
        "-t",
        "set",
        "-n",
        str(requests),
        "-c",
        str(clients),
        "-r",
        "100000",
        "-P",
        "1",
        "--csv",
        "-q",
    ]
    if cluster:
        args.append("--cluster")
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    for line in out.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0] == "SET":
            return {"ops_per_s": float(cells[1])}
    return {"error": (out.stderr or out.stdout).strip()[-200:]}


def lua(file: str, publish: str) -> str:
    """A script as the core builds it (src/scripts/assembly.rs): the PUBLISH
    flavour, the lua/lib/ libraries its first line includes (each once,
    dependencies first), then the step's own file (lua/README.md)."""
    done: List[str] = []

    def includes(source: str) -> List[str]:
        first = source.split("\n", 1)[0]
        return first.split(":", 1)[1].split() if first.startswith("-- include:") else []

    def visit(name: str) -> None:
        if name not in done:
            for inner in includes((ROOT / "lua" / "lib" / f"{name}.lua").read_text()):
                visit(inner)
            done.append(name)

    source = (ROOT / "lua" / file).read_text()
    for name in includes(source):
        visit(name)
    libs = "".join((ROOT / "lua" / "lib" / f"{name}.lua").read_text() for name in done)
    return f"local PUBLISH = '{publish}'\n" + libs + source


def pipelined_cost(port: int, pid: int, keys: List[str], cluster: bool, cycles: int) -> dict:
    """Server CPU per cycle with the network's share taken away: cycles sent
    in pipelines of 200 over one connection, so reading and writing the
    socket is shared by hundreds of commands. A lock cycle is the core's own
    two scripts (obtain.lua, release.lua: what acquire() and release() send
    when uncontended), beside SET PX + DEL."""
    import redis

    r = redis.Redis(port=port)
    publish = "SPUBLISH" if cluster else "PUBLISH"
    obtain = r.script_load(lua("obtain.lua", publish))
    release = r.script_load(lua("release.lua", publish))
    rng = random.Random(7)
    out = {}
    for kind in ("lock", "floor"):

        def batch(n: int) -> None:
            pipe = r.pipeline(transaction=False)
            for _ in range(n):
                key, token = rng.choice(keys), "%032x" % rng.getrandbits(128)
                if kind == "lock":
                    pipe.evalsha(obtain, 1, key, token, 30_000, "", "0")
                    pipe.evalsha(release, 1, key, token, "0", "")
                else:
                    pipe.set(key, token, px=30_000)
                    pipe.delete(key)
            pipe.execute()

        batch(200)  # warm up
        # SET + DEL cost a tenth as much: more of them, for as many clock ticks of CPU time.
        rounds = cycles // 200 * (5 if kind == "floor" else 1)
        stats0, cpu0 = command_usec(port), proc_cpu(pid)
        for _ in range(rounds):
            batch(200)
        stats1, cpu1 = command_usec(port), proc_cpu(pid)
        usec = sum(u - stats0.get(c, (0, 0))[1] for c, (_, u) in stats1.items() if c in OWN[kind])
        done = rounds * 200
        out[kind] = {"server_cpu_us_per_cycle": 1e6 * (cpu1 - cpu0) / done, "command_us_per_cycle": usec / done}
    r.close()
    return out


# ------------------------------------------------------------------ report


def row(target: str, r: dict) -> str:
    servers = " / ".join(f"{p:.0f}" for p in r["server_cpu_pct"])
    return (
        f"| {target} | {r['kind']} | {r['procs']} x {r['threads']} | {r['cycles_per_s']:,.0f} | {servers} | "
        f"{r['server_cpu_us_per_cycle']:.1f} | {r['command_us_per_cycle']:.1f} | "
        f"{r['client_cpu_pct']:.0f} | {r['client_cpu_us_per_cycle']:.0f} | {r['machine_busy_pct']:.0f} |"
    )


def report(res: dict) -> str:
    lines = [
        f"- date: {res['date']}; machine: {res['cpus']} cores; load average {res['load_before']} before, "
        f"{res['load_after']} after",
        f"- command: `{res['command']}`",
        f"- {res['names']:,} names drawn uniformly; {res['seconds']:.1f} s per run; redis-server {res['redis']}",
        "",
        "| target | cycle | processes x threads | cycles/s | server CPU, % of a core (each master) | "
        "server CPU us/cycle | server command us/cycle | clients' CPU, % of a core | clients' CPU us/cycle | "
        "machine busy % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for target in ("single", "cluster"):
        for r in res["runs"].get(target, []):
            lines.append(row("1 redis-server" if target == "single" else "Cluster, 3 masters", r))
    lines.append("")
    for target, b in res.get("redis_benchmark", {}).items():
        label = "1 redis-server" if target == "single" else "Cluster, 3 masters"
        if "ops_per_s" in b:
            lines.append(
                f"- redis-benchmark SET, {res['bench_clients']} connections, {label}: {b['ops_per_s']:,.0f} ops/s"
            )
        else:
            lines.append(f"- redis-benchmark, {label}: {b.get('error')}")
    if res.get("pipelined"):
        lines += [
            "",
            "Server CPU per cycle with the network's share taken away (pipelines of 200 cycles, one connection):",
            "",
            "| server | lock cycle: CPU us | its scripts' command time us | SET + DEL: CPU us | "
            "command time us | lock / SET+DEL (CPU) |",
            "|---|---|---|---|---|---|",
        ]
        for target, c in res["pipelined"].items():
            label = "1 redis-server" if target == "single" else "a Cluster master"
            lock, floor = c["lock"], c["floor"]
            lines.append(
                f"| {label} | {lock['server_cpu_us_per_cycle']:.1f} | {lock['command_us_per_cycle']:.1f} | "
                f"{floor['server_cpu_us_per_cycle']:.1f} | {floor['command_us_per_cycle']:.1f} | "
                f"{lock['server_cpu_us_per_cycle'] / floor['server_cpu_us_per_cycle']:.1f}x |"
            )
    errors = [e for runs in res["runs"].values() for r in runs for e in r["errors"]]
    if errors:
        lines += ["", "Errors: " + "; ".join(sorted(set(errors)))]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs, 1, 4 and 8 processes (~1 minute)")
    ap.add_argument("--procs", default=None, help="numbers of client processes, comma-separated (1,2,4,8)")
    ap.add_argument("--threads", type=int, default=4, help="threads per client process")
    ap.add_argument("--names", type=int, default=1000, help="lock names, drawn uniformly")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per run (3; 1.5 with --quick)")
    ap.add_argument("--json", metavar="FILE", help="save the figures as JSON")
    ap.add_argument("--targets", default="single,cluster", help=argparse.SUPPRESS)
    args = ap.parse_args()
    procs = [int(p) for p in (args.procs or ("1,4,8" if args.quick else "1,2,4,8")).split(",")]
    seconds = args.seconds or (1.5 if args.quick else 3.0)

    from support.redis_cluster import RedisCluster

    from ferrolock.throwaway import RedisServer

    import ferrolock  # noqa: F401  (fail early when the extension is not built)

    res: Dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_before": "%.2f %.2f %.2f" % os.getloadavg(),
        "names": args.names,
        "seconds": seconds,
        "command": " ".join([os.path.relpath(sys.executable)] + sys.argv),
        "runs": {},
        "bench_clients": max(procs) * args.threads,
        "redis": subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2],
    }
    server = cluster = None
    try:
        server = RedisServer(extra=("--maxclients", "10000")).start()
        port = server.port
        cluster = RedisCluster(3).start()
        targets = {
            "single": (server.url, {port: server.proc.pid}, [port], False),
            "cluster": (cluster.url, {n.port: n.proc.pid for n in cluster.nodes}, cluster.ports, True),
        }
        print(f"redis-server on port {port}; Cluster on ports {cluster.ports}; load {res['load_before']}")
        # What one cycle costs the server without the network's share: the
        # scripts beside SET + DEL, pipelined, on the single server and on one
        # master of the Cluster (keys of its own slots).
        from support.redis_cluster import key_slot

        first, last = cluster.ranges[0]
        own = [k for k in (f"scale:{{n{i}}}" for i in range(20 * args.names)) if first <= key_slot(k) <= last]
        n = 20_000 if args.quick else 60_000
        res["pipelined"] = {
            "single": pipelined_cost(port, server.proc.pid, [f"scale:{{n{i}}}" for i in range(args.names)], False, n),
            "cluster": pipelined_cost(cluster.ports[0], cluster.nodes[0].proc.pid, own[: args.names], True, n),
        }
        print(f"   pipelined cost: {res['pipelined']}", flush=True)
        for target, (url, pids, ports, is_cluster) in targets.items():
            if target not in args.targets.split(","):
                continue
            runs = res["runs"].setdefault(target, [])
            for n in procs:
                for kind in ("lock", "floor"):
                    r = measure(kind, url, pids, n, args.threads, args.names, seconds)
                    runs.append(r)
                    print(row(target, r), flush=True)
            res.setdefault("redis_benchmark", {})[target] = redis_benchmark(
                ports, is_cluster, res["bench_clients"], 50_000 if args.quick else 200_000
            )
            print(f"   redis-benchmark: {res['redis_benchmark'][target]}", flush=True)
    finally:
        if server is not None:
            server.close()
        if cluster is not None:
            cluster.close()
    res["load_after"] = "%.2f %.2f %.2f" % os.getloadavg()
    print()
    print(report(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 1 if any(r["errors"] for runs in res["runs"].values() for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
