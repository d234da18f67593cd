"""Adopting a restored hold (a handle made with another process's token):
cancelling or timing out the adopt never touches the owner's hold, and
adopting keeps the owner's metadata unless new metadata is given."""

from __future__ import annotations

import asyncio

import pytest

import ferrolock
from support.helpers import hold_field, key

FAIRNESS = [pytest.param(False, id="plain"), pytest.param(True, id="fair")]


@pytest.mark.parametrize("fair", FAIRNESS)
async def test_a_cancelled_adopt_leaves_the_owners_hold_alone(client, raw, prefix, fair):
    owner = client.lock("a", fair=fair, metadata="owner-meta", ttl=30.0)
    assert await owner.aacquire()
    k = key(prefix, "a")
    # Cancellation lands at every point of the adopt in turn: before it is
    # sent, while the script runs, as its answer arrives, after.
    for steps in range(40):
        restored = client.lock("a", fair=fair, token=owner.token, ttl=30.0)
        task = asyncio.ensure_future(restored.aacquire())
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert hold_field(raw("GET", k), "token").decode() == owner.token, f"released after {steps} steps"
        assert hold_field(raw("GET", k), "meta").decode() == "owner-meta"
    assert await owner.aowned()
    await owner.arelease()


@pytest.mark.parametrize("fair", FAIRNESS)
def test_a_timed_out_adopt_leaves_the_owners_hold_alone(client, raw, prefix, fair):
    """The adopt of a hold that was taken over in the meantime waits, then
    gives up: neither the new holder's hold nor anything else is touched."""
    first = client.lock("t", fair=fair, ttl=30.0)
    assert first.acquire()
    stale = first.token
    assert client.force_release("t")
    second = client.lock("t", fair=fair, ttl=30.0)
    assert second.acquire()
    restored = client.lock("t", fair=fair, token=stale, ttl=30.0)
    assert restored.acquire(timeout=0.2) is False
    assert hold_field(raw("GET", key(prefix, "t")), "token").decode() == second.token
    second.release()
    assert raw.keys(prefix + "*") == []


@pytest.mark.parametrize("fair", FAIRNESS)
def test_adopting_keeps_the_owners_metadata_unless_given(client, prefix, fair):
    owner = client.lock("m", fair=fair, metadata="worker-1")
    assert owner.acquire()
    adopter = client.lock("m", fair=fair, token=owner.token)
    assert adopter.acquire(timeout=1)
    assert client.inspect("m").metadata == "worker-1"
    renamed = client.lock("m", fair=fair, token=owner.token, metadata="worker-2")
    assert renamed.acquire(timeout=1)
    assert client.inspect("m").metadata == "worker-2"
    assert renamed.fence == adopter.fence
    renamed.release()
    assert client.inspect("m") is None


def test_a_writer_adopt_keeps_the_writers_metadata(client):
    rw = client.rwmutex("doc")
    owner = rw.write(metadata="editor-1")
    assert owner.acquire()
    adopter = rw.write(token=owner.token)
    assert adopter.acquire(timeout=1)
    info = adopter.inspect()[0]
    assert info.metadata == "editor-1"
    adopter.release()
    assert isinstance(owner, ferrolock.Lock)
