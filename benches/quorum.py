"""What a quorum of independent masters (Redlock) costs: the uncontended
acquire+release cycle on one server and on quorums of 3 and 5, beside the
network floor and pottery's Redlock over the same masters, in one run.

    python benches/quorum.py [--cycles 2000] [--rounds 3]

Starts its own redis-servers on free loopback ports (no persistence, stopped
at the end). For each number of masters N it measures, taking turns round
after round so that a change in the machine's state hits every column alike,
and keeps each column's best round:

- floor: two round trips to N servers at once over raw sockets (PING written
  to each, then each reply read): the least a cycle of two steps can cost;
- ferrolock `with lock` (sync) and `async with lock` (asyncio), ttl 10 s;
- pottery `Redlock` (acquire + release) over the same N masters, the anchor
  with a quorum (redsync is Go).

Figures are microseconds per cycle, and the ratio to the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
import time

import ferrolock
from ferrolock.throwaway import RedisServer, encode

# The floor reads each reply with one recv, unparsed: a PONG fits in one.
PING = encode(("PING",))


def floor(ports: list, cycles: int) -> float:
    socks = [socket.create_connection(("127.0.0.1", p)) for p in ports]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def round_trip() -> None:
        for s in socks:
            s.sendall(PING)
        for s in socks:
            s.recv(64)

    try:
        for _ in range(100):
            round_trip()
        started = time.perf_counter()
        for _ in range(cycles):
            round_trip()
            round_trip()
        return (time.perf_counter() - started) / cycles * 1e6
    finally:
        for s in socks:
            s.close()


def ferrolock_sync(urls: list, cycles: int) -> float:
    client = ferrolock.Client(urls if len(urls) > 1 else urls[0], prefix="bench:quorum:")
    lock = client.lock("sync", ttl=10)
    for _ in range(100):
        with lock:
            pass
    started = time.perf_counter()
    for _ in range(cycles):
        with lock:
            pass
    return (time.perf_counter() - started) / cycles * 1e6


def ferrolock_async(urls: list, cycles: int) -> float:
    client = ferrolock.Client(urls if len(urls) > 1 else urls[0], prefix="bench:quorum:")

    async def main() -> float:
        lock = client.lock("async", ttl=10)
        for _ in range(100):
            async with lock:
                pass
        started = time.perf_counter()
        for _ in range(cycles):
            async with lock:
                pass
        return (time.perf_counter() - started) / cycles * 1e6

    return asyncio.run(main())


def pottery_redlock(urls: list, cycles: int) -> float | None:
    try:
        from pottery import Redlock
        from redis import Redis
    except ImportError:
        return None
    logging.getLogger("pottery").setLevel(logging.ERROR)
    masters = {Redis.from_url(u) for u in urls}
    lock = Redlock(key="bench:quorum:pottery", masters=masters, auto_release_time=10)
    for _ in range(50):
        lock.acquire()
        lock.release()
    started = time.perf_counter()
    for _ in range(cycles):
        lock.acquire()
        lock.release()
    return (time.perf_counter() - started) / cycles * 1e6


COLUMNS = {
    "floor (2 round trips)": lambda urls, ports, n: floor(ports, n),
    "ferrolock sync": lambda urls, ports, n: ferrolock_sync(urls, n),
    "ferrolock asyncio": lambda urls, ports, n: ferrolock_async(urls, n),
    "pottery Redlock": lambda urls, ports, n: pottery_redlock(urls, max(n // 4, 200)),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=2000, help="cycles per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each column keeps its best")
    args = ap.parse_args()
    servers = [RedisServer().start() for _ in range(5)]
    try:
        best: dict = {}
        for _ in range(args.rounds):
            for n in (1, 3, 5):
                urls, ports = [s.url for s in servers[:n]], [s.port for s in servers[:n]]
                for column, measure in COLUMNS.items():
                    us = measure(urls, ports, args.cycles)
                    if us is not None:
                        key = (n, column)
                        best[key] = min(best.get(key, us), us)
        print(f"uncontended acquire+release, µs per cycle (best of {args.rounds} rounds), ratio to the floor")
        print(f"{'masters':>8}  " + "  ".join(f"{c:>22}" for c in COLUMNS))
        for n in (1, 3, 5):
            base = best[(n, "floor (2 round trips)")]
            cells = []
            for column in COLUMNS:
                us = best.get((n, column))
                cells.append(f"{'n/a':>22}" if us is None else f"{us:>12.1f} ({us / base:4.1f}×)".rjust(22))
            print(f"{n:>8}  " + "  ".join(cells))
        print("1 master: a plain client of one server (no quorum); 3 and 5: Client([url, ...]).")
    finally:
        for s in servers:
            s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
