"""ferrolock beside the Python Redis locks people use, measured in one run.

    make bench                                   # installs benches/requirements.txt, builds, runs
    .venv/bin/python benches/bench.py [--quick] [--out docs/benchmarks.md]

Starts its own throwaway redis-server (loopback, free port, no persistence, a
temporary directory; always stopped at the end) and measures, against it:

1. uncontended acquire+release from one thread, beside the floor of two bare
   round trips (two redis-py + hiredis PINGs);
2. contended: 4 processes x 500 cycles on one lock, 1 ms of work inside;
3. asyncio: 200 tasks x 20 cycles on one key in one event loop;
4. the watchdog at scale: 10,000 ferrolock locks held with ttl=3 s;
5. RWMutex: 8 reader processes + 1 writer process.

The anchors are redis-py `Lock` (sync and `redis.asyncio`), python-redis-lock
(`redis_lock.Lock`) and pottery `Redlock` with a single master, each used the
way its docs show, with its default waiting. Writes a markdown report (tables,
targets, machine, command) and a chart beside it (same name, .png).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import datetime
import gc
import json
import logging
import math
import multiprocessing
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from importlib import metadata as pkg_metadata
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from throwaway_redis import start_redis, stop_redis  # noqa: E402
TTL = 10.0  # seconds, the same expiry for every library in scenarios 1-3 (none is reached)
WORK = 0.001  # the 1 ms of "work" held inside the lock in scenario 2

FERRO = "ferrolock"
FERRO_FAIR = "ferrolock fair=True"
REDISPY = "redis-py Lock"
REDISPY_ASYNC = "redis-py asyncio Lock"
PRL = "python-redis-lock"
POTTERY = "pottery Redlock"
FLOOR = "floor: 2 x PING"


# ---------------------------------------------------------------------------
# small helpers

def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.{digits}f}"


def version(dist: str) -> str:
    try:
        return pkg_metadata.version(dist)
    except pkg_metadata.PackageNotFoundError:
        return "not installed"


def quiet_logs() -> None:
    # pottery logs a warning for every contended attempt; keep the output readable
    for name in ("pottery", "redis_lock", "ferrolock"):
        logging.getLogger(name).setLevel(logging.ERROR)


# ---------------------------------------------------------------------------
# a throwaway redis-server

def flush(url: str) -> None:
    import redis
    r = redis.Redis.from_url(url)
    r.flushall()
    r.close()


# ---------------------------------------------------------------------------
# one factory per library: a fresh handle on `name`, with .acquire() / .release()

def fair_supported(url: str) -> bool:
    import ferrolock
    client = ferrolock.Client(url, prefix="bench:probe:")
    try:
        client.lock("x", fair=True)  # type: ignore[call-arg]
    except TypeError:
        return False
    return True


def make_factory(lib: str, url: str, name: str) -> Callable[[], Any]:
    """Handles as a user of each library makes them, each library's default waiting."""
    if lib in (FERRO, FERRO_FAIR):
        import ferrolock
        client = ferrolock.Client(url, prefix="bench:")
        opts: dict[str, Any] = {"ttl": TTL}
        if lib == FERRO_FAIR:
            opts["fair"] = True
        return lambda: client.lock(name, **opts)
    if lib == REDISPY:
        import redis
        r = redis.Redis.from_url(url)
        # blocking, sleep=0.1 between attempts (the default)
        return lambda: r.lock(name, timeout=TTL)
    if lib == PRL:
        import redis
        import redis_lock
        r = redis.Redis.from_url(url)
        # blocking, waits on BLPOP of the release signal (the default)
        return lambda: redis_lock.Lock(r, name, expire=int(TTL))
    if lib == POTTERY:
        import redis
        from pottery import Redlock
        r = redis.Redis.from_url(url)
        # blocking, retries after a random 0-0.2 s (the default); one master
        return lambda: Redlock(key=name, masters={r}, auto_release_time=TTL)
    raise ValueError(lib)


# ---------------------------------------------------------------------------
# 1. uncontended

def uncontended(url: str, libs: list[str], rounds: int, cycles: int, warmup: int) -> dict:
    """Each library in turn, in `rounds` rounds with the order rotated, so that
    the machine's noise falls on all of them alike. One handle per library,
    acquire() + release() per cycle."""
    import redis
    import redis.asyncio as aredis
    import ferrolock

    samples: dict[str, list[float]] = {}
    r = redis.Redis.from_url(url)
    sync_cycle: dict[str, Callable[[], None]] = {}

    def floor() -> None:
        r.ping()
        r.ping()
    sync_cycle[FLOOR] = floor
    for lib in libs:
        handle = make_factory(lib, url, f"u:{lib}")()

        def cycle(h=handle) -> None:
            h.acquire()
            h.release()
        sync_cycle[lib] = cycle

    fclient = ferrolock.Client(url, prefix="bench:")
    async_libs = [f"{FERRO} (asyncio)", REDISPY_ASYNC, "floor: 2 x PING (redis.asyncio)"]

    async def async_round(order: list[str], n: int, record: bool) -> None:
        ar = aredis.Redis.from_url(url)
        fl = fclient.lock("u:async-ferrolock", ttl=TTL)
        rl = ar.lock("u:async-redis-py", timeout=TTL)
        try:
            for lib in order:
                ns = []
                for _ in range(n):
                    t0 = time.perf_counter_ns()
                    if lib == async_libs[0]:
                        await fl.aacquire()
                        await fl.arelease()
                    elif lib == async_libs[1]:
                        await rl.acquire()
                        await rl.release()
                    else:
                        await ar.ping()
                        await ar.ping()
                    ns.append(time.perf_counter_ns() - t0)
                if record:
                    samples.setdefault(lib, []).extend(x / 1000 for x in ns)
        finally:
            await ar.aclose()

    sync_names = [FLOOR] + libs
    for name in sync_names:  # warm-up: connections, scripts loaded, caches
        for _ in range(warmup):
            sync_cycle[name]()
    asyncio.run(async_round(async_libs, warmup, record=False))

    for rnd in range(rounds):
        order = sync_names[rnd % len(sync_names):] + sync_names[:rnd % len(sync_names)]
        for name in order:
            f = sync_cycle[name]
            ns = []
            for _ in range(cycles):
                t0 = time.perf_counter_ns()
                f()
                ns.append(time.perf_counter_ns() - t0)
            samples.setdefault(name, []).extend(x / 1000 for x in ns)
        aorder = async_libs[rnd % 3:] + async_libs[:rnd % 3]
        asyncio.run(async_round(aorder, cycles, record=True))
    r.close()

    rows = {}
    floor_med = pct(samples[FLOOR], 50)
    for name in sync_names + async_libs:
        s = samples[name]
        rows[name] = {"median_us": pct(s, 50), "p99_us": pct(s, 99), "n": len(s),
                      "x_floor": pct(s, 50) / floor_med}
    return {"rows": rows, "order_sync": sync_names, "order_async": async_libs,
            "rounds": rounds, "cycles": cycles, "warmup": warmup}


