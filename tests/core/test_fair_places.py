"""A fair waiter's place in line, for every fair kind (a fair Lock, a fair
RWMutex's writer, a fair semaphore's permit): it lasts as long as its process
runs, whatever the process's Python threads do meanwhile (another thread
holding the GIL, a long garbage collection), because the waiter re-asserts
it from ferrolock's own threads; a process stopped for longer than the
waiter's patience (min(ttl, 2 s)) is taken for dead: it loses its place,
those behind it go first, and it queues again at the back once it runs."""

from __future__ import annotations

import mmap
import threading
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from support.helpers import wait_for

KINDS = ["lock", "writer", "permit"]

# The waiters' process: three fair waiters of `kind`, queued in order (each
# seen in the queue before the next starts), each taking the name, noting
# its turn and giving it back. `hog`: once all are queued, one thread keeps
# the GIL (no I/O, no switch) until the test writes a byte into the shared
# file: while it runs, no other Python thread of this process runs a line.
WAITERS = textwrap.dedent(
    """
    import mmap, sys, threading, time, ferrolock
    url, prefix, kind, hog, flag = sys.argv[1:6]
    client = ferrolock.Client(url, prefix=prefix)
    patient = dict(ttl=1.0, retry=ferrolock.Retry.fixed(10.0))

    def handle():
        if kind == "lock":
            return client.lock("q", fair=True, **patient)
        if kind == "writer":
            return client.rwmutex("q", fair=True).write(**patient)
        return client.semaphore("q", 1, fair=True, **patient)

    def queued():
        return sum(s.waiters for s in client.describe("q"))

    order = []

    def run(i, h):
        assert h.acquire(timeout=60), i
        order.append(i)
        h.release()

    threads = []
    for i in range(3):
        threads.append(threading.Thread(target=run, args=(i, handle())))
        threads[-1].start()
        deadline = time.monotonic() + 20
        while queued() != i + 1:
            assert time.monotonic() < deadline, f"waiter {i} not queued"
            time.sleep(0.005)
    print("queued", flush=True)
    if hog == "1":
        with open(flag, "r+b") as f:
            shared = mmap.mmap(f.fileno(), 1)
        sys.setswitchinterval(1000.0)
        print("hogging", flush=True)
        end = time.monotonic() + 30
        while shared[0] == 0 and time.monotonic() < end:
            pass
        sys.setswitchinterval(0.005)
    for t in threads:
        t.join(60)
    print("order", *order, flush=True)
    """
)


def held_elsewhere(client, kind: str):
    """A handle of `kind` on the same name, of this process."""
    if kind == "lock":
        return client.lock("q", fair=True, ttl=30)
    if kind == "writer":
        return client.rwmutex("q", fair=True).write(ttl=30)
    return client.semaphore("q", 1, fair=True, ttl=30)


class Waiters:
    """The waiters' process, and the shared byte that ends its GIL hog."""

    def __init__(self, redis_url: str, prefix: str, kind: str, hog: bool, tmp_path):
        self.flag = tmp_path / "flag"
        self.flag.write_bytes(b"\0")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WAITERS, redis_url, prefix, kind, "1" if hog else "0", str(self.flag)],
            stdout=subprocess.PIPE,
            text=True,
        )

    def expect(self, line: str) -> None:
        got = self.proc.stdout.readline().strip()
        assert got == line, f"the waiters said {got!r}, not {line!r}"

    def stop_hogging(self) -> None:
        with open(self.flag, "r+b") as f:
            shared = mmap.mmap(f.fileno(), 1)
            shared[0] = 1
            shared.flush()

    def order(self) -> list:
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, out
        words = out.split()
        return [int(w) for w in words[words.index("order") + 1 :]]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)


@pytest.mark.parametrize("kind", KINDS)
def test_a_waiter_keeps_its_place_while_another_thread_holds_the_gil(client, redis_url, prefix, kind, tmp_path):
    """The waiters' process keeps the GIL in one thread for twice their
    patience: their places stay (re-asserted from ferrolock's threads), so
    the release goes to the first of them and a newcomer is refused."""
    holder = held_elsewhere(client, kind)
    assert holder.acquire(blocking=False)
    waiters = Waiters(redis_url, prefix, kind, True, tmp_path)
    try:
        waiters.expect("queued")
        waiters.expect("hogging")
        # The fault itself: the GIL held for twice the waiters' 1 s patience.
        time.sleep(2.0)
        holder.release()
        newcomer = held_elsewhere(client, kind)
        barged = newcomer.acquire(blocking=False)
        waiters.stop_hogging()
        assert barged is False, "a newcomer took it past three queued waiters"
        assert waiters.order() == [0, 1, 2]
    finally:
        waiters.stop_hogging()
        waiters.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_stopped_process_loses_its_place_and_queues_again(client, redis_url, prefix, kind, tmp_path):
    """SIGSTOP for longer than the waiters' patience: they are taken for
    dead, so a waiter queued behind them (here) goes first; resumed, they
    queue again and all get their turn."""
    holder = held_elsewhere(client, kind)
    assert holder.acquire(blocking=False)
    waiters = Waiters(redis_url, prefix, kind, False, tmp_path)
    later = held_elsewhere(client, kind)
    try:
        waiters.expect("queued")
        got = {}

        def behind():
            got["ok"] = later.acquire(timeout=60)

        t = threading.Thread(target=behind)
        t.start()
        wait_for(lambda: sum(s.waiters for s in client.describe("q")) == 4, 20, "the fourth waiter queued")
        os.kill(waiters.proc.pid, signal.SIGSTOP)
        # The fault: stopped for twice the waiters' 1 s patience.
        time.sleep(2.0)
        holder.release()
        t.join(30)
        assert got == {"ok": True}, "the running waiter was not let past the stopped ones"
        os.kill(waiters.proc.pid, signal.SIGCONT)
        later.release()
        assert sorted(waiters.order()) == [0, 1, 2]
    finally:
        waiters.close()
