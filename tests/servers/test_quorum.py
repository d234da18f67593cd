"""A quorum of independent masters (Redlock): `Client([url, url, url])`.

Each test starts its own loopback servers (three or five), so it may kill,
pause (SIGSTOP), restart empty or DEBUG SLEEP one of them. What is checked:
a majority holds the lock and excludes everyone else; a minority of
masters failing in any of those ways neither stalls nor breaks a holder;
a majority failing is reported (LockConnectionError, or the hold lost);
fences keep increasing even when the masters disagree; waiters wake
through any master; what a quorum cannot do is refused with its name."""

from __future__ import annotations

import asyncio
import logging
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest

import ferrolock
from ferrolock import Retry
from ferrolock.testing import RedisServer, encode, read_reply
from support.helpers import LostProbe, hold_value, key, skewed_clock, wait_for
from support.redis_masters import Masters

SLOW = Retry.fixed(10.0)  # polling alone would take 10 s: only a wake-up is fast
SUPPORTED = "Lock (not fair), multi_lock and RWMutex (not fair)"


# Another process takes "fenced" (ttl 1 s) on the masters, prints its fence,
# then releases it and says so, or (`how` = "die") waits to be SIGKILLed.
HOLDER_SCRIPT = """
import sys, ferrolock
urls, prefix, how = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
lock = ferrolock.Client(urls, prefix=prefix).lock("fenced", ttl=1)
assert lock.acquire(timeout=10)
print(lock.fence, flush=True)
if how == "release":
    lock.release()
    print("released", flush=True)
sys.stdin.read()
"""


