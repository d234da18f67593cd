"""Synchronous calls send their commands on the calling thread, on pooled
connections: threads share a few, however many calls they make, and the
results are those of the runtime path."""

from __future__ import annotations

import threading

import ferrolock


def clients(server) -> int:
    return server.command("CLIENT", "LIST").count(b"id=")


def test_threads_share_a_small_pool_of_inline_connections(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix)
    client.connect()  # a Client connects at first use: this one now
    before = clients(server)  # ours: the client's multiplexed connection and this probe's
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            lock = client.lock(f"t{n}", ttl=5)
            for _ in range(200):
                assert lock.acquire(blocking=False)
                assert lock.owned()
                lock.release()
        except BaseException as e:  # reported below, with the thread's failure
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    # inline connections were used, at most one per thread that ran at once,
    # not one per call
    assert 1 <= clients(server) - before <= 4
    assert server.command("KEYS", prefix + "*") == []


def test_a_blocking_acquire_and_an_inline_release_agree(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix)
    a, b = client.lock("x", ttl=5), client.lock("x", ttl=5)
    assert a.acquire()  # waits through the runtime
    assert not b.acquire(blocking=False)  # one attempt, inline
    assert client.inspect("x").token == a.token
    a.release()  # inline
    assert b.acquire(timeout=2)
    b.release()
    assert client.inspect("x") is None
