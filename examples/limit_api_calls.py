"""Limit concurrent calls to an API across processes with a leased semaphore.

Six worker processes each make five calls to a (simulated) API that allows at
most 2 calls at once. Each call holds one of the semaphore's 2 permits; a
worker that dies frees its permit after its ttl, never sooner. Runs against a
throwaway redis-server (or REDIS_URL): `python examples/limit_api_calls.py`.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time

import ferrolock
from ferrolock.throwaway import redis_url

PERMITS, WORKERS, CALLS = 2, 6, 5


def call_api(url: str, log) -> None:
    client = ferrolock.Client(url, prefix="example:")
    for _ in range(CALLS):
        with client.semaphore("partner-api", PERMITS, ttl=10.0, metadata=f"pid {os.getpid()}"):
            started = time.monotonic()
            time.sleep(0.02)  # the API call
            log.put((started, time.monotonic()))


def most_at_once(calls: list) -> int:
    """The most calls in flight at one instant (the clock is system-wide)."""
    edges = sorted([(s, 1) for s, _ in calls] + [(e, -1) for _, e in calls])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def main() -> int:
    with redis_url() as url:
        ctx = multiprocessing.get_context("spawn")
        log = ctx.Queue()
        workers = [ctx.Process(target=call_api, args=(url, log)) for _ in range(WORKERS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        calls = [log.get(timeout=5) for _ in range(WORKERS * CALLS)]
        peak = most_at_once(calls)
        print(f"{len(calls)} calls by {WORKERS} processes, at most {peak} at once (limit {PERMITS})")
        ok = peak <= PERMITS and all(w.exitcode == 0 for w in workers)
        print("OK" if ok else "FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
