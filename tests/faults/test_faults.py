"""Faults on a private redis-server: dropped connections, a crash and restart,
a dead port, a server too slow to answer, bad credentials, and Ctrl-C during
a blocked acquire. Nothing hangs, nothing is left behind, and a holder never
goes on believing it holds a lock Redis no longer gives it."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ferrolock
from ferrolock import LockConfigurationError, LockConnectionError, LockError, LockLost
from ferrolock.testing import RedisServer, RespError, encode, free_port, read_reply
from support.helpers import LostProbe, hold_field, key, script_calls, wait_for

pytestmark = pytest.mark.chaos


def hget(server, k: str, field: str):
    reply = hold_field(server.command("GET", k), field)
    return None if reply is None else reply.decode()


def exists(server, k: str) -> bool:
    return server.command("EXISTS", k) == 1


def pttl(server, k: str) -> int:
    return server.command("PTTL", k)


# ---------------------------------------------------------------- dropped connections


def test_client_kill_while_holding_is_survived(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=1, command_timeout=1)
    probe = LostProbe()
    lock = client.lock("killed", ttl=1.2, on_lost=probe)  # reconnects and renews in time on a busy machine too
    k = key(prefix, "killed")
    assert lock.acquire()
    token = lock.token
    assert server.command("CLIENT", "LIST").count(b"id=") >= 2  # the lock's and ours
    killed = 0
    start = time.monotonic()
    while time.monotonic() - start < 3.6:  # 3 ttls, the connection dropped every 0.2 s
        killed += server.command("CLIENT", "KILL", "TYPE", "normal")
        time.sleep(0.2)
    assert killed >= 3, "the lock's connection was never there to kill"
    assert not probe.event.is_set()
    assert not lock.lost
    assert lock.owned()
    assert hget(server, k, "token") == token
    assert 0 < pttl(server, k) <= 1200
    lock.release()
    assert not exists(server, k)
    assert not probe.event.is_set()


async def test_client_kill_while_holding_async(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=1, command_timeout=1)
    lock = client.lock("killed-async", ttl=1.2)
    async with lock:
        for _ in range(8):
            server.command("CLIENT", "KILL", "TYPE", "normal")
            await asyncio.sleep(0.2)
        assert await lock.aowned()
        assert not lock.lost
    assert not exists(server, key(prefix, "killed-async"))


# ---------------------------------------------------------------- crash and restart


@pytest.mark.parametrize("down_for", [0.0, 1.5], ids=["restart-at-once", "down-past-ttl"])
def test_server_restart_while_holding(server, prefix, down_for):
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    probe = LostProbe()
    lock = client.lock("crash", ttl=1.0, on_lost=probe)
    with pytest.raises(LockLost) as info:
        with lock:
            acquired = time.monotonic()
            first_fence = lock.fence
            server.kill()
            if down_for:
                # Redis gone: the holder must give up by its own deadline,
                # before the key could have expired on a live server.
                assert probe.wait(3.0), "never reported lost while Redis was down"
                assert probe.at - acquired <= 1.0 + 0.15, probe.at - acquired
                assert lock.lost
                time.sleep(max(0.0, down_for - (time.monotonic() - acquired)))
                server.start()
            else:
                server.start()
                # The data is gone: the next renewal says not owned.
                assert probe.wait(3.0), "never reported lost after the restart"
                assert probe.at - acquired <= 1.0 + 0.15, probe.at - acquired
            assert lock.lost
    assert info.value.__context__ is None, "the block itself failed"
    assert probe.calls == 1
    # The same Client works again, no new one needed.
    again = client.lock("crash", ttl=1.0)
    assert again.acquire(timeout=5)
    assert again.fence > first_fence  # the server's clock, not its lost data, orders fences
    assert hget(server, key(prefix, "crash"), "token") == again.token
    again.release()
    assert not exists(server, key(prefix, "crash"))
    with client.lock("other", ttl=1.0):
        assert exists(server, key(prefix, "other"))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_waiter_rides_out_a_server_restart_until_its_timeout(server, prefix, is_async):
    """A waiter with acquire(timeout=15) keeps waiting through a restart (as a
    Cluster waiter rides a failover) instead of failing at the first refused
    connection, and takes the lock once the server is back and free."""
    holder_client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    waiter_client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    holder = holder_client.lock("ride", ttl=30)
    assert holder.acquire()
    waiter = waiter_client.lock("ride", ttl=5)
    outcome: dict = {}

    def wait() -> None:
        try:
            if is_async:
                outcome["taken"] = asyncio.run(waiter.aacquire(timeout=15))
            else:
                outcome["taken"] = waiter.acquire(timeout=15)
        except BaseException as e:  # noqa: BLE001 - the test reports it
            outcome["error"] = e

    thread = threading.Thread(target=wait)
    thread.start()
    wait_for(lambda: ferrolock._ferrolock._debug_stats()["waiters"] == 1, 5, "the waiter to wait")
    server.kill()  # no persistence: the holder's hold is gone with it
    time.sleep(1.0)  # down for longer than a connect plus a command timeout
    server.start()
    thread.join(20)
    assert not thread.is_alive()
    assert outcome.get("error") is None, outcome
    assert outcome["taken"] is True
    assert hget(server, key(prefix, "ride"), "token") == waiter.token
    waiter.release()


def test_a_watchdog_failing_to_renew_warns_once_not_on_every_retry(server, prefix):
    """Renewal retries every few tens of ms while Redis is down: the log gets
    one WARNING when it starts failing (then at most one every 5 s), and one
    for the loss, not one per retry."""
    import logging

    seen: list = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record)

    handler = Catch(level=logging.WARNING)
    logger = logging.getLogger("ferrolock")
    logger.addHandler(handler)
    try:
        client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.3, command_timeout=0.3)
        probe = LostProbe()
        lock = client.lock("quiet", ttl=3, on_lost=probe)
        assert lock.acquire()
        server.kill()
        assert probe.wait(10), "never reported lost while Redis was down"
        wait_until_logged(seen, "lost lock")
        renewing = [r.getMessage() for r in seen if "renewing" in r.getMessage()]
        assert len(renewing) == 1, renewing
        assert "failed, retrying" in renewing[0]
    finally:
        logger.removeHandler(handler)
        server.start()


def test_a_level_set_after_the_first_records_is_obeyed(server, prefix):
    """Records at INFO logged while the logger says WARNING do not stop
    those logged once it says INFO; DEBUG follows within the second the
    level cache lives."""
    import logging

    seen: list = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record)

    logger = logging.getLogger("ferrolock")
    before = logger.level
    handler = Catch(level=logging.DEBUG)
    logger.addHandler(handler)
    try:
        logger.setLevel(logging.WARNING)
        ferrolock.Client(server.url + "?max_connections=3", prefix=prefix)
        ferrolock.Client(server.url + "?max_connections=3", prefix=prefix)
        logger.setLevel(logging.INFO)
        ferrolock.Client(server.url + "?lib_name=after", prefix=prefix)
        wait_until_logged(seen, "?lib_name= is not used")
        logger.setLevel(logging.DEBUG)
        client = ferrolock.Client(server.url, prefix=prefix)
        deadline = time.monotonic() + 10
        while not any(r.levelno == logging.DEBUG for r in seen):
            assert time.monotonic() < deadline, "no DEBUG record after the level was lowered to DEBUG"
            with client.lock("debug-level", ttl=0.3) as lock:
                lock.extend(0.3)
                time.sleep(0.15)  # a renewal is due each third of the ttl: debug records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def wait_until_logged(seen: list, text: str) -> None:
    """Log records reach Python from a forwarding thread: waits for one saying `text`."""
    wait_for(lambda: any(text in r.getMessage() for r in seen), 10, f"a log record saying {text!r}")


def test_restart_while_not_holding_is_transparent(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    assert not client.lock("idle").locked()
    server.kill()
    server.start()
    # The first command after a restart may see the dead connection; the
    # client reconnects by itself and later ones succeed.
    deadline = time.monotonic() + 3
    while True:
        try:
            lock = client.lock("idle", ttl=1)
            assert lock.acquire(blocking=False)
            break
        except LockConnectionError:
            assert time.monotonic() < deadline, "never reconnected"
    lock.release()
    assert not exists(server, key(prefix, "idle"))


# ---------------------------------------------------------------- unreachable


def test_connect_to_dead_port_fails_fast():
    port = free_port()
    start = time.monotonic()
    with pytest.raises(LockConnectionError) as info:
        ferrolock.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5).connect()
    assert time.monotonic() - start < 1.0
    assert isinstance(info.value, ConnectionError)
    assert isinstance(info.value, LockError)
    assert str(port) in str(info.value)


def test_connect_to_silent_listener_times_out():
    """A port that accepts TCP but never speaks: the connect timeout bounds the wait."""
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(16)
        port = blackhole.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(LockConnectionError):
            c = ferrolock.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5, command_timeout=0.5)
            c.lock("x").acquire()
        assert time.monotonic() - start < 1.5


def test_acquire_while_server_down_raises(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    lock = client.lock("down", ttl=1)
    assert not lock.locked()
    server.stop()
    for attempt in (
        lambda: lock.acquire(),
        lambda: lock.acquire(timeout=10),
        lambda: lock.acquire(blocking=False),
        lambda: lock.locked(),
        lambda: client.inspect("down"),
        lambda: client.lock("down2", blocking_timeout=10).__enter__(),
    ):
        start = time.monotonic()
        with pytest.raises(LockConnectionError) as info:
            attempt()
        assert isinstance(info.value, ConnectionError)
        assert time.monotonic() - start < 0.5 + 0.5 + 0.5, "waited past connect+command timeouts"
    assert lock.token is None
    assert not lock.lost
    server.start()
    deadline = time.monotonic() + 3
    while True:
        try:
            assert lock.acquire(blocking=False)
            break
        except LockConnectionError:
            assert time.monotonic() < deadline, "never reconnected"
    assert hget(server, key(prefix, "down"), "token") == lock.token
    lock.release()
    assert not exists(server, key(prefix, "down"))


async def test_aacquire_while_server_down_raises(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, connect_timeout=0.5, command_timeout=0.5)
    lock = client.lock("adown", ttl=1)
    server.stop()
    start = time.monotonic()
    with pytest.raises(LockConnectionError):
        await lock.aacquire()
    with pytest.raises(LockConnectionError):
        async with lock:
            pytest.fail("entered without Redis")
    assert time.monotonic() - start < 2.0
    assert lock.token is None


# ---------------------------------------------------------------- slow server


class Asleep:
    """`DEBUG SLEEP seconds` on its own connection; the reply is read on exit."""

    def __init__(self, server, seconds: float):
        self.server, self.seconds = server, seconds

    def __enter__(self):
        self.conn = self.server.connect()
        self.conn.sock.sendall(encode(("DEBUG", "SLEEP", self.seconds)))
        self.reply = None
        self.thread = threading.Thread(target=self._read)
        self.thread.start()
        # Wait until the server is surely asleep: a PING goes unanswered.
        while True:
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=1) as probe:
                probe.settimeout(0.05)
                probe.sendall(encode(("PING",)))
                try:
                    probe.recv(64)
                except socket.timeout:
                    return self
            time.sleep(0.01)  # the DEBUG SLEEP is still in flight

    def _read(self):
        self.reply = read_reply(self.conn.file)

    def __exit__(self, *exc):
        self.thread.join(10)
        self.conn.close()
        assert self.reply == "OK"


def test_slow_server_hits_the_command_timeout(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, command_timeout=0.3)
    lock = client.lock("slow", ttl=1)
    assert not lock.locked()  # connected
    with Asleep(server, 2):
        start = time.monotonic()
        with pytest.raises(LockConnectionError) as info:
            lock.locked()
        assert time.monotonic() - start < 1.0
        assert isinstance(info.value, ConnectionError)
        start = time.monotonic()
        with pytest.raises(LockConnectionError):
            lock.acquire()
        assert time.monotonic() - start < 1.0
    # Awake again: the same client answers, and the late replies to the
    # timed-out commands are not mistaken for answers to new ones. The
    # timed-out acquire's attempt ran late, on its own connection: the
    # acquire's undo, sent on the client's other connection, may run before
    # it there, and then the hold lasts its ttl.
    wait_for(lambda: not lock.locked(), 1.0 + 1.0, "the late attempt undone or expired")
    assert lock.acquire(blocking=False)
    assert lock.owned()
    assert lock.ttl() <= 1.0
    info = client.inspect("slow")
    assert info is not None and info.token == lock.token
    lock.release()
    assert not lock.locked()
    assert not exists(server, key(prefix, "slow"))


def test_holder_reports_lost_before_a_stalled_server_expires_it(server, prefix):
    client = ferrolock.Client(server.url, prefix=prefix, command_timeout=0.3)
    probe = LostProbe()
    lock = client.lock("stalled", ttl=1.0, on_lost=probe)
    with pytest.raises(LockLost) as info:
        with lock:
            with Asleep(server, 4):
                # The server cannot renew and will expire the key on waking:
                # the holder must know by its own deadline, at most a ttl after
                # the last renewal that could reach the server (sent before now).
                asleep = time.monotonic()
                time.sleep(1.0)  # a ttl: the bound itself, past which the holder must know
                assert lock.lost
                # Told too, while the server still sleeps (bound: + 1.5 s on a busy machine).
                assert probe.wait(3.0)
                assert probe.at - asleep <= 1.0 + 1.5, probe.at - asleep
                assert lock.lost
    assert info.value.__context__ is None, "the block itself failed"
    assert probe.calls == 1
    assert not exists(server, key(prefix, "stalled"))


# ---------------------------------------------------------------- credentials


@pytest.fixture
def auth_server():
    s = RedisServer(password="pw").start()
    yield s
    s.close()


def test_wrong_password_is_refused_without_echoing_it(auth_server, prefix):
    wrong = "wrong-Pa55-xyz"
    for url in (
        f"redis://:{wrong}@127.0.0.1:{auth_server.port}/0",
        f"redis://default:{wrong}@127.0.0.1:{auth_server.port}/0",
        f"{wrong}@127.0.0.1:{auth_server.port}",
    ):
        start = time.monotonic()
        with pytest.raises(LockConfigurationError) as info:
            ferrolock.Client(url, prefix=prefix).connect()
        assert time.monotonic() - start < 2.0
        assert not isinstance(info.value, ConnectionError), "retrying cannot help: not a connection error"
        text = " ".join([str(info.value), repr(info.value), *getattr(info.value, "__notes__", ())])
        assert wrong not in text
        assert "pw" not in text.replace(wrong, "")  # nor the right one


@pytest.mark.parametrize(
    "url",
    [
        "redis://:pw@127.0.0.1:{port}/0",
        "redis://default:pw@127.0.0.1:{port}/0",
        "pw@127.0.0.1:{port}",
    ],
    ids=["url", "url-with-user", "password-at-host"],
)
def test_right_password_works(auth_server, prefix, url):
    client = ferrolock.Client(url.format(port=auth_server.port), prefix=prefix)
    lock = client.lock("authed", ttl=0.9)
    with lock:
        acquired = script_calls(auth_server)
        # A renewal (due at 0.3 s) goes through the authenticated connection.
        wait_for(lambda: script_calls(auth_server) > acquired, 5, "a renewal")
        assert lock.owned()
        assert hget(auth_server, key(prefix, "authed"), "token") == lock.token
    assert not lock.lost
    assert not exists(auth_server, key(prefix, "authed"))


def test_missing_password_is_a_configuration_error(auth_server, prefix):
    with pytest.raises(LockConfigurationError):
        client = ferrolock.Client(f"redis://127.0.0.1:{auth_server.port}/0", prefix=prefix)
        client.lock("x").acquire()


# ---------------------------------------------------------------- Ctrl-C

CHILD = textwrap.dedent(
    """
    import sys, time
    import ferrolock
    url, prefix, mode = sys.argv[1:4]
    client = ferrolock.Client(url, prefix=prefix)
    lock = client.lock("busy", ttl=5)
    print("waiting", flush=True)
    start = time.monotonic()
    try:
        if mode == "acquire":
            lock.acquire()
        elif mode == "acquire-timeout":
            lock.acquire(timeout=60)
        else:
            with lock:
                pass
    except KeyboardInterrupt:
        print(f"interrupted token={lock.token} lost={lock.lost}", flush=True)
        sys.exit(3)
    print("acquired", flush=True)
    sys.exit(0)
    """
)


def _start_blocked_child(server, script: str, prefix: str, mode: str) -> subprocess.Popen:
    """Start `script` in a child and return once it is inside acquire,
    retrying on the busy lock (seen in the server's script call count)."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, server.url, prefix, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "waiting"
        baseline = script_calls(server)
        deadline = time.monotonic() + 10
        while script_calls(server) < baseline + 3:
            assert time.monotonic() < deadline, "the child never tried to acquire"
            assert child.poll() is None, child.stderr.read()
            time.sleep(0.02)  # polling another process's progress: no event to await
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child


@pytest.mark.parametrize("mode", ["acquire", "acquire-timeout", "with"])
def test_ctrl_c_during_blocked_acquire(server, prefix, mode):
    client = ferrolock.Client(server.url, prefix=prefix)
    holder = client.lock("busy", ttl=30, auto_renew=False)  # no renewals: only the child runs scripts
    assert holder.acquire()
    k = key(prefix, "busy")
    child = _start_blocked_child(server, CHILD, prefix, mode)
    try:
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=5)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 3, (child.returncode, out, err)
    assert "interrupted token=None lost=False" in out, (out, err)
    assert took < 2.0, took
    # The holder is untouched, and the child left nothing behind.
    assert hget(server, k, "token") == holder.token
    assert holder.owned()
    holder.release()
    assert not exists(server, k)
    assert server.command("KEYS", prefix + "*") == []