# ---------------------------------------------------------------------------
# 2. contended: processes on one lock

def contended_worker(lib: str, url: str, name: str, cycles: int, counter, barrier, out: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # on Ctrl-C the parent stops us
    quiet_logs()
    new = make_factory(lib, url, name)
    warm = make_factory(lib, url, name + ":warm")()  # connect and load scripts first
    warm.acquire()
    warm.release()
    holds = []
    barrier.wait(120)
    for _ in range(cycles):
        handle = new()
        asked = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        handle.acquire()
        got = time.perf_counter()
        value = counter.value  # a non-atomic read-modify-write of shared memory
        time.sleep(WORK)
        counter.value = value + 1
        done = time.perf_counter()
        handle.release()
        holds.append((asked, got, done))
    Path(out).write_text(json.dumps({"pid": os.getpid(), "holds": holds}))


def run_procs(procs: list, timeout: float) -> bool:
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()
    return all(p.exitcode == 0 for p in procs)


def contended(url: str, lib: str, workdir: Path, procs_n: int, cycles: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.RawValue("q", 0)  # shared memory, no lock of its own
    barrier = ctx.Barrier(procs_n)
    outs = [workdir / f"contended-{abs(hash(lib))}-{i}.json" for i in range(procs_n)]
    procs = [ctx.Process(target=contended_worker,
                         args=(lib, url, f"c:{lib}", cycles, counter, barrier, str(outs[i])))
             for i in range(procs_n)]
    ok = run_procs(procs, timeout=180)
    holds = []
    for o in outs:
        if o.exists():
            data = json.loads(o.read_text())
            holds += [(data["pid"], *h) for h in data["holds"]]
            o.unlink()
    expected = procs_n * cycles
    if not holds:
        return {"ok": False, "error": "no worker finished"}
    holds.sort(key=lambda h: h[2])  # by the time the lock was got
    wall = max(h[3] for h in holds) - min(h[1] for h in holds)
    held = sum(h[3] - h[2] for h in holds)
    waits = [(h[2] - h[1]) * 1000 for h in holds]
    overlaps = sum(b[2] < a[3] for a, b in zip(holds, holds[1:]))
    handoffs = sum(a[0] != b[0] for a, b in zip(holds, holds[1:]))
    return {
        "ok": ok and len(holds) == expected, "cycles": len(holds), "expected": expected,
        "wall_s": wall, "cycles_per_s": len(holds) / wall, "utilisation": held / wall,
        "hold_mean_ms": held / len(holds) * 1000,
        "wait_p50_ms": pct(waits, 50), "wait_p99_ms": pct(waits, 99), "wait_max_ms": max(waits),
        "counter": counter.value, "counter_ok": counter.value == expected == len(holds),
        "overlaps": overlaps, "handoffs": handoffs,
    }


# ---------------------------------------------------------------------------
# 3. asyncio: many tasks on one key in one event loop

async def asyncio_run(url: str, lib: str, tasks: int, cycles: int, time_limit: float) -> dict:
    state = {"counter": 0, "inside": 0, "most_inside": 0, "done": 0}
    deadline = time.perf_counter() + time_limit
    name = f"a:{lib}"
    new: Callable[[], Any]
    if lib in (FERRO, FERRO_FAIR):
        import ferrolock
        client = ferrolock.Client(url, prefix="bench:")
        opts: dict[str, Any] = {"ttl": TTL}
        if lib == FERRO_FAIR:
            opts["fair"] = True
        new = lambda: client.lock(name, **opts)  # noqa: E731
        closer: Any = None
    else:
        import redis.asyncio as aredis
        from redis.asyncio.lock import Lock as ALock
        # redis-py 8's default pool stops at 100 connections (MaxConnectionsError), and
        # 200 tasks waiting at once each hold one: room for every task
        ar = aredis.Redis.from_url(url, max_connections=tasks + 16)
        # blocking, sleep=0.1 between attempts (the default)
        new = lambda: ALock(ar, name, timeout=TTL)  # noqa: E731
        closer = ar.aclose
    await asyncio.sleep(0)

    async def task() -> None:
        lock = new()  # a separate handle per task
        for _ in range(cycles):
            if time.perf_counter() > deadline:
                return
            async with lock:
                state["inside"] += 1
                state["most_inside"] = max(state["most_inside"], state["inside"])
                value = state["counter"]
                await asyncio.sleep(0)  # other tasks run mid-update
                state["counter"] = value + 1
                state["inside"] -= 1
            state["done"] += 1

    # warm-up: connections and scripts
    async with new():
        pass
    began = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(tasks)))
    wall = time.perf_counter() - began
    if closer is not None:
        await closer()
    expected = tasks * cycles
    return {"cycles": state["done"], "expected": expected, "wall_s": wall,
            "cycles_per_s": state["done"] / wall, "complete": state["done"] == expected,
            "counter_ok": state["counter"] == state["done"], "most_inside": state["most_inside"]}


# ---------------------------------------------------------------------------
# 4. the watchdog at scale (each measurement in its own process, so the CPU
#    figure is that process's alone)

