"""The watchdog: renewal every ttl/3 keeps a hold alive for as long as it is held
and stops with the release; a hold that ends behind the holder's back (expiry
without renewal, takeover) is reported lost exactly once: `lock.lost`,
`on_lost()`, `LockLost` at the end of a `with` / `async with` block."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

import ferrolock
from ferrolock._ferrolock import _debug_stats
from ferrolock import LockLost, LockNotOwned
from support.helpers import Events, LostProbe, command_calls, hold_of, hold_value, key, script_calls, wait_for

# The ttls here are long enough that a process not scheduled for a few
# hundred milliseconds (a busy machine) still renews in time: a hold is
# renewed every ttl/3, so a 1 s ttl leaves ~0.6 s of slack.


def fields(raw, k: str) -> dict:
    return {f: v.decode() for f, v in hold_of(raw("GET", k)).items()}


def test_renewal_keeps_the_hold_for_many_ttls(client, raw, prefix):
    probe = LostProbe()
    lock = client.lock("renewed", ttl=1.2, on_lost=probe)
    k = key(prefix, "renewed")
    assert lock.acquire()
    token = lock.token
    start = time.monotonic()
    pttls = []
    checks = 0
    while time.monotonic() - start < 3.6 or checks < 3:  # 3 ttls
        pttl = raw("PTTL", k)
        pttls.append(pttl)
        assert 0 < pttl <= 1200, pttls
        assert fields(raw, k)["token"] == token
        if len(pttls) % 5 == 0:
            assert lock.owned()
            remaining = lock.ttl()
            assert remaining is not None and 0 < remaining <= 1.2
            checks += 1
        assert not lock.lost
        time.sleep(0.05)  # sampling over three ttls
    # Renewed every ttl/3: the expiry never came close to running out.
    assert min(pttls) > 360, pttls
    assert not probe.event.is_set()
    assert not lock.lost
    lock.release()
    assert raw("EXISTS", k) == 0
    time.sleep(1.0)  # over two renewal periods: a renewal still running would have shown up by now
    assert raw("EXISTS", k) == 0
    assert raw.keys(prefix + "*") == []
    assert not probe.event.is_set()


def test_renewal_stops_with_release(server, prefix):
    """After release, the client sends Redis nothing more for that hold."""
    client = ferrolock.Client(server.url, prefix=prefix)
    lock = client.lock("quiet", ttl=0.9)
    renewed = _debug_stats()["renewals"]
    assert lock.acquire()
    wait_for(lambda: _debug_stats()["renewals"] >= renewed + 2, 5, "two renewals")
    lock.release()
    after_release = steps_run(server)
    time.sleep(1.0)  # > 3 renewal periods
    assert steps_run(server) == after_release


def test_renewals_hand_python_no_record_while_its_logger_is_above_debug(server, prefix):
    """Each renewal logs at DEBUG (`ferrolock.watchdog`). With the logger
    above DEBUG the core drops those records itself, by the level it
    caches for that logger (asked again each second): a hundred renewals
    hand Python's `logging` a few records at most, not one each, which
    cost the holding process more CPU than the renewals themselves.
    tests/faults/test_faults.py::test_a_level_set_after_the_first_records_is_obeyed
    has them arrive once the level is DEBUG."""
    import logging

    logger = logging.getLogger("ferrolock")
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        client = ferrolock.Client(server.url, prefix=prefix)
        locks = [client.lock(f"quiet-log{i}", ttl=0.3) for i in range(10)]
        for lock in locks:
            assert lock.acquire()
        renewed, logged = _debug_stats()["renewals"], _debug_stats()["log_records"]
        wait_for(lambda: _debug_stats()["renewals"] >= renewed + 100, 15, "a hundred renewals")
        handed = _debug_stats()["log_records"] - logged
        for lock in locks:
            lock.release()
    finally:
        logger.setLevel(before)
    assert handed < 20, f"{handed} log records handed to Python over a hundred renewals"


def steps_run(server) -> int:
    """What a hold's steps have run so far: scripts, and the plain commands
    a Lock's renewal may be on a server that compares (SET … IFEQ)."""
    return script_calls(server) + command_calls(server, "set", "exec", "delifeq")


def test_multi_lock_renews_every_key(client, raw, prefix):
    lock = client.lock(["m1", "m2", "m3"], ttl=1.2)
    assert lock.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 3.0:  # 2.5 ttls
        for name in ("m1", "m2", "m3"):
            assert 300 < raw("PTTL", key(prefix, name)) <= 1200
        time.sleep(0.05)  # sampling over 2.5 ttls
    assert lock.owned() and not lock.lost
    lock.release()
    assert raw.keys(prefix + "*") == []


