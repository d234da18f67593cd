"""The synchronous Lock API against a real Redis: holds, tokens, fences,
storage layout, waiting and retry strategies, ownership errors, restore by
token, force release, multi-locks, key naming, threads and processes."""

from __future__ import annotations

import multiprocessing
import re
import threading
import time

import pytest

import ferrolock
from ferrolock import LockError, LockNotAcquired, LockNotOwned, Retry
from support.helpers import hold_field, hold_of, script_calls, wait_for

TOKEN_RE = re.compile(r"[0-9a-f]{32}")


def key_of(prefix: str, name: str) -> str:
    """The Redis key ferrolock documents for lock `name` under `prefix`."""
    escaped = name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{prefix}{{{escaped}}}"


def wait_until_free(client: ferrolock.Client, name: str, limit: float = 3.0) -> None:
    """Until nobody holds `name` (its ttl ran out), failing after `limit` s."""
    wait_for(lambda: client.inspect(name) is None, limit, f"lock {name!r} to expire")


def hash_of(raw, key: str) -> dict:
    return hold_of(raw("GET", key))


# --------------------------------------------------------------------------
# holding, tokens, fences, storage


def test_acquire_release_round_trip_and_storage(client, raw, prefix):
    lock = client.lock("orders:42", ttl=10.0, metadata="worker-7")
    assert lock.acquire() is True
    key = key_of(prefix, "orders:42")
    assert raw.keys(prefix + "*") == [key]
    fields = hash_of(raw, key)
    # A free name is taken by a transaction, whose value cannot carry the
    # fence its TIME gives: the owner records it with its first renewal.
    assert set(fields) == {"token", "meta"}
    assert fields["token"].decode() == lock.token
    assert fields["meta"] == b"worker-7"
    pttl = raw("PTTL", key)
    assert 9000 < pttl <= 10000
    lock.extend()
    fields = hash_of(raw, key)
    assert set(fields) == {"token", "meta", "fence"}
    assert int(fields["fence"]) == lock.fence and fields["meta"] == b"worker-7"
    assert 9000 < raw("PTTL", key) <= 10000

    lock.release()
    assert raw.keys(prefix + "*") == []
    assert lock.token is None
    assert lock.fence is None


def test_a_hold_of_the_hash_layout_is_another_owners(client, raw, prefix):
    """A hold as ferrolock 0.1 kept it (a hash: token, fence, meta), met in a
    rolling upgrade: a new handle finds it held and waits for it (marking it
    as 0.1 marked, so its release wakes the waiter), the tools show its
    owner, and a forced release ends it. Never taken, never overwritten."""
    key = key_of(prefix, "old")
    raw("HSET", key, "token", "0123456789abcdef0123456789abcdef", "fence", "7", "meta", "v0.1")
    raw("PEXPIRE", key, 10_000)
    lock = client.lock("old", ttl=5)
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0.1) is False
    assert raw("HGET", key, "w") == b"1", "the waiter's mark, as 0.1 reads it"
    info = client.inspect("old")
    assert info is not None and (info.token, info.fence, info.metadata) == (
        "0123456789abcdef0123456789abcdef",
        7,
        "v0.1",
    )
    assert raw("HGET", key, "token") == b"0123456789abcdef0123456789abcdef", "left as it was"
    assert client.force_release("old") is True
    assert lock.acquire(blocking=False) is True
    assert hold_field(raw("GET", key), "token").decode() == lock.token and lock.fence > 7
    lock.release()


@pytest.mark.parametrize("value", [("SET", "not a hold"), ("HSET", "field", "value")])
def test_a_key_of_another_program_is_refused_and_left_alone(client, raw, prefix, value):
    """Another program's string, or a hash that is no 0.1 hold, under a
    lock's key: every step refuses it with an error naming the key, and it
    stays as it was."""
    key = key_of(prefix, "foreign")
    raw(value[0], key, *value[1:])
    lock = client.lock("foreign", ttl=5)
    for attempt in (lambda: lock.acquire(blocking=False), lambda: client.inspect("foreign")):
        with pytest.raises(LockError, match="holds a value ferrolock did not write"):
            attempt()
    kept = raw("GET", key) if value[0] == "SET" else raw("HGET", key, "field")
    assert kept == value[-1].encode()


