"""Semaphore and election figures, beside the network floor and a counting
semaphore built the usual way on redis-py, measured in one run against a
throwaway redis-server on loopback: `python benches/primitives.py [--quick]`.

1. Uncontended permit acquire + release, against two bare PINGs (the floor:
   one round trip each way).
2. N=4 permits, 16 processes, 1 ms inside: utilisation of the permits (busy
   permit-time / (4 x wall time)) and the longest wait, for ferrolock
   (wake-ups, fair and not) and for an INCR/DECR semaphore with an expiry
   that polls every 1 ms (the usual hand-rolled one: no lease per holder).
3. Election: time from the leader's death (SIGKILL) to a new leader, and
   from a resignation to a new leader.
4. With `--replicas`: the uncontended Lock acquire + release cycle against a
   master with one replica on loopback, without replica acknowledgement and
   with `replicas=1` (WAIT behind each grant), in the same run: sync
   (`with lock`), sync non-blocking (inline), and asyncio.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import statistics
import sys
import time

import redis

import ferrolock

from ferrolock.throwaway import RedisServer

PERMITS, PROCS, HOLD_S = 4, 16, 0.001


def median_us(f, n: int) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def uncontended(url: str, n: int) -> dict:
    r = redis.Redis.from_url(url)
    client = ferrolock.Client(url, prefix="bench:")
    sem = client.semaphore("u", PERMITS, ttl=30.0)
    lock = client.lock("u", ttl=30.0)

    def permit():
        sem.acquire()
        sem.release()

    def plain():
        lock.acquire()
        lock.release()

    for f in (permit, plain):
        median_us(f, n // 10)  # warm up: scripts loaded, connections open
    return {
        "floor: two PINGs (redis-py)": median_us(lambda: (r.ping(), r.ping()), n),
        "ferrolock semaphore": median_us(permit, n),
        "ferrolock Lock": median_us(plain, n),
    }


def _ferro_worker(url, fair, cycles, barrier, out):
    client = ferrolock.Client(url, prefix="bench:")
    sem = client.semaphore("c", PERMITS, ttl=30.0, fair=fair)
    waits, busy = [], 0.0
    barrier.wait()
    for _ in range(cycles):
        t = time.perf_counter()
        with sem:
            got = time.perf_counter()
            time.sleep(HOLD_S)
            busy += time.perf_counter() - got
        waits.append(got - t)
    out.put((max(waits), busy))


def _incr_worker(url, fair, cycles, barrier, out):
    r = redis.Redis.from_url(url)
    key = "bench:incr-sem"
    waits, busy = [], 0.0
    barrier.wait()
    for _ in range(cycles):
        t = time.perf_counter()
        while True:  # INCR, and give it back when over the limit; poll every 1 ms
            pipe = r.pipeline()
            pipe.incr(key)
            pipe.expire(key, 30)
            if pipe.execute()[0] <= PERMITS:
                break
            r.decr(key)
            time.sleep(0.001)
        got = time.perf_counter()
        time.sleep(HOLD_S)
        busy += time.perf_counter() - got
        r.decr(key)
        waits.append(got - t)
    out.put((max(waits), busy))


def contended(url: str, worker, fair: bool, cycles: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(PROCS + 1), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(url, fair, cycles, barrier, out)) for _ in range(PROCS)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    results = [out.get(timeout=300) for _ in procs]
    wall = time.perf_counter() - start
    for p in procs:
        p.join(30)
    return {
        "utilisation": sum(b for _, b in results) / (PERMITS * wall),
        "max wait ms": max(w for w, _ in results) * 1e3,
    }


def _leader(url, ttl, ready):
    term = ferrolock.Client(url, prefix="bench:").election("e", ttl=ttl).campaign("doomed")
    ready.put(term.number)
    time.sleep(3600)


def election(url: str, rounds: int) -> dict:
    client = ferrolock.Client(url, prefix="bench:")
    ttl = 1.0
    deaths, resigns = [], []
    ctx = multiprocessing.get_context("spawn")
    for _ in range(rounds):
        ready = ctx.Queue()
        p = ctx.Process(target=_leader, args=(url, ttl, ready))
        p.start()
        ready.get(timeout=30)
        e = client.election("e", ttl=ttl)
        os.kill(p.pid, signal.SIGKILL)
        t = time.perf_counter()
        term = e.campaign("heir", timeout=10)
        deaths.append(time.perf_counter() - t)
        p.join(10)
        heir = ferrolock.Client(url, prefix="bench:").election("e", ttl=ttl)
        import threading

        got = {}
        th = threading.Thread(
            target=lambda: got.setdefault("t", (heir.campaign("next", timeout=10), time.perf_counter()))
        )
        th.start()
        while ferrolock._ferrolock._debug_stats()["waiters"] < 1:
            time.sleep(0.001)
        t = time.perf_counter()
        term.resign()
        th.join(10)
        resigns.append(got["t"][1] - t)
        got["t"][0].resign()
    return {
        "death to new leader (ttl 1 s), median ms": statistics.median(deaths) * 1e3,
        "resign to new leader, median ms": statistics.median(resigns) * 1e3,
    }


def replicated(n: int) -> dict:
    """The Lock cycle beside a replica, with and without replicas=1."""
    import asyncio

    with (
        RedisServer(extra=("--repl-diskless-sync-delay", "0")) as master,
        RedisServer(extra=("--replicaof", "127.0.0.1", str(master.port))) as _replica,
    ):
        url = master.url
        r = redis.Redis.from_url(url)
        deadline = time.monotonic() + 30
        while r.info("replication").get("connected_slaves", 0) < 1 or "online" not in str(
            r.info("replication").get("slave0", "")
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not come online")
            time.sleep(0.05)  # polling the replica's state: nothing to await
        out = {}
        # a patient replica_timeout: WAIT returns as soon as the replica
        # acknowledges, and a loaded machine must not fail the run
        patient = {"replicas": 1, "replica_timeout": 1.0}
        for label, options in (
            ("no replica acknowledgement", {}),
            ("replicas=1 (WAIT behind each grant and renewal)", patient),
        ):
            client = ferrolock.Client(url, prefix="bench:", **options)
            lock = client.lock(f"r{len(out)}", ttl=30.0)

            def blocking():
                with lock:
                    pass

            def inline():
                lock.acquire(blocking=False)
                lock.release()

            async def cycles(k: int) -> list:
                samples = []
                for _ in range(k):
                    t = time.perf_counter()
                    async with lock:
                        pass
                    samples.append(time.perf_counter() - t)
                return samples

            for f in (blocking, inline):
                median_us(f, n // 10)  # warm up
            asyncio.run(cycles(n // 10))
            out[label] = {
                "with lock": median_us(blocking, n),
                "acquire(blocking=False) + release (inline)": median_us(inline, n),
                "async with lock": statistics.median(asyncio.run(cycles(n))) * 1e6,
            }
        return out


def main() -> None:
    quick = "--quick" in sys.argv
    if "--replicas" in sys.argv:
        n = 500 if quick else 3000
        results = replicated(n)
        labels = list(results)
        print(f"## Lock acquire + release beside one replica on loopback (median of {n}, µs)")
        print(f"| cycle | {' | '.join(labels)} |")
        print("|---|---|---|")
        for cycle in results[labels[0]]:
            print(f"| {cycle} | " + " | ".join(f"{results[label][cycle]:.0f}" for label in labels) + " |")
        return
    with RedisServer() as server:
        url = server.url
        print("## Uncontended acquire + release (median, µs)")
        for k, v in uncontended(url, 500 if quick else 3000).items():
            print(f"| {k} | {v:.0f} |")
        cycles = 20 if quick else 100
        print(f"\n## {PERMITS} permits, {PROCS} processes x {cycles} cycles, {HOLD_S * 1e3:.0f} ms inside")
        print("| semaphore | utilisation | max wait (ms) |")
        print("|---|---|---|")
        for label, worker, fair in (
            ("ferrolock", _ferro_worker, False),
            ("ferrolock fair=True", _ferro_worker, True),
            ("redis-py INCR/DECR, 1 ms poll", _incr_worker, False),
        ):
            r = contended(url, worker, fair, cycles)
            print(f"| {label} | {r['utilisation']:.2f} | {r['max wait ms']:.1f} |")
        print("\n## Election")
        for k, v in election(url, 3 if quick else 10).items():
            print(f"| {k} | {v:.0f} |")


if __name__ == "__main__":
    main()
