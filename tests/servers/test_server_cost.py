"""What a lock cycle costs the server, counted in commands (never in time:
benches/server_cost.py measures that): an uncontended cycle runs a fixed set
of commands, a release nobody waits for publishes nothing, and a waiter is
still woken by the release it waits for, however many wait behind it. On a
server with compare commands (Valkey 9: `SET … IFEQ`, `DELIFEQ`), a Lock's
renewal and release are one such command each, and a hold whose value is
not the one its owner wrote falls back to the script; the watchdog's
renewals that fall due together compare their values in one script call on
every server. Run against each server the project is tested on (`make
test-servers`)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis

import ferrolock
from ferrolock import Retry
from ferrolock._ferrolock import _debug_stats
from support.helpers import compares, hold_field, hold_value, key, wait_for

SLOW = Retry.fixed(10.0)  # polling alone would take 10 s: only a wake-up is fast

# A Lock's cycle on a server with compare commands: the transaction, then
# DELIFEQ of the value it wrote.
COMPARED_LOCK = {"multi": 1, "set": 1, "time": 1, "exec": 1, "delifeq": 1}

# Every command one uncontended acquire + release runs, inside the scripts too.
CYCLES = {
    # No hold and no fence on record: a transaction, SET NX and the clock's
    # fence; a release of a hold no waiter marked and whose fence the clock
    # gave is its GET and DEL.
    "lock": {"multi": 1, "set": 1, "time": 1, "exec": 1, "evalsha": 1, "get": 1, "del": 1},
    # No queue and no hash: EXISTS of both and the clock's fence; a release of
    # a hold no waiter marked reads no queue.
    "fair lock": {"evalsha": 2, "exists": 1, "time": 1, "set": 1, "get": 1, "del": 1},
    # A fair Lock's cycle, told on the election's watch channel at each end.
    "election": {
        "evalsha": 2,
        "exists": 1,
        "time": 1,
        "set": 1,
        "get": 1,
        "del": 1,
        "publish": 2,
    },
    # No queue, no writer, no other reader: EXISTS of the three and one lease.
    "fair rwmutex read": {
        "evalsha": 2,
        "time": 2,
        "exists": 2,
        "zadd": 1,
        "pexpire": 1,
        "zremrangebyscore": 1,
        "zrem": 1,
    },
    # The read: a script, then a transaction (MULTI / ZSCORE / ZREM / TIME / GET / EXEC).
    "rwmutex read": {
        "evalsha": 1,
        "exists": 1,
        "time": 2,
        "zadd": 1,
        "pexpire": 1,
        "multi": 1,
        "zscore": 1,
        "zrem": 1,
        "get": 1,
        "exec": 1,
    },
    # No data: EXISTS, the clock's fence, the data and the lease written, the
    # keys' ttl; the last permit's release reads the data and the first two
    # leases, and both keys go.
    "semaphore": {
        "evalsha": 2,
        "exists": 1,
        "time": 2,
        "hmget": 1,
        "hset": 1,
        "zadd": 1,
        "pexpire": 2,
        "zrange": 1,
        "del": 1,
    },
}


def cycle(client, kind: str):
    """One uncontended acquire + release of `kind`."""
    if kind == "election":
        election = client.election("c")
        return lambda: election.campaign("me").resign()
    if kind == "lock":
        h = client.lock("c")
    elif kind == "fair lock":
        h = client.lock("c", fair=True)
    elif kind == "rwmutex read":
        h = client.rwmutex("c").read()
    elif kind == "fair rwmutex read":
        h = client.rwmutex("c", fair=True).read()
    else:
        h = client.semaphore("c", 4)

    def run() -> None:
        with h:
            pass

    return run


def commands(server) -> dict[str, int]:
    """Calls of each command since the last CONFIG RESETSTAT, but INFO and
    the test's own connection set-up (a new connection's CLIENT SETINFO)."""
    info = server.command("INFO", "commandstats").decode()
    counts = {}
    for line in info.splitlines():
        if line.startswith("cmdstat_") and not line.startswith(
            ("cmdstat_info:", "cmdstat_config", "cmdstat_client|setinfo")
        ):
            name, rest = line[len("cmdstat_") :].split(":", 1)
            counts[name] = int(rest.split("calls=", 1)[1].split(",", 1)[0])
    return counts


@pytest.mark.parametrize("kind", sorted(CYCLES))
def test_an_uncontended_cycle_runs_its_commands_and_publishes_nothing(server, kind):
    """Nothing published but an election's two announcements to its watchers."""
    run = cycle(ferrolock.Client(server.url), kind)
    run()  # the first cycle loads the scripts
    server.command("CONFIG", "RESETSTAT")
    run()
    ran = commands(server)
    assert ran.get("publish", 0) == (2 if kind == "election" else 0)
    assert ran == (COMPARED_LOCK if kind == "lock" and compares(server) else CYCLES[kind])


