"""Sentinel failovers with a holder and a waiter, plain and over TLS with ACL
users: `SENTINEL FAILOVER` (the old master demoted, its data replicated
first) and the master killed with SIGKILL. The holder either renews on the
new master or is told it lost the lock, never silently holding; a waiter
blocked across the failover is woken by pub/sub on the new master when the
holder releases there. Each run records how long the failover took, from
the fault to the first acquire that landed on the new master, in
target/sentinel-failover-times.jsonl (docs/reliability.md quotes them)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

import ferrolock
from ferrolock import Retry
from support import ROOT
from support.helpers import hold_field, LostProbe
from support.redis_sentinel import SentinelDeployment

TIMES = ROOT / "target" / "sentinel-failover-times.jsonl"
SLOW = Retry.fixed(30.0)  # polling alone would take the holder's whole ttl: only a wake-up is fast
TTL = 6.0

pytestmark = pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel not installed")


@pytest.fixture(params=["plain", "tls-acl"])
def deployment(request):
    tls = request.param == "tls-acl"
    d = SentinelDeployment(tls=tls, acl=tls).start()
    yield d
    d.close()


def connect(d: SentinelDeployment, prefix: str) -> ferrolock.Client:
    return ferrolock.Client(d.url(), ca_file=d.ca_file, prefix=prefix, connect_timeout=5, command_timeout=2)


def fault(d: SentinelDeployment, kind: str) -> int:
    """Injects the fault; returns the old master's port."""
    if kind == "failover":
        return d.sentinel_failover()
    return d.kill_master().port


def first_acquire_on_new_master(
    d: SentinelDeployment, client: ferrolock.Client, prefix: str, old: int, since: float, limit: float = 30
) -> float:
    """Seconds from `since` to the first acquire (each on a fresh name) whose
    hold is on a node other than the old master; within `limit`, not
    counting time a Sentinel spends in TILT mode (SentinelDeployment.await_sentinels)."""
    deadline, checked = since + limit, time.monotonic()
    for i in range(100_000):
        now = time.monotonic()
        if now - checked >= 0.25:  # asked a few times a second, not at each try
            if d.any_in_tilt():
                deadline += now - checked
            checked = now
        assert now < deadline, "no acquire reached the new master in time"
        lock = client.lock(f"probe{i}", ttl=5)
        try:
            ok = lock.acquire(blocking=False)
        except ferrolock.LockError:
            time.sleep(0.01)  # the failover is under way: try again shortly
            continue
        at = time.monotonic()
        if ok and granted_by_new_master(d, old, f"{prefix}{{probe{i}}}"):
            return at - since
        time.sleep(0.01)  # still on the old master (not demoted yet): try again
    raise AssertionError("unreachable")


def granted_by_new_master(d: SentinelDeployment, old: int, key: str) -> bool:
    """Whether `key` was written on the promoted node: it has the key and is a
    master, and the old master lacks it or is a replica now (before the
    promotion the replica holds a copy of the old master's keys; after it,
    the old master, until demoted, replicates nothing from the new one)."""
    new = next(n for n in d.nodes if n.port != old)
    old_node = d.node(old)
    try:
        if d.role(new) != "master" or new("EXISTS", key) != 1:
            return False
    except OSError:
        return False
    if d.role(old_node) != "master":
        return True
    try:
        return old_node("EXISTS", key) == 0
    except OSError:
        return True


def expires_after(node, key: str, at: float) -> bool:
    """Whether `key` on `node` expires after `at` (a time.time()). A write
    made before the promotion, on the old master or replicated from it,
    expires by then + TTL: a later expiry was written on the node since
    (by the holder's renewal, when the hold is still its own)."""
    asked = time.time()  # the server reads its clock after this: its expiry is at least asked + pttl
    pttl = node("PTTL", key)
    return pttl > 0 and asked + pttl / 1000 > at


def record(**fields) -> None:
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    with TIMES.open("a") as f:
        f.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%S"), **fields}) + "\n")


