"""What an operator sees and does, for every kind of primitive: a
semaphore's permit holders and an election's leader are listed by
`Client.scan`, described by `Client.describe`, shown by `Client.inspect`,
and ended by `Client.force_release` (by token or all), which wakes the
waiters and campaigners and tells an election's watchers; a term's number
stays readable once the term ends."""

from __future__ import annotations

import threading

import pytest

import ferrolock
from support.helpers import script_calls, wait_for


def permits(client, name="partner-api", n=3, count=2, **kw):
    held = []
    for i in range(count):
        p = client.semaphore(name, n, metadata=f"worker-{i}", ttl=30, **kw)
        assert p.acquire(blocking=False)
        held.append(p)
    return held


def kinds(states):
    return [(s.name, s.kind) for s in states]


def test_scan_and_describe_show_a_semaphores_holders_and_limit(client):
    held = permits(client)
    [sem] = client.describe("partner-api")
    assert sem.kind == "semaphore" and sem.name == "partner-api"
    assert sem.holder is None and sem.readers == []
    assert {h.token for h in sem.holders} == {p.token for p in held}
    by_token = {h.token: h for h in sem.holders}
    for i, p in enumerate(held):
        assert by_token[p.token].metadata == f"worker-{i}"
        assert by_token[p.token].fence == p.fence
        assert 0 < by_token[p.token].ttl <= 30
    assert sem.limit == 3 and sem.waiters == 0
    assert kinds(client.scan("partner-*")) == [("partner-api", "semaphore")]
    assert client.scan("other-*") == []


def test_a_fair_semaphores_queue_is_counted(client):
    held = permits(client, "pool", n=1, count=1, fair=True)
    waiter = client.semaphore("pool", 1, fair=True)
    t = threading.Thread(target=waiter.acquire, kwargs={"timeout": 30})
    t.start()
    try:
        wait_for(lambda: client.describe("pool")[0].queued_writers == 1, 10, "the waiter queued")
        assert client.describe("pool")[0].waiters == 1
    finally:
        held[0].release()
        t.join(30)
    assert waiter.owned()
    waiter.release()


def test_an_elections_leader_and_campaigners_are_shown(client):
    e = client.election("leader-x", ttl=30)
    term = e.campaign("host-a")
    campaigner = threading.Thread(target=lambda: e.campaign("host-b", timeout=30).resign())
    campaigner.start()
    try:
        wait_for(lambda: client.describe("leader-x")[0].waiters == 1, 10, "host-b campaigning")
        [el] = client.describe("leader-x")
        assert el.kind == "election"
        assert (el.holder.token, el.holder.metadata, el.holder.fence) == (term.token, "host-a", term.number)
        assert 0 < el.holder.ttl <= 30
        assert el.holders == [el.holder] and el.queued_writers == 1
        info = client.inspect("leader-x")
        assert (info.token, info.metadata, info.fence) == (term.token, "host-a", term.number)
        assert kinds(client.scan("*")) == [("leader-x", "election")]
    finally:
        term.resign()
        campaigner.join(30)


def test_inspect_shows_a_semaphore_holder_and_a_lock_first(client):
    held = permits(client, "shared")
    assert client.inspect("shared").token in {p.token for p in held}
    lock = client.lock("shared")
    assert lock.acquire(blocking=False)
    assert client.inspect("shared").token == lock.token
    assert kinds(client.describe("shared")) == [("shared", "lock"), ("shared", "semaphore")]
    lock.release()


def test_force_release_by_token_removes_one_permit_and_lets_a_waiter_in(client):
    a, b = permits(client, n=2)
    waiter = client.semaphore("partner-api", 2)
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=30)))
    t.start()
    assert client.force_release("partner-api", token="someone-else") is False
    assert client.force_release("partner-api", token=a.token) is True
    t.join(30)
    assert got == [True], "the waiter took the permit freed"
    tokens = {h.token for h in client.describe("partner-api")[0].holders}
    assert tokens == {b.token, waiter.token}
    with pytest.raises(ferrolock.LockNotOwned):
        a.extend()
    assert a.lost and not b.lost
    assert client.force_release("partner-api", token=a.token) is False  # gone already


