"""Scenario 3: many asyncio tasks on one key in one event loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from scenarios.common import TTL, FERRO, FERRO_FAIR, FERRO_WAKEUPS


async def asyncio_run(url: str, lib: str, tasks: int, cycles: int, time_limit: float) -> dict:
    state = {"counter": 0, "inside": 0, "most_inside": 0, "done": 0}
    deadline = time.perf_counter() + time_limit
    name = f"a:{lib}"
    new: Callable[[], Any]
    if lib in (FERRO, FERRO_FAIR, FERRO_WAKEUPS):
        import ferrolock

        client = ferrolock.Client(url, prefix="bench:")
        opts: dict[str, Any] = {"ttl": TTL}
        if lib == FERRO_FAIR:
            opts["fair"] = True
        if lib == FERRO_WAKEUPS:
            opts["retry"] = ferrolock.Retry.fixed(1.0)
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
    import redis

    stats = redis.Redis.from_url(url)
    stats.config_resetstat()
    began = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(tasks)))
    wall = time.perf_counter() - began
    commands = stats.info("commandstats")
    stats.close()
    scripts = sum(commands.get(k, {}).get("calls", 0) for k in ("cmdstat_evalsha", "cmdstat_eval"))
    if closer is not None:
        await closer()
    expected = tasks * cycles
    return {
        "cycles": state["done"],
        "expected": expected,
        "wall_s": wall,
        "scripts_per_cycle": scripts / max(state["done"], 1),
        "server_us_per_cycle": sum(v.get("usec", 0) for v in commands.values()) / max(state["done"], 1),
        "cycles_per_s": state["done"] / wall,
        "complete": state["done"] == expected,
        "counter_ok": state["counter"] == state["done"],
        "most_inside": state["most_inside"],
    }
