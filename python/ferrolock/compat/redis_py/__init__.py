"""``Lock``: redis-py's ``Lock`` (``redis.lock.Lock``, redis-py 8.1) on
ferrolock, holding the same key.

Change the import (or pass ``lock_class=Lock`` to ``r.lock(...)``) and
nothing else::

    from ferrolock.compat.redis_py import Lock   # was: from redis.lock import Lock

    with Lock(r, "orders:42", timeout=10):
        ...

The hold is where redis-py keeps it: the key named ``name`` itself, a string
whose value is the token. A process still running redis-py's ``Lock`` and one
running this one exclude each other on that key, and each releases or
extends only its own hold. The constructor, ``acquire``, ``release``,
``extend`` (adds to the time left; ``replace_ttl=True`` sets it),
``reacquire``, ``locked``, ``owned``, ``local.token`` (bytes, in a
``threading.local`` unless ``thread_local=False``) and ``with`` behave as
redis-py's, and raise redis-py's own ``redis.exceptions.LockError`` and
``LockNotOwnedError``.

What ferrolock adds: ``fence`` (the server's clock when the hold was taken,
strictly increasing per name among ferrolock's holders), ``lost`` and
``on_lost=`` (told when the hold's timeout runs out, or it is deleted, before
it is released), ``auto_renew=True`` (the watchdog renews the hold every
``timeout / 3`` while it is held, without a thread), ``hold`` (the
:class:`ferrolock.Lock` behind it), and an acquire that Ctrl-C never leaves
held. A waiter is woken at once by a ferrolock process's release, and polls
every ``sleep`` for a redis-py process's (which publishes nothing).
:mod:`ferrolock.compat.redis_py.asyncio` is the asyncio twin.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Literal, Optional, Type, Union

from redis.exceptions import LockError


import ferrolock

from ._base import LockBase, Number

__all__ = ["Lock"]

logger = logging.getLogger(__name__)


class Lock(LockBase):
    """redis-py's ``Lock(redis, name, timeout=None, sleep=0.1, blocking=True,
    blocking_timeout=None, thread_local=True, raise_on_release_error=True)``
    on ferrolock, holding the same key; see the module's documentation.

    ``timeout`` is the hold's time to live in seconds (``None``: it never
    expires), ``sleep`` the pause between two attempts of a waiter,
    ``blocking_timeout`` how long ``acquire`` waits (``None``: forever).
    Keyword-only extras: ``auto_renew`` (renew the hold every
    ``timeout / 3`` while it is held) and ``on_lost`` (called once, with no
    arguments, when a hold is lost before it is released).

    Raises:
        TypeError: ``redis`` is not a redis-py client or connection pool.
        ValueError: a setting of the redis-py client cannot be carried over
            (the message names it), or ``name`` is not UTF-8 text.
    """

    def __enter__(self) -> "Lock":
        if self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", lock_name=self.name)

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        try:
            self.release()
        except LockError:
            if self.raise_on_release_error:
                raise
            logger.warning("Lock was unlocked or no longer owned when exiting context manager.")

    def acquire(
        self,
        sleep: Optional[Number] = None,
        blocking: Optional[bool] = None,
        blocking_timeout: Optional[Number] = None,
        token: Optional[Union[str, bytes]] = None,
    ) -> bool:
        """Take the lock; ``True`` once taken, ``False`` when ``blocking`` is
        false and it is held, or ``blocking_timeout`` passed first.

        ``token``: the value to store (bytes, or a str the client encodes);
        a fresh random one when ``None``. The GIL is released while waiting,
        and Ctrl-C leaves nothing held.
        """
        if sleep is None:
            sleep = self.sleep
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        hold = self._new_hold(self._token_of(token), sleep)
        if not hold.acquire(**self._wait(blocking, blocking_timeout)):
            return False
        self.local.token = self._keep(hold)
        return True

    def do_acquire(self, token: Union[str, bytes]) -> bool:
        """One attempt with ``token``, no waiting."""
        hold = self._new_hold(self._token_of(token), self.sleep)
        if not hold.acquire(blocking=False):
            return False
        self._keep(hold)
        return True

    def locked(self) -> bool:
        """Whether any process holds the key (redis-py's or ferrolock's)."""
        return self.redis.get(self.name) is not None

    def owned(self) -> bool:
        """Whether the key holds this thread's token (``local.token``)."""
        stored = self.redis.get(self.name)
        if stored and not isinstance(stored, bytes):
            stored = self._encoder().encode(stored)
        return self.local.token is not None and stored == self.local.token

    def release(self) -> None:
        """Release the hold ``local.token`` names.

        Raises:
            redis.exceptions.LockError: no token (never acquired, or released).
            redis.exceptions.LockNotOwnedError: the key no longer holds the
                token (it expired or was taken over); nothing is deleted.
        """
        expected_token = self._token_to_release()
        self.local.token = None
        self.do_release(expected_token)

    def do_release(self, expected_token: bytes) -> None:
        """Release the hold of ``expected_token``, only if the key still holds it."""
        try:
            self._hold_of(expected_token).release()
        except ferrolock.LockNotOwned:
            raise self._not_owned("release") from None
        finally:
            self._holds.pop(expected_token, None)

    def extend(self, additional_time: Number, replace_ttl: bool = False) -> Literal[True]:
        """Add ``additional_time`` seconds to the time the hold has left, or
        with ``replace_ttl=True`` make it that many seconds from now.

        Raises:
            redis.exceptions.LockError: no token, or ``timeout`` is ``None``.
            redis.exceptions.LockNotOwnedError: the key no longer holds the token.
        """
        self._token_to_extend("extend")
        return self.do_extend(additional_time, replace_ttl)

    def do_extend(self, additional_time: Number, replace_ttl: bool) -> Literal[True]:
        """The extend, once checked."""
        if self._hold_of(self.local.token)._extend_plain(additional_time, not replace_ttl) != 1:
            raise self._not_owned("extend")
        return True

    def reacquire(self) -> Literal[True]:
        """Make the hold's time left ``timeout`` again.

        Raises:
            redis.exceptions.LockError: no token, or ``timeout`` is ``None``.
            redis.exceptions.LockNotOwnedError: the key no longer holds the token.
        """
        self._token_to_extend("reacquire")
        return self.do_reacquire()

    def do_reacquire(self) -> Literal[True]:
        """The reacquire, once checked."""
        assert self.timeout is not None
        if self._hold_of(self.local.token)._extend_plain(self.timeout, False) != 1:
            raise self._not_owned("reacquire")
        return True