def test_force_release_lets_a_fair_semaphores_next_in_line_in(client):
    [stuck] = permits(client, "pool", n=1, count=1, fair=True)
    waiter = client.semaphore("pool", 1, fair=True)
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=30)))
    t.start()
    wait_for(lambda: client.describe("pool")[0].queued_writers == 1, 10, "the waiter queued")
    assert client.force_release("pool", token=stuck.token) is True
    t.join(30)
    assert got == [True] and waiter.owned()
    assert [h.token for h in client.describe("pool")[0].holders] == [waiter.token]
    waiter.release()


def test_force_release_without_a_token_clears_every_permit(client, raw, prefix):
    held = permits(client)
    assert client.force_release("partner-api") is True
    assert client.describe("partner-api") == []
    assert client.force_release("partner-api") is False
    for p in held:
        with pytest.raises(ferrolock.LockNotOwned):
            p.extend()
    assert raw.keys(prefix + "*") == [], "nothing left behind"


@pytest.mark.parametrize("by_token", [True, False], ids=["token", "all"])
def test_force_release_deposes_a_leader_the_next_leads_and_watchers_learn(client, by_token):
    e = client.election("leader-x", ttl=30)
    stuck = e.campaign("stuck-host")
    watcher = e.observe()
    assert next(watcher).value == "stuck-host"
    terms = []
    campaigner = threading.Thread(target=lambda: terms.append(e.campaign("host-b", timeout=30)))
    campaigner.start()
    wait_for(lambda: client.describe("leader-x")[0].waiters == 1, 10, "host-b campaigning")
    assert client.force_release("leader-x", token="not-the-leader") is False
    assert client.force_release("leader-x", token=stuck.token if by_token else None) is True
    campaigner.join(30)
    assert terms and terms[0].number > stuck.number
    seen = next(watcher)
    while seen is not None and seen.value != "host-b":  # may see nobody lead first
        seen = next(watcher)
    assert seen.value == "host-b" and seen.term == terms[0].number
    with pytest.raises(ferrolock.LockNotOwned):
        stuck.proclaim("still here?")
    terms[0].resign()


async def test_aforce_release_deposes_and_adescribe_shows_an_election(client):
    e = client.election("leader-x", ttl=30)
    term = await e.acampaign("host-a")
    [el] = await client.adescribe("leader-x")
    assert el.kind == "election" and el.holder.token == term.token
    assert [s.kind for s in await client.ascan("leader-*")] == ["election"]
    assert await client.aforce_release("leader-x", term.token) is True
    assert await e.aleader() is None
    assert await client.ainspect("leader-x") is None


def test_a_terms_number_stays_readable_after_it_ends(client, ferrolock_helpers):
    e = client.election("cron", ttl=30)
    term = e.campaign("a")
    number = term.number
    term.resign()
    assert term.number == number
    lost = e.campaign("b")
    ferrolock_helpers.expire_now(lost)
    assert lost.lost and lost.number > number
    assert str(lost.number) in repr(lost)


async def test_a_terms_number_stays_readable_after_aresign(client):
    e = client.election("cron", ttl=30)
    term = await e.acampaign("a")
    number = term.number
    await term.aresign()
    assert term.number == number > 0


def test_inspect_reads_a_name_in_one_script(server, prefix):
    """On one server `Client.inspect` reads every kind at once: one script
    whether the name is free, held as a Lock or held as another kind."""
    client = ferrolock.Client(f"redis://127.0.0.1:{server.port}/0", prefix=prefix)
    lock = client.lock("job", ttl=30)
    assert lock.acquire(blocking=False)
    [permit] = permits(client, count=1)
    client.inspect("warm-up")  # the server loads the script (EVALSHA, NOSCRIPT, EVALSHA) once
    for name, token in (("free", None), ("job", lock.token), ("partner-api", permit.token)):
        before = script_calls(server)
        found = client.inspect(name)
        assert (found and found.token) == token
        assert script_calls(server) - before == 1, name
