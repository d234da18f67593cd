"""Ctrl-C during a blocking acquire: when KeyboardInterrupt reaches the
caller, everything the acquire did in Redis is undone already: a writer's
intent, a place in a fair queue, a hold granted in flight, the wake-up
subscription. Each scenario runs in a child process that the test
interrupts with SIGINT; the child reports "interrupted" the moment the
exception reaches it, and the test looks at Redis then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from support.fault_proxy import FaultProxy
from support.helpers import key, wait_for
from support.redis_masters import Masters

CHILD = textwrap.dedent(
    """
    import sys, ferrolock
    url, prefix, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    urls = url.split(",")  # several: a quorum's masters
    client = ferrolock.Client(urls if len(urls) > 1 else url, prefix=prefix, command_timeout=3.0)
    client.connect()  # connected before any fault is injected (a Client connects at first use)
    # A Lock's release script loaded, as any earlier use leaves it: an undo
    # whose NOSCRIPT answer is held back with every other reply cannot load it.
    with client.lock("warm-up"):
        pass
    slow = ferrolock.Retry.fixed(10.0)
    if scenario == "writer":
        handle = client.rwmutex("rw").write(retry=slow)
    elif scenario == "fair":
        handle = client.lock("f", fair=True, retry=slow)
    elif scenario == "fair-writer":
        handle = client.rwmutex("frw", fair=True).write(retry=slow)
    elif scenario == "fair-permit":
        handle = client.semaphore("sem", 1, fair=True, retry=slow)
    else:  # "waiter" on a busy lock, or "granted": a lock taken in flight
        handle = client.lock("l", retry=slow)
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        handle.acquire()
        print("acquired", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    sys.stdin.readline()
    """
)


class Child:
    def __init__(self, url, prefix, scenario):
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, prefix, scenario],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.line() == "ready"

    def line(self) -> str:
        return self.p.stdout.readline().strip()

    def go(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def interrupt(self):
        os.kill(self.p.pid, signal.SIGINT)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdin.close()
        self.p.stdout.close()


def numsub(raw, channel) -> int:
    return raw("PUBSUB", "NUMSUB", channel)[1]


@pytest.mark.parametrize(
    "scenario, busy, waiting, left",
    [
        pytest.param(
            "waiter",
            "lock",
            lambda raw, k: numsub(raw, f"{k('l')}:wake") == 1,
            lambda raw, k: numsub(raw, f"{k('l')}:wake"),
            id="waiter-subscription",
        ),
        pytest.param(
            "writer",
            "reader",
            lambda raw, k: raw("EXISTS", f"{k('rw')}:rw:i") == 1,
            lambda raw, k: raw("EXISTS", f"{k('rw')}:rw:i"),
            id="writer-intent",
        ),
        pytest.param(
            "fair",
            "fair",
            lambda raw, k: raw("ZCARD", f"{k('f')}:q") == 1,
            lambda raw, k: raw("ZCARD", f"{k('f')}:q"),
            id="fair-queue",
        ),
        pytest.param(
            "fair-writer",
            "fair-reader",
            lambda raw, k: raw("ZCARD", f"{k('frw')}:rw:qw") == 1,
            lambda raw, k: raw("ZCARD", f"{k('frw')}:rw:qw"),
            id="fair-rw-queue",
        ),
        pytest.param(
            "fair-permit",
            "fair-permit",
            lambda raw, k: raw("ZCARD", f"{k('sem')}:sem:q") == 1,
            lambda raw, k: raw("ZCARD", f"{k('sem')}:sem:q"),
            id="fair-semaphore-queue",
        ),
    ],
)
def test_ctrl_c_while_waiting_undoes_everything_first(client, raw, redis_url, prefix, scenario, busy, waiting, left):
    k = lambda name: key(prefix, name)  # noqa: E731
    holder = {
        "lock": lambda: client.lock("l"),
        "reader": lambda: client.rwmutex("rw").read(),
        "fair": lambda: client.lock("f", fair=True),
        "fair-reader": lambda: client.rwmutex("frw", fair=True).read(),
        "fair-permit": lambda: client.semaphore("sem", 1, fair=True),
    }[busy]()
    assert holder.acquire()
    child = Child(redis_url, prefix, scenario)
    try:
        child.go()
        wait_for(lambda: waiting(raw, k), 10, f"the child waiting ({scenario})")
        child.interrupt()
        assert child.line() == "interrupted"
        assert left(raw, k) == 0, "still in Redis when KeyboardInterrupt was raised"
    finally:
        child.close()
    holder.release()
    assert raw.keys(prefix + "*") == []


def test_ctrl_c_after_a_grant_in_flight_releases_it(raw, redis_url, prefix):
    """The acquire has run on the server but its answer has not arrived
    (held back by a proxy) when Ctrl-C lands: the lock it was granted is
    released, not left to expire after 30 s."""
    proxy = FaultProxy(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    child = Child(proxy.url, prefix, "granted")
    try:
        proxy.hold("command", "down")
        child.go()
        wait_for(lambda: raw("EXISTS", key(prefix, "l")) == 1, 10, "the grant on the server")
        child.interrupt()
        wait_for(lambda: raw("EXISTS", key(prefix, "l")) == 0, 10, "the grant released")
        proxy.resume("command", "down")
        assert child.line() == "interrupted"
    finally:
        child.close()
        proxy.close()
    assert raw.keys(prefix + "*") == []


def test_ctrl_c_on_a_quorum_with_a_master_stopped(prefix):
    """A writer waits on a quorum of three (its intent on every master); one
    master is SIGSTOPped, then Ctrl-C: the intent is withdrawn from the other
    two (a majority) and KeyboardInterrupt reaches the caller at once, not
    after the stopped master's command timeout (3 s)."""
    masters = Masters(3, prefix)
    try:
        reader = masters.client().rwmutex("rw").read()
        assert reader.acquire()
        intent = f"{key(prefix, 'rw')}:rw:i"
        child = Child(",".join(masters.urls), prefix, "writer")
        try:
            child.go()
            wait_for(
                lambda: all(s.command("EXISTS", intent) == 1 for s in masters.servers),
                10,
                "the writer's intent on every master",
            )
            with masters.paused(0):
                started = time.monotonic()
                child.interrupt()
                assert child.line() == "interrupted"
                took = time.monotonic() - started
                left = [s.command("EXISTS", intent) for s in masters.servers[1:]]
            assert left == [0] * 2, "the intent was still there when KeyboardInterrupt was raised"
            assert took < 1.0, f"KeyboardInterrupt came {took:.2f} s after the signal"
        finally:
            child.close()
        reader.release()
    finally:
        masters.close()