def test_ctrl_c_default_handler_exits_with_keyboard_interrupt(server, prefix):
    """Uncaught, the interrupt ends the child like any KeyboardInterrupt."""
    client = ferrolock.Client(server.url, prefix=prefix)
    holder = client.lock("busy", ttl=30, auto_renew=False)
    assert holder.acquire()
    script = CHILD.replace("except KeyboardInterrupt:", "except ZeroDivisionError:")
    child = _start_blocked_child(server, script, prefix, "acquire")
    try:
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=5)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "KeyboardInterrupt" in err
    assert child.returncode in (-signal.SIGINT, 130, 1), child.returncode
    assert "acquired" not in out
    assert hget(server, key(prefix, "busy"), "token") == holder.token
    holder.release()
    assert server.command("KEYS", prefix + "*") == []


def test_a_release_resent_after_a_dropped_reply_is_not_a_loss(redis_url, raw, prefix):
    """The release runs on the server, then the connection drops before its
    reply arrives; ferrolock sends it again on a new connection, which finds
    nothing to release. That is not a lost lock: the hold was still valid,
    so the first sending released it."""
    from support.fault_proxy import FaultProxy

    proxy = FaultProxy(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    try:
        c = ferrolock.Client(proxy.url, prefix=prefix)
        lock = c.lock("resent", ttl=30.0)
        assert lock.acquire()
        lock.release()  # the release script is loaded on the server now: EVALSHA runs it
        assert lock.acquire()
        proxy.drop_reply_to(b"EVALSHA")
        lock.release()  # no LockNotOwned
        assert proxy.dropped.is_set()  # the fault did happen
        assert lock.lost is False
        assert raw("EXISTS", key(prefix, "resent")) == 0
    finally:
        proxy.close()


# ---------------------------------------------------------------- eviction


def test_an_evicted_lock_is_reported_lost(prefix):
    """A server whose maxmemory policy may evict keys with an expiry (here
    volatile-ttl: the lock is the only such key, so it goes first) loses the
    lock when memory fills up. The holder is told at its next renewal."""
    s = RedisServer(extra=("--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")).start()
    try:
        client = ferrolock.Client(s.url, prefix=prefix)
        probe = LostProbe()
        lock = client.lock("ev", ttl=1.5, on_lost=probe)
        assert lock.acquire()
        filler = "x" * 100_000
        for i in range(80):  # 8 MB of keys without expiry: past maxmemory, evictions start
            try:
                s.command("SET", f"fill:{i}", filler)
            except RespError as e:  # OOM: nothing left to evict (the lock went first)
                assert e.args[0].startswith("OOM"), e
            if not exists(s, key(prefix, "ev")):
                break
        assert not exists(s, key(prefix, "ev")), "the lock was never evicted"
        evicted = time.monotonic()
        assert probe.wait(1.5), "the eviction was never reported"
        assert probe.at - evicted <= 1.5 / 3 + 0.2  # at the next renewal
        assert lock.lost
    finally:
        s.close()


def test_a_server_that_may_evict_locks_is_warned_about(prefix):
    """At connect, a server with maxmemory and a policy that can evict keys
    with an expiry gets a WARNING naming the policy and the fix."""
    import logging

    seen, warned = [], threading.Event()

    class Catch(logging.Handler):
        def emit(self, record):
            if "maxmemory-policy" in record.getMessage():
                seen.append(record)
                warned.set()

    handler = Catch(level=logging.WARNING)
    logging.getLogger("ferrolock").addHandler(handler)
    s = RedisServer(extra=("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")).start()
    try:
        ferrolock.Client(s.url, prefix=prefix).connect()
        assert warned.wait(5), "no warning about the eviction policy"
        message = seen[0].getMessage()
        assert "allkeys-lru" in message and "noeviction" in message and str(s.port) in message
        assert seen[0].levelno == logging.WARNING
    finally:
        logging.getLogger("ferrolock").removeHandler(handler)
        s.close()