@contextmanager
def holder_process(masters, how: str, env: dict | None = None):
    """Runs HOLDER_SCRIPT; yields its fence once it holds."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, ",".join(masters.urls), masters.prefix, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        try:
            line = proc.stdout.readline()
            assert line.strip().isdigit(), f"the holder said {line!r}"
            if how == "release":
                assert proc.stdout.readline().strip() == "released"
            yield int(line)
        finally:
            proc.kill()


@pytest.fixture
def masters(prefix):
    m = Masters(3, prefix)
    yield m
    m.close()


def test_a_majority_holds_and_excludes_everyone_else(masters):
    a, b = masters.client(), masters.client()
    assert a.masters == 3 and "quorum of 3" in repr(a)
    lock = a.lock("job", ttl=5)
    with lock:
        token = lock.token.encode()
        assert masters.holders("job").count(token) >= 2  # a majority (normally all three)
        assert not b.lock("job").acquire(blocking=False)
        info = b.inspect("job")
        assert info is not None and info.token == lock.token and info.fence == lock.fence
        assert 4 < info.ttl <= 5
    assert masters.holders("job") == [None] * 3
    assert b.inspect("job") is None
    with b.lock("job"):
        pass
    stuck = a.lock("stuck", ttl=30)
    stuck.acquire()
    assert b.force_release("stuck") is True  # an operator's recovery, on every master
    assert masters.holders("stuck") == [None] * 3 and b.force_release("stuck") is False
    assert stuck.lost is False  # told at its next renewal, as on one server


def test_a_minority_holding_another_token_is_not_the_holder(masters):
    """Two masters held by one owner, the third by another: the first holds."""
    a = masters.client()
    lock = a.lock("split", ttl=5)
    with masters.paused(2):
        assert lock.acquire(blocking=False)
    # The paused master ran the attempt when it resumed: it holds too, or
    # (had its answer come too late to count) it holds nothing else.
    assert masters.holders("split")[:2] == [lock.token.encode()] * 2
    assert a.inspect("split").token == lock.token
    lock.release()


@pytest.mark.parametrize("n,down", [(3, 1), (5, 2)])
def test_a_minority_killed_the_lock_still_works(prefix, n, down):
    m = Masters(n, prefix)
    try:
        client = m.client()
        for i in range(down):
            m.servers[i].kill()
        fences = []
        for _ in range(3):
            with client.lock("job", ttl=2) as lock:
                fences.append(lock.fence)
                assert not m.client().lock("job").acquire(blocking=False)
        assert fences == sorted(fences) and len(set(fences)) == 3
        m.servers[down].kill()  # now a majority is gone
        with pytest.raises(ferrolock.LockConnectionError, match=rf"needs {n // 2 + 1} of {n} masters"):
            client.lock("job").acquire(timeout=1)
    finally:
        m.close()


def test_connecting_needs_a_majority(masters):
    masters.servers[0].kill()
    two_of_three = masters.client(connect_timeout=1)
    two_of_three.connect()
    assert two_of_three.masters == 3  # two of three: fine
    masters.servers[1].kill()
    with pytest.raises(ferrolock.LockConnectionError, match="connecting needs 2 of 3 masters, and only 1 answered"):
        masters.client(connect_timeout=1).connect()


def test_a_paused_master_neither_stalls_acquire_nor_breaks_the_holder(masters):
    """One master SIGSTOPped for three times the ttl of the locks taken
    meanwhile: acquires go on with the other two, and a holder keeps
    renewing on them."""
    client = masters.client()
    probe = LostProbe()
    # The holder renews every second through the pause (at least four times
    # while it lasts); its 3 s ttl is what a machine with a load of 12 needs
    # for one of them to reach both live masters within the step's limit.
    holder = client.lock("held", ttl=3.0, on_lost=probe)
    holder.acquire()
    with masters.paused(0):
        started = time.monotonic()
        # An acquire stalled by the paused master would wait out its limit
        # (ttl/10 = 150 ms) each time, 750 ms for the five.
        for i in range(5):
            with client.lock(f"other{i}", ttl=1.5):
                pass
        took = time.monotonic() - started
        assert took < 0.75, f"5 cycles took {took:.2f} s with one master paused"
        deadline = time.monotonic() + 4.5  # three of their ttls
        while time.monotonic() < deadline:
            assert not masters.client().lock("held").acquire(blocking=False)
    assert not probe.event.is_set() and not holder.lost
    holder.release()


def test_a_master_restarted_empty_leaves_the_hold_with_the_majority(masters):
    client = masters.client()
    probe = LostProbe()
    # A ttl of 1.2 s gives each step 120 ms: with 0.6 s (60 ms) a busy
    # machine's masters did not all answer the first acquire in time.
    holder = client.lock("held", ttl=1.2, on_lost=probe)
    holder.acquire()
    first = holder.fence
    masters.restart_empty(1)
    assert masters.holders("held")[1] is None
    # Renewals go on with the other two: no loss through three ttls.
    assert not probe.wait(3.6) and not holder.lost
    assert not masters.client().lock("held").acquire(blocking=False)
    holder.release()
    nxt = client.lock("held")
    with nxt:
        assert nxt.fence > first


def test_debug_sleep_on_one_master(masters):
    """One master busy in DEBUG SLEEP for 2 s: the others carry on, a hold
    taken and given back while it still sleeps, another renewed meanwhile."""
    client = masters.client()
    holder = client.lock("held", ttl=1.5)
    holder.acquire()
    sleeper = masters.servers[2].connect()
    try:
        sleeper.sock.sendall(encode(("DEBUG", "SLEEP", "2")))
        with client.lock("other", ttl=1.5) as other:
            assert other.fence > 0
        still_asleep = not select.select([sleeper.sock], [], [], 0)[0]
        assert still_asleep, "the lock waited for the sleeping master"
        assert read_reply(sleeper.file) == "OK"  # the sleep is over
    finally:
        sleeper.close()
    assert not holder.lost
    holder.release()


def test_losing_the_majority_is_reported(masters):
    client = masters.client()
    probe = LostProbe()
    holder = client.lock("held", ttl=0.6, on_lost=probe)
    holder.acquire()
    masters.servers[0].kill()
    masters.servers[1].kill()
    assert probe.wait(2), "the loss of two masters of three was not reported"
    assert holder.lost


def test_fences_increase_when_the_masters_disagree(masters):
    """Masters 0 and 1 keep fences far above the third's, and not the same
    (as after they served holds the third missed): the hold gets the highest
    of the majority that decides (a master answering late is left out),
    written back to a majority before acquire returns, so the next hold is
    above it even without master 0."""
    client = masters.client()
    name = "fenced"
    ahead = int(time.time() * 1e6) + 60_000_000  # a minute past every clock
    for i, fence in ((0, ahead), (1, ahead - 1)):
        masters.servers[i].command("SET", key(masters.prefix, name), hold_value("", fence))
        masters.servers[i].command("PEXPIRE", key(masters.prefix, name), "120000")
    lock = client.lock(name, ttl=5)
    with lock:
        fence = lock.fence
        assert fence in (ahead, ahead + 1), "not the highest fence of a majority"
        fences = [int(masters.field(i, name, "fence") or 0) for i in range(3)]
        assert sum(f >= fence for f in fences) >= 2, f"no majority carries {fence}: {fences}"
    # Master 0 gone: masters 1 and 2 alone must still give a greater fence.
    masters.servers[0].kill()
    with client.lock(name, ttl=5) as again:
        assert again.fence > fence


def test_fences_stay_monotonic_across_changing_majorities(masters):
    client = masters.client()
    seen = []
    for down in (0, 1, 2, None, 0):
        if down is not None:
            masters.servers[down].kill()
        with client.lock("rotating", ttl=2) as lock:
            seen.append(lock.fence)
        if down is not None:
            masters.servers[down].start()  # back empty
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


def test_waiters_wake_through_any_master(masters):
    """The waiter's subscription on one master is gone with it: the release
    published by the other two still wakes it at once."""
    client = masters.client()
    holder = client.lock("w", ttl=5)
    holder.acquire()
    waiter = client.lock("w", retry=SLOW)
    got = {}

    def wait():
        got["ok"] = waiter.acquire(timeout=5)
        got["at"] = time.monotonic()

    t = threading.Thread(target=wait)
    t.start()
    from ferrolock._ferrolock import _debug_stats

    wait_for(lambda: _debug_stats()["waiters"] >= 2, 2, "the waiter to subscribe")
    masters.servers[0].kill()
    released = time.monotonic()
    holder.release()
    t.join(5)
    assert got["ok"]
    assert got["at"] - released < 0.5, f"woken {1000 * (got['at'] - released):.0f} ms after the release"
    waiter.release()


def waiting(lock, **kw) -> tuple[threading.Thread, dict]:
    """`lock.acquire(**kw)` in a thread; `got` says when it returned, and what."""
    got: dict = {}

    def wait():
        got["ok"] = lock.acquire(**kw)
        got["at"] = time.monotonic()

    t = threading.Thread(target=wait)
    t.start()
    return t, got


def subscribe_everywhere(client) -> None:
    """One wait on `client`, so that its subscription connection to every
    master is open (a SUBSCRIBE on it then has no connect timeout)."""
    from ferrolock._ferrolock import _debug_stats

    holder = client.lock("warm-up", ttl=5)
    holder.acquire()
    waiter = client.lock("warm-up", retry=SLOW)
    t, got = waiting(waiter, timeout=5)
    wait_for(lambda: _debug_stats()["waiters"] >= 3, 5, "the waiter to subscribe")
    holder.release()
    t.join(5)
    assert got["ok"]
    waiter.release()


@pytest.mark.parametrize("timeout", [None, 4])
def test_a_stopped_master_does_not_stall_a_waiter(masters, timeout):
    """One master SIGSTOPped: a waiter subscribes on the other two (a majority)
    and is woken by the release within a round trip, instead of waiting for the
    stopped master's SUBSCRIBE (forever, or until its own deadline)."""
    from ferrolock._ferrolock import _debug_stats

    client = masters.client(command_timeout=6)
    subscribe_everywhere(client)
    holder = client.lock("w", ttl=5)
    holder.acquire()
    with masters.paused(0):
        t, got = waiting(client.lock("w", retry=SLOW), timeout=timeout)
        try:
            wait_for(lambda: _debug_stats()["waiters"] >= 3, 5, "the waiter to subscribe")
            released = time.monotonic()
            holder.release()
            t.join(1.5)
            assert got.get("ok"), f"not woken within 1.5 s of the release: {got}"
            assert got["at"] - released < 1.5
        finally:
            masters.servers[0].proc.send_signal(signal.SIGCONT)
            t.join(10)


