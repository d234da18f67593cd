"""The fencing guard for data in Redis, written with redis-py.

``RedisGuard(redis.Redis(...))`` (``AsyncRedisGuard`` for ``redis.asyncio``)
writes a key only with a fence: one Lua script reads the fence on record for
the key, refuses the write with :class:`~ferrolock.StaleFence` when the fence
offered is below it, and otherwise records the fence and runs the write, all
in one atomic step on the server::

    guard = RedisGuard(redis.Redis.from_url(url))
    with client.lock("orders:42") as lock:
        guard.set("orders:42", "shipped", fence=lock)

The fence of ``key`` is recorded in a key of its own, :func:`fence_key` (``key``):
``{orders:42}:fence`` for ``orders:42``, ``{user:7}:profile:fence`` for
``{user:7}:profile``. Its hash tag puts it in the data's hash slot, so both
keys can be declared to the script on a Redis Cluster. The record has no
expiry: it must outlive every stale holder (delete it with the data once the
data is gone for good). Needs redis-py (``pip install redis``, or ferrolock's ``redis`` extra).
"""

from __future__ import annotations

from typing import Any, Mapping, Union

try:
    import redis
    import redis.asyncio
except ImportError as exc:  # tests/integrations/test_fencing.py imports it with the package hidden
    raise ImportError(
        "ferrolock.fencing.redis needs redis-py: pip install redis, or install ferrolock with its [redis] extra"
    ) from exc

from . import FenceLike, StaleFence, fence_of

__all__ = ["AsyncRedisGuard", "RedisGuard", "fence_key"]

# KEYS[1]: the fence record, KEYS[2]: the data. ARGV[1]: the fence offered,
# ARGV[2]: the write command, ARGV[3...]: its arguments after the key.
# Answers 0 when written, else the fence on record (greater than the offered).
# The write runs before the fence is recorded: a write Redis refuses (a
# WRONGTYPE) stops the script before it changes anything.
FENCED_WRITE = """
local recorded = redis.call('GET', KEYS[1])
if recorded and tonumber(recorded) > tonumber(ARGV[1]) then
  return tonumber(recorded)
end
redis.call(ARGV[2], KEYS[2], unpack(ARGV, 3))
redis.call('SET', KEYS[1], ARGV[1])
return 0
"""

_Value = Union[str, bytes, int, float]


def fence_key(key: str) -> str:
    """The key where the guards record the last fence written to ``key``.

    ``key + ":fence"`` when ``key`` has a hash tag (``{user:7}:profile``),
    else ``"{" + key + "}:fence"``: either way in ``key``'s Redis Cluster hash
    slot.

    Raises:
        TypeError: ``key`` is not a ``str``.
        ValueError: ``key`` has no hash tag but holds a ``}``, so no record
            key can share its slot: give it a hash tag.
    """
    if not isinstance(key, str):
        raise TypeError(f"a fenced key is a str, not {type(key).__name__}")
    start = key.find("{")
    if start >= 0 and key.find("}", start + 1) > start + 1:  # a tag: the first "{", a character or more, "}"
        return key + ":fence"
    if "}" in key:
        raise ValueError(
            f"key {key!r} has no hash tag but holds a '}}', so its fence record cannot share its Redis Cluster "
            "slot: give it a hash tag, such as '{orders}:42'"
        )
    return "{" + key + "}:fence"


def _hset_args(mapping: Mapping[str, _Value]) -> list[_Value]:
    if not mapping:
        raise ValueError("hset needs at least one field to write")
    return [part for item in mapping.items() for part in item]