@pytest.mark.parametrize("token", ["a b", "tab\there", "new\nline", "caf\u00e9"])
def test_a_token_with_a_space_or_not_printable_ascii_is_refused(client, token):
    """A hold's value ends its token at the first space (lua/lib/hold.lua)."""
    with pytest.raises(ValueError, match="token must be 1 to 512 printable ASCII characters with no space"):
        client.lock("t", token=token)


def test_token_format_and_fresh_per_acquisition(client, raw, prefix):
    lock = client.lock("t")
    assert lock.token is None
    tokens = []
    for _ in range(20):
        assert lock.acquire()
        token = lock.token
        assert isinstance(token, str)
        assert TOKEN_RE.fullmatch(token), token
        assert len(token) * 4 == 128
        assert client.inspect("t").token == token
        tokens.append(token)
        lock.release()
    assert len(set(tokens)) == len(tokens)
    # A different handle gets a different token too.
    other = client.lock("t")
    with other:
        assert other.token not in tokens
    assert raw.keys(prefix + "*") == []


def test_fence_strictly_increasing_across_release(client):
    fences = []
    for i in range(10):
        # alternate handles: the fence belongs to the name, not the handle
        lock = client.lock("fenced") if i % 2 else client.lock("fenced", ttl=5)
        with lock:
            assert isinstance(lock.fence, int)
            assert client.inspect("fenced").fence == 0  # recorded by its first renewal
            lock.extend()
            assert client.inspect("fenced").fence == lock.fence
            fences.append(lock.fence)
    assert all(a < b for a, b in zip(fences, fences[1:])), fences
    # µs since the epoch, from the server clock
    assert abs(fences[-1] / 1e6 - time.time()) < 600


def test_fence_strictly_increasing_across_expiry(client, raw, prefix):
    first = client.lock("exp", ttl=0.2, auto_renew=False)
    assert first.acquire(blocking=False)
    f1 = first.fence
    wait_until_free(client, "exp")
    assert raw.keys(prefix + "*") == []
    second = client.lock("exp", ttl=0.2, auto_renew=False)
    assert second.acquire(blocking=False)
    assert second.fence > f1
    f2 = second.fence
    wait_until_free(client, "exp")
    # the original handle gives up its expired hold, then takes it again: still higher
    with pytest.raises(LockNotOwned):
        first.release()
    assert first.acquire(blocking=False)
    assert first.fence > f2
    first.release()


# --------------------------------------------------------------------------
# waiting


def test_non_blocking_acquire_on_held_lock_is_false(client):
    holder = client.lock("busy")
    other = client.lock("busy")
    assert holder.acquire()
    t0 = time.monotonic()
    assert other.acquire(blocking=False) is False
    assert time.monotonic() - t0 < 1
    assert other.token is None
    assert client.inspect("busy").token == holder.token
    holder.release()
    assert other.acquire(blocking=False) is True
    other.release()


def test_acquire_timeout_returns_false_after_timeout(client):
    holder = client.lock("busy")
    other = client.lock("busy")
    assert holder.acquire()
    t0 = time.monotonic()
    assert other.acquire(timeout=0.2) is False
    elapsed = time.monotonic() - t0
    assert 0.2 <= elapsed < 2, elapsed
    assert other.token is None
    assert client.inspect("busy").token == holder.token
    holder.release()


def test_blocking_acquire_succeeds_promptly_after_release_in_other_thread(client):
    holder = client.lock("handoff")
    waiter = client.lock("handoff")
    assert holder.acquire()
    started, acquired = threading.Event(), threading.Event()
    result = {}

    def wait_for_it():
        started.set()
        result["ok"] = waiter.acquire()  # blocks: no timeout
        result["at"] = time.monotonic()
        acquired.set()

    t = threading.Thread(target=wait_for_it)
    t.start()
    assert started.wait(5)
    assert not acquired.wait(0.2), "acquired a lock that was held"
    released_at = time.monotonic()
    holder.release()
    assert acquired.wait(5)
    t.join(5)
    assert result["ok"] is True
    assert result["at"] - released_at < 1.0
    assert client.inspect("handoff").token == waiter.token
    waiter.release()