def test_no_auto_renew_expires_and_reports_lost(client, raw, prefix):
    probe = LostProbe()
    lock = client.lock("plain", ttl=1.0, auto_renew=False, on_lost=probe)
    k = key(prefix, "plain")
    with pytest.raises(LockLost) as info:
        asked = time.monotonic()  # the hold's ttl runs from its request, before the block starts
        with lock:
            start = time.monotonic()
            assert 0 < raw("PTTL", k) <= 1000
            assert not lock.lost
            assert probe.wait(5.0), "on_lost never fired"
            lost_since_asked, lost_after = probe.at - asked, probe.at - start
            # Reported at the local deadline, a safety margin before Redis expires it.
            wait_for(lambda: raw("EXISTS", k) == 0, 5, "Redis to expire the key")
            assert lock.lost
            assert not lock.owned()
    assert info.value.__context__ is None, "the block itself failed"
    # Not before the ttl (the hold was still good), and not long after it:
    # each bound from the moment that makes it hold however slow the machine
    # is between the request and the block.
    assert 0.95 <= lost_since_asked, lost_since_asked
    assert lost_after <= 1.0 + 1.5, lost_after
    assert "plain" in str(info.value)
    time.sleep(0.3)  # the time a second, wrong report would take to show
    assert probe.calls == 1
    assert probe.threads[0] is not threading.main_thread()
    assert raw.keys(prefix + "*") == []
    assert lock.token is None


def test_no_auto_renew_not_lost_while_within_ttl(client, raw, prefix):
    probe = LostProbe()
    lock = client.lock("short", ttl=1.0, auto_renew=False, on_lost=probe)
    with lock:
        time.sleep(0.3)  # held for a while, short of a renewal's ttl/3: PTTL shows the time gone
        assert not lock.lost
        assert 0 < raw("PTTL", key(prefix, "short")) <= 700  # not renewed
    assert not probe.event.is_set()
    time.sleep(1.0)  # past the old ttl: a released hold is never reported lost
    assert not probe.event.is_set()
    assert probe.calls == 0


@pytest.mark.parametrize("auto_renew", [True, False])
def test_clean_release_is_never_reported_lost(client, raw, prefix, auto_renew):
    lock = client.lock("clean", ttl=1.0, auto_renew=auto_renew)
    assert lock.acquire()
    lock.release()
    assert not lock.lost
    time.sleep(1.2)  # past the ttl
    assert raw.keys(prefix + "*") == []
    assert not lock.lost


def test_extend_changes_subsequent_renewals(client, raw, prefix):
    lock = client.lock("ext", ttl=0.5)
    k = key(prefix, "ext")
    assert lock.acquire()
    lock.extend(ttl=2)
    # Set to 2 s, not the 0.5 s of before (a loaded machine may read it a few
    # hundred ms later).
    assert 1000 < raw("PTTL", k) <= 2000
    start = time.monotonic()
    pttls = []
    while time.monotonic() - start < 1.5:  # renewals at ~0.17 s, then every ~0.67 s
        pttls.append(raw("PTTL", k))
        time.sleep(0.05)  # sampling across the renewals
    # Renewals kept the 2 s ttl: with the old 0.5 s the expiry would sit below 500 ms.
    assert min(pttls) > 1000, pttls
    assert any(b > a for a, b in zip(pttls, pttls[1:])), "no renewal seen"
    assert lock.ttl() > 1.0
    assert not lock.lost
    lock.release()
    assert raw("EXISTS", k) == 0


@pytest.mark.parametrize("how", ["shorter-than-own-ttl", "back-to-own-ttl"])
def test_extend_to_a_shorter_ttl_keeps_the_hold(client, raw, prefix, how):
    probe = LostProbe()
    k = key(prefix, "shrink")
    if how == "shorter-than-own-ttl":
        lock = client.lock("shrink", ttl=6, on_lost=probe)
        assert lock.acquire()
        lock.extend(ttl=0.9)
    else:
        lock = client.lock("shrink", ttl=0.9, on_lost=probe)
        assert lock.acquire()
        lock.extend(ttl=4)
        time.sleep(0.3)  # the next renewal, at the 4 s ttl, is ~1.3 s away
        lock.extend()  # back to the handle's 0.9 s
    assert 0 < raw("PTTL", k) <= 900
    time.sleep(2.5)  # several of the new, shorter ttls
    assert not probe.event.is_set()
    assert not lock.lost
    assert 0 < raw("PTTL", k) <= 900
    lock.release()


