"""Lock.take_over(token): one attempt that takes the lock and, where
`token` holds it, that hold, under the handle's own token in the same atomic
step (fence kept, metadata the handle's), so that whoever else knows
`token` can no longer adopt, renew or release it. On one server, a Cluster,
Sentinel and a quorum; `ferrolock inspect` reads the hold as any other; what
it refuses; cancelled, it leaves no hold behind."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ferrolock
from support.helpers import cancelled_after, sent_before
from support.redis_masters import Masters

FERROLOCK = str(Path(sys.executable).parent / "ferrolock")


@pytest.fixture(params=["server", "cluster", "sentinel", "quorum"])
def deployment(request, prefix, redis_url):
    """A client of each topology, and the URL `ferrolock inspect` takes (None: a quorum)."""
    if request.param == "server":
        yield ferrolock.Client(redis_url, prefix=prefix), redis_url
    elif request.param == "cluster":
        cluster = request.getfixturevalue("cluster")
        yield ferrolock.Client(cluster.url, prefix=prefix), cluster.url
    elif request.param == "sentinel":
        if shutil.which("redis-sentinel") is None:
            pytest.skip("redis-sentinel not installed")
        from support.redis_sentinel import SentinelDeployment

        d = SentinelDeployment().start()
        try:
            yield ferrolock.Client(d.url(), prefix=prefix, connect_timeout=5), d.url()
        finally:
            d.close()
    else:
        masters = Masters(3, prefix)
        try:
            yield masters.client(), None
        finally:
            masters.close()


def test_a_hold_taken_over_is_the_new_handles_alone(deployment, prefix):
    client, url = deployment
    queued = client.lock("job", ttl=30, auto_renew=False, metadata="queued")
    assert queued.acquire(blocking=False)
    queued.extend()  # records its fence, as its first renewal would
    old, fence = queued.token, queued.fence
    running = client.lock("job", ttl=30, metadata="running")
    assert running.take_over(old)
    assert running.token != old, "under a token of its own"
    # The same hold: its fence kept. A quorum's masters may disagree on one
    # hold (a master that granted it late, under a fence of its own, or not
    # at all): the take-over settles on the highest, as any quorum grant.
    assert running.fence == fence or (url is None and running.fence > fence)
    fence = running.fence
    info = client.inspect("job")
    assert (info.token, info.metadata, info.fence) == (running.token, "running", fence)
    # Whoever else knows the old token: no adopt, no second take-over, no renewal, no release.
    assert not client.lock("job", token=old).acquire(blocking=False)
    assert not client.lock("job").take_over(old)
    with pytest.raises(ferrolock.LockNotOwned):
        queued.extend()
    with pytest.raises(ferrolock.LockNotOwned):
        client.lock("job", token=old).release()
    with pytest.raises(ferrolock.LockNotOwned):
        queued.release()
    assert client.inspect("job").token == running.token and running.owned()
    if url is not None:  # the operator's tool reads it as any hold
        shown = subprocess.run(
            [FERROLOCK, "--url", url, "--prefix", prefix, "inspect", "job", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        holder = json.loads(shown.stdout)[0]["holder"]
        assert (holder["token"], holder["metadata"], holder["fence"]) == (running.token, "running", fence)
    running.release()
    assert client.inspect("job") is None
    # Free: taken as acquire takes it, a new hold.
    fresh = client.lock("job")
    assert fresh.take_over(old) and fresh.fence > fence
    # Held by another token: not taken, nothing changed.
    other = client.lock("job")
    assert not other.take_over(old) and other.token is None
    assert client.inspect("job").token == fresh.token
    fresh.release()


def test_without_metadata_the_holds_metadata_is_kept_and_a_multi_lock_is_taken_whole(client):
    queued = client.multi_lock(["x", "y"], metadata="task-1")
    assert queued.acquire(blocking=False)
    old, fence = queued.token, queued.fence
    running = client.multi_lock(["x", "y"])
    assert running.take_over(old)
    assert [(i.token, i.metadata, i.fence) for i in running.inspect()] == [(running.token, "task-1", fence)] * 2
    running.release()
    with pytest.raises(ferrolock.LockNotOwned):
        queued.release()
    partly = client.lock("x")
    assert partly.acquire(blocking=False)
    assert not client.multi_lock(["x", "y"]).take_over(old), "all or none"
    assert client.inspect("y") is None
    partly.release()


def test_what_take_over_refuses(client):
    holder = client.lock("r")
    assert holder.acquire(blocking=False)
    with pytest.raises(ValueError, match="restored"):
        client.lock("r", token=holder.token).take_over(holder.token)
    with pytest.raises(ValueError, match="fair Lock"):
        client.lock("f", fair=True).take_over(holder.token)
    with pytest.raises(ValueError, match="plain Lock"):
        client.rwmutex("rw").write().take_over(holder.token)
    with pytest.raises(ValueError, match="plain Lock"):
        client.semaphore("s", 2).take_over(holder.token)
    with pytest.raises(ValueError, match="token must be 1 to 512 printable"):
        client.lock("r").take_over("")
    with pytest.raises(TypeError):
        client.lock("r").take_over(7)
    assert client.inspect("r").token == holder.token
    holder.release()


async def test_a_cancelled_take_over_leaves_no_hold_behind(client):
    """Cancelled at every step: either it never ran (the old token still
    holds) or it is undone (the hold it took over is released)."""
    for steps in range(40):
        queued = client.lock("c", ttl=30, auto_renew=False)
        assert await queued.aacquire()
        running = client.lock("c", ttl=30)
        taken = await cancelled_after(running.atake_over(queued.token), steps)
        if taken:
            assert client.inspect("c").token == running.token
            await running.arelease()
        await sent_before(running)
        deadline = time.monotonic() + 10  # the undo runs in the background: no event to await
        while (info := client.inspect("c")) is not None and info.token != queued.token:
            assert time.monotonic() < deadline, f"left behind after {steps} steps"
            await asyncio.sleep(0.01)
        try:
            await queued.arelease()  # still its own if the take-over never ran
        except ferrolock.LockNotOwned:
            pass
        assert client.inspect("c") is None