def test_a_waiter_rides_through_a_majority_outage(masters):
    """Two masters of three killed while a waiter waits, and back (empty) once
    the holder has been told it lost them: the waiter keeps trying through the
    outage instead of failing, and then gets the lock."""
    client = masters.client()
    probe = LostProbe()
    holder = client.lock("w", ttl=1, on_lost=probe)
    holder.acquire()
    waiter = client.lock("w", ttl=5)
    got = {}

    def wait():
        try:
            got["ok"] = waiter.acquire(timeout=8)
        except ferrolock.LockError as e:
            got["error"] = e

    t = threading.Thread(target=wait)
    t.start()
    from ferrolock._ferrolock import _debug_stats

    wait_for(lambda: _debug_stats()["waiters"] >= 3, 2, "the waiter to subscribe")
    masters.servers[0].kill()
    masters.servers[1].kill()
    # Restarted empty only once the holder's ttl is over (Redlock's delayed
    # restart): sooner, a majority that forgot the hold would let the waiter in
    # while the holder still counts on it.
    assert probe.wait(3), "the holder was not told it lost the majority"
    assert not got  # still waiting, through the outage
    masters.servers[0].start()
    masters.servers[1].start()
    t.join(10)
    assert got == {"ok": True}, got
    waiter.release()


def test_masters_slow_to_answer_a_first_attempt_do_not_fail_a_blocking_acquire(masters):
    """Two masters of three stopped past the step's limit when a blocking
    acquire starts: slow is not gone, so it tries again (as on a loaded
    machine, where a master's answer can come a limit late) and takes the
    lock once they answer; a try (`blocking=False`) reports the error."""
    client = masters.client()
    with client.lock("warm-up", ttl=1):
        pass  # connected to every master
    with masters.paused(0), masters.paused(1):
        with pytest.raises(ferrolock.LockConnectionError, match="not heard from"):
            client.lock("slow", ttl=1).acquire(blocking=False)
        retrying = threading.Event()

        class Retrying(logging.Handler):
            def emit(self, record):
                if "served again" in record.getMessage():
                    retrying.set()

        logger, handler = logging.getLogger("ferrolock"), Retrying()
        before = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            lock = client.lock("slow", ttl=1)
            t, got = waiting(lock, timeout=10)
            assert retrying.wait(5), "the first attempt's silence ended the acquire"
            assert not got, got
        finally:
            logger.removeHandler(handler)
            logger.setLevel(before)
    t.join(10)
    assert got.get("ok") is True, got
    assert lock.fence > 0
    lock.release()


