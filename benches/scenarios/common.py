"""What every scenario shares: the libraries compared, their handles, and small helpers."""

from __future__ import annotations

import logging
import math
import time
from importlib import metadata as pkg_metadata
from typing import Any, Callable

TTL = 10.0  # seconds, the same expiry for every library in scenarios 1-3 (none is reached)
WORK = 0.001  # the 1 ms of "work" held inside the lock in scenario 2

FERRO = "ferrolock"
FERRO_FAIR = "ferrolock fair=True"
FERRO_WAKEUPS = "ferrolock retry=Retry.fixed(1.0)"  # waiting on wake-ups, hardly any polling
REDISPY = "redis-py Lock"
REDISPY_ASYNC = "redis-py asyncio Lock"
PRL = "python-redis-lock"
POTTERY = "pottery Redlock"
FLOOR = "floor: 2 x PING"


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


def flush(url: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    r.flushall()
    r.close()


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