def test_a_lock_is_renewed_and_released_by_comparing_where_the_server_can(server):
    """An extend records the fence in the hold (the transaction could not),
    the next keeps it; with compare commands each is one SET … IFEQ and the
    release one DELIFEQ, else the scripts'; the value is the same either way."""
    client = ferrolock.Client(server.url, prefix="t:")
    warm_up(client)
    lock = client.lock("c", metadata="two words")
    assert lock.acquire()
    lock_key = key("t:", "c")
    assert server.command("GET", lock_key) == hold_value(lock.token, "", meta="two words").encode()
    server.command("CONFIG", "RESETSTAT")
    lock.extend()
    lock.extend()
    ran = commands(server)
    assert server.command("GET", lock_key) == hold_value(lock.token, lock.fence, meta="two words").encode()
    if compares(server):
        assert ran == {"set": 2}, ran
    else:
        assert (ran["evalsha"], ran["set"], ran["pexpire"]) == (2, 1, 1), ran
    server.command("CONFIG", "RESETSTAT")
    lock.release()
    ran = commands(server)
    assert server.command("EXISTS", lock_key) == 0
    assert ran == ({"delifeq": 1} if compares(server) else {"evalsha": 1, "get": 1, "del": 1})


def test_a_hold_a_waiter_marked_is_renewed_and_released_by_the_script(server):
    """A waiter's mark changes the hold's value: the compare finds another
    value and changes nothing, the script renews it (and from then on alone,
    the owner no longer knowing the value), and the release's script wakes
    the waiter, which a release by DELIFEQ could not."""
    client = ferrolock.Client(server.url, prefix="t:")
    warm_up(client)
    holder = client.lock("m")
    assert holder.acquire()
    lock_key = key("t:", "m")
    got, counted = threading.Event(), threading.Event()

    def wait() -> None:
        waiting = client.lock("m", retry=SLOW)
        if waiting.acquire(timeout=8):
            got.set()
            counted.wait(10)
            waiting.release()

    waiter = threading.Thread(target=wait)
    server.command("CONFIG", "RESETSTAT")
    waiter.start()
    wait_for(lambda: hold_field(server.command("GET", lock_key), "w") == b"1", 5, "the waiter to mark the hold")
    # Its first try marked the hold; it then subscribes, and tries once more
    # at once (its script alone), and only then waits for the wake-up, its
    # retry 10 s away: the counts below are the holder's once that try ran.
    wait_for(lambda: settled(commands(server)), 5, "the waiter to subscribe and try again")
    server.command("CONFIG", "RESETSTAT")
    holder.extend()
    holder.extend()
    ran = commands(server)
    assert ran["evalsha"] - ran.get("script|load", 0) == 2, ran  # a first run of refresh.lua loads it
    assert ran.get("set", 0) == (1 if compares(server) else 0) + 1, ran  # the refused compare; the fence recorded
    server.command("CONFIG", "RESETSTAT")
    holder.release()
    woken = got.wait(5)
    ran = commands(server)
    counted.set()
    waiter.join(10)
    assert woken, "the waiter was not woken by the release"
    assert ran.get("delifeq", 0) == 0 and ran["publish"] == 1, ran


def settled(ran: dict) -> bool:
    """A waiter's commands since it began (`commands`): a first try (the
    transaction, then obtain.lua), SUBSCRIBE, and the try right after it."""
    return ran.get("subscribe", 0) == 1 and ran.get("evalsha", 0) - ran.get("script|load", 0) >= 2


def test_a_refused_compare_command_falls_back_to_the_script_and_is_not_sent_again(server):
    """A user the server's ACL does not allow DELIFEQ (or a server without
    it, after a failover) still releases, by the script; and the client no
    longer sends it."""
    if not compares(server):
        pytest.skip(f"{server.binary} has no DELIFEQ")
    server.command("ACL", "SETUSER", "nodel", "on", ">pw", "~*", "&*", "+@all", "-delifeq")
    client = ferrolock.Client(server.url.replace("redis://", "redis://nodel:pw@"), prefix="t:")
    lock = client.lock("r")
    for refused in (1, 0):
        server.command("CONFIG", "RESETSTAT")
        assert lock.acquire()
        lock.release()
        stats = server.command("INFO", "commandstats").decode()
        assert server.command("EXISTS", key("t:", "r")) == 0
        assert "cmdstat_evalsha:" in stats, "the release did not run its script"
        sent = [line for line in stats.splitlines() if line.startswith("cmdstat_delifeq:")]
        assert len(sent) == refused, sent


def test_a_delifeq_resent_after_a_dropped_reply_is_not_a_loss(server):
    """The DELIFEQ runs on the server, then the connection drops before its
    reply arrives; sent again on a new connection it finds nothing, and so
    does the script after it. That is not a lost lock: the hold was still
    valid, so the first sending released it (as for the script's release,
    tests/faults/test_faults.py)."""
    from support.fault_proxy import FaultProxy

    if not compares(server):
        pytest.skip(f"{server.binary} has no DELIFEQ")
    proxy = FaultProxy(int(server.url.rsplit(":", 1)[1].split("/")[0]))
    try:
        lock = ferrolock.Client(proxy.url, prefix="t:").lock("resent", ttl=30.0)
        assert lock.acquire()
        proxy.drop_reply_to(b"DELIFEQ")
        lock.release()  # no LockNotOwned
        assert proxy.dropped.is_set()  # the fault did happen
        assert lock.lost is False
        assert server.command("EXISTS", key("t:", "resent")) == 0
    finally:
        proxy.close()