def test_with_raises_lock_not_acquired_after_blocking_timeout(client, raw, prefix):
    holder = client.lock("w")
    assert holder.acquire()
    waiter = client.lock("w", blocking_timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(LockNotAcquired) as info:
        with waiter:
            pytest.fail("entered the block of a lock held by another handle")
    elapsed = time.monotonic() - t0
    assert 0.2 <= elapsed < 2, elapsed
    assert isinstance(info.value, LockError)
    assert client.inspect("w").token == holder.token
    holder.release()
    assert raw.keys(prefix + "*") == []


def refused_once(client) -> None:
    """One try at "r", held: the step a refused first try falls back to
    (obtain.lua, after the transaction that found the name taken) is
    loaded, so each try after runs one script, and no NOSCRIPT reply counts
    as one."""
    assert not client.lock("r").acquire(blocking=False)


def test_retry_none_gives_up_after_one_try(server):
    client = ferrolock.Client(server.url, prefix="rn:")
    holder = client.lock("r")
    assert holder.acquire()
    waiter = client.lock("r", retry=Retry.none())
    refused_once(client)
    before = script_calls(server)
    t0 = time.monotonic()
    assert waiter.acquire() is False  # blocking, no timeout: still one try
    assert time.monotonic() - t0 < 1
    assert script_calls(server) - before == 1
    with pytest.raises(LockNotAcquired):
        with waiter:
            pass
    holder.release()
    assert waiter.acquire() is True
    waiter.release()


def test_retry_fixed_with_attempts_gives_up(server):
    client = ferrolock.Client(server.url, prefix="rf:")
    holder = client.lock("r")
    assert holder.acquire()
    waiter = client.lock("r", retry=Retry.fixed(0.05, attempts=3))
    refused_once(client)
    before = script_calls(server)
    t0 = time.monotonic()
    assert waiter.acquire() is False
    elapsed = time.monotonic() - t0
    assert script_calls(server) - before == 3
    # Three tries: the second at once, right after subscribing to wake-ups
    # (so a release in between is not missed), then one 50 ms wait.
    assert 0.05 <= elapsed < 2, elapsed
    with pytest.raises(LockNotAcquired):
        with waiter:
            pass
    holder.release()


# --------------------------------------------------------------------------
# ownership


def test_release_of_non_held_handle_raises(client, raw, prefix):
    lock = client.lock("n")
    with pytest.raises(LockNotOwned):
        lock.release()
    assert lock.acquire()
    lock.release()
    with pytest.raises(LockNotOwned):
        lock.release()
    # someone else's hold is not a hold of this handle
    other = client.lock("n")
    assert other.acquire()
    with pytest.raises(LockNotOwned):
        lock.release()
    assert client.inspect("n").token == other.token
    other.release()
    assert raw.keys(prefix + "*") == []


def test_release_after_expiry_and_takeover_raises_and_leaves_other(client):
    first = client.lock("e", ttl=0.2, auto_renew=False)
    assert first.acquire()
    wait_until_free(client, "e")
    second = client.lock("e", ttl=10)
    assert second.acquire(blocking=False)
    with pytest.raises(LockNotOwned):
        first.release()
    assert first.lost is True
    second.extend()  # records its fence
    info = client.inspect("e")
    assert info is not None and info.token == second.token
    assert info.fence == second.fence
    assert second.owned()
    second.release()


def test_extend_pushes_ttl(client, raw, prefix):
    lock = client.lock("x", ttl=2.0, auto_renew=False)
    assert lock.acquire()
    time.sleep(0.3)  # let some of the ttl run out
    before = lock.ttl()
    assert before is not None and before < 1.85
    lock.extend()
    after = lock.ttl()
    assert after > before
    assert 1.5 < after <= 2.0  # minus the extend's round trip, on a busy machine too
    lock.extend(ttl=5)
    assert 4.0 < lock.ttl() <= 5.0
    assert 4000 < raw("PTTL", key_of(prefix, "x")) <= 5000
    lock.extend(ttl=0.5)
    assert lock.ttl() <= 0.5
    lock.release()


def test_extend_after_expiry_raises(client):
    lock = client.lock("x", ttl=0.2, auto_renew=False)
    assert lock.acquire()
    wait_until_free(client, "x")
    with pytest.raises(LockNotOwned):
        lock.extend()
    assert client.inspect("x") is None  # extend did not resurrect it
    assert lock.lost


def test_extend_of_non_held_handle_raises(client):
    lock = client.lock("x")
    with pytest.raises(LockNotOwned):
        lock.extend()


def test_locked_owned_ttl_in_each_state(client):
    a = client.lock("s", ttl=10.0, auto_renew=False)
    b = client.lock("s")
    # free
    assert (a.locked(), a.owned(), a.ttl(), a.token, a.fence, a.lost) == (False, False, None, None, None, False)
    # held by a
    assert a.acquire()
    assert a.locked() is True and a.owned() is True
    assert 9.0 < a.ttl() <= 10.0
    assert b.locked() is True and b.owned() is False and b.ttl() is None
    assert b.token is None
    # released
    a.release()
    assert (a.locked(), a.owned(), a.ttl(), a.token, a.lost) == (False, False, None, None, False)
    assert b.locked() is False
    # expired
    short = client.lock("s", ttl=0.6, auto_renew=False)  # still held at the next line on a busy machine
    assert short.acquire()
    assert short.owned()
    wait_until_free(client, "s")
    assert short.locked() is False
    assert short.owned() is False
    assert short.ttl() is None
    assert short.lost is True


def test_metadata_and_inspect(client):
    assert client.inspect("m") is None
    plain = client.lock("m")
    assert plain.inspect() == [None]
    with plain:
        info = client.inspect("m")
        assert info.metadata is None
        assert info.token == plain.token
    lock = client.lock("m", ttl=10.0, metadata='{"host": "h1", "pid": 1}')
    with lock:
        assert client.inspect("m").fence == 0  # recorded by its first renewal
        lock.extend()
        info = client.inspect("m")
        assert isinstance(info, ferrolock.LockInfo)
        assert info.name == "m"
        assert info.token == lock.token
        assert info.metadata == '{"host": "h1", "pid": 1}'
        assert info.fence == lock.fence
        assert 9.0 < info.ttl <= 10.0
        [same] = lock.inspect()
        assert (same.name, same.token, same.metadata, same.fence) == (info.name, info.token, info.metadata, info.fence)
    assert client.inspect("m") is None
    assert lock.inspect() == [None]


# --------------------------------------------------------------------------
# restore by token, force release


def test_token_restore_releases_lock_taken_elsewhere(client, raw, prefix):
    a = client.lock("job")
    assert a.acquire()
    restored = ferrolock.Lock(client, "job", token=a.token)
    assert restored.token == a.token
    assert restored.owned() is True
    restored.release()
    assert client.inspect("job") is None
    assert raw.keys(prefix + "*") == []
    with pytest.raises(LockNotOwned):
        a.release()


def test_wrong_token_cannot_release(client):
    a = client.lock("job")
    assert a.acquire()
    wrong = ferrolock.Lock(client, "job", token="0" * 32)
    assert wrong.owned() is False
    with pytest.raises(LockNotOwned):
        wrong.release()
    info = client.inspect("job")
    assert info is not None and info.token == a.token
    a.release()


def test_token_restore_acquire_adopts_hold(client):
    a = client.lock("job")
    assert a.acquire()
    a.extend()  # its first renewal records its fence
    adopted = client.lock("job", token=a.token)
    assert adopted.acquire(blocking=False) is True
    assert adopted.token == a.token
    assert adopted.fence == a.fence  # the same hold, not a new one
    assert adopted.owned()
    adopted.release()
    assert client.inspect("job") is None


def test_a_hold_adopted_before_its_fence_is_recorded_gets_a_newer_one(client):
    """Adopted before its first renewal, a hold's fence is not in Redis yet:
    the adopting handle gets a newer one from the clock, recorded, so a
    storage that saw it refuses the older one's writes; a later adopter
    keeps it."""
    a = client.lock("job")
    assert a.acquire()
    adopted = client.lock("job", token=a.token)
    assert adopted.acquire(blocking=False) is True
    assert adopted.fence > a.fence
    assert client.inspect("job").fence == adopted.fence
    again = client.lock("job", token=a.token)
    assert again.acquire(blocking=False) is True
    assert again.fence == adopted.fence
    a.extend()  # a renewal of the older handle leaves the newer fence
    assert client.inspect("job").fence == adopted.fence
    adopted.release()
    assert client.inspect("job") is None


def test_force_release(client, raw, prefix):
    assert client.force_release("f") is False
    holder = client.lock("f")
    assert holder.acquire()
    assert client.force_release("f") is True
    assert client.inspect("f") is None
    assert raw.keys(prefix + "*") == []
    assert client.force_release("f") is False
    with pytest.raises(LockNotOwned):
        holder.extend()
    with pytest.raises(LockNotOwned):
        holder.release()
    assert holder.lost is True
    # free for the taking again, by anyone
    other = client.lock("f")
    assert other.acquire(blocking=False)
    assert client.force_release("f") is True
    with pytest.raises(LockNotOwned):
        other.release()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# multi-locks


def test_multi_lock_all_or_nothing(client, raw, prefix):
    names = ["a", "b", "c"]
    blocker = client.lock("b")
    assert blocker.acquire()
    multi = client.multi_lock(names)
    assert multi.name == ("a", "b", "c")
    assert multi.names == ("a", "b", "c")
    assert multi.acquire(blocking=False) is False
    assert raw.keys(prefix + "*") == [key_of(prefix, "b")]  # none of the others created
    assert client.inspect("b").token == blocker.token
    blocker.release()

    assert multi.acquire(blocking=False) is True
    assert raw.keys(prefix + "*") == sorted(key_of(prefix, n) for n in names)
    infos = multi.inspect()
    assert [i.name for i in infos] == names
    assert {i.token for i in infos} == {multi.token}
    assert {i.fence for i in infos} == {multi.fence}
    assert multi.owned() and multi.locked()

    # a single lock on any one of the names is excluded
    for n in names:
        single = client.lock(n)
        assert single.acquire(blocking=False) is False

    multi.release()
    assert raw.keys(prefix + "*") == []
    single = client.lock("c")
    assert single.acquire(blocking=False) is True
    single.release()


def test_multi_lock_excluded_by_other_multi_lock_sharing_a_name(client, raw, prefix):
    m1 = client.multi_lock(["x", "y"])
    m2 = client.multi_lock(["y", "z"])
    with m1:
        assert m2.acquire(blocking=False) is False
        assert client.inspect("z") is None
    with m2:
        assert raw.keys(prefix + "*") == sorted([key_of(prefix, "y"), key_of(prefix, "z")])
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# naming


NAMES = ["a{b}", "a%7Bb%7D", "%", "%25", "}{", "ünï cödé 漢字", "with space", "{", "}"]


def test_special_names_are_distinct_and_round_trip(client, raw, prefix):
    locks = [client.lock(n) for n in NAMES]
    for lock in locks:
        assert lock.acquire(blocking=False), lock.name
    assert raw.keys(prefix + "*") == sorted(key_of(prefix, n) for n in NAMES)
    for n, lock in zip(NAMES, locks):
        assert lock.name == n
        info = client.inspect(n)
        assert info.name == n and info.token == lock.token
        # one Cluster hash tag per key: exactly one {...}
        k = key_of(prefix, n)
        assert k.count("{") == 1 and k.count("}") == 1
        assert hold_field(raw("GET", k), "token").decode() == lock.token
    assert key_of(prefix, "a{b}") != key_of(prefix, "a%7Bb%7D")
    for lock in locks:
        lock.release()
    assert raw.keys(prefix + "*") == []


def test_prefixes_namespace_locks(redis_url, client, raw, prefix):
    other = ferrolock.Client(redis_url, prefix=prefix + "other:")
    a = client.lock("shared")
    b = other.lock("shared")
    assert a.acquire(blocking=False)
    assert b.acquire(blocking=False)
    assert raw.keys(prefix + "*") == sorted([key_of(prefix, "shared"), key_of(prefix + "other:", "shared")])
    assert client.inspect("shared").token == a.token
    assert other.inspect("shared").token == b.token
    a.release()
    assert other.inspect("shared").token == b.token
    b.release()
    assert raw.keys(prefix + "*") == []


# --------------------------------------------------------------------------
# threads


def test_shared_handle_second_thread_blocks_until_first_releases(client):
    lock = client.lock("shared-handle")
    first_token = []
    held, go_release = threading.Event(), threading.Event()
    second_started, second_acquired = threading.Event(), threading.Event()
    second_token = []

    def first():
        assert lock.acquire()
        first_token.append(lock.token)
        held.set()
        go_release.wait(10)
        lock.release()

    def second():
        second_started.set()
        assert lock.acquire()
        second_token.append(lock.token)
        second_acquired.set()

    t1 = threading.Thread(target=first)
    t1.start()
    assert held.wait(5)
    # not a shared hold: non-blocking acquire on the same handle is refused
    assert lock.acquire(blocking=False) is False
    t2 = threading.Thread(target=second)
    t2.start()
    assert second_started.wait(5)
    assert not second_acquired.wait(0.3), "second thread shared the first thread's hold"
    assert client.inspect("shared-handle").token == first_token[0]
    go_release.set()
    assert second_acquired.wait(5)
    t1.join(5)
    t2.join(5)
    assert second_token[0] != first_token[0]
    assert client.inspect("shared-handle").token == second_token[0]
    # released from the main thread, acquired in t2
    lock.release()
    assert client.inspect("shared-handle") is None


def test_release_from_other_thread(client):
    lock = client.lock("cross")
    assert lock.acquire()
    errors = []

    def release():
        try:
            lock.release()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=release)
    t.start()
    t.join(10)
    assert errors == []
    assert client.inspect("cross") is None
    assert lock.token is None


