"""A cron job that only the leader runs: three processes campaign in one
election; the leader runs the job on each tick, and when it dies another
takes over within the term's ttl. Runs against a throwaway redis-server (or
REDIS_URL): `python examples/leader_cron.py`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import ferrolock

sys.path.insert(0, str(Path(__file__).parent))
from throwaway_redis import redis_url  # noqa: E402

TTL = 1.0


def node(url: str, name: str, runs) -> None:
    election = ferrolock.Client(url, prefix="example:").election("nightly-report", ttl=TTL)
    with election.campaign(name) as term:  # blocks until this node leads
        while not term.lost:
            runs.put((name, term.number, time.monotonic()))  # the job, once per tick
            time.sleep(0.1)


def main() -> int:
    with redis_url() as url:
        ctx = multiprocessing.get_context("spawn")
        runs = ctx.Queue()
        nodes = {n: ctx.Process(target=node, args=(url, n, runs)) for n in ("node-a", "node-b", "node-c")}
        for p in nodes.values():
            p.start()
        first, term, _ = runs.get(timeout=30)
        print(f"{first} leads (term {term}) and runs the job")
        os.kill(nodes[first].pid, signal.SIGKILL)
        killed = time.monotonic()
        print(f"{first} killed")
        while True:
            name, new_term, at = runs.get(timeout=30)
            if name != first:
                break
        print(f"{name} took over after {at - killed:.2f} s (ttl {TTL} s), term {new_term} > {term}")
        ok = new_term > term and at - killed < TTL + 1.0
        for p in nodes.values():
            p.kill()
            p.join(10)
        print("OK" if ok else "FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