def test_loss_by_takeover(client, raw, prefix, redis_url):
    probe = LostProbe()
    first = client.lock("taken", ttl=0.6, on_lost=probe)
    other = ferrolock.Client(redis_url, prefix=prefix).lock("taken", ttl=10, auto_renew=False)
    k = key(prefix, "taken")
    body_ran = False
    with pytest.raises(LockLost):
        with first:
            old_fence = first.fence
            assert raw("DEL", k) == 1
            deleted = time.monotonic()
            assert other.acquire(blocking=False)
            assert other.fence > old_fence
            taken = raw("GET", k)
            assert probe.wait(5.0), "takeover never reported"
            # The next renewal (within ttl/3, plus a round trip) notices.
            assert probe.at - deleted < 0.2 + 1.5, probe.at - deleted
            assert first.lost
            assert not first.owned()
            body_ran = True
    assert body_ran
    # The new holder's key was left alone by the loser's exit.
    rec = fields(raw, k)
    assert rec["token"] == other.token
    assert raw("GET", k) == taken
    before = raw("PTTL", k)
    assert 5000 < before <= 10_000
    assert other.owned()
    time.sleep(0.3)  # the loser's watchdog has a renewal due in this (ttl/3): it must not touch the key
    assert probe.calls == 1  # once, although the release also found the hold gone
    # Nor does the loser's watchdog touch it later.
    assert 5000 < raw("PTTL", k) <= before - 250
    other.release()
    assert raw.keys(prefix + "*") == []


def test_body_exception_wins_over_loss_with_a_note(client, raw, prefix):
    """A lost hold must not mask what the body raised (Ctrl-C stays Ctrl-C);
    the loss is noted on that exception instead."""
    probe = LostProbe()
    lock = client.lock("ctx", ttl=0.3, on_lost=probe)
    with pytest.raises(KeyError) as info:
        with lock:
            raw("DEL", key(prefix, "ctx"))
            assert probe.wait(2.0)
            raise KeyError("from the body")
    assert lock.lost
    notes = getattr(info.value, "__notes__", [])
    if sys.version_info >= (3, 11):
        assert any("ctx" in n and "lost" in n for n in notes), notes
    assert raw.keys(prefix + "*") == []


def test_release_after_loss_raises_not_owned(client, raw, prefix):
    probe = LostProbe()
    lock = client.lock("gone", ttl=0.3, on_lost=probe)
    assert lock.acquire()
    raw("DEL", key(prefix, "gone"))
    assert probe.wait(2.0)
    with pytest.raises(LockNotOwned):
        lock.extend()
    with pytest.raises(LockNotOwned):
        lock.release()
    assert lock.lost
    assert probe.calls == 1
    # The handle can take the lock again, and the new hold is not lost.
    probe2 = LostProbe()
    again = client.lock("gone", ttl=0.9, on_lost=probe2)
    with again:
        time.sleep(1.0)  # past a ttl
        assert not again.lost
    assert not probe2.event.is_set()


async def test_async_with_cancels_the_body_on_loss(client, raw, prefix):
    probe = LostProbe()
    lock = client.lock("async", ttl=0.6, on_lost=probe)
    k = key(prefix, "async")
    body = {"cancelled": False, "finished": False}
    start = None
    with pytest.raises(LockLost):
        async with lock:
            assert await lock.aowned()
            assert raw("DEL", k) == 1
            start = time.monotonic()
            try:
                await asyncio.sleep(30)
                body["finished"] = True
            except asyncio.CancelledError:
                body["cancelled"] = True
                raise
    elapsed = time.monotonic() - start
    assert body == {"cancelled": True, "finished": False}
    assert elapsed < 0.6 + 1.5, elapsed
    assert probe.wait(5) and probe.calls == 1  # on_lost runs on a thread of its own
    assert lock.lost
    # The task is not left half-cancelled: it goes on awaiting normally.
    if sys.version_info >= (3, 11):
        assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0.01)
    assert raw.keys(prefix + "*") == []