def test_synchronized_sync_function_never_overlaps(client, raw, prefix):
    guard = threading.Lock()
    state = {"inside": 0, "max": 0, "calls": 0}

    @client.synchronized("sync-fn", retry=Retry.exponential(0.001, 0.01))
    def critical(x):
        """Doubles x under the lock."""
        with guard:
            state["inside"] += 1
            state["max"] = max(state["max"], state["inside"])
            state["calls"] += 1
        time.sleep(0.002)  # let time pass inside the section to expose overlap
        with guard:
            state["inside"] -= 1
        return x * 2

    assert critical.__name__ == "critical"
    assert critical.__doc__ == "Doubles x under the lock."
    barrier = threading.Barrier(4)
    results = {}

    def worker(i):
        barrier.wait()
        results[i] = [critical(i * 100 + j) for j in range(10)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert state["calls"] == 40
    assert state["max"] == 1
    for i in range(4):
        assert results[i] == [(i * 100 + j) * 2 for j in range(10)]
    assert raw.keys(prefix + "*") == []


def test_synchronized_releases_when_function_raises(client):
    @client.synchronized("raises")
    def boom():
        assert client.inspect("raises") is not None
        raise KeyError("x")

    with pytest.raises(KeyError):
        boom()
    assert client.inspect("raises") is None


# --------------------------------------------------------------------------
# processes


def _count_in_process(url: str, prefix: str, path: str, iterations: int) -> None:
    client = ferrolock.Client(url, prefix=prefix)
    lock = client.lock("file-counter", retry=Retry.exponential(0.001, 0.01))
    for _ in range(iterations):
        with lock:
            with open(path) as f:
                n = int(f.read())
            time.sleep(0.0005)  # widen the read-modify-write race
            with open(path, "w") as f:
                f.write(str(n + 1))


def test_processes_increment_file_counter_exactly(redis_url, prefix, raw, tmp_path):
    path = tmp_path / "counter"
    path.write_text("0")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_count_in_process, args=(redis_url, prefix, str(path), 50)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert int(path.read_text()) == 200
    assert raw.keys(prefix + "*") == []


def test_unix_socket_url(prefix, tmp_path):
    """`unix:///path?db=N` reaches a server listening on a socket only."""
    from ferrolock.testing import RedisServer

    sock = tmp_path / "redis.sock"
    server = RedisServer(extra=("--unixsocket", str(sock), "--unixsocketperm", "700")).start()
    try:
        client = ferrolock.Client(f"unix://{sock}?db=2", prefix=prefix)
        assert "unix://" in repr(client)
        lock = client.lock("over-a-socket")
        with lock:
            assert client.inspect("over-a-socket").token == lock.token
            assert b"db2:keys=1," in server.command("INFO", "keyspace")
        assert client.inspect("over-a-socket") is None
        assert b"db2:" not in server.command("INFO", "keyspace")
    finally:
        server.close()


# --------------------------------------------------------------------------
# a handle dropped while holding


def test_a_handle_collected_while_holding_warns_naming_the_lock(client):
    import gc

    lock = client.lock("dropped", ttl=5)
    assert lock.acquire()
    with pytest.warns(
        ResourceWarning, match='^unreleased ferrolock.Lock "dropped" was garbage-collected while holding'
    ):
        del lock
        gc.collect()
    info = client.inspect("dropped")
    assert info is not None and info.ttl <= 5, "it stays held until its ttl runs out"


def test_a_released_or_idle_handle_is_collected_silently(client):
    import gc
    import warnings

    released = client.lock("quiet")
    assert released.acquire()
    released.release()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del released
        client.lock("never-acquired")
        gc.collect()
    # gc.collect() also collects what earlier tests of this process left:
    # only these two handles' warnings count here.
    ours = [
        w
        for w in caught
        if issubclass(w.category, ResourceWarning)
        and ('"quiet"' in str(w.message) or '"never-acquired"' in str(w.message))
    ]
    assert ours == []