def test_a_step_left_to_a_slow_master_still_runs_there(masters, prefix):
    """A quorum's step stops waiting for a master a short grace after a
    majority answered; whatever it sent still runs there. A master that had
    never run a script would first answer NOSCRIPT, and a step dropped then
    would never send the script nor itself: so the quorum loads every script
    on each master it connects. Here the third master's replies are held
    back from the first use of the writer's step on: its intent still
    reaches it, long before the writer's next attempt (10 s)."""
    from support.fault_proxy import FaultProxy

    proxy = FaultProxy(masters.servers[2].port)
    client = ferrolock.Client(masters.urls[:2] + [proxy.url], prefix=prefix, command_timeout=3.0)
    result: list = []
    writer = client.rwmutex("rw").write(retry=Retry.fixed(10.0))
    t = threading.Thread(target=lambda: result.append(writer.acquire(timeout=5)), daemon=True)
    try:
        client.connect()
        reader = client.rwmutex("rw").read()
        assert reader.acquire()
        proxy.hold("command", "down")
        t.start()
        intent = f"{key(prefix, 'rw')}:rw:i"
        wait_for(
            lambda: masters.servers[2].command("EXISTS", intent) == 1,
            4,
            "the writer's intent on the master whose replies are held back",
        )
        proxy.resume("command", "down")
        t.join(30)
        assert result == [False]
        reader.release()
    finally:
        proxy.resume("command", "down")
        if t.is_alive():
            t.join(30)
        client.close()
        proxy.close()