@pytest.mark.parametrize("kind", ["failover", "kill"])
def test_a_holder_and_a_waiter_ride_out_a_failover(deployment, kind, prefix, events):
    d = deployment
    holder_client, waiter_client, prober = (connect(d, prefix) for _ in range(3))
    lost = LostProbe()
    holder = holder_client.lock("job", ttl=TTL, on_lost=lost)
    assert holder.acquire()
    fence = holder.fence
    key = f"{prefix}{{job}}"
    # Replicated before the fault, so the hold survives it (the hold that
    # does not is test_sentinel.py's asynchronous-failover test).
    d.wait_for(lambda: hold_field(d.replica("GET", key), "token") == holder.token, 5, "the hold replicated")

    waiter = waiter_client.lock("job", ttl=TTL, retry=SLOW)
    got: dict = {}

    def wait() -> None:
        got["ok"] = waiter.acquire(timeout=60)
        got["at"] = time.monotonic()

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        channel = f"{key}:wake"
        # The waiter's subscription, seen on the server: nothing in this process to await.
        d.wait_for(lambda: channel in d.master("PUBSUB", "CHANNELS", f"{prefix}*"), 5, "the waiter subscribed")

        t_fault = time.monotonic()
        old = fault(d, kind)
        took = first_acquire_on_new_master(d, prober, prefix, old, t_fault)
        promoted = time.time()  # the prober's hold is on the new master: promoted by now
        d.await_sentinels(lambda: d.failover_named(old), 30, "the Sentinel to name the new master")
        new = d.node(d.master_port())

        # The holder renews on the new master (its hold was replicated), and is
        # not lost; had it been, it would have been told (on_lost, lost). Not
        # necessarily at its first renewal after the fault: a master demoted
        # by SENTINEL FAILOVER serves its connections until its Sentinel
        # reconfigures it, and the holder's client asks the Sentinels once a
        # second, so a renewal sent before it heard of the new master lands
        # on the demoted one (and a release then would too, waking nobody on
        # the new master). A later one lands on the new master, before the
        # copy the promotion gave it runs out (at most TTL after the promotion).
        d.wait_for(
            lambda: hold_field(new("GET", key), "token") == holder.token and expires_after(new, key, promoted + TTL),
            TTL,
            "the holder to renew on the new master",
        )
        assert not holder.lost and lost.calls == 0

        # The waiter follows: subscribed on the new master (at its next attempt,
        # or when the old master's connections are cut), still waiting.
        d.wait_for(lambda: channel in new("PUBSUB", "CHANNELS", f"{prefix}*"), 3 * TTL, "the waiter to resubscribe")
        assert "ok" not in got
        released = time.monotonic()
        holder.release()
        thread.join(10)
        assert got.get("ok") is True
        woken_after = got["at"] - released
        # Woken by the release, not by polling: the "woken" event below says
        # pub/sub woke it. A poll would come only when the hold's ttl (renewed
        # to TTL every TTL/3) ran out, or after the retry's 30 s; the bound
        # is that, not a speed (a busy machine has taken 4 s here).
        assert woken_after < TTL, f"the waiter took {woken_after:.3f} s after the release"
        assert events.wait(
            lambda t, k, det, n: k == "woken" and det == "pubsub" and n == ("job",) and released <= t, 2
        ), "the waiter was not woken by pub/sub"
        assert hold_field(new("GET", key), "token") == waiter.token
        assert waiter.fence > fence
        waiter.release()
    finally:
        if thread.is_alive():
            holder_client.force_release("job")
            thread.join(10)
    record(
        fault=kind,
        tls=d.tls,
        acl=d.acl,
        first_acquire_s=round(took, 3),
        waiter_woken_after_release_s=round(woken_after, 4),
    )


def test_a_blocked_waiter_follows_a_failover_without_sending_commands(deployment, prefix, events):
    """A waiter whose next attempt is far off (the holder's ttl and its retry
    delay both long) sends no command, yet its client asks the Sentinels once
    a second while it waits: its subscription moves to the new master about a
    second after the Sentinels name it, not when the demoted master is
    reconfigured (the Sentinel's 10 s timer) or at the waiter's next attempt."""
    d = deployment
    holder_client, waiter_client = connect(d, prefix), connect(d, prefix)
    holder = holder_client.lock("job", ttl=30.0)
    assert holder.acquire()
    key = f"{prefix}{{job}}"
    d.wait_for(lambda: hold_field(d.replica("GET", key), "token") == holder.token, 5, "the hold replicated")
    waiter = waiter_client.lock("job", ttl=TTL, retry=SLOW)
    got: dict = {}
    thread = threading.Thread(target=lambda: got.setdefault("ok", waiter.acquire(timeout=60)))
    thread.start()
    try:
        channel = f"{key}:wake"
        d.wait_for(lambda: channel in d.master("PUBSUB", "CHANNELS", f"{prefix}*"), 5, "the waiter subscribed")
        t_fault = time.monotonic()
        old = d.sentinel_failover()
        d.await_sentinels(lambda: d.failover_named(old), 30, "the Sentinel to name the new master")
        new = d.node(d.master_port())
        # RECHECK (1 s), the Sentinel's answer and a new subscription, with a
        # margin for a loaded machine: well short of the 10 s the Sentinel
        # takes to reconfigure the old master, and of the waiter's next attempt.
        d.wait_for(lambda: channel in new("PUBSUB", "CHANNELS", f"{prefix}*"), 5, "the waiter to resubscribe")
        assert "ok" not in got
        # Its subscription dropped woke it to retry: no message did, and none is reported.
        events.wait(lambda at, k, det, n: k == "woken" and n == ("job",) and at >= t_fault, 5)
        with events.cond:
            woken = [det for at, k, det, n in events.seen if k == "woken" and n == ("job",) and at >= t_fault]
        assert woken and set(woken) == {"poll"}, woken
        # The holder's client follows at its next command: an extend to 60 s
        # shows on the new master (its copy of the hold has at most 30 s left).
        d.wait_for(lambda: holder.extend(60) is None and new("PTTL", key) > 31_000, 10, "the holder's client to follow")
        holder.release()
        thread.join(10)
        assert got.get("ok") is True, "the waiter was not woken by the release on the new master"
        assert hold_field(new("GET", key), "token") == waiter.token
        waiter.release()
    finally:
        if thread.is_alive():
            holder_client.force_release("job")
            thread.join(60)


