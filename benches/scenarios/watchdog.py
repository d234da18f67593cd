"""Scenario 4: the watchdog at scale (each measurement in its own process, so the CPU
and memory figures are that process's alone)."""

from __future__ import annotations

import gc
import json
import multiprocessing
import signal
import threading
import time
from pathlib import Path
from typing import Any

from scenarios.common import FERRO, quiet_logs


def scripts(r) -> tuple[int, int]:
    """(calls, usec) of EVALSHA so far, from INFO commandstats."""
    return calls(r, "evalsha")


def calls(r, command: str) -> tuple[int, int]:
    """(calls, usec) of `command` so far, from INFO commandstats (inside
    scripts too)."""
    stats = r.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def renewals(lib: str):
    """Renewals this process has made so far: ferrolock's count (None for another
    library, and for a build that counts none, whose renewals are one script call each)."""
    if lib != FERRO:
        return None
    from ferrolock import _ferrolock

    return _ferrolock._debug_stats().get("renewals")


def watchdog_worker(
    lib: str, url: str, n: int, hold: float, ttl: float, out: str, redis_pid: int, ready, go, held
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_logs()
    import psutil
    import redis

    r = redis.Redis.from_url(url)
    me, server = psutil.Process(), psutil.Process(redis_pid)
    gc.collect()
    rss_before = me.memory_info().rss
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
    evalsha0, usec0 = scripts(r)
    set0, _ = calls(r, "set")
    renewed0 = renewals(lib)
    c0, s0, w0 = me.cpu_times(), server.cpu_times(), time.perf_counter()
    time.sleep(hold)
    c1, s1, w1 = me.cpu_times(), server.cpu_times(), time.perf_counter()
    evalsha1, usec1 = scripts(r)
    set1, _ = calls(r, "set")
    renewed1 = renewals(lib)
    held.set()  # the parent stops sweeping
    window = w1 - w0
    result["window_s"] = window
    result["cpu_pct"] = 100 * ((c1.user - c0.user) + (c1.system - c0.system)) / window
    result["redis_cpu_pct"] = 100 * ((s1.user - s0.user) + (s1.system - s0.system)) / window
    result["evalsha_per_s"] = (evalsha1 - evalsha0) / window
    # SET calls, a script's included: a renewal by SET ... IFEQ (Valkey) is one
    result["set_per_s"] = (set1 - set0) / window
    # the scripts' own time on the server (INFO commandstats), in % of a core
    result["script_cpu_pct"] = 100 * (usec1 - usec0) / 1e6 / window
    # ferrolock renews many holds in one script call: its renewals are its own count
    # (python-redis-lock's are its script calls, one each)
    result["renewals_per_s"] = (renewed1 - renewed0) / window if renewed0 is not None else result["evalsha_per_s"]
    result["rss_mb"] = me.memory_info().rss / 2**20
    result["bytes_per_lock"] = (me.memory_info().rss - rss_before) / max(taken, 1)
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
        result["renewers_dead"] = sum(
            1 for lock in locks if lock._lock_renewal_thread is not None and not lock._lock_renewal_thread.is_alive()
        )
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


def watchdog(
    url: str, lib: str, n: int, hold: float, ttl: float, workdir: Path, redis_pid: int, sweep_ttls: bool = True
) -> dict:
    """`n` locks of `lib` held `hold` s; `sweep_ttls`: the lowest ttl left is
    swept from this process meanwhile (its SCAN and PTTL cost redis-server CPU too)."""
    import redis

    ctx = multiprocessing.get_context("spawn")
    ready, go, held = ctx.Event(), ctx.Event(), ctx.Event()
    out = workdir / f"watchdog-{abs(hash(lib))}.json"
    p = ctx.Process(target=watchdog_worker, args=(lib, url, n, hold, ttl, str(out), redis_pid, ready, go, held))
    stop = threading.Event()
    monitor: dict[str, Any] = {"sweeps": 0, "min_pttl_ms": None, "min_keys": None}

    def sweep() -> None:  # from this process: the lowest ttl left on any lock, every ~1 s per 20,000
        r = redis.Redis.from_url(url)
        while not stop.wait(max(1.0, n / 20_000)):
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
        if sweep_ttls:
            mon.start()
        go.set()
        held.wait(hold + 60)
        stop.set()
        if mon.is_alive():
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