def test_inspect_reads_the_fence_a_majority_carries_not_a_late_masters(masters, prefix):
    """A master whose grant came too late to count (its replies held back)
    gave a higher fence (it had one on record): the hold's fence is the one
    the majority carries, and inspect says that one, not the late master's."""
    from support.fault_proxy import FaultProxy

    proxy = FaultProxy(masters.servers[2].port)
    client = ferrolock.Client(masters.urls[:2] + [proxy.url], prefix=prefix, command_timeout=3.0)
    try:
        client.connect()
        seconds, micros = masters.servers[2].command("TIME")
        ahead = int(seconds) * 1_000_000 + int(micros) + 60_000_000
        masters.servers[2].command("SET", key(prefix, "job") + ":fence", str(ahead), "PX", "60000")
        proxy.hold("command", "down")
        lock = client.lock("job", ttl=30)
        assert lock.acquire(blocking=False)
        wait_for(lambda: masters.field(2, "job", "token") == lock.token.encode(), 5, "the late grant")
        proxy.resume("command", "down")
        assert int(masters.field(2, "job", "fence")) > ahead > lock.fence
        info = client.inspect("job")
        assert (info.token, info.fence) == (lock.token, lock.fence)
        lock.release()
    finally:
        proxy.resume("command", "down")
        client.close()
        proxy.close()


def test_rwmutex_on_a_quorum(masters):
    client = masters.client()
    rw = client.rwmutex("doc")
    r1, r2 = rw.read(ttl=5), rw.read(ttl=5)
    with r1, r2:
        assert rw.readers() == 2
        assert not rw.write().acquire(blocking=False)
    writer = rw.write(ttl=5)
    with writer:
        first = writer.fence
        assert not rw.read().acquire(blocking=False)
        assert rw.locked()
    with writer:
        assert writer.fence > first
    assert not rw.locked()


def test_multi_lock_on_a_quorum(masters):
    client = masters.client()
    both = client.multi_lock(["a", "b"], ttl=5)
    with both:
        mine = both.token.encode()
        assert [a == b == mine for a, b in zip(masters.holders("a"), masters.holders("b"))].count(True) >= 2
        assert not client.lock("b").acquire(blocking=False)
    # The release returns once a majority answered; the last master's answer may still be on its way.
    assert [h is None for h in masters.holders("a")].count(True) >= 2
    wait_for(lambda: masters.holders("a") == [None] * 3, 5, "the release on every master")


def test_asyncio_on_a_quorum(masters):
    client = masters.client()

    async def main():
        fences = []
        for _ in range(3):
            async with client.lock("async", ttl=2) as lock:
                fences.append(lock.fence)
        other = client.lock("async", ttl=2)
        async with client.lock("async", ttl=2):
            assert not await other.aacquire(blocking=False)
        return fences

    fences = asyncio.run(main())
    assert fences == sorted(fences) and len(set(fences)) == 3


def test_what_a_quorum_cannot_do_is_refused_by_name(masters):
    client = masters.client()
    refused = {
        "a semaphore": lambda: client.semaphore("s", 2),
        "a fair Lock": lambda: client.lock("f", fair=True),
        "a fair RWMutex": lambda: client.rwmutex("r", fair=True),
        "an election": lambda: client.election("e"),
        "scan": lambda: client.scan(),
        "describe": lambda: client.describe("x"),
    }
    for what, make in refused.items():
        with pytest.raises(ValueError, match=what) as e:
            make()
        assert SUPPORTED in str(e.value)


