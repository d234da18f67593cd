"""A cron job that only the leader runs: three processes campaign in one
election; the leader runs the job on each tick, and when it dies another
takes over within the term's ttl. Runs against a throwaway redis-server (or
REDIS_URL): `python examples/leader_cron.py`.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import wait
import os
import signal
import sys
import time

import ferrolock
from ferrolock.throwaway import redis_url

TTL = 1.0


def node(url: str, name: str, runs) -> None:
    election = ferrolock.Client(url, prefix="example:").election("nightly-report", ttl=TTL)
    with election.campaign(name) as term:  # blocks until this node leads
        while not term.lost:
            runs.send((name, term.number, time.monotonic()))  # the job, once per tick
            time.sleep(0.1)


def main() -> int:
    with redis_url() as url:
        ctx = multiprocessing.get_context("spawn")
        # A pipe per node, not one shared queue: a node killed while writing
        # to a shared queue could leave its lock held and the others stuck.
        pipes = {n: ctx.Pipe(duplex=False) for n in ("node-a", "node-b", "node-c")}
        nodes = {n: ctx.Process(target=node, args=(url, n, w), daemon=True) for n, (_, w) in pipes.items()}
        readers = [r for r, _ in pipes.values()]

        def next_run(timeout: float = 30) -> tuple:
            deadline = time.monotonic() + timeout
            while readers:
                ready = wait(readers, max(0.0, deadline - time.monotonic()))
                if not ready:
                    break
                for r in ready:
                    try:
                        return r.recv()
                    except EOFError:
                        readers.remove(r)  # a killed node's pipe
            raise TimeoutError("no node ran the job in time")

        try:
            for p in nodes.values():
                p.start()
            first, term, _ = next_run()
            print(f"{first} leads (term {term}) and runs the job")
            os.kill(nodes[first].pid, signal.SIGKILL)
            killed = time.monotonic()
            print(f"{first} killed")
            while True:
                name, new_term, at = next_run()
                if name != first:
                    break
            print(f"{name} took over after {at - killed:.2f} s (ttl {TTL} s), term {new_term} > {term}")
            ok = new_term > term and at - killed < TTL + 1.0
        finally:
            for p in nodes.values():
                p.kill()
                p.join(10)
        print("OK" if ok else "FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