def watchdog_worker(lib: str, url: str, n: int, hold: float, ttl: float, out: str, redis_pid: int,
                    ready, go, held) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_logs()
    import psutil
    import redis
    r = redis.Redis.from_url(url)
    me, server = psutil.Process(), psutil.Process(redis_pid)
    lost_calls = [0]
    result: dict[str, Any] = {"lib": lib, "n": n, "hold_s": hold, "ttl_s": ttl}
    thread_errors: dict[str, int] = {}

    def count_thread_error(a: threading.ExceptHookArgs) -> None:  # a renewal thread died
        key = a.exc_type.__name__
        thread_errors[key] = thread_errors.get(key, 0) + 1
    threading.excepthook = count_thread_error
    began = time.perf_counter()
    locks: list[Any]
    if lib == FERRO:
        import ferrolock
        from ferrolock import _ferrolock
        client = ferrolock.Client(url, prefix="wd:")

        def on_lost() -> None:
            lost_calls[0] += 1
        locks = [client.lock(f"w{i}", ttl=ttl, on_lost=on_lost) for i in range(n)]
        taken = sum(lock.acquire(blocking=False) for lock in locks)
    else:
        import redis_lock
        # one renewal thread per lock, and they wake together: each needs its own connection
        # (redis-py 8's default pool of 100 raises MaxConnectionsError in the renewal threads)
        pool_client = redis.Redis.from_url(url, max_connections=n + 16)
        locks = [redis_lock.Lock(pool_client, f"w{i}", expire=int(ttl), auto_renewal=True) for i in range(n)]
        taken = sum(lock.acquire(blocking=False) for lock in locks)
    result["acquire_s"] = time.perf_counter() - began
    result["taken"] = taken
    result["threads"] = me.num_threads()
    if lib == FERRO:
        result["watchdogs"] = _ferrolock._debug_stats().get("watchdogs")
    gc.collect()
    ready.set()
    go.wait(60)  # the parent starts its ttl monitor, then lets us measure
    evalsha0 = int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    c0, s0, w0 = me.cpu_times(), server.cpu_times(), time.perf_counter()
    time.sleep(hold)
    c1, s1, w1 = me.cpu_times(), server.cpu_times(), time.perf_counter()
    evalsha1 = int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    held.set()  # the parent stops sweeping
    window = w1 - w0
    result["window_s"] = window
    result["cpu_pct"] = 100 * ((c1.user - c0.user) + (c1.system - c0.system)) / window
    result["redis_cpu_pct"] = 100 * ((s1.user - s0.user) + (s1.system - s0.system)) / window
    result["evalsha_per_s"] = (evalsha1 - evalsha0) / window
    result["rss_mb"] = me.memory_info().rss / 2**20
    result["redis_clients"] = int(r.info("clients").get("connected_clients", 0))
    # every key still there, each with most of its ttl left
    keys = list(r.scan_iter(count=1000))
    result["keys_at_end"] = len(keys)
    pipe = r.pipeline(transaction=False)
    for k in keys:
        pipe.pttl(k)
    pttls = pipe.execute()
    result["min_pttl_at_end_ms"] = min(pttls) if pttls else None
    if lib == FERRO:
        result["lost"] = sum(lock.lost for lock in locks)  # the library's own signal
        result["on_lost_calls"] = lost_calls[0]
    else:
        # python-redis-lock cannot tell its holder; count what the harness sees
        result["lost"] = None
        result["renewers_dead"] = sum(1 for lock in locks if lock._lock_renewal_thread is not None
                                      and not lock._lock_renewal_thread.is_alive())
    result["thread_errors"] = dict(thread_errors)
    release_errors = 0
    for lock in locks:
        try:
            lock.release()
        except Exception:
            release_errors += 1
    result["release_errors"] = release_errors
    result["keys_after_release"] = r.dbsize()
    Path(out).write_text(json.dumps(result))


def watchdog(url: str, lib: str, n: int, hold: float, ttl: float, workdir: Path, redis_pid: int) -> dict:
    import redis
    ctx = multiprocessing.get_context("spawn")
    ready, go, held = ctx.Event(), ctx.Event(), ctx.Event()
    out = workdir / f"watchdog-{abs(hash(lib))}.json"
    p = ctx.Process(target=watchdog_worker, args=(lib, url, n, hold, ttl, str(out), redis_pid, ready, go, held))
    stop = threading.Event()
    monitor: dict[str, Any] = {"sweeps": 0, "min_pttl_ms": None, "min_keys": None}

    def sweep() -> None:  # from this process: the lowest ttl left on any lock, every ~1 s
        r = redis.Redis.from_url(url)
        while not stop.wait(1.0):
            keys = list(r.scan_iter(count=1000))
            pipe = r.pipeline(transaction=False)
            for k in keys:
                pipe.pttl(k)
            if stop.is_set():
                break
            vals = [v for v in pipe.execute() if v is not None and v > 0]
            live = len(vals)
            monitor["sweeps"] += 1
            low = min(vals) if vals else None
            if low is not None and (monitor["min_pttl_ms"] is None or low < monitor["min_pttl_ms"]):
                monitor["min_pttl_ms"] = low
            if monitor["min_keys"] is None or live < monitor["min_keys"]:
                monitor["min_keys"] = live
        r.close()

    mon = threading.Thread(target=sweep, daemon=True)
    try:
        p.start()
        if not ready.wait(180):
            raise RuntimeError(f"watchdog worker ({lib}) did not get ready")
        mon.start()
        go.set()
        held.wait(hold + 60)
        stop.set()
        mon.join(10)
        p.join(120)
    finally:
        stop.set()
        if p.is_alive():
            p.terminate()
            p.join()
    if mon.is_alive():
        mon.join(5)
    if not out.exists():
        return {"ok": False, "error": f"worker exited with {p.exitcode}"}
    result = json.loads(out.read_text())
    out.unlink()
    result.update({f"monitor_{k}": v for k, v in monitor.items()})
    result["ok"] = p.exitcode == 0
    return result


# ---------------------------------------------------------------------------
# 5. RWMutex: reader processes and a writer process

