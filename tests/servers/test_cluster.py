"""Redis Cluster (redis+cluster://): every lock works across the slots of a
real 3-primary cluster, and wake-ups use sharded pub/sub: a release is
announced with SPUBLISH on its own shard only, never with a PUBLISH that
the cluster bus would carry to every node."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import ferrolock
from support.chaos_report import record
from support.redis_cluster import key_slot
from support.helpers import command_calls, hand_over_ms, hold_field, wait_for, WOKEN_WITHIN_MS


def pubsub_counts(cluster_raw) -> dict:
    return {cmd: sum(command_calls(raw, cmd) for raw in cluster_raw.nodes.values()) for cmd in ("publish", "spublish")}


@pytest.fixture
def cclient(cluster, prefix):
    return ferrolock.Client(cluster.url, prefix=prefix)


def test_locks_on_every_node(cclient, cluster, cluster_raw, prefix):
    names = [f"job:{i}" for i in range(12)]
    owners = {cluster.node_port_for(f"{prefix}{{{n}}}") for n in names}
    assert owners == set(cluster.ports), "the names should spread over all three nodes"
    fences = {}
    for n in names:
        lock = cclient.lock(n, metadata="w1")
        assert lock.acquire(blocking=False)
        assert not cclient.lock(n).acquire(blocking=False)
        assert cclient.inspect(n).fence == 0  # taken by the transaction: not recorded yet
        lock.extend()  # records it, as its first renewal would
        info = cclient.inspect(n)
        assert (info.token, info.metadata, info.fence) == (lock.token, "w1", lock.fence)
        fences[n] = lock.fence
        lock.release()
        again = cclient.lock(n)
        assert again.acquire(blocking=False) and again.fence > fences[n]
        assert cclient.force_release(n) is True
    assert cluster_raw.keys(prefix + "*") == []


def test_release_wakes_a_waiter_with_sharded_pubsub(cclient, cluster_raw, prefix):
    key = f"{prefix}{{q}}"
    node = cluster_raw.node(key)
    before = pubsub_counts(cluster_raw)
    holder = cclient.lock("q")
    assert holder.acquire()
    waiter = cclient.lock("q", retry=ferrolock.Retry.fixed(10.0))
    subscribed = lambda: node("PUBSUB", "SHARDNUMSUB", f"{key}:wake")[1] == 1  # noqa: E731
    ms = hand_over_ms(holder, waiter, lambda: int(subscribed()))
    assert ms < WOKEN_WITHIN_MS, f"the waiter got the lock {ms:.1f} ms after the release"
    after = pubsub_counts(cluster_raw)
    assert after["publish"] == before["publish"], "a plain PUBLISH floods every node"
    assert after["spublish"] >= before["spublish"] + 2  # both releases announced on the shard
    # The last waiter gone, the shard channel is given up.
    wait_for(lambda: not subscribed(), 5, "the unsubscription")


def test_a_readers_release_and_a_permits_give_back_on_a_cluster(cclient, cluster_raw, prefix):
    """A reader leaves by a transaction (MULTI / EXEC in its name's slot),
    and the script that wakes a waiting writer runs after it; a permit is
    given back by its own step. Both wake their waiter on the shard."""
    rw = cclient.rwmutex("doc-r")
    reader = rw.read()
    assert reader.acquire(blocking=False)
    writer = rw.write(retry=ferrolock.Retry.fixed(10.0))
    wkey = f"{prefix}{{doc-r}}:rw:w"

    def marked() -> int:
        return int(hold_field(cluster_raw.node(wkey)("GET", wkey), "w") == b"1")

    ms = hand_over_ms(reader, writer, marked)
    assert ms < WOKEN_WITHIN_MS, f"the writer got in {ms:.1f} ms after the last reader left"
    holder = cclient.semaphore("pool", 1)
    assert holder.acquire()
    waiter = cclient.semaphore("pool", 1, retry=ferrolock.Retry.fixed(10.0))
    data = f"{prefix}{{pool}}:sem:d"
    ms = hand_over_ms(holder, waiter, lambda: int(cluster_raw.node(data)("HGET", data, "w") == b"1"))
    assert ms < WOKEN_WITHIN_MS, f"the waiter got a permit {ms:.1f} ms after the release"
    assert cluster_raw.keys(prefix + "*") == []


def test_fair_lock_and_fair_rwmutex(cclient, cluster_raw, prefix):
    holder = cclient.lock("f", fair=True)
    assert holder.acquire()
    order = []
    waiters = [cclient.lock("f", fair=True, retry=ferrolock.Retry.fixed(10.0)) for _ in range(3)]

    def take(i):
        assert waiters[i].acquire(timeout=10)
        order.append(i)
        waiters[i].release()

    threads = []
    for i in range(3):
        threads.append(threading.Thread(target=take, args=(i,)))
        threads[-1].start()
        wait_for(lambda: cluster_raw.node(f"{prefix}{{f}}")("ZCARD", f"{prefix}{{f}}:q") == i + 1, 5, "queued")
    holder.release()
    for t in threads:
        t.join(10)
    assert order == [0, 1, 2]

    rw = cclient.rwmutex("doc", fair=True)
    writer = rw.write()
    assert writer.acquire()
    readers = [rw.read(retry=ferrolock.Retry.fixed(10.0)) for _ in range(2)]
    got = []
    threads = [threading.Thread(target=lambda r=r: got.append(r.acquire(timeout=5))) for r in readers]
    for t in threads:
        t.start()
    node = cluster_raw.node(f"{prefix}{{doc}}")
    wait_for(lambda: node("ZCARD", f"{prefix}{{doc}}:rw:qr") == 2, 5, "two queued readers")
    released = time.monotonic()
    writer.release()
    for t in threads:
        t.join(5)
    assert got == [True, True] and time.monotonic() - released < 1.0
    assert rw.readers() == 2
    for r in readers:
        r.release()
    assert cluster_raw.keys(prefix + "*") in ([], [f"{prefix}{{doc}}:rw:w"])


async def test_asyncio_tasks_share_a_counter(cclient, cluster_raw, prefix):
    counter = {"n": 0, "inside": 0, "most": 0}

    async def work():
        for _ in range(5):
            async with cclient.lock("acount", ttl=5):
                counter["inside"] += 1
                counter["most"] = max(counter["most"], counter["inside"])
                n = counter["n"]
                await asyncio.sleep(0)  # let another task run while "inside"
                counter["n"] = n + 1
                counter["inside"] -= 1

    await asyncio.wait_for(asyncio.gather(*(work() for _ in range(10))), 60)
    assert (counter["n"], counter["most"]) == (50, 1)


def same_slot_names(prefix: str) -> tuple:
    """Two lock names whose keys share one hash slot."""
    seen = {}
    i = 0
    while True:
        name = f"m{i}"
        slot = key_slot(f"{prefix}{{{name}}}")
        if slot in seen:
            return seen[slot], name
        seen[slot] = name
        i += 1


def test_multi_lock_needs_one_slot(cclient, prefix):
    with pytest.raises(ValueError, match="hash slot"):
        cclient.multi_lock(["a", "b"])
    a, b = same_slot_names(prefix)
    both = cclient.multi_lock([a, b])
    assert both.acquire(blocking=False)
    assert not cclient.lock(b).acquire(blocking=False)
    both.release()


def held_and_awaited(cclient, name: str):
    """A holder of `name`, and a waiter (polling only every 10 s: it relies
    on its wake-up) acquiring in a thread: (holder, waiter, thread, result)."""
    holder = cclient.lock(name, ttl=30.0)
    assert holder.acquire()
    waiter = cclient.lock(name, retry=ferrolock.Retry.fixed(10.0))
    result: dict = {}
    t = threading.Thread(target=lambda: result.setdefault("ok", waiter.acquire(timeout=15)), daemon=True)
    t.start()
    return holder, waiter, t, result


def released_wakes_at_once(holder, waiter, t, result, what: str) -> None:
    """Releases `holder`; the waiter must have the lock within a second (a
    poll would take 10 s)."""
    released = time.monotonic()
    holder.release()
    t.join(10)
    assert result == {"ok": True}
    assert time.monotonic() - released < 1.0, what
    waiter.release()


def test_waiters_recover_after_the_subscription_is_killed(cclient, cluster_raw, prefix):
    key = f"{prefix}{{k}}"
    node = cluster_raw.node(key)
    holder, waiter, t, result = held_and_awaited(cclient, "k")
    wait_for(lambda: node("PUBSUB", "SHARDNUMSUB", f"{key}:wake")[1] == 1, 5, "the subscription")
    for raw in cluster_raw.nodes.values():
        raw("CLIENT", "KILL", "TYPE", "pubsub")
    wait_for(lambda: node("PUBSUB", "SHARDNUMSUB", f"{key}:wake")[1] == 1, 5, "the subscription again")
    released_wakes_at_once(holder, waiter, t, result, "the wake-up after the reconnect was missed")


def test_cluster_urls(cluster):
    c = ferrolock.Client(cluster.url)
    assert repr(c).startswith('Client("redis+cluster://127.0.0.1:')
    with pytest.raises(ValueError, match="database 0"):
        ferrolock.Client(cluster.url + "/2")
    with pytest.raises(ValueError, match="rediss\\+cluster"):
        ferrolock.Client(cluster.url, ca_file=__file__)
    with pytest.raises(ferrolock.LockConnectionError) as dead:
        ferrolock.Client("redis+cluster://:hunter2@127.0.0.1:1,127.0.0.1:2").connect()
    assert "hunter2" not in str(dead.value) and "127.0.0.1:1" in str(dead.value)


def _move_slot(cluster_raw, slot: int, src: int, dst: int) -> None:
    """Moves `slot` (and its keys) from the node on port `src` to `dst`."""
    node = cluster_raw.nodes
    ids = {p: node[p]("CLUSTER", "MYID").decode() for p in node}
    node[dst]("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src])
    node[src]("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst])
    keys = node[src]("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    if keys:
        node[src]("MIGRATE", "127.0.0.1", dst, "", 0, 5000, "KEYS", *keys)
    for p in (dst, src, *[p for p in node if p not in (src, dst)]):
        node[p]("CLUSTER", "SETSLOT", slot, "NODE", ids[dst])


def test_waiters_follow_a_slot_migration(cclient, cluster, cluster_raw, prefix):
    """The slot of a lock moves to another node while a waiter is
    subscribed there: the server drops the waiter's sharded subscription,
    ferrolock subscribes again on the new owner, and the release still
    wakes the waiter at once."""
    key = f"{prefix}{{m}}"
    slot = key_slot(key)
    src = cluster.node_port_for(key)
    dst = next(p for p in cluster.ports if p != src)
    other = next(n for n in (f"m{i}" for i in range(1_000_000)) if key_slot(f"{prefix}{{{n}}}") == slot)
    holder, waiter, t, result = held_and_awaited(cclient, "m")
    on = lambda port: cluster_raw.nodes[port]("PUBSUB", "SHARDNUMSUB", f"{key}:wake")[1]  # noqa: E731
    wait_for(lambda: on(src) == 1, 5, "the subscription on the first owner")
    moved = time.monotonic()
    _move_slot(cluster_raw, slot, src, dst)
    try:
        # A new handle on another name of the moved slot: redirected, then served by the new owner.
        probe = cclient.lock(other)
        assert probe.acquire(timeout=5)
        first_acquire_ms = 1000 * (time.monotonic() - moved)
        assert hold_field(cluster_raw.nodes[dst]("GET", f"{prefix}{{{other}}}"), "token").decode() == probe.token
        probe.release()
        wait_for(lambda: on(dst) == 1, 5, "the subscription on the new owner")
        resubscribed_ms = 1000 * (time.monotonic() - moved)
        assert on(src) == 0
        released_wakes_at_once(holder, waiter, t, result, "the waiter missed the release after the migration")
    finally:
        _move_slot(cluster_raw, slot, dst, src)
    wait_for(lambda: cluster_raw.nodes[src]("EXISTS", key) == 0, 5, "no key left")
    record(
        "cluster-failover",
        variant="slot-migration",
        faults_injected=1,
        first_acquire_ms=round(first_acquire_ms, 1),
        resubscribed_ms=round(resubscribed_ms, 1),
    )
    print(
        f"slot moved: first acquire {first_acquire_ms:.0f} ms after the move; the waiter subscribed on the "
        f"new owner {resubscribed_ms:.0f} ms after it"
    )


def test_ls_finds_names_on_every_master(cclient, cluster, prefix):
    """`ferrolock ls` (SCAN on each master) lists names whatever node owns them."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    names = [f"job:{i}" for i in range(12)]
    assert {cluster.node_port_for(f"{prefix}{{{n}}}") for n in names} == set(cluster.ports)
    held = [cclient.lock(n) for n in names]
    for lock in held:
        assert lock.acquire(blocking=False)
    reader = cclient.rwmutex("doc").read()
    assert reader.acquire(blocking=False)
    assert [s.name for s in cclient.scan("job:*")] == sorted(names)
    ferrolock_cli = str(Path(sys.executable).parent / "ferrolock")
    out = subprocess.run(
        [ferrolock_cli, "--url", cluster.url, "--prefix", prefix, "ls", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    listed = {s["name"]: s for s in json.loads(out.stdout)}
    assert set(listed) == set(names) | {"doc"}
    assert all(listed[n]["holder"]["token"] == lock.token for n, lock in zip(names, held))
    assert [r["token"] for r in listed["doc"]["readers"]] == [reader.token]


def test_a_node_without_the_scripts_runs_them_while_another_node_is_stopped(cluster, cluster_raw, prefix):
    """A node that has not loaded the scripts (a restart, SCRIPT FLUSH, a
    replica just promoted: scripts are not replicated) answers NOSCRIPT; the
    script is then loaded on that node alone, not on every node, which waits
    for every node (here one is stopped) and would fail the step."""
    c = ferrolock.Client(cluster.url, prefix=prefix, command_timeout=2.0)
    names = {cluster.node_port_for(f"{prefix}{{n{i}}}"): f"n{i}" for i in range(30)}
    assert len(names) == len(cluster.ports)
    for name in names.values():  # every node has run the scripts, and the client knows them all
        lock = c.lock(name)
        assert lock.acquire(blocking=False)
        lock.release()
    flushed, stopped = cluster.ports[0], cluster.ports[1]
    assert cluster_raw.nodes[flushed]("SCRIPT", "FLUSH") in (b"OK", "OK")
    node = next(n for n in cluster.nodes if n.port == stopped)
    node.pause()
    try:
        lock = c.lock(names[flushed])
        assert lock.acquire(blocking=False), "the step failed on the node that lost its scripts"
        lock.release()
    finally:
        node.resume()
    c.close()


def test_every_prefix_is_listed_on_every_master(cluster, prefix):
    """scan(all_prefixes=True) on a Cluster: every master is scanned, each
    name read back with its own prefix; a waiter of a non-fair Lock counts
    by its sharded subscription."""
    import threading

    one = ferrolock.Client(cluster.url, prefix=f"{prefix}one:")
    two = ferrolock.Client(cluster.url, prefix=f"{prefix}two:")
    names = [f"job:{i}" for i in range(9)]
    assert {cluster.node_port_for(f"{prefix}one:{{{n}}}") for n in names} == set(cluster.ports)
    held = [one.lock(n) for n in names] + [two.lock(n) for n in names]
    for h in held:
        assert h.acquire(blocking=False)
    waiter = two.lock("job:0", retry=ferrolock.Retry.fixed(10.0))
    got: list = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=60)))
    t.start()
    try:
        wait_for(lambda: two.describe("job:0")[0].waiters == 1, 10, "the waiter's subscription")
        listed = [
            (s.prefix, s.name, s.waiters) for s in one.scan("job:*", all_prefixes=True) if s.prefix.startswith(prefix)
        ]
        assert listed == (
            [(f"{prefix}one:", n, 0) for n in names] + [(f"{prefix}two:", n, int(n == "job:0")) for n in names]
        )
        assert [s.prefix for s in one.scan("job:*")] == [f"{prefix}one:"] * len(names)
    finally:
        for h in held:
            h.release()
        t.join(60)
    assert got == [True]
    waiter.release()