def test_renewals_that_fall_due_together_compare_their_values_in_one_call(server):
    """A watchdog's batch of one-name Locks, whose values their owners know,
    is one refresh_compared.lua call on every server: one MGET for the whole
    batch, then one PEXPIRE a hold (a SET the first time, recording its
    fence), and no value read hold by hold; a hold whose value changed (a
    waiter's mark) is left to refresh_batch.lua, and stays held."""
    client = ferrolock.Client(server.url, prefix="t:")
    warm_up(client)
    n = 12
    locks = [client.lock(f"b{i}", ttl=1.5) for i in range(n)]
    ours = {key("t:", f"b{i}") for i in range(n)}

    async def take_all() -> list:
        return await asyncio.gather(*(lock.aacquire(blocking=False) for lock in locks))

    assert all(asyncio.run(take_all()))
    # A waiter's mark on one of them: its value is no longer the one known.
    marked = key("t:", "b0")
    assert not client.lock("b0", retry=SLOW).acquire(timeout=0.05)
    assert hold_field(server.command("GET", marked), "w") == b"1"
    watcher = redis.Redis.from_url(server.url, socket_timeout=15)
    batches = []
    with watcher.monitor() as monitor:
        while len(batches) < 2:
            command = monitor.next_command()["command"]
            renewed = ours & set(command.split())
            if command.startswith("EVALSHA") and len(renewed) > 1:
                ran = []
                while (inner := monitor.next_command())["client_type"] == "lua":
                    ran.append(inner["command"].split()[0])
                if ran:  # not a first call's NOSCRIPT
                    batches.append((renewed, ran))
    for renewed, ran in batches:
        assert ran[0] == "MGET" and len(ran) == 1 + len(renewed - {marked}), ran
        assert set(ran[1:]) <= {"PEXPIRE", "SET"}, ran
    assert [client.inspect(lock.name).fence for lock in locks[1:]] == [lock.fence for lock in locks[1:]]
    for lock in locks:
        assert not lock.lost
        lock.release()
    assert server.command("DBSIZE") == 0


def warm_up(client) -> None:
    """A Lock's cycle with an extend, so that the scripts it may run are
    loaded (a first run of each is a NOSCRIPT, then SCRIPT LOAD)."""
    lock = client.lock("warm-up")
    assert lock.acquire()
    lock.extend()
    lock.release()


def test_a_first_try_at_a_held_lock_is_the_transaction_then_the_script(server):
    """The transaction takes only a free name: refused, the try goes on to
    obtain.lua (the holder's ttl, the waiter's mark); a later try of the
    same acquire runs the script alone; and an adopting handle (a token
    that holds already) gets its newer fence from the script too."""
    client = ferrolock.Client(server.url)
    holder = client.lock("c")
    assert holder.acquire()
    assert not client.lock("c").acquire(blocking=False)  # the first refusal loads obtain.lua
    server.command("CONFIG", "RESETSTAT")
    assert not client.lock("c", retry=Retry.none()).acquire(blocking=False)
    # obtain.lua reads the hold twice: its fast path's GET, then read_hold's.
    assert commands(server) == {"multi": 1, "set": 1, "time": 1, "exec": 1, "evalsha": 1, "get": 2, "pttl": 1}
    server.command("CONFIG", "RESETSTAT")
    retried = client.lock("c", retry=Retry.fixed(0.01, attempts=2))
    assert not retried.acquire(timeout=5)
    ran = commands(server)
    assert (ran["multi"], ran["exec"], ran["evalsha"]) == (1, 1, 2), ran
    server.command("CONFIG", "RESETSTAT")
    adopted = client.lock("c", token=holder.token)
    assert adopted.acquire(blocking=False) and adopted.fence > holder.fence
    ran = commands(server)
    assert (ran["multi"], ran["evalsha"]) == (1, 1), ran
    adopted.release()


def test_a_release_someone_waits_for_wakes_each_waiter_in_turn(server):
    """Three waiters of one process, retrying only every 10 s: each is woken
    by the release before it, though the first of them took the lock the
    previous waits had marked, and nobody marked the hold it took since."""
    client = ferrolock.Client(server.url, prefix="t:")
    holder = client.lock("turns")
    assert holder.acquire()
    taken = []

    def wait(i: int) -> None:
        waiter = client.lock("turns", retry=SLOW)
        if waiter.acquire(timeout=8):
            taken.append(i)
            waiter.release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    lock_key = key("t:", "turns")
    wait_for(lambda: hold_field(server.command("GET", lock_key), "w") == b"1", 5, "a waiter to mark the hold")
    wait_for(lambda: ferrolock_waiters() >= 3, 5, "three waiters")
    holder.release()
    for t in threads:
        t.join(10)
    assert sorted(taken) == [0, 1, 2]


def ferrolock_waiters() -> int:
    return _debug_stats()["waiters"]
