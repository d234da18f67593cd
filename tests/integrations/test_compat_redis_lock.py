"""ferrolock.compat.redis_lock: python-redis-lock's Lock on ferrolock, on the
same keys (``lock:<name>``, and the signal list ``lock-signal:<name>``).

- python-redis-lock's README examples and its own tests of the API (adapted
  from its tests/test_redis_lock.py, BSD 2-Clause licence), run against the
  real library and the compat module alike: the compat module passes what
  the library passes. Left out: the tests that read its log lines or its
  renewal thread's attributes (renewal here is the watchdog's: see
  test_auto_renewal_keeps_the_hold).
- Old and new side by side, in both directions: never held by both, nobody
  releases or extends another's hold, a waiter of either is woken by the
  other's release through the signal list; real processes of each contend.
- What ferrolock adds: the fence, the loss told.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import redis
import redis_lock as real_redis_lock

import ferrolock
from ferrolock.compat import redis_lock as compat_redis_lock
from support.helpers import LostProbe, wait_for


@pytest.fixture
def conn(redis_url):
    client = redis.StrictRedis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def n(prefix, conn):
    """A lock name of this test's own."""
    yield f"{prefix}foobar"
    for key in conn.scan_iter(match=f"*{prefix}*"):
        conn.delete(key)


@pytest.fixture(params=[real_redis_lock, compat_redis_lock], ids=["python-redis-lock", "compat"])
def redis_lock(request):
    """The module under test: python-redis-lock itself, or the compat module."""
    return request.param


def test_the_exceptions_are_python_redis_locks_own():
    for name in (
        "AlreadyAcquired",
        "NotAcquired",
        "AlreadyStarted",
        "TimeoutNotUsable",
        "InvalidTimeout",
        "TimeoutTooLarge",
        "NotExpirable",
    ):
        assert getattr(compat_redis_lock, name) is getattr(real_redis_lock, name)


# ------------------------------------------------------------- README examples


