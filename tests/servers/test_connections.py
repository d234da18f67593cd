"""How many connections one process opens (docs/design.md, "Connections"),
counted by the servers themselves (CLIENT LIST): on one server, one
multiplexed connection, one for wake-up subscriptions while anything waits,
and a pool of at most 8 for threads making synchronous calls at once,
however many threads there are; on a Cluster, one multiplexed connection to
each node and, while anything waits, one subscription connection to each."""

from __future__ import annotations

import asyncio
import threading

import ferrolock
from support.helpers import wait_for

THREADS = 24
INLINE_MAX = 8  # src/transport/conn.rs


def clients(raw) -> list[dict]:
    """The server's connections but the one asking, each as CLIENT LIST's fields."""
    listed = raw("CLIENT", "LIST")
    listed = listed.decode() if isinstance(listed, bytes) else listed
    out = []
    for line in listed.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("cmd") != "client|list":
            out.append(fields)
    return out


def subscribers(found: list[dict]) -> int:
    return sum("P" in c.get("flags", "") for c in found)


def busy_threads(client, run) -> tuple[list, threading.Event, list]:
    """THREADS threads calling `run(i)` until told to stop, started together."""
    stop, start = threading.Event(), threading.Barrier(THREADS)
    errors: list = []

    def loop(i: int) -> None:
        start.wait(30)
        try:
            while not stop.is_set():
                run(i)
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    return threads, stop, errors


def test_a_process_opens_at_most_two_connections_and_a_bounded_pool(server, prefix):
    from ferrolock.testing import Raw

    raw = Raw(server.url)
    assert clients(raw) == []
    client = ferrolock.Client(server.url, prefix=prefix)

    # Asynchronous calls, however many tasks: the one multiplexed connection.
    async def tasks():
        async def cycle(i: int) -> None:
            for _ in range(20):
                async with client.lock(f"a{i}"):
                    pass

        await asyncio.gather(*(cycle(i) for i in range(50)))

    asyncio.run(tasks())
    assert len(clients(raw)) == 1

    # Waiters, of three names in many threads: one subscription connection more.
    holder = client.lock("held")
    assert holder.acquire()
    waiters = [client.lock("held", retry=ferrolock.Retry.fixed(10.0)) for _ in range(4)]
    results: list = []

    def take_and_give_back(w) -> None:
        results.append(w.acquire(timeout=60))
        w.release()

    wait_threads = [threading.Thread(target=take_and_give_back, args=(w,)) for w in waiters]
    for t in wait_threads:
        t.start()
    wait_for(lambda: subscribers(clients(raw)) == 1, 10, "the waiters' subscription")

    # THREADS threads in synchronous calls at once: at most INLINE_MAX more, however many threads.
    def cycle(i: int) -> None:
        lock = client.lock(f"t{i}")
        assert lock.acquire(blocking=False)
        lock.release()

    threads, stop, errors = busy_threads(client, cycle)
    peak = 0
    try:
        for _ in range(200):
            found = clients(raw)
            peak = max(peak, len(found))
            assert subscribers(found) == 1, found
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert errors == []
    assert 1 + 1 < peak <= 1 + 1 + INLINE_MAX, f"{peak} connections with {THREADS} threads"

    holder.release()
    for t in wait_threads:
        t.join(60)
    assert results == [True] * 4
    client.close()


def test_a_cluster_client_opens_one_connection_to_each_node_and_one_more_while_waiting(cluster, prefix):
    from ferrolock.testing import Raw

    nodes = {port: Raw(f"redis://127.0.0.1:{port}/0") for port in cluster.ports}
    before = {port: len(clients(raw)) for port, raw in nodes.items()}
    client = ferrolock.Client(cluster.url, prefix=prefix)

    def opened() -> dict:
        return {port: len(clients(raw)) - before[port] for port, raw in nodes.items()}

    def cycle(i: int) -> None:
        lock = client.lock(f"c{i}")
        assert lock.acquire(blocking=False)
        lock.release()

    threads, stop, errors = busy_threads(client, cycle)
    try:
        for _ in range(50):
            assert all(n <= 1 for n in opened().values()), opened()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert errors == [] and set(opened().values()) == {1}

    holder = client.lock("held")
    assert holder.acquire()
    waiter = client.lock("held", retry=ferrolock.Retry.fixed(10.0))
    got: list = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=60)))
    t.start()
    wait_for(lambda: sum(subscribers(clients(raw)) for raw in nodes.values()) >= 1, 10, "the subscription")
    assert all(n <= 2 for n in opened().values()), opened()
    holder.release()
    t.join(60)
    assert got == [True]
    waiter.release()
    client.close()