@pytest.mark.parametrize("kind", ["failover", "kill"])
def test_with_replicas_1_no_two_valid_holds_across_a_failover(deployment, kind, prefix, events):
    """With replicas=1 and replica_policy="fail" a grant or renewal counts only
    once a replica has it, so the promoted replica has every valid hold: a
    second holder is granted only after the first one's hold ended (released,
    or reported lost before the second grant)."""
    d = deployment
    opts = dict(
        ca_file=d.ca_file,
        prefix=prefix,
        connect_timeout=5,
        command_timeout=2,
        replicas=1,
        replica_timeout=0.5,
        replica_policy="fail",
    )
    first_client, second_client = ferrolock.Client(d.url(), **opts), ferrolock.Client(d.url(), **opts)
    d.await_sentinels(d.ready_for_failover, 30, "the replica in sync")  # else a grant is refused, as asked
    lost = LostProbe()
    first = first_client.lock("job", ttl=3.0, on_lost=lost)
    for _ in range(20):
        try:
            assert first.acquire()
            break
        except ferrolock.LockNotReplicated:
            # A replica just in sync may take a moment before its acknowledgements
            # reach the master (its first REPLCONF ACK): until then grants are
            # refused, as asked, and leave nothing behind.
            assert d.master("EXISTS", f"{prefix}{{job}}") == 0
    else:
        raise AssertionError("the replica never acknowledged a grant before the failover")
    fence = first.fence
    assert hold_field(d.replica("GET", f"{prefix}{{job}}"), "token") == first.token  # acknowledged by the replica
    if kind == "failover":
        old = d.sentinel_failover()
    else:
        killed = d.kill_master()
        old = killed.port
        d.await_sentinels(lambda: d.failover_done(old), 30, "the replica promoted")
        d.restart_as_replica(killed)  # so that the new master has a replica to acknowledge
    second = second_client.lock("job", ttl=3.0)
    for _ in range(3):
        try:
            taken = second.acquire(timeout=10)
            break
        except ferrolock.LockNotReplicated:
            # The promoted master has no replica until the old one rejoins as
            # its replica: a grant nobody acknowledges is refused, as asked.
            d.await_sentinels(d.ready_for_failover, 30, "a replica in sync with the new master")
    else:
        raise AssertionError("no replica acknowledged a grant after the failover")
    if taken:
        granted = time.monotonic()
        # The first hold ended in the failover: its holder was told, before.
        assert first.lost and lost.at is not None and lost.at <= granted, "two valid holds at once"
    else:
        # The first holder kept its hold through the failover, renewed on the new master.
        assert not first.lost and lost.calls == 0
        first.release()
        assert second.acquire(timeout=5)
    assert second.fence > fence
    second.release()
    d.await_sentinels(lambda: d.failover_named(old), 30, "the Sentinel to name the new master")


def test_a_sentinel_that_tilts_as_the_master_dies_still_fails_over():
    """A Sentinel starved of CPU for over 2 s (a loaded machine) enters TILT
    mode and marks the master down only once it ends; a replica whose link
    has been down for over ten times down-after by then is never promoted.
    With the harness's tilt-period (5 times down-after) the failover comes
    after the TILT; with Sentinel's own 30 s it never would."""
    d = SentinelDeployment().start()
    try:
        d.await_sentinels(d.ready_for_failover, 30, "the replica in sync")
        old = d.kill_master().port
        sentinel = d.sentinels[0]
        os.kill(sentinel.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(2.5)  # the stall: its timer runs over 2 s late
        finally:
            os.kill(sentinel.proc.pid, signal.SIGCONT)
        d.await_sentinels(lambda: d.failover_done(old), 30, "the replica promoted after the TILT")
        log = (Path(sentinel.dir) / "sentinel.log").read_text()
        assert "+tilt" in log and "-tilt" in log, "the stall put the Sentinel in TILT mode"
    finally:
        d.close()