def test_readme_usage(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    if lock.acquire(blocking=False):
        got = True
        lock.release()
    else:
        got = False
    assert got and not lock.locked()


def test_readme_context_manager(redis_lock, conn, n):
    with redis_lock.Lock(conn, n):
        assert conn.exists("lock:" + n)
    assert not conn.exists("lock:" + n)


def test_readme_identifier(redis_lock, conn, n):
    host_id = "owned-by-%s" % socket.gethostname()
    lock = redis_lock.Lock(conn, n, id=host_id)
    assert lock.acquire(blocking=False)
    assert lock.locked() is True
    assert redis_lock.Lock(conn, n, id=host_id).get_owner_id() == host_id  # "acquired in another process"
    assert redis_lock.Lock(conn, n).get_owner_id() == host_id
    lock.release()


# ------------------------------------------- python-redis-lock's own API tests


def test_timeout(redis_lock, conn, n):
    with redis_lock.Lock(conn, n):
        lock = redis_lock.Lock(conn, n)
        assert lock.acquire(timeout=1) is False


@pytest.mark.parametrize("timeout", [0, "0", "123"])
def test_timeout_int_conversion(redis_lock, conn, n, timeout):
    lock = redis_lock.Lock(conn, n)
    lock.acquire(blocking=True, timeout=timeout)
    lock.release()


def test_timeout_expire(redis_lock, conn, n):
    lock1 = redis_lock.Lock(conn, n, expire=1)
    lock1.acquire()
    lock2 = redis_lock.Lock(conn, n)
    assert lock2.acquire(timeout=2)


def test_timeout_expire_with_renewal(redis_lock, conn, n):
    with redis_lock.Lock(conn, n, expire=1, auto_renewal=True):
        lock = redis_lock.Lock(conn, n)
        assert lock.acquire(timeout=2) is False


def test_not_usable_timeout(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    with pytest.raises(redis_lock.TimeoutNotUsable):
        lock.acquire(blocking=False, timeout=1)


def test_expire_less_than_timeout(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n, expire=1)
    with pytest.raises(redis_lock.TimeoutTooLarge):
        lock.acquire(blocking=True, timeout=2)
    lock = redis_lock.Lock(conn, n, expire=1, auto_renewal=True)
    lock.acquire(blocking=True, timeout=2)
    lock.release()


def test_invalid_timeout(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    with pytest.raises(redis_lock.InvalidTimeout):
        lock.acquire(blocking=True, timeout=-123)
    with pytest.raises(redis_lock.InvalidTimeout):
        lock.acquire(blocking=True, timeout=-1)
    with pytest.raises(ValueError, match="invalid literal for int"):
        lock.acquire(blocking=True, timeout="foobar")


def test_expire_without_timeout(redis_lock, conn, n):
    first_lock = redis_lock.Lock(conn, n, expire=2)
    second_lock = redis_lock.Lock(conn, n, expire=1)
    first_lock.acquire()
    assert second_lock.acquire(blocking=False) is False
    assert second_lock.acquire() is True
    second_lock.release()


def test_extend(redis_lock, conn, n):
    with redis_lock.Lock(conn, n, expire=100) as lock:
        assert conn.ttl("lock:" + n) <= 100
        lock.extend(expire=1000)
        assert conn.ttl("lock:" + n) > 100


def test_extend_lock_default_expire(redis_lock, conn, n):
    with redis_lock.Lock(conn, n, expire=1000) as lock:
        conn.expire("lock:" + n, 900)
        lock.extend()
        assert 997 < conn.ttl("lock:" + n) <= 1000


def test_extend_lock_without_expire_fail(redis_lock, conn, n):
    with redis_lock.Lock(conn, n) as lock:
        with pytest.raises(redis_lock.NotExpirable):
            lock.extend(expire=1000)
        with pytest.raises(TypeError):
            lock.extend()


def test_extend_another_instance(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n, expire=100)
    lock.acquire()
    assert 0 <= conn.ttl("lock:" + n) <= 100
    another_lock = redis_lock.Lock(conn, n, id=lock.id)
    another_lock.extend(1000)
    assert conn.ttl("lock:" + n) > 100


def test_extend_another_instance_different_id_fail(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n, expire=100)
    lock.acquire()
    another_lock = redis_lock.Lock(conn, n)
    with pytest.raises(redis_lock.NotAcquired):
        another_lock.extend(1000)
    assert conn.ttl("lock:" + n) <= 100
    assert lock.id != another_lock.id


def test_double_acquire(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    with lock:
        with pytest.raises(RuntimeError):
            lock.acquire()
        with pytest.raises(redis_lock.AlreadyAcquired):
            lock.acquire()


def test_enter_already_acquired_with_not_blocking(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    assert lock.acquire()
    with pytest.raises(redis_lock.NotAcquired):
        with redis_lock.Lock(conn, n, blocking=False):
            pass


def test_reset(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    lock.reset()
    new_lock = redis_lock.Lock(conn, n)
    new_lock.acquire(blocking=False)
    new_lock.release()
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()


def test_reset_all(redis_lock, conn, n):
    lock1 = redis_lock.Lock(conn, n + "1")
    lock2 = redis_lock.Lock(conn, n + "2")
    lock1.acquire(blocking=False)
    lock2.acquire(blocking=False)
    redis_lock.reset_all(conn)
    lock1 = redis_lock.Lock(conn, n + "1")
    lock2 = redis_lock.Lock(conn, n + "2")
    assert lock1.acquire(blocking=False)
    assert lock2.acquire(blocking=False)
    lock1.release()
    lock2.release()


def test_owner_id_and_token(redis_lock, conn, n):
    assert redis_lock.Lock(conn, n, expire=5, id="foobar-identifier").id == "foobar-identifier"
    lock = redis_lock.Lock(conn, n)
    assert conn.get("lock:" + n) is None
    lock.acquire()
    assert lock.get_owner_id() == lock.id
    assert conn.get("lock:" + n).decode() == lock.id
    lock.release()


def test_bogus_release(redis_lock, conn, n):
    lock = redis_lock.Lock(conn, n)
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()
    lock.acquire()
    lock2 = redis_lock.Lock(conn, n, id=lock.id)
    lock2.release()
    assert not conn.exists("lock:" + n)


def test_release_from_nonblocking_leaving_garbage(redis_lock, conn, n):
    for _ in range(10):
        lock = redis_lock.Lock(conn, n)
        lock.acquire(blocking=False)
        lock.release()
        assert conn.llen("lock-signal:" + n) == 1


def test_auto_renewal_bad_values(redis_lock, conn, n):
    with pytest.raises(ValueError, match="Expire may not be None when auto_renewal is set"):
        redis_lock.Lock(conn, n, expire=None, auto_renewal=True)


def test_strict_wants_a_strict_redis(redis_lock, n):
    with pytest.raises(ValueError, match="redis_client must be instance of StrictRedis"):
        redis_lock.Lock(object(), n)


def test_signal_expiration(redis_lock, conn, n):
    """A release's wake-up stays on the signal list for signal_expire ms."""
    lock = redis_lock.Lock(conn, n, signal_expire=1500)
    lock.acquire()
    lock.release()
    assert 0 < conn.pttl("lock-signal:" + n) <= 1500


def test_reset_signalizes(redis_lock, conn, n):
    """reset() pushes the signal, so a blocked waiter is unblocked."""
    lock = redis_lock.Lock(conn, n)
    lock.acquire()
    got = []
    waiter = threading.Thread(
        target=lambda: got.append(redis_lock.Lock(redis.StrictRedis(connection_pool=conn.connection_pool), n).acquire())
    )
    waiter.start()
    wait_for(lambda: _blocked_on(conn, "lock-signal:" + n), 10, "the waiter to block on the signal list")
    lock.reset()
    waiter.join(10)
    assert got == [True]


def _blocked_on(conn, key: str) -> bool:
    """Whether a client of the server is blocked in BLPOP (each test's own
    server traffic: its waiter, on the signal list `key`)."""
    return any(c.get("cmd") == "blpop" for c in conn.client_list())


# ----------------------------------------------------- old and new together


@pytest.mark.parametrize("holder_kind,other_kind", [("old", "new"), ("new", "old")])
def test_an_old_hold_and_a_compat_hold_exclude_each_other(conn, n, holder_kind, other_kind):
    module = {"old": real_redis_lock, "new": compat_redis_lock}
    holder, other = module[holder_kind].Lock(conn, n, expire=30), module[other_kind].Lock(conn, n, expire=30)
    assert holder.acquire(blocking=False)
    assert not other.acquire(blocking=False)
    with pytest.raises(module[other_kind].NotAcquired):
        other.release()
    with pytest.raises(module[other_kind].NotAcquired):
        other.extend(100)
    assert holder.get_owner_id() == holder.id and conn.ttl("lock:" + n) <= 30, "the holder's hold is untouched"
    holder.release()
    assert other.acquire(blocking=False)
    other.release()


@pytest.fixture
def patient(monkeypatch):
    """The compat waiter's safety net made long: only a signal can wake it in time."""
    monkeypatch.setattr(compat_redis_lock, "SAFETY_NET", 120.0)


@pytest.mark.parametrize("holder_kind,waiter_kind", [("old", "new"), ("new", "old")])
def test_a_waiter_is_woken_by_the_other_librarys_release(conn, n, patient, holder_kind, waiter_kind):
    """No expiry and no timeout: the waiter blocks on the signal list until a
    release pushes it, whichever library released."""
    module = {"old": real_redis_lock, "new": compat_redis_lock}
    holder = module[holder_kind].Lock(conn, n)
    assert holder.acquire(blocking=False)
    got = []
    waiter_conn = redis.StrictRedis(connection_pool=conn.connection_pool)
    thread = threading.Thread(
        target=lambda: got.append(module[waiter_kind].Lock(waiter_conn, n).acquire()), daemon=True
    )
    thread.start()
    wait_for(lambda: _blocked_on(conn, "lock-signal:" + n), 10, "the waiter to block on the signal list")
    holder.release()
    thread.join(60)
    assert got == [True]


CONTENDER = textwrap.dedent("""
    import sys, time
    import redis
    kind, url, name, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if kind == "old":
        import redis_lock
    else:
        from ferrolock.compat import redis_lock
    r = redis.StrictRedis.from_url(url)
    inside = name + ":inside"
    for _ in range(rounds):
        with redis_lock.Lock(r, name, expire=10):
            if r.incr(inside) != 1:
                print("OVERLAP", flush=True)
            time.sleep(0.002)  # hold time: widens the window an overlap would show in
            r.decr(inside)
    print("DONE", flush=True)
""")


def test_old_and_new_processes_never_hold_at_once(redis_url, conn, n):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, kind, redis_url, n, "25"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in ("old", "new", "old", "new")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert "OVERLAP" not in out and "DONE" in out, out


# ------------------------------------------------------ what ferrolock adds


def test_auto_renewal_keeps_the_hold(conn, n):
    probe = LostProbe()
    lock = compat_redis_lock.Lock(conn, n, expire=1, auto_renewal=True, on_lost=probe)
    with lock:
        time.sleep(2.5)  # the work outlasts two expiries
        assert lock.get_owner_id() == lock.id and not lock.lost
    assert probe.calls == 0
    assert ferrolock._ferrolock._debug_stats()["watchdogs"] == 0 or not lock.locked()


def test_fence_and_loss(conn, n):
    probe = LostProbe()
    lock = compat_redis_lock.Lock(conn, n, expire=1, on_lost=probe)
    lock.acquire()
    first = lock.fence
    assert first and first > 0
    assert probe.wait(10) and lock.lost, "an expiry without renewal is told"
    wait_for(lambda: not lock.locked(), 10, "the key to expire (the loss is told a drift margin early)")
    with pytest.raises(compat_redis_lock.NotAcquired):
        lock.release()
    lock.acquire()
    assert lock.fence > first
    lock.release()


def test_a_fractional_timeout_is_kept(conn, n):
    with compat_redis_lock.Lock(conn, n):
        started = time.monotonic()
        assert compat_redis_lock.Lock(conn, n).acquire(timeout=0.3) is False
        assert 0.25 < time.monotonic() - started < 10