class _Guard:
    """What both guards share: the script and its arguments and answer."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._script = client.register_script(FENCED_WRITE)

    @staticmethod
    def _arguments(command: str, key: str, args: tuple[_Value, ...], fence: int) -> tuple[list[str], list[Any]]:
        if not isinstance(command, str) or not command:
            raise TypeError(f"the command is a Redis command's name, such as 'SET', not {command!r}")
        return [fence_key(key), key], [fence, command, *args]

    @staticmethod
    def _check(answer: int, fence: int, key: str) -> None:
        if answer:
            raise StaleFence(fence, int(answer), f"Redis key {key!r}")

    @staticmethod
    def _recorded(value: Any) -> int | None:
        return None if value is None else int(value)


class RedisGuard(_Guard):
    """Fenced writes to a Redis that a ``redis.Redis`` (or
    ``redis.RedisCluster``) client reaches.

    Each write takes ``fence=``: an ``int`` or a held handle (``lock``, not
    ``lock.fence``, reads it at the write). It is applied when the fence is
    not below the one on record for the key (an equal fence is the same hold
    writing again), which it then records; otherwise nothing is written and
    :class:`~ferrolock.StaleFence` is raised. The check and the write are one
    script (registered once, sent by its SHA), so nothing can come between
    them.
    """

    def __init__(self, client: redis.Redis | redis.RedisCluster) -> None:
        super().__init__(client)

    def execute(self, command: str, key: str, *args: _Value, fence: FenceLike) -> None:
        """Run ``command key *args`` (a write to ``key`` alone, such as
        ``"RPUSH"``, ``"HDEL"`` or ``"SET", ..., "PX", 5000``) if ``fence`` is
        not below the one on record for ``key``.

        Raises:
            StaleFence: a greater fence is on record for ``key``; nothing was written.
            ValueError: the handle holds nothing, or the fence is out of range.
            redis.ResponseError: Redis refused the command (a WRONGTYPE, say):
                nothing was written, nor the fence recorded.
        """
        offered = fence_of(fence)
        keys, argv = self._arguments(command, key, args, offered)
        self._check(self._script(keys=keys, args=argv), offered, key)

    def set(self, key: str, value: _Value, *, fence: FenceLike) -> None:
        """``SET key value`` if ``fence`` is not below the one on record for ``key``.

        Raises:
            StaleFence: a greater fence is on record for ``key``; nothing was written.
        """
        self.execute("SET", key, value, fence=fence)

    def hset(self, key: str, mapping: Mapping[str, _Value], *, fence: FenceLike) -> None:
        """``HSET key field value ...`` (the fields of ``mapping``) if
        ``fence`` is not below the one on record for ``key``.

        Raises:
            StaleFence: a greater fence is on record for ``key``; nothing was written.
            ValueError: ``mapping`` is empty.
        """
        self.execute("HSET", key, *_hset_args(mapping), fence=fence)

    def recorded(self, key: str) -> int | None:
        """The last fence written to ``key``, or ``None`` when none was."""
        return self._recorded(self.client.get(fence_key(key)))


class AsyncRedisGuard(_Guard):
    """:class:`RedisGuard` for ``redis.asyncio.Redis`` (or
    ``redis.asyncio.RedisCluster``): the same writes, awaited."""

    def __init__(self, client: redis.asyncio.Redis | redis.asyncio.RedisCluster) -> None:
        super().__init__(client)

    async def execute(self, command: str, key: str, *args: _Value, fence: FenceLike) -> None:
        """Asyncio version of :meth:`RedisGuard.execute`."""
        offered = fence_of(fence)
        keys, argv = self._arguments(command, key, args, offered)
        self._check(await self._script(keys=keys, args=argv), offered, key)

    async def set(self, key: str, value: _Value, *, fence: FenceLike) -> None:
        """Asyncio version of :meth:`RedisGuard.set`."""
        await self.execute("SET", key, value, fence=fence)

    async def hset(self, key: str, mapping: Mapping[str, _Value], *, fence: FenceLike) -> None:
        """Asyncio version of :meth:`RedisGuard.hset`."""
        await self.execute("HSET", key, *_hset_args(mapping), fence=fence)

    async def recorded(self, key: str) -> int | None:
        """Asyncio version of :meth:`RedisGuard.recorded`."""
        return self._recorded(await self.client.get(fence_key(key)))