def test_semaphores_and_elections_are_listed_and_force_released_on_every_master(cclient, cluster, prefix):
    """Every key of a name shares its hash tag, so one script reads (or
    clears) a semaphore's or an election's keys wherever the slot lives."""
    names = [f"pool:{i}" for i in range(9)]
    assert {cluster.node_port_for(f"{prefix}{{{n}}}") for n in names} == set(cluster.ports)
    permits = [cclient.semaphore(n, 2, metadata=n) for n in names]
    for p in permits:
        assert p.acquire(blocking=False)
    term = cclient.election("leader-x", ttl=30).campaign("host-a")
    listed = {s.name: s for s in cclient.scan("*")}
    assert set(listed) == set(names) | {"leader-x"}
    assert all([h.token for h in listed[n].holders] == [p.token] for n, p in zip(names, permits))
    assert listed["leader-x"].kind == "election" and listed["leader-x"].holder.token == term.token
    for n, p in zip(names, permits):
        assert cclient.force_release(n, token=p.token) is True
    assert cclient.force_release("leader-x") is True
    assert cclient.scan("*") == []
    assert cclient.election("leader-x").leader() is None


def crossslot_errors(cluster_raw) -> int:
    """CROSSSLOT refusals the cluster's nodes have answered so far."""
    total = 0
    for raw in cluster_raw.nodes.values():
        for line in raw("INFO", "errorstats").decode().splitlines():
            if line.startswith("errorstat_CROSSSLOT:"):
                total += int(line.split("count=", 1)[1].split(",", 1)[0])
    return total