async def test_async_with_expiry_without_renewal_cancels_the_body(client, raw, prefix):
    lock = client.lock("async-plain", ttl=0.3, auto_renew=False)
    start = time.monotonic()
    cancelled = False
    with pytest.raises(LockLost):
        async with lock:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled = True
                raise
    assert cancelled
    assert time.monotonic() - start < 0.3 + 1.5
    await asyncio.sleep(0)


async def test_async_with_not_lost_is_left_alone(client, raw, prefix):
    probe = LostProbe()
    lock = client.lock("async-ok", ttl=0.9, on_lost=probe)
    async with lock:
        await asyncio.sleep(3.0)  # > 3 ttls, renewed throughout
        assert await lock.aowned()
        assert not lock.lost
    assert not probe.event.is_set()
    assert raw.keys(prefix + "*") == []


async def test_outside_cancellation_is_not_turned_into_lock_lost(client, raw, prefix):
    """Cancelling the task from outside is a plain cancellation, and releases."""
    lock = client.lock("async-cancel", ttl=0.5)
    entered = asyncio.Event()

    async def body():
        async with lock:
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(body())
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not lock.lost
    assert raw.keys(prefix + "*") == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_on_lost_that_raises_is_reported_and_harmless(client, raw, prefix, monkeypatch):
    reported = []
    hook_called = threading.Event()

    def hook(unraisable):
        reported.append(unraisable.exc_value)
        hook_called.set()

    monkeypatch.setattr(sys, "unraisablehook", hook)
    fired = threading.Event()

    def on_lost():
        fired.set()
        raise RuntimeError("callback failed")

    lock = client.lock("raising", ttl=0.3, on_lost=on_lost)
    with pytest.raises(LockLost) as info:
        with lock:
            raw("DEL", key(prefix, "raising"))
            assert fired.wait(2.0)
            assert hook_called.wait(2.0)
    assert info.value.__context__ is None, "the block itself failed"
    assert len(reported) == 1
    assert isinstance(reported[0], RuntimeError)
    assert "callback failed" in str(reported[0])
    # Everything still works, including other on_lost callbacks.
    probe = LostProbe()
    again = client.lock("raising", ttl=0.3, on_lost=probe)
    with pytest.raises(LockLost) as info:
        with again:
            raw("DEL", key(prefix, "raising"))
            assert probe.wait(2.0)
    assert info.value.__context__ is None, "the block itself failed"
    with client.lock("raising", ttl=1.0):
        assert raw("EXISTS", key(prefix, "raising")) == 1
    assert raw.keys(prefix + "*") == []
    assert len(reported) == 1


async def test_wait_lost_resolves_when_the_hold_ends(client, raw, prefix):
    """wait_lost(): an awaitable that fires when the hold ends."""
    lock = client.lock("done", ttl=0.9)
    assert await lock.wait_lost() is False  # nothing held
    assert await lock.aacquire()
    waiter = asyncio.ensure_future(lock.wait_lost())
    await asyncio.sleep(1.0)  # past a ttl: renewals keep it, so not done yet
    assert not waiter.done()
    raw("DEL", key(prefix, "done"))
    assert await asyncio.wait_for(waiter, 2.0) is True
    with pytest.raises(LockNotOwned):
        await lock.arelease()
    assert await lock.aacquire()
    released = asyncio.ensure_future(lock.wait_lost())
    await lock.arelease()
    assert await asyncio.wait_for(released, 2.0) is False


def test_extend_without_renewal_moves_the_loss_deadline(client, raw, prefix):
    """auto_renew=False, then extend(): the hold lasts the extended ttl, is
    not reported lost at the original one, and a new acquire in this
    process does not find its own stale hold in the way."""
    probe = LostProbe()
    # A ttl a loaded machine does not spend between acquire and extend.
    lock = client.lock("ext", ttl=1.0, auto_renew=False, on_lost=probe)
    assert lock.acquire()
    lock.extend(6.0)
    assert not probe.wait(2.5), "reported lost at the original ttl"  # 2.5 x the original ttl
    assert not lock.lost
    assert lock.owned()
    assert raw("PTTL", key(prefix, "ext")) > 2000
    lock.release()
    again = client.lock("ext", ttl=1.0)
    assert again.acquire(timeout=0.5)
    again.release()
    assert raw.keys(prefix + "*") == []


async def test_a_loss_while_entering_async_with_is_lock_lost(client):
    """A hold lost before its `async with` block even starts (here: a 2 ms ttl
    without renewal, lost at once) ends the block with LockLost, never with a
    bare CancelledError out of `async with` itself."""
    for _ in range(20):
        lock = client.lock("early", ttl=0.002, auto_renew=False)
        with pytest.raises(ferrolock.LockLost):
            async with lock:
                await asyncio.sleep(0.05)