def test_bad_master_lists_are_named(masters):
    with pytest.raises(ValueError, match="list of URLs is empty"):
        ferrolock.Client([])
    with pytest.raises(ValueError, match="given twice"):
        ferrolock.Client([masters.urls[0], masters.urls[1], masters.urls[0]])
    with pytest.raises(TypeError, match=r"url\[1\] must be str"):
        ferrolock.Client([masters.urls[0], 6379])
    with pytest.raises(ValueError, match="is a Redis Cluster"):
        ferrolock.Client([masters.urls[0], "redis+cluster://127.0.0.1:7000"])
    one = ferrolock.Client([masters.urls[0]])
    assert one.masters == 1 and "quorum" not in repr(one)


@pytest.mark.parametrize("how", ["die", "release"])
def test_a_fast_client_clock_never_drives_fences(masters, how):
    """A client whose clock is 5 s fast holds, then dies (its hold expires) or
    releases: the next hold, by a client with a correct clock, still gets a
    greater fence, and a release leaves nothing behind (the masters' clocks
    agree, so no fence record outlives it by more than a millisecond)."""
    with holder_process(masters, how, env=skewed_clock(5)) as fast:
        pass  # then SIGKILLed, holding or released
    if how == "release":
        k = key(masters.prefix, "fenced")
        left = masters.pttls(k) + masters.pttls(k + ":fence")
        assert all(t <= 1000 for t in left), f"left behind for {left} ms"
    nxt = masters.client().lock("fenced", ttl=1)
    assert nxt.acquire(timeout=5)
    assert nxt.fence > fast, f"fence went back by {(fast - nxt.fence) / 1e6:.2f} s"
    nxt.release()


def test_a_fence_raised_on_a_master_outlives_an_expired_hold(masters):
    """Masters 0 and 1 keep fences 5 s ahead of every clock, not the same
    (as masters whose clocks are ahead give), so the master of the deciding
    majority that gave less is raised to the highest (a master answering
    late is left out). The holder dies; its hold (ttl 1 s) expires; with
    master 0 gone, masters 1 and 2 still give the next hold a greater
    fence: each keeps the raised one in its fence record until its own
    clock passes it, and no longer."""
    k = key(masters.prefix, "fenced")
    ahead = int(time.time() * 1e6) + 5_000_000
    for i, fence in ((0, ahead), (1, ahead - 1)):
        masters.servers[i].command("SET", k, hold_value("", fence))
        masters.servers[i].command("PEXPIRE", k, "120000")
    with holder_process(masters, "die") as first:
        pass  # SIGKILLed: nothing releases its hold
    assert first in (ahead, ahead + 1), "not the highest fence of a majority"
    wait_for(lambda: masters.pttls(k, 1) == [-2, -2], 5, "the hold to expire")
    masters.servers[0].kill()
    nxt = masters.client().lock("fenced", ttl=1)
    assert nxt.acquire(timeout=5)
    assert nxt.fence > first, f"fence went back by {(first - nxt.fence) / 1e6:.2f} s"
    nxt.release()
    left = masters.pttls(k + ":fence", 1) + masters.pttls(k, 1)
    assert all(t <= 5000 for t in left), f"left behind for {left} ms"  # until the clocks pass it