def test_holds_in_different_slots_are_each_renewed(cclient, cluster, cluster_raw, prefix, events):
    """Renewals go together only within a slot (a script's keys must share
    one): Locks on names of every master's slots are each renewed, and so
    are the readers of one RWMutex, whose renewals share their slot."""
    names = [f"slot{i}" for i in range(12)]
    assert {cluster.node_port_for(f"{prefix}{{{n}}}") for n in names} == set(cluster.ports)
    locks = [cclient.lock(n, ttl=1.2) for n in names]
    for lock in locks:
        assert lock.acquire(blocking=False)
    rw = cclient.rwmutex("shared", ttl=1.2)
    readers = [rw.read() for _ in range(5)]
    for reader in readers:
        assert reader.acquire(blocking=False)
    holds = len(locks) + len(readers)
    crossslot0 = crossslot_errors(cluster_raw)
    start = time.monotonic()
    while time.monotonic() - start < 3.6:  # 3 ttls: each hold renewed about 9 times
        for n in names:
            k = f"{prefix}{{{n}}}"
            assert 0 < cluster_raw.node(k)("PTTL", k) <= 1200
        time.sleep(0.1)  # sampling over three ttls
    told = [names for _at, kind, _d, names in list(events.seen) if kind == "renewed"]
    for n in names:
        assert told.count((n,)) >= 4, f"{n} renewed {told.count((n,))} times"
    assert told.count(("shared",)) >= 4 * len(readers)
    readers_key = f"{prefix}{{shared}}:rw:r"
    assert cluster_raw.node(readers_key)("ZCARD", readers_key) == len(readers)
    assert not any(h.lost for h in locks + readers), f"of {holds} holds"
    # No call mixed slots (the server refuses one with CROSSSLOT; each of its
    # renewals would then go again alone).
    assert crossslot_errors(cluster_raw) == crossslot0
    for h in locks + readers:
        h.release()
    assert cluster_raw.keys(prefix + "*") == []
