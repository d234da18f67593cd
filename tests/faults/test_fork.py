"""fork() at the wrong moment, and waits bounded by their timeout: a child
forked while a parent thread is in the middle of subscribing uses its
inherited client on fresh connections and never hangs; subscribing for
wake-ups never outlasts the acquire's own deadline."""

from __future__ import annotations

import os
import threading
import time

import pytest

import ferrolock
from support.fault_proxy import FaultProxy
from support.helpers import wait_child


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@pytest.fixture
def slowed(client, redis_url, prefix):
    """(proxy, a Client behind it, a holder of "busy" on the direct client)."""
    proxy = FaultProxy(port_of(redis_url))
    holder = client.lock("busy", ttl=30.0)
    assert holder.acquire()
    yield proxy, ferrolock.Client(proxy.url, prefix=prefix), holder
    if holder.token is not None:
        holder.release()
    proxy.close()


def test_a_child_forked_while_the_parent_subscribes_does_not_hang(slowed):
    proxy, behind, holder = slowed
    proxy.slow_subscribe(3.0)
    waiter = threading.Thread(target=lambda: behind.lock("busy").acquire(timeout=10), daemon=True)
    waiter.start()
    assert proxy.subscribe_seen.wait(5)  # the parent's waiter is subscribing now
    pid = os.fork()
    if pid == 0:  # the child: its inherited client must work, and not hang
        code = 1
        try:
            free = behind.lock("free", ttl=5.0)
            busy = behind.lock("busy", ttl=5.0)
            if free.acquire(timeout=2) and busy.acquire(timeout=0.5) is False:
                free.release()
                code = 0
        finally:
            os._exit(code)
    status = wait_child(pid, 10)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert status == 0, "the forked child hung or failed" if status is None else f"exit status {status}"
    holder.release()
    waiter.join(15)


def test_a_slow_subscribe_does_not_stretch_the_acquire_timeout(slowed):
    proxy, behind, _ = slowed
    proxy.slow_subscribe(2.0)
    started = time.monotonic()
    assert behind.lock("busy").acquire(timeout=0.3) is False
    took = time.monotonic() - started
    assert took < 0.3 + 0.2, f"acquire(timeout=0.3) took {took:.2f} s"