def rw_worker(role: str, url: str, name: str, duration: float, barrier, out: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_logs()
    import ferrolock
    client = ferrolock.Client(url, prefix="bench:")
    rw = client.rwmutex(name, ttl=TTL)
    side = rw.read if role == "reader" else rw.write
    warm = side()
    warm.acquire()
    warm.release()
    holds = []
    barrier.wait(120)
    end = time.perf_counter() + duration
    while time.perf_counter() < end:
        h = side()
        asked = time.perf_counter()
        h.acquire()
        got = time.perf_counter()
        time.sleep(WORK)  # 1 ms held, as in scenario 2
        done = time.perf_counter()
        h.release()
        holds.append((asked, got, done))
        if role == "writer":
            time.sleep(0.01)  # a write every ~10 ms
    Path(out).write_text(json.dumps({"role": role, "holds": holds}))


def rwmutex(url: str, workdir: Path, readers: int, duration: float) -> dict:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(readers + 1)
    roles = ["reader"] * readers + ["writer"]
    outs = [workdir / f"rw-{i}.json" for i in range(len(roles))]
    procs = [ctx.Process(target=rw_worker, args=(role, url, "rw", duration, barrier, str(outs[i])))
             for i, role in enumerate(roles)]
    ok = run_procs(procs, timeout=duration + 120)
    reads: list[list[float]] = []
    writes: list[list[float]] = []
    for o in outs:
        if o.exists():
            data = json.loads(o.read_text())
            (reads if data["role"] == "reader" else writes).extend(data["holds"])
            o.unlink()
    if not reads or not writes:
        return {"ok": False, "error": "a worker did not finish"}
    start = min(h[0] for h in reads + writes)
    end = max(h[2] for h in reads + writes)
    wall = end - start
    # a writer's hold must not overlap any reader's hold (client-side intervals lie
    # inside the server-side holds, so an overlap here would be a real one)
    reads.sort(key=lambda h: h[1])
    starts = [h[1] for h in reads]
    longest = max(h[2] - h[1] for h in reads)
    overlaps = 0
    for w in writes:
        i = bisect.bisect_left(starts, w[1] - longest)
        while i < len(reads) and reads[i][1] < w[2]:
            if reads[i][2] > w[1]:
                overlaps += 1
            i += 1
    wwait = [(h[1] - h[0]) * 1000 for h in writes]
    rwait = [(h[1] - h[0]) * 1000 for h in reads]
    return {"ok": ok, "wall_s": wall, "reads": len(reads), "writes": len(writes),
            "reads_per_s": len(reads) / wall, "writes_per_s": len(writes) / wall,
            "writer_wait_p50_ms": pct(wwait, 50), "writer_wait_p99_ms": pct(wwait, 99),
            "writer_wait_max_ms": max(wwait), "reader_wait_p99_ms": pct(rwait, 99),
            "reader_wait_max_ms": max(rwait), "overlaps": overlaps}


# ---------------------------------------------------------------------------
# report

def machine_note() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count()
    return f"{cores} cores" + (f" ({model})" if model else "") + f", {platform.system()} {platform.release()}"


def redis_server_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        return next(w.split("=", 1)[1] for w in out.split() if w.startswith("v="))
    except Exception:
        return "?"


def mark(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


def targets(res: dict, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    rows = []
    un = res.get("uncontended")
    if un:
        r = un["rows"]
        f, floor, rp = r[FERRO]["median_us"], r[FLOOR]["median_us"], r[REDISPY]["median_us"]
        rows.append(("uncontended: ferrolock median within 1.3x the two-round-trip floor",
                     f"{f / floor:.3f}x ({fmt(f)} us vs floor {fmt(floor)} us)", mark(f / floor <= 1.3)))
        rows.append(("uncontended: ferrolock >= 1.5x faster than redis-py Lock",
                     f"{rp / f:.2f}x ({fmt(rp)} us vs {fmt(f)} us)", mark(rp / f >= 1.5)))
    co = res.get("contended", {})
    if FERRO_FAIR in co and co[FERRO_FAIR].get("cycles"):
        c = co[FERRO_FAIR]
        ok = c["utilisation"] >= 0.9 and c["wait_max_ms"] <= 20
        rows.append(("contended, fair=True: utilisation >= 0.9 and max wait <= 20 ms",
                     f"utilisation {c['utilisation']:.2f}, max wait {c['wait_max_ms']:.1f} ms", mark(ok)))
    elif FERRO in co and co[FERRO].get("cycles"):
        c = co[FERRO]
        rows.append(("contended, fair=True: utilisation >= 0.9 and max wait <= 20 ms",
                     f"fair=True is not in this build; default mode: utilisation {c['utilisation']:.2f}, "
                     f"max wait {c['wait_max_ms']:.1f} ms", mark(None)))
    asy = res.get("asyncio", {})
    if "cycles_per_s" in (asy.get(FERRO) or {}) and "cycles_per_s" in (asy.get(REDISPY_ASYNC) or {}):
        a, b = asy[FERRO]["cycles_per_s"], asy[REDISPY_ASYNC]["cycles_per_s"]
        rows.append(("asyncio: ferrolock >= 10x redis-py asyncio Lock (cycles/s)",
                     f"{a / b:.1f}x ({fmt(a)} vs {fmt(b)} cycles/s)", mark(a / b >= 10)))
    wd = res.get("watchdog", {}).get(FERRO)
    if wd and wd.get("taken") is not None:
        ok = (wd["taken"] == wd["n"] and wd["lost"] == 0 and wd["keys_at_end"] == wd["n"]
              and wd["cpu_pct"] < 10)
        note = "" if wd["n"] >= 10_000 else f" (--quick: {wd['n']:,} locks; the target is for 10,000)"
        rows.append(("watchdog: 10,000 locks held, zero lost, < 10 % of one core",
                     f"{wd['taken']:,} held {wd['window_s']:.0f} s, {wd['lost']} lost, "
                     f"{wd['keys_at_end']:,} keys at the end, {wd['cpu_pct']:.1f} % of one core{note}", mark(ok)))
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def write_report(res: dict, args: argparse.Namespace, out: Path, png: Path) -> str:
    p = res["params"]
    md = [
        "# Benchmarks",
        "",
        f"ferrolock {version('ferrolock')} beside redis-py `Lock` (sync and `redis.asyncio`), "
        "python-redis-lock and pottery `Redlock` (one master), all measured in one run against one "
        "throwaway loopback redis-server. Generated by [`benches/bench.py`](../benches/bench.py); "
        "numbers vary from run to run on a shared machine, so compare within a run.",
        "",
        f"- date: {res['date']}",
        f"- machine: {res['machine']}; load average {res['load_before']} before, {res['load_after']} after",
        f"- command: `{res['command']}` ({res['elapsed_s']:.0f} s{', --quick' if args.quick else ''})",
        f"- software: Python {platform.python_version()}, redis-server {redis_server_version()}, "
        f"redis-py {version('redis')} with hiredis {version('hiredis')}, python-redis-lock "
        f"{version('python-redis-lock')}, pottery {version('pottery')}",
        f"- fair mode: {'measured (`fair=True`)' if res['fair'] else 'not in this build (`client.lock(name, fair=True)` raised TypeError), so no fair rows'}",
        "",
        "## Targets",
        "",
        table(["target", "measured", "result"], [list(t) for t in res["targets"]]),
        "",
        f"![benchmarks]({png.name})",
        "",
    ]
    un = res.get("uncontended")
    if un:
        rows = []
        for name in un["order_sync"] + un["order_async"]:
            r = un["rows"][name]
            rows.append([name, fmt(r["median_us"]), fmt(r["p99_us"]), f"{r['x_floor']:.2f}x", f"{r['n']:,}"])
        md += [
            "## 1. Uncontended acquire + release, one thread",
            "",
            f"One handle per library, `acquire()` then `release()` per cycle (`aacquire()`/`arelease()`, "
            f"and `acquire()`/`release()` awaited, for the asyncio rows), {un['warmup']} warm-up cycles, then "
            f"{un['rounds']} rounds of {un['cycles']:,} cycles with the order rotated between rounds. "
            "The floor is two bare round trips from the same client library: two redis-py + hiredis "
            "`PING`s per cycle (one round trip to take, one to release).",
            "",
            table(["library", "median (us)", "p99 (us)", "median / floor", "cycles"], rows),
            "",
        ]
    co = res.get("contended")
    if co:
        rows = []
        for lib, c in co.items():
            if not c.get("cycles"):
                rows.append([lib] + ["failed: " + c.get("error", "?")] + [""] * 8)
                continue
            rows.append([lib, fmt(c["cycles_per_s"]), f"{c['utilisation']:.2f}",
                         f"{c['wait_p50_ms']:.2f}", f"{c['wait_p99_ms']:.1f}", f"{c['wait_max_ms']:.1f}",
                         f"{c['counter']:,} / {c['expected']:,} " + ("ok" if c["counter_ok"] else "**WRONG**"),
                         str(c["overlaps"]), f"{c['handoffs']:,}", f"{c['wall_s']:.2f}"])
        md += [
            "## 2. Contended: processes on one lock",
            "",
            f"{p['procs']} processes (multiprocessing spawn, each with its own client) x {p['cycles']} cycles "
            f"on one lock name. Inside each hold: read a counter in shared memory (no lock of its own), "
            f"`time.sleep(0.001)` as the work, write it back +1. Each library waits its default way: "
            "ferrolock pub/sub wake-up with retry as safety net, redis-py `sleep=0.1` polling (what its users get), "
            "python-redis-lock BLPOP on a signal list, pottery a random 0-0.2 s retry. "
            "Utilisation = sum of time held (from `acquire()` returning to `release()` being called) / wall time "
            "(first `acquire()` called to last hold ended). Wait = time inside `acquire()`. "
            "Handoffs = holds taken by a different process than the previous one. "
            "Overlaps = holds that began before the previous one ended (must be 0).",
            "",
            table(["library", "cycles/s", "utilisation", "wait p50 (ms)", "wait p99 (ms)", "wait max (ms)",
                   "counter", "overlaps", "handoffs", "wall (s)"], rows),
            "",
        ]
        done = [c for c in co.values() if c.get("cycles")]
        if done and un:
            hold = sum(c["hold_mean_ms"] for c in done) / len(done)
            floor_ms = un["rows"][FLOOR]["median_us"] / 1000
            one_way = floor_ms / 4  # half a round trip: the release reaching Redis
            md += [f"A hold lasted {hold:.2f} ms on average (`time.sleep(0.001)` plus the counter). For a "
                   "library that takes the lock with its own request after a release, two holds are at least "
                   f"about the two-round-trip floor apart ({floor_ms * 1000:.0f} us in scenario 1), so its "
                   f"utilisation cannot exceed about {hold:.2f} / ({hold:.2f} + {floor_ms:.2f}) = "
                   f"{hold / (hold + floor_ms):.2f} on this machine. With `fair=True` the release itself hands "
                   "the lock over and the wake-up is the new holder's grant, so the gap is the release reaching "
                   "Redis plus the message reaching the waiter, about one round trip: a bound near "
                   f"{hold:.2f} / ({hold:.2f} + {2 * one_way:.2f}) = {hold / (hold + 2 * one_way):.2f}. What "
                   "separates the measured figure from it is scheduling: 4 processes, their runtime threads and "
                   "redis-server share 2 cores, so a woken waiter often waits for a core.", ""]
    asy = res.get("asyncio")
    if asy:
        rows = []
        for lib, a in asy.items():
            if a is None:
                rows.append([lib, "n/a (no asyncio API)", "", "", ""])
                continue
            if "error" in a:
                rows.append([lib, "failed: " + a["error"], "", "", ""])
                continue
            cyc = f"{a['cycles']:,} / {a['expected']:,}" + ("" if a["complete"] else " (stopped at the time limit)")
            rows.append([lib, fmt(a["cycles_per_s"]), cyc, f"{a['wall_s']:.2f}",
                         ("ok" if a["counter_ok"] and a["most_inside"] == 1 else "**WRONG**")])
        md += [
            "## 3. asyncio: tasks on one key in one event loop",
            "",
            f"{p['tasks']} tasks x {p['task_cycles']} cycles on one key, one event loop, a separate handle per "
            "task (`async with client.lock(name)` / `async with redis.asyncio.lock.Lock(...)`, blocking, "
            "default `sleep=0.1`; its `redis.asyncio` client gets `max_connections=tasks + 16`, because redis-py "
            "8's default pool of 100 raises `MaxConnectionsError` with 200 tasks waiting). Inside each hold a shared counter is read, the task yields "
            "(`await asyncio.sleep(0)`), and writes it back +1; the counter must come out exact with one "
            f"task inside at a time. Time limit {p['async_limit']:.0f} s per library.",
            "",
            table(["library", "cycles/s", "cycles", "wall (s)", "counter, one inside"], rows),
            "",
        ]
    wd = res.get("watchdog")
    if wd:
        rows = []
        for lib, w in wd.items():
            if w is None:
                continue
            if not w.get("ok") and w.get("taken") is None:
                rows.append([lib, "failed: " + w.get("error", "?")] + [""] * 11)
                continue
            renew_expected = w["n"] / (w["ttl_s"] / 3 if lib == FERRO else w["ttl_s"] * 2 / 3)
            if w["lost"] is None:  # python-redis-lock: what the harness saw, the holder was not told
                lost = (f"{w['n'] - w['keys_at_end']:,} expired, untold" if w["keys_at_end"] < w["n"]
                        else "0 (the library cannot tell)")
            else:
                lost = f"{w['lost']:,}"
            rows.append([
                lib, f"{w['taken']:,} / {w['n']:,}", f"{w['window_s']:.0f}", f"{w['cpu_pct']:.1f}",
                f"{w['redis_cpu_pct']:.1f}", f"{w['evalsha_per_s']:,.0f} / {renew_expected:,.0f}",
                f"{w['cpu_pct'] / 100 * 1e6 / w['evalsha_per_s']:,.0f}" if w["evalsha_per_s"] else "?",
                lost, f"{w['keys_at_end']:,}",
                f"{w['monitor_min_pttl_ms'] / 1000:.2f} s" if w.get("monitor_min_pttl_ms") is not None else "?",
                str(w["threads"]), f"{w['redis_clients']:,}", f"{w['rss_mb']:.0f}",
            ])
        md += [
            "## 4. Watchdog at scale",
            "",
            f"Locks on distinct names, ttl={p['wd_ttl']:.0f} s, acquired in one process and held for "
            f"{p['wd_hold']:.0f} s ({p['wd_hold_prl']:.0f} s for python-redis-lock), each library renewing by itself "
            "(ferrolock: one tokio task per hold, renewing every ttl/3; python-redis-lock: `auto_renewal=True`, "
            "one thread per lock, renewing every 2/3 ttl). CPU is the holding process's user+system time over "
            "the hold, as % of one core; redis-server's beside it. Renewals are the server's EVALSHA calls per "
            "second over the hold, against the rate a renewal schedule that is on time gives. The lowest ttl "
            "left is the minimum of PTTL over every lock, swept every second from another process during the "
            "hold. python-redis-lock's client gets `max_connections=locks + 16`: its renewal threads wake "
            "together and each takes a connection, and with redis-py 8's default pool of 100 they die of "
            "`MaxConnectionsError` and their locks expire. redis-py `Lock` and pottery have no watchdog: n/a.",
            "",
            table(["library", "locks held", "hold (s)", "CPU % of one core", "redis-server CPU %",
                   "renewals/s (measured / on time)", "CPU per renewal (us)", "lost", "keys at the end", "lowest ttl left",
                   "threads", "Redis connections", "RSS (MB)"], rows),
            "",
        ]
        pw = wd.get(PRL)
        if pw and pw.get("taken") is not None and (pw.get("thread_errors") or pw["keys_at_end"] < pw["n"]):
            errs = ", ".join(f"{v:,} x {k}" for k, v in pw.get("thread_errors", {}).items()) or "none"
            md += [f"python-redis-lock: {pw['n'] - pw['keys_at_end']:,} of {pw['n']:,} locks expired while "
                   f"held: their renewal threads ran late, found the key gone and died ({errs}; "
                   f"{pw.get('renewers_dead', 0):,} renewal threads dead at the end). The holders were not told; "
                   f"`release()` then raised for {pw['release_errors']:,} of them.", ""]
        fw = wd.get(FERRO)
        if fw and fw.get("taken") is not None:
            md += [f"ferrolock: {fw['watchdogs']:,} live watchdog tasks after acquiring, `on_lost` called "
                   f"{fw['on_lost_calls']} times, every `lock.lost` checked at the end; acquiring "
                   f"{fw['n']:,} locks took {fw['acquire_s']:.1f} s; {fw['keys_after_release']} keys left "
                   "after releasing them all.", ""]
    rw = res.get("rwmutex")
    if rw:
        if rw.get("reads") is None:
            rows = [[FERRO, "failed: " + rw.get("error", "?")] + [""] * 7]
        else:
            rows = [[FERRO, fmt(rw["reads_per_s"]), fmt(rw["writes_per_s"]), f"{rw['writer_wait_p50_ms']:.1f}",
                     f"{rw['writer_wait_p99_ms']:.1f}", f"{rw['writer_wait_max_ms']:.1f}",
                     f"{rw['reader_wait_p99_ms']:.1f}", f"{rw['reader_wait_max_ms']:.1f}", str(rw["overlaps"])]]
        rows += [[lib, "n/a (no RW lock)"] + [""] * 7 for lib in (REDISPY, PRL, POTTERY)]
        md += [
            "## 5. RWMutex: readers and a writer",
            "",
            f"{p['rw_readers']} reader processes + 1 writer process on one ferrolock `RWMutex` (writer "
            f"preference, the default) for {p['rw_duration']:.0f} s. Each hold lasts 1 ms (`time.sleep(0.001)`); "
            "the writer pauses 10 ms between writes. Overlaps = reader holds that overlapped a writer's hold "
            "(must be 0).",
            "",
            table(["library", "reads/s", "writes/s", "writer wait p50 (ms)", "writer wait p99 (ms)",
                   "writer wait max (ms)", "reader wait p99 (ms)", "reader wait max (ms)", "overlaps"], rows),
            "",
        ]
    if res.get("errors"):
        md += ["## Errors", ""] + [f"- {e}" for e in res["errors"]] + [""]
    text = "\n".join(md)
    out.write_text(text)
    return text


def chart(res: dict, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {FERRO: "#d9480f", FERRO_FAIR: "#f08c00", REDISPY: "#1971c2", REDISPY_ASYNC: "#1971c2",
              PRL: "#2f9e44", POTTERY: "#7048e8", FLOOR: "#868e96"}

    def color(name: str) -> str:
        for k, v in colors.items():
            if name.startswith(k):
                return v
        return "#868e96"

    def bars(ax, names, values, title, unit, log=False, labels=None):
        y = range(len(names))
        ax.barh(list(y), values, color=[color(n) for n in names])
        ax.set_yticks(list(y), [n.replace(" (asyncio)", "\n(asyncio)").replace("floor: ", "floor:\n")
                               for n in names], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        if log:
            ax.set_xscale("log")
        hi = max(values) if values else 1
        for i, v in enumerate(values):
            text = labels[i] if labels else f"{v:,.0f}"
            ax.text(v * (1.05 if log else 1) + (0 if log else hi * 0.01), i, text, va="center", fontsize=8)
        if not log:
            ax.set_xlim(0, hi * 1.3)
        else:
            ax.set_xlim(min(values) / 2, hi * 8)

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    fig.suptitle(f"ferrolock beside redis-py, python-redis-lock, pottery: one run, {res['date']}, "
                 f"{res['machine'].split(',')[0]}", fontsize=12)
    un = res.get("uncontended")
    ax = axes[0][0]
    if un:
        names = un["order_sync"] + un["order_async"]
        med = [un["rows"][n]["median_us"] for n in names]
        p99 = [un["rows"][n]["p99_us"] for n in names]
        bars(ax, names, med, "1. uncontended acquire+release: median (p99 in label)", "microseconds",
             labels=[f"{m:,.0f} (p99 {q:,.0f})" for m, q in zip(med, p99)])
    co = {k: v for k, v in res.get("contended", {}).items() if v.get("cycles")}
    if co:
        names = list(co)
        bars(axes[0][1], names, [co[n]["cycles_per_s"] for n in names],
             f"2. contended, {res['params']['procs']} processes, 1 ms held: cycles/s (utilisation)",
             "cycles per second",
             labels=[f"{co[n]['cycles_per_s']:,.0f} ({co[n]['utilisation']:.2f})" for n in names])
        bars(axes[0][2], names, [co[n]["wait_max_ms"] for n in names],
             "2. contended: max wait (p99 in label), log scale", "milliseconds", log=True,
             labels=[f"{co[n]['wait_max_ms']:,.1f} (p99 {co[n]['wait_p99_ms']:,.1f})" for n in names])
    asy = {k: v for k, v in res.get("asyncio", {}).items() if v and "cycles_per_s" in v}
    if asy:
        names = list(asy)
        bars(axes[1][0], names, [asy[n]["cycles_per_s"] for n in names],
             f"3. asyncio, {res['params']['tasks']} tasks on one key: cycles/s, log scale",
             "cycles per second", log=True)
    wd = {k: v for k, v in res.get("watchdog", {}).items() if v and v.get("taken") is not None}
    if wd:
        names = list(wd)
        bars(axes[1][1], [f"{n}\n{wd[n]['n']:,} locks" for n in names], [wd[n]["cpu_pct"] for n in names],
             "4. watchdog: CPU of the holding process (% of one core)", "% of one core",
             labels=[f"{wd[n]['cpu_pct']:.1f} %, lost: "
                     + (f"{wd[n]['lost']}" if wd[n]["lost"] is not None
                        else f"{wd[n]['n'] - wd[n]['keys_at_end']} (untold)")
                     for n in names])
        for lbl in axes[1][1].get_yticklabels():
            lbl.set_color(color(lbl.get_text()))
    rw = res.get("rwmutex")
    ax = axes[1][2]
    if rw and rw.get("reads"):
        names = ["reads/s", "writes/s"]
        ax.bar(names, [rw["reads_per_s"], rw["writes_per_s"]], color=[colors[FERRO], colors[FERRO_FAIR]])
        for i, v in enumerate([rw["reads_per_s"], rw["writes_per_s"]]):
            ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(f"5. ferrolock RWMutex, {res['params']['rw_readers']} readers + 1 writer\n"
                     "(the anchors have no RW lock)", fontsize=10)
        ax.text(0.5, 0.6, f"writer wait p50 {rw['writer_wait_p50_ms']:.1f} ms\n"
                f"writer wait max {rw['writer_wait_max_ms']:.1f} ms\noverlaps {rw['overlaps']}",
                transform=ax.transAxes, ha="center", fontsize=10,
                bbox={"facecolor": "white", "edgecolor": "#adb5bd"})
        ax.tick_params(labelsize=8)
    for a in axes.flat:
        a.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts and shorter holds (~1 minute)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"),
                    help="markdown report to write; the chart goes beside it as .png")
    args = ap.parse_args()
    out = Path(args.out)
    png = out.with_suffix(".png")
    quiet_logs()
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    q = args.quick
    params: dict[str, Any] = {
        "rounds": 3, "cycles_un": 300 if q else 1000, "warmup": 100 if q else 300,
        "procs": 4, "cycles": 200 if q else 500,
        "tasks": 200, "task_cycles": 20, "async_limit": 15.0 if q else 40.0,
        "wd_n": 2000 if q else 10_000, "wd_hold": 10.0 if q else 30.0, "wd_ttl": 3.0,
        "wd_prl_n": 200 if q else 1000, "wd_hold_prl": 6.0 if q else 10.0,
        "rw_readers": 8, "rw_duration": 3.0 if q else 5.0,
    }
    try:
        rel = os.path.relpath(sys.executable, Path.cwd())
        exe = rel if not rel.startswith("..") else sys.executable
    except ValueError:
        exe = sys.executable
    res: dict[str, Any] = {
        "params": params, "errors": [],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_note(), "load_before": "%.2f %.2f %.2f" % os.getloadavg(),
        "command": shlex.join([exe] + sys.argv),
    }
    workdir = Path(tempfile.mkdtemp(prefix="ferrolock-bench-"))
    server = None
    began = time.monotonic()

    def step(title: str, fn: Callable[[], Any]) -> Any:
        print(f"\n== {title}", flush=True)
        t = time.monotonic()
        try:
            return fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:
            traceback.print_exc()
            res["errors"].append(f"{title}: {type(e).__name__}: {e}")
            return None
        finally:
            print(f"   ({time.monotonic() - t:.1f} s)", flush=True)

    try:
        server, port = start_redis(workdir, "--maxclients", "10000")
        url = f"redis://127.0.0.1:{port}/0"
        print(f"redis-server {redis_server_version()} on {url} (pid {server.pid}); {res['machine']}")
        res["fair"] = fair_supported(url)
        print(f"fair=True available: {res['fair']}")
        ferros = [FERRO] + ([FERRO_FAIR] if res["fair"] else [])

        # 1
        un = step("1. uncontended", lambda: uncontended(
            url, ferros + [REDISPY, PRL, POTTERY], params["rounds"], params["cycles_un"], params["warmup"]))
        if un:
            res["uncontended"] = un
            for name in un["order_sync"] + un["order_async"]:
                r = un["rows"][name]
                print(f"   {name:34} median {r['median_us']:7.0f} us  p99 {r['p99_us']:7.0f} us  "
                      f"{r['x_floor']:.2f}x floor")
        flush(url)

        # 2
        res["contended"] = {}
        for lib in ferros + [REDISPY, PRL, POTTERY]:
            c = step(f"2. contended: {lib}", lambda: contended(url, lib, workdir, params["procs"], params["cycles"]))
            res["contended"][lib] = c or {"error": "see the errors"}
            if c and c.get("cycles"):
                print(f"   {c['cycles_per_s']:.0f} cycles/s, utilisation {c['utilisation']:.2f}, wait p50 "
                      f"{c['wait_p50_ms']:.2f} / p99 {c['wait_p99_ms']:.1f} / max {c['wait_max_ms']:.1f} ms, "
                      f"counter {c['counter']}/{c['expected']}, overlaps {c['overlaps']}, handoffs {c['handoffs']}")
                if not c["counter_ok"] or c["overlaps"]:
                    res["errors"].append(f"contended {lib}: counter {c['counter']} of {c['expected']}, "
                                         f"{c['overlaps']} overlaps")
            flush(url)

        # 3
        res["asyncio"] = {}
        for lib in ferros + [REDISPY_ASYNC]:
            a = step(f"3. asyncio: {lib}", lambda: asyncio.run(asyncio_run(
                url, lib, params["tasks"], params["task_cycles"], params["async_limit"])))
            res["asyncio"][lib] = a or {"error": "see the errors below"}
            if a:
                print(f"   {a['cycles_per_s']:.0f} cycles/s, {a['cycles']}/{a['expected']} cycles in "
                      f"{a['wall_s']:.2f} s, counter ok: {a['counter_ok']}, most inside: {a['most_inside']}")
            flush(url)
        res["asyncio"][PRL] = None
        res["asyncio"][POTTERY] = None

        # 4
        res["watchdog"] = {}
        wd_url = f"redis://127.0.0.1:{port}/1"
        w = step(f"4. watchdog: ferrolock, {params['wd_n']:,} locks for {params['wd_hold']:.0f} s",
                 lambda: watchdog(wd_url, FERRO, params["wd_n"], params["wd_hold"], params["wd_ttl"],
                                  workdir, server.pid))
        res["watchdog"][FERRO] = w
        if w and w.get("taken") is not None:
            print(f"   {w['taken']}/{w['n']} held, lost {w['lost']}, keys at end {w['keys_at_end']}, "
                  f"CPU {w['cpu_pct']:.1f} % of one core (redis-server {w['redis_cpu_pct']:.1f} %), "
                  f"renewals {w['evalsha_per_s']:.0f}/s, lowest ttl left {w.get('monitor_min_pttl_ms')} ms")
        flush(url)
        w = step(f"4. watchdog: python-redis-lock, {params['wd_prl_n']:,} locks for {params['wd_hold_prl']:.0f} s",
                 lambda: watchdog(wd_url, PRL, params["wd_prl_n"], params["wd_hold_prl"], params["wd_ttl"],
                                  workdir, server.pid))
        res["watchdog"][PRL] = w
        if w and w.get("taken") is not None:
            print(f"   {w['taken']}/{w['n']} held, keys at end {w['keys_at_end']}, CPU {w['cpu_pct']:.1f} % "
                  f"of one core, {w['threads']} threads, renewals {w['evalsha_per_s']:.0f}/s, "
                  f"renewal threads died: {w['thread_errors'] or 0}")
        flush(url)

        # 5
        rw = step("5. RWMutex", lambda: rwmutex(url, workdir, params["rw_readers"], params["rw_duration"]))
        if rw:
            res["rwmutex"] = rw
            if rw.get("reads"):
                print(f"   {rw['reads_per_s']:.0f} reads/s, {rw['writes_per_s']:.0f} writes/s, writer wait "
                      f"p50 {rw['writer_wait_p50_ms']:.1f} / max {rw['writer_wait_max_ms']:.1f} ms, "
                      f"overlaps {rw['overlaps']}")
                if rw["overlaps"]:
                    res["errors"].append(f"RWMutex: {rw['overlaps']} reader/writer overlaps")
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    finally:
        if server is not None:
            stop_redis(server)
        shutil.rmtree(workdir, ignore_errors=True)

    res["elapsed_s"] = time.monotonic() - began
    res["load_after"] = "%.2f %.2f %.2f" % os.getloadavg()
    res["targets"] = targets(res, args)
    print("\n== targets")
    for t in res["targets"]:
        print(f"   {t[2]:>14}  {t[0]}: {t[1]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        chart(res, png)
    except Exception as e:
        traceback.print_exc()
        res["errors"].append(f"chart: {type(e).__name__}: {e}")
    write_report(res, args, out, png)
    print(f"\nwrote {out} and {png} ({res['elapsed_s']:.0f} s)")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
