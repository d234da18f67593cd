"""Scenario 1: uncontended acquire + release from one thread (and one event loop), beside
the floor of two bare round trips."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from scenarios.common import TTL, FERRO, REDISPY_ASYNC, FLOOR, pct, make_factory


def uncontended(url: str, libs: list[str], rounds: int, cycles: int, warmup: int) -> dict:
    """Each library in turn, in `rounds` rounds with the order rotated, so that
    the machine's noise falls on all of them alike. One handle per library,
    acquire() + release() per cycle."""
    import redis
    import redis.asyncio as aredis
    import ferrolock

    samples: dict[str, list[float]] = {}
    per_round: dict[str, list[float]] = {}  # each round's median, per library
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
                    per_round.setdefault(lib, []).append(pct([x / 1000 for x in ns], 50))
        finally:
            await ar.aclose()

    sync_names = [FLOOR] + libs
    for name in sync_names:  # warm-up: connections, scripts loaded, caches
        for _ in range(warmup):
            sync_cycle[name]()
    asyncio.run(async_round(async_libs, warmup, record=False))

    for rnd in range(rounds):
        order = sync_names[rnd % len(sync_names) :] + sync_names[: rnd % len(sync_names)]
        for name in order:
            f = sync_cycle[name]
            ns = []
            for _ in range(cycles):
                t0 = time.perf_counter_ns()
                f()
                ns.append(time.perf_counter_ns() - t0)
            samples.setdefault(name, []).extend(x / 1000 for x in ns)
            per_round.setdefault(name, []).append(pct([x / 1000 for x in ns], 50))
        aorder = async_libs[rnd % 3 :] + async_libs[: rnd % 3]
        asyncio.run(async_round(aorder, cycles, record=True))
    r.close()

    rows = {}
    floor_med = pct(samples[FLOOR], 50)
    for name in sync_names + async_libs:
        s = samples[name]
        rows[name] = {
            "median_us": pct(s, 50),
            "p99_us": pct(s, 99),
            "n": len(s),
            "x_floor": pct(s, 50) / floor_med,
            "x_floor_rounds": round_ratio(per_round, name, FLOOR),
        }
    return {
        "rows": rows,
        "order_sync": sync_names,
        "order_async": async_libs,
        "per_round": per_round,
        "rounds": rounds,
        "cycles": cycles,
        "warmup": warmup,
    }


def round_ratio(per_round: dict[str, list[float]], a: str, b: str) -> float:
    """The median, over the rounds, of `a`'s median over `b`'s in the same round:
    a burst of noise long enough to cover a round slows both sides of its ratio."""
    return pct([x / y for x, y in zip(per_round[a], per_round[b])], 50)