# Renewal in batches: the renewals that fall due together on one server go
# out as one script call renewing many holds (src/transport/backend/renew.rs).


def renewals(events: Events) -> int:
    """Renewals told so far (one `renewed` event each)."""
    return sum(1 for _at, kind, _detail, _names in list(events.seen) if kind == "renewed")


def test_holds_renewed_together_go_out_in_fewer_script_calls_than_holds(server, prefix, events):
    """60 holds taken together (at once, from one event loop) fall due
    together, and each round of their renewals is a few script calls
    (refresh_batch.lua), not 60."""
    client = ferrolock.Client(server.url, prefix=prefix)
    n = 60
    locks = [client.lock(f"many{i}", ttl=1.5) for i in range(n)]

    async def take_all() -> list:
        return await asyncio.gather(*(lock.aacquire(blocking=False) for lock in locks))

    assert all(asyncio.run(take_all()))
    wait_for(lambda: renewals(events) >= n, 10, "a first round of renewals")
    calls0, renewed0 = script_calls(server), renewals(events)
    wait_for(lambda: renewals(events) >= renewed0 + 3 * n, 15, "three more rounds of renewals")
    calls, renewed = script_calls(server) - calls0, renewals(events) - renewed0
    assert calls * 3 <= renewed, f"{renewed} renewals took {calls} script calls"
    # Taken by transactions, their fences were not in Redis: renewed in
    # batches, each hold now has its own owner's.
    assert [client.inspect(lock.name).fence for lock in locks] == [lock.fence for lock in locks]
    for lock in locks:
        assert not lock.lost
        lock.release()
    assert server.command("DBSIZE") == 0


def test_a_hold_lost_inside_a_batch_is_told_lost_while_the_others_in_it_stay_held(server, prefix, events):
    """One hold of a batch (seen renewed in one call with others, through
    MONITOR) taken over behind its owner's back: the call that renews the
    batch finds it lost, and it is told lost as a hold renewed alone is
    (`lost`, `on_lost` once, a `lost` event, LockLost out of its `with`
    block), while the other holds of that same call are renewed and stay
    held. Their values known to their owners, the batch compares each
    (refresh_compared.lua): the victim's compare finds another value, and
    the script it falls back to finds the hold lost."""
    import contextlib

    import redis

    client = ferrolock.Client(server.url, prefix=prefix)
    n = 20
    probes = [LostProbe() for _ in range(n)]
    locks = [client.lock(f"b{i}", ttl=3.2, on_lost=probes[i]) for i in range(n)]
    ours = {key(prefix, f"b{i}"): i for i in range(n)}
    watcher = redis.Redis.from_url(server.url, socket_timeout=15)

    def renewed_in(command: str) -> list:
        """Our holds a script call renews."""
        return [ours[k] for k in command.split() if k in ours] if command.startswith("EVALSHA") else []

    with pytest.raises(LockLost):
        with contextlib.ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            with watcher.monitor() as monitor:
                # A call renewing several of them: its first hold is the victim.
                while len(together := renewed_in(monitor.next_command()["command"])) < 2:
                    pass
                victim = together[0]
                victim_key = key(prefix, f"b{victim}")
                assert server.command("SET", victim_key, hold_value("another-owner", 1), "KEEPTTL") == "OK"
                assert probes[victim].wait(5.0), "the loss was never told"
                # The first call to renew the victim after the change: it
                # found the victim lost, and carried other holds with it.
                after = False
                while True:
                    command = monitor.next_command()["command"]
                    after = after or (command.startswith("SET") and victim_key in command)
                    if after and victim in renewed_in(command):
                        break
            assert len(renewed_in(command)) > 1, f"the victim was renewed alone: {command}"
            assert locks[victim].lost
            renewed0 = renewals(events)
            wait_for(lambda: renewals(events) >= renewed0 + n - 1, 10, "a round of the others")
    assert probes[victim].calls == 1
    lost = [names for _at, kind, _detail, names in list(events.seen) if kind == "lost" and names[0].startswith("b")]
    assert lost == [(f"b{victim}",)]
    for i, lock in enumerate(locks):
        if i != victim:
            assert not lock.lost and probes[i].calls == 0
    # The others were released by the `with` blocks, renewed until then.
    assert server.command("KEYS", prefix + "*") == [victim_key.encode()]
