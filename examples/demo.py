"""A tour of ferrolock against a throwaway redis-server.

    make demo        # or: .venv/bin/python examples/demo.py

1. four processes contend for one lock around a read-modify-write of a file;
2. the watchdog keeps a short-ttl lock alive for several ttls;
3. a lost hold is reported (on_lost callback, LockLost at the end of `with`);
4. asyncio tasks share a counter under `async with`.

Every number printed is measured. Exits 0 when every check passes.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import ferrolock
from ferrolock.throwaway import RedisServer

WORKERS, CYCLES = 4, 25
PREFIX = "demo:"
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  [{'ok' if ok else 'FAIL'}] {what}")
    if not ok:
        failures.append(what)


# -- 1. contention across processes ------------------------------------------


def worker(i: int, url: str, counter: str, out: str, start_together) -> None:
    """One process: CYCLES read-modify-writes of the counter file, each under the lock."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # on Ctrl-C the parent stops us
    client = ferrolock.Client(url, prefix=PREFIX)  # each process has its own client
    holds = []
    start_together.wait(30)
    for _ in range(CYCLES):
        asked = time.perf_counter()
        # Waits (retrying with jittered exponential backoff, 2 ms .. 100 ms by default),
        # renews every ttl/3 while held, releases at the end of the block.
        with client.lock("demo:counter", ttl=5.0, metadata=f"worker-{i}") as lock:
            start = time.time()
            waited = time.perf_counter() - asked
            value = int(Path(counter).read_text())
            time.sleep(0.002)  # the "work": without the lock, updates would be lost here
            Path(counter).write_text(str(value + 1))
            holds.append({"worker": i, "fence": lock.fence, "wait": waited, "start": start, "end": time.time()})
        time.sleep(0.001)  # work outside the lock, which gives the others a chance
    Path(out).write_text(json.dumps(holds))


def demo_contention(url: str, workdir: Path) -> None:
    print(f"\n1. {WORKERS} processes x {CYCLES} cycles: read counter, work ~2 ms, write counter+1")
    counter = workdir / "counter.txt"
    counter.write_text("0")
    ctx = multiprocessing.get_context("spawn")
    start_together = ctx.Barrier(WORKERS)
    outs = [workdir / f"worker-{i}.json" for i in range(WORKERS)]
    procs = [
        ctx.Process(target=worker, args=(i, url, str(counter), str(outs[i]), start_together)) for i in range(WORKERS)
    ]
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + 60
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:  # only after a failure or Ctrl-C
            if p.is_alive():
                p.terminate()
                p.join()
    check(all(p.exitcode == 0 for p in procs), "every worker exited cleanly")
    holds = sorted((h for o in outs if o.exists() for h in json.loads(o.read_text())), key=lambda h: h["start"])
    check(len(holds) == WORKERS * CYCLES, f"{len(holds)} holds recorded")
    if not holds:
        return
    final = int(counter.read_text())
    span = holds[-1]["end"] - holds[0]["start"]
    print(f"  {len(holds)} holds in {span:.2f} s of contention")
    check(final == WORKERS * CYCLES, f"final counter {final}, expected {WORKERS * CYCLES}")
    overlaps = sum(a["end"] > b["start"] for a, b in zip(holds, holds[1:]))
    check(overlaps == 0, f"overlapping holds: {overlaps}")
    # A fence is Redis's clock in microseconds, raised if needed above the last one.
    fences = [h["fence"] for h in holds]
    check(
        all(a < b for a, b in zip(fences, fences[1:])),
        f"fences strictly increase in hold order ({fences[0]} .. {fences[-1]})",
    )
    per_worker = Counter(h["worker"] for h in holds)
    print("  holds per worker: " + ", ".join(f"worker-{w}: {n}" for w, n in sorted(per_worker.items())))
    waits = [h["wait"] * 1000 for h in holds]
    print(f"  acquire wait: p50 {statistics.median(waits):.1f} ms, max {max(waits):.1f} ms")
    handoffs = sum(a["worker"] != b["worker"] for a, b in zip(holds, holds[1:]))
    print(f"  next hold taken by a different process: {handoffs} of {len(holds) - 1} times")
    print("  first holds:")
    for n, h in enumerate(holds[:8], 1):
        print(f"    #{n} worker-{h['worker']}  fence {h['fence']}  waited {h['wait'] * 1000:5.1f} ms")


# -- 2. the watchdog renews a hold that outlives its ttl ---------------------


