"""An operator's release by token: `Client.force_release(name, token=...)`
and `RWMutex.force_release(token=...)` remove only the hold that token
names (checked and deleted in one script), for a Lock, a fair Lock, an
RWMutex's writer and each reader, and on every master of a quorum; another
holder's hold, taken since, stays."""

from __future__ import annotations

import pytest

from ferrolock import LockNotOwned
from support.helpers import hold_value, wait_for
from support.redis_masters import Masters


@pytest.mark.parametrize("fair", [False, True], ids=["lock", "fair-lock"])
def test_a_token_removes_only_its_own_hold(client, raw, prefix, fair):
    shown = client.lock("job", fair=fair)
    assert shown.acquire(blocking=False)
    token = shown.token
    shown.release()
    now = client.lock("job", fair=fair)
    assert now.acquire(blocking=False)  # another holder, since it was shown
    assert client.force_release("job", token=token) is False
    assert client.inspect("job").token == now.token and now.owned()
    assert client.force_release("job", token=now.token) is True
    assert client.inspect("job") is None
    with pytest.raises(LockNotOwned):
        now.release()
    assert client.force_release("job", token=now.token) is False  # free
    assert raw.keys(prefix + "*") == []


async def test_the_async_twin_takes_a_token(client):
    held = client.lock("job")
    assert await held.aacquire(blocking=False)
    assert await client.aforce_release("job", token="someone-else") is False
    assert held.owned()
    assert await client.aforce_release("job", held.token) is True
    assert client.inspect("job") is None


def test_an_rwmutex_token_removes_that_writer_or_that_reader(client, raw, prefix):
    rw = client.rwmutex("doc")
    writer = rw.write()
    assert writer.acquire(blocking=False)
    assert rw.force_release(token="not-the-writer") is False
    assert rw.locked()
    assert rw.force_release(token=writer.token) is True
    assert not rw.locked()
    a, b = rw.read(), rw.read()
    assert a.acquire(blocking=False) and b.acquire(blocking=False)
    assert rw.force_release(token=writer.token) is False  # that writer holds nothing now
    assert rw.force_release(a.token) is True
    assert rw.readers() == 1 and b.owned()
    with pytest.raises(LockNotOwned):
        a.release()
    b.release()
    assert raw.keys(prefix + "*") == []


async def test_an_rwmutex_async_twin_takes_a_token(client):
    rw = client.rwmutex("doc")
    reader = rw.read()
    assert await reader.aacquire(blocking=False)
    assert await rw.aforce_release("gone") is False
    assert await rw.aforce_release(token=reader.token) is True
    assert await rw.areaders() == 0


def test_a_bad_token_says_what_is_wrong(client):
    with pytest.raises(TypeError, match="token must be str"):
        client.force_release("job", token=7)
    with pytest.raises(ValueError, match="token must be 1 to 512 printable"):
        client.force_release("job", token="")
    with pytest.raises(ValueError, match="token must be 1 to 512 printable"):
        client.rwmutex("doc").force_release("x" * 513)
    assert client.force_release("job", token=None) is False  # None: whoever holds


def test_on_a_quorum_a_token_clears_only_its_hold_on_every_master(prefix):
    masters = Masters(3, prefix)
    try:
        client = masters.client()
        shown = client.lock("stuck", ttl=30)
        assert shown.acquire()
        token = shown.token
        shown.release()
        now = client.lock("stuck", ttl=30)
        assert now.acquire()
        assert client.force_release("stuck", token=token) is False
        # A step settles on a majority: a master answering late (a loaded
        # machine) follows, its commands in order.
        mine = now.token.encode()
        wait_for(lambda: token.encode() not in masters.holders("stuck"), 5, "the shown hold to go everywhere")
        holders = masters.holders("stuck")
        assert holders.count(mine) >= 2 and set(holders) <= {mine, None}, holders
        # A minority's leftover of the shown hold goes too.
        masters.servers[0].command("SET", f"{prefix}{{left}}", hold_value(token, 1))
        assert client.force_release("left", token=token) is True
        wait_for(lambda: masters.holders("left") == [None] * 3, 5, "the leftover to go")
        assert client.force_release("stuck", token=now.token) is True
        wait_for(lambda: masters.holders("stuck") == [None] * 3, 5, "the hold to go from every master")
    finally:
        masters.close()
