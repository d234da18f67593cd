"""``Lock``: redis-py's asyncio ``Lock`` (``redis.asyncio.lock.Lock``,
redis-py 8.1) on ferrolock, holding the same key as it and as the sync
:class:`ferrolock.compat.redis_py.Lock`.

Change the import (or pass ``lock_class=Lock`` to ``r.lock(...)`` of a
``redis.asyncio.Redis``) and nothing else::

    from ferrolock.compat.redis_py.asyncio import Lock   # was: from redis.asyncio.lock import Lock

    async with Lock(r, "orders:42", timeout=10):
        ...

Its methods are redis-py's: ``acquire``, ``release``, ``locked`` and
``owned`` are coroutines; ``extend`` and ``reacquire`` return awaitables and
raise ``LockError`` at the call when there is nothing to extend. What
ferrolock adds is the sync twin's (``fence``, ``lost``, ``on_lost``,
``auto_renew``, ``hold``), and cancelling an ``acquire`` at any point leaves
nothing held.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Literal, Optional, Union

from redis.exceptions import LockError, LockNotOwnedError

import ferrolock

from ._base import LockBase, Number

__all__ = ["Lock"]

logger = logging.getLogger(__name__)


class Lock(LockBase):
    """redis-py's asyncio ``Lock(redis, name, timeout=None, sleep=0.1,
    blocking=True, blocking_timeout=None, thread_local=True,
    raise_on_release_error=True)`` on ferrolock, holding the same key; the
    same keyword-only extras as the sync :class:`ferrolock.compat.redis_py.Lock`.
    ``redis`` is a ``redis.asyncio.Redis`` (or ``RedisCluster``).

    Raises:
        TypeError: ``redis`` is not a redis-py client or connection pool.
        ValueError: a setting of the redis-py client cannot be carried over
            (the message names it), or ``name`` is not UTF-8 text.
    """

    async def __aenter__(self) -> "Lock":
        if await self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified")

    async def __aexit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        try:
            await self.release()
        except LockError:
            if self.raise_on_release_error:
                raise
            logger.warning("Lock was unlocked or no longer owned when exiting context manager.")

    async def acquire(
        self,
        blocking: Optional[bool] = None,
        blocking_timeout: Optional[Number] = None,
        token: Optional[Union[str, bytes]] = None,
    ) -> bool:
        """Take the lock; ``True`` once taken, ``False`` when ``blocking`` is
        false and it is held, or ``blocking_timeout`` passed first. Cancelling
        it leaves nothing held."""
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        hold = self._new_hold(self._token_of(token), self.sleep)
        if not await hold.aacquire(**self._wait(blocking, blocking_timeout)):
            return False
        self.local.token = self._keep(hold)
        return True

    async def do_acquire(self, token: Union[str, bytes]) -> bool:
        """One attempt with ``token``, no waiting."""
        hold = self._new_hold(self._token_of(token), self.sleep)
        if not await hold.aacquire(blocking=False):
            return False
        self._keep(hold)
        return True

    async def locked(self) -> bool:
        """Whether any process holds the key (redis-py's or ferrolock's)."""
        return await self.redis.get(self.name) is not None

    async def owned(self) -> bool:
        """Whether the key holds this object's token (``local.token``)."""
        stored = await self.redis.get(self.name)
        if stored and not isinstance(stored, bytes):
            stored = self._encoder().encode(stored)
        return self.local.token is not None and stored == self.local.token

    async def release(self) -> None:
        """Release the hold ``local.token`` names; the token is cleared once
        the release is done (or found the hold gone), as redis-py's is.

        Raises:
            redis.exceptions.LockError: no token (never acquired, or released).
            redis.exceptions.LockNotOwnedError: the key no longer holds the
                token (it expired or was taken over); nothing is deleted.
        """
        expected_token = self._token_to_release()
        try:
            await self.do_release(expected_token)
        except LockNotOwnedError:
            self.local.token = None
            raise
        self.local.token = None

    async def do_release(self, expected_token: bytes) -> None:
        """Release the hold of ``expected_token``, only if the key still holds it."""
        try:
            await self._hold_of(expected_token).arelease()
        except ferrolock.LockNotOwned:
            raise self._not_owned("release") from None
        finally:
            self._holds.pop(expected_token, None)

    def extend(self, additional_time: Number, replace_ttl: bool = False) -> Awaitable[Literal[True]]:
        """Add ``additional_time`` seconds to the time the hold has left, or
        with ``replace_ttl=True`` make it that many seconds from now.

        Raises:
            redis.exceptions.LockError: at the call: no token, or ``timeout`` is ``None``.
            redis.exceptions.LockNotOwnedError: when awaited: the key no longer holds the token.
        """
        self._token_to_extend("extend")
        return self.do_extend(additional_time, replace_ttl)

    async def do_extend(self, additional_time: Number, replace_ttl: bool) -> Literal[True]:
        """The extend, once checked."""
        if await self._hold_of(self.local.token)._aextend_plain(additional_time, not replace_ttl) != 1:
            raise self._not_owned("extend")
        return True

    def reacquire(self) -> Awaitable[Literal[True]]:
        """Make the hold's time left ``timeout`` again.

        Raises:
            redis.exceptions.LockError: at the call: no token, or ``timeout`` is ``None``.
            redis.exceptions.LockNotOwnedError: when awaited: the key no longer holds the token.
        """
        self._token_to_extend("reacquire")
        return self.do_reacquire()

    async def do_reacquire(self) -> Literal[True]:
        """The reacquire, once checked."""
        assert self.timeout is not None
        if await self._hold_of(self.local.token)._aextend_plain(self.timeout, False) != 1:
            raise self._not_owned("reacquire")
        return True