def demo_watchdog(client: ferrolock.Client) -> None:
    ttl = 1.0
    print(f"\n2. Watchdog: ttl={ttl} s, held for {3.5 * ttl} s, lock.ttl() sampled every 0.5 s")
    with client.lock("demo:watchdog", ttl=ttl, metadata="long-job") as lock:
        token, samples, began = lock.token, [], time.monotonic()
        while time.monotonic() - began < 3.5 * ttl:
            time.sleep(0.5)
            samples.append(lock.ttl())  # seconds left in Redis; None if no longer ours
        held_for = time.monotonic() - began
        info = client.inspect("demo:watchdog")
        lost = lock.lost
    print("  ttl left: " + " ".join("gone" if s is None else f"{s:.2f}s" for s in samples))
    check(
        all(s is not None and s > 0 for s in samples),
        f"held {held_for:.1f} s ({held_for / ttl:.1f} ttls), never lapsed "
        f"(lowest ttl left {min(s or 0 for s in samples):.2f} s)",
    )
    check(
        info is not None and info.token == token and info.metadata == "long-job",
        "Redis still showed our token and metadata at the end",
    )
    check(not lost, f"lock.lost is {lost}")


# -- 3. a lost hold is reported ----------------------------------------------


def demo_lost(client: ferrolock.Client) -> None:
    print("\n3. Lost lock: ttl=1.0 s, then an operator force-releases it and another handle takes it")
    lost_event = threading.Event()
    victim = client.lock("demo:lost", ttl=1.0, on_lost=lost_event.set)
    thief = client.lock("demo:lost", ttl=1.0, metadata="new-holder")
    raised, latency, took, old_fence = None, None, False, None
    try:
        try:
            with victim:
                old_fence = victim.fence
                client.force_release("demo:lost")
                took = thief.acquire(blocking=False)
                taken_at = time.perf_counter()
                if lost_event.wait(3.0):  # the watchdog notices at its next renewal
                    latency = time.perf_counter() - taken_at
        except ferrolock.LockLost as e:
            if isinstance(e.__context__, KeyboardInterrupt):
                raise e.__context__  # LockLost supersedes whatever the block raised
            raised = e
        info = client.inspect("demo:lost")
        check(took, f"the new handle acquired it (fence {old_fence} -> {thief.fence})")
        check(
            latency is not None,
            "on_lost fired"
            + (
                f" {latency * 1000:.0f} ms after the takeover (renewals every ttl/3 = 333 ms)"
                if latency is not None
                else " (not within 3 s)"
            ),
        )
        check(raised is not None, f"the with block raised LockLost: {raised}")
        check(victim.lost, "victim.lost is True")
        check(
            info is not None and info.token == thief.token,
            f"the new holder still holds it (inspect: metadata={info and info.metadata!r})",
        )
    finally:
        if thief.token is not None:
            thief.release()


# -- 4. asyncio ---------------------------------------------------------------


async def demo_async(client: ferrolock.Client) -> None:
    tasks, rounds = 20, 5
    print(f"\n4. asyncio: {tasks} tasks x {rounds} increments, each task with its own handle")
    state = {"counter": 0, "inside": 0, "most_inside": 0}

    async def task() -> None:
        lock = client.lock("demo:async-counter", ttl=5.0)
        for _ in range(rounds):
            async with lock:
                state["inside"] += 1
                state["most_inside"] = max(state["most_inside"], state["inside"])
                value = state["counter"]
                await asyncio.sleep(0.001)  # lets other tasks run mid-update
                state["counter"] = value + 1
                state["inside"] -= 1

    began = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(tasks)))
    print(f"  {tasks * rounds} holds in {time.perf_counter() - began:.2f} s")
    check(state["counter"] == tasks * rounds, f"counter {state['counter']}, expected {tasks * rounds}")
    check(state["most_inside"] == 1, f"at most {state['most_inside']} task inside at once")


def main() -> int:
    # `kill` (SIGTERM) unwinds like Ctrl-C, so the finally below still stops redis.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # A throwaway redis-server: loopback only, no persistence, its own temp dir.
    redis = RedisServer()
    workdir = Path(tempfile.mkdtemp(prefix="ferrolock-demo-"))
    try:
        began = time.monotonic()
        url = redis.start().url
        print(f"ferrolock {ferrolock.__version__}: redis-server started on {url} (pid {redis.proc.pid})")
        client = ferrolock.Client(url, prefix=PREFIX)
        demo_contention(url, workdir)
        demo_watchdog(client)
        demo_lost(client)
        asyncio.run(demo_async(client))
        print(f"\n({time.monotonic() - began:.1f} s)")
    except KeyboardInterrupt:
        failures.append("interrupted")
    except Exception as e:  # report, then stop redis and fail
        traceback.print_exc()
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        redis.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print("demo FAILED: " + "; ".join(failures))
        return 130 if "interrupted" in failures else 1
    print("demo OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
