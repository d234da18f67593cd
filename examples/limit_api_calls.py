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
import tempfile
import time
from pathlib import Path

import ferrolock

sys.path.insert(0, str(Path(__file__).parent))
from throwaway_redis import redis_url  # noqa: E402

PERMITS, WORKERS, CALLS = 2, 6, 5


def call_api(url: str, counter: str, log) -> None:
    client = ferrolock.Client(url, prefix="example:")
    for _ in range(CALLS):
        with client.semaphore("partner-api", PERMITS, ttl=10.0, metadata=f"pid {os.getpid()}"):
            fd = os.open(counter, os.O_RDWR)
            try:  # how many calls are in flight now (a file shared by the workers)
                inside = int(os.pread(fd, 8, 0) or b"0") + 1
                os.pwrite(fd, b"%8d" % inside, 0)
            finally:
                os.close(fd)
            log.put(inside)
            time.sleep(0.02)  # the API call
            fd = os.open(counter, os.O_RDWR)
            try:
                os.pwrite(fd, b"%8d" % (int(os.pread(fd, 8, 0)) - 1), 0)
            finally:
                os.close(fd)


def main() -> int:
    with redis_url() as url, tempfile.TemporaryDirectory() as tmp:
        counter = os.path.join(tmp, "in-flight")
        Path(counter).write_bytes(b"%8d" % 0)
        ctx = multiprocessing.get_context("spawn")
        log = ctx.Queue()
        workers = [ctx.Process(target=call_api, args=(url, counter, log)) for _ in range(WORKERS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        seen = [log.get(timeout=5) for _ in range(WORKERS * CALLS)]
        print(f"{len(seen)} calls by {WORKERS} processes, at most {max(seen)} at once (limit {PERMITS})")
        ok = max(seen) <= PERMITS and all(w.exitcode == 0 for w in workers)
        print("OK" if ok else "FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