def test_a_fence_given_above_the_clock_outlives_an_expired_hold(prefix):
    """Five masters. Master 0 keeps a fence 5 s ahead of every clock, so it
    gives the hold (on masters 0, 1, 2; 3 and 4 down) a fence above its own
    clock, and 1 and 2 are raised to it. The holder dies and its hold expires.
    The next hold is granted by masters 0, 3 and 4 (1 and 2 down, 3 and 4 back
    empty): master 0 alone links the two majorities, and must still give more
    than the first fence, having kept it until its clock passes it."""
    masters = Masters(5, prefix)
    try:
        k = key(prefix, "fenced")
        ahead = int(time.time() * 1e6) + 5_000_000
        masters.servers[0].command("SET", k, hold_value("", ahead))
        masters.servers[0].command("PEXPIRE", k, "120000")
        masters.servers[3].kill()
        masters.servers[4].kill()
        with holder_process(masters, "die") as first:
            pass  # SIGKILLed: nothing releases its hold
        assert first == ahead + 1
        wait_for(lambda: masters.pttls(k, 0, 3) == [-2, -2, -2], 5, "the hold to expire")
        masters.servers[1].kill()
        masters.servers[2].kill()
        masters.servers[3].start()
        masters.servers[4].start()
        nxt = masters.client().lock("fenced", ttl=1)
        assert nxt.acquire(timeout=5)
        assert nxt.fence > first, f"fence went back by {(first - nxt.fence) / 1e6:.2f} s"
        nxt.release()
    finally:
        masters.close()


def test_every_quorum_step_is_settled_by_a_majority(masters):
    """One master SIGSTOPped, command_timeout 6 s: each step is settled by
    the other two within about a round trip, never by the stopped master's
    timeout; a blocking call returns within its own timeout plus that."""
    client = masters.client(command_timeout=6)
    rw = client.rwmutex("doc")
    reader = rw.read(ttl=10)
    reader.acquire()
    lock = client.lock("l", ttl=10)
    lock.acquire()
    with masters.paused(0):
        steps = {
            # Waits 0.5 s, leaving its intent, then withdraws it on every master.
            "write().acquire(timeout=0.5)": (0.5, lambda: rw.write(ttl=10).acquire(timeout=0.5) is False),
            "rw.locked()": (0, lambda: rw.locked() is True),
            "rw.readers()": (0, lambda: rw.readers() == 1),
            "lock.locked()": (0, lambda: lock.locked() is True),
            "inspect": (0, lambda: client.inspect("l").token == lock.token),
            "release a reader": (0, lambda: reader.release() is None),
            "force_release": (0, lambda: client.force_release("free") is False),
        }
        slow = {}
        for what, (waits, step) in steps.items():
            started = time.monotonic()
            assert step(), what
            took = time.monotonic() - started
            if took > waits + 1.5:
                slow[what] = round(took, 2)
    lock.release()
    assert not slow, f"with one master of three stopped, these took (s): {slow}"


def test_a_release_missing_on_one_master_with_another_stopped(masters):
    """The hold is gone from master 1 (restarted empty) and master 0 is
    stopped: master 2's answer makes a majority with master 1's, so the
    release returns at once, not after the command timeout."""
    client = masters.client(command_timeout=6)
    lock = client.lock("l", ttl=10)
    lock.acquire()
    masters.restart_empty(1)
    with masters.paused(0):
        started = time.monotonic()
        lock.release()
        took = time.monotonic() - started
    assert took < 1.5, f"release took {took:.2f} s"
    assert masters.holders("l")[2] is None


def test_two_urls_of_one_server_are_refused(masters):
    """Another database number, or another address of the same process:
    one server would count twice towards the majority."""
    base = masters.urls[0]
    with pytest.raises(ferrolock.LockConfigurationError, match="are the same server"):
        ferrolock.Client([base, base.rsplit("/", 1)[0] + "/1", masters.urls[1]]).connect()
    twice = RedisServer(extra=("--bind", "127.0.0.1", "127.0.0.2")).start()
    try:
        other_name = twice.url.replace("127.0.0.1", "127.0.0.2")
        with pytest.raises(ferrolock.LockConfigurationError, match="are the same server .run_id"):
            ferrolock.Client([twice.url, other_name, masters.urls[1]]).connect()
    finally:
        twice.close()
    assert masters.client().masters == 3  # three distinct servers are fine
