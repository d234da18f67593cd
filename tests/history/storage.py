"""The storage the workers' fenced writes go to: a redis-server on a unix
socket (every worker reaches it, whatever the network does: a stale holder
can always write, the worst case), written through ferrolock.fencing's
guards, as an application protects its data.

A holder writes once at the end of each exclusive hold it still believes
valid (``write``), and once more after it saw the hold lost, with the same
fence (``late``): a holder paused or cut off that writes anyway. Each write
appends ``fence:worker:seq`` to the name's list, so the list is what the
storage took, in its own order; the guard refuses a write whose fence is
below the one on record, and the checker reads the lists back
(``stale-write-accepted``)."""

from __future__ import annotations

import redis
import redis.asyncio

import ferrolock
from ferrolock.fencing.redis import AsyncRedisGuard, RedisGuard

from .attempt import Attempt

WRITERS = ("lock", "write", "term")  # the exclusive kinds: their fences order the writes


def data_key(prefix: str, name: str) -> str:
    return f"{prefix}data:{name}"


def records(path: str, prefix: str, names: tuple) -> dict:
    """name -> the fences of the writes the storage took, in its order."""
    with redis.Redis(unix_socket_path=path) as r:
        return {n: [int(v.split(b":")[0]) for v in r.lrange(data_key(prefix, n), 0, -1)] for n in names}


class Storage:
    def __init__(self, path: str, prefix: str):
        self.prefix = prefix
        self.guard = RedisGuard(redis.Redis(unix_socket_path=path, socket_timeout=5))

    def write(self, att: Attempt, late: bool = False) -> None:
        if att.kind not in WRITERS or att.fence is None:
            return
        for name in att.names:
            try:
                self.guard.execute(
                    "RPUSH", data_key(self.prefix, name), f"{att.fence}:{att.w}:{att.seq}", fence=att.fence
                )
                result = "written"
            except ferrolock.StaleFence:
                result = "refused"
            att.write("write", name=name, fence=att.fence, result=result, late=late)


class AsyncStorage:
    def __init__(self, path: str, prefix: str):
        self.prefix = prefix
        self.guard = AsyncRedisGuard(redis.asyncio.Redis(unix_socket_path=path, socket_timeout=5))

    async def write(self, att: Attempt, late: bool = False) -> None:
        if att.kind not in WRITERS or att.fence is None:
            return
        for name in att.names:
            try:
                await self.guard.execute(
                    "RPUSH", data_key(self.prefix, name), f"{att.fence}:{att.w}:{att.seq}", fence=att.fence
                )
                result = "written"
            except ferrolock.StaleFence:
                result = "refused"
            att.write("write", name=name, fence=att.fence, result=result, late=late)
