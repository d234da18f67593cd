"""Distributed locks on Redis with a Rust core.

>>> import ferrolock
>>> client = ferrolock.Client("redis://127.0.0.1:6379/0")
>>> with client.lock("orders:42", ttl=30.0):
...     ...
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
from typing import Any, Callable, Iterable, TypeVar

from ._ferrolock import _at_exit
from ._ferrolock import (
    Client as _Client,
    Lock,
    LockConnectionError,
    LockError,
    LockInfo,
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    Retry,
    RWMutex,
    __version__,
)

__all__ = [
    "Client",
    "Lock",
    "LockConnectionError",
    "LockError",
    "LockInfo",
    "LockLost",
    "LockNotAcquired",
    "LockNotOwned",
    "RWMutex",
    "Retry",
    "__version__",
]

logging.getLogger("ferrolock").addHandler(logging.NullHandler())
atexit.register(_at_exit)

F = TypeVar("F", bound=Callable[..., Any])


class Client(_Client):
    """A connection to one Redis deployment, shared by every lock made from it.

    Args:
        url: ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS),
            ``unix:///path/to/redis.sock?db=N``, or ``[password@]host[:port]``.
        connect_timeout: seconds allowed to connect (and to reconnect).
        command_timeout: seconds allowed for Redis to answer one command.
        prefix: prepended to every key (default ``"ferrolock:"``).
        ca_file: PEM file of the certificate authorities to trust for ``rediss://``.

    Raises:
        LockConnectionError: Redis is unreachable or refused the credentials.
        ValueError: the URL or an option is invalid.
    """

    def synchronized(self, name: str, **options: Any) -> Callable[[F], F]:
        """Decorate a function (sync or ``async``) to run holding the lock ``name``.

        Each call takes a fresh handle, so concurrent calls exclude each other.
        Keyword arguments are those of :class:`Lock`.
        """
        Lock(self, name, **options)  # check the options now, not at the first call

        def decorate(func: F) -> F:
            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    async with Lock(self, name, **options):
                        return await func(*args, **kwargs)

                return run_async  # type: ignore[return-value]

            @functools.wraps(func)
            def run(*args: Any, **kwargs: Any) -> Any:
                with Lock(self, name, **options):
                    return func(*args, **kwargs)

            return run  # type: ignore[return-value]

        return decorate

    def lock(
        self,
        name: str | list[str] | tuple[str, ...],
        *,
        ttl: float | None = None,
        auto_renew: bool = True,
        blocking_timeout: float | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
        fair: bool = False,
    ) -> Lock:
        """A new :class:`Lock` handle on ``name``: the same as ``Lock(self, name, ...)``.

        Nothing is sent to Redis until the lock is acquired.

        Args:
            name: the lock name, or a list or tuple of names for a multi-lock.
            ttl, auto_renew, blocking_timeout, retry, metadata, token, on_lost,
                fair: see :class:`Lock`.

        Returns:
            A handle that does not hold the lock yet (unless ``token`` is given).

        Raises:
            TypeError: an argument has the wrong type.
            ValueError: an argument is out of range (see :class:`Lock`).
        """
        return Lock(
            self, name, ttl=ttl, auto_renew=auto_renew, blocking_timeout=blocking_timeout, retry=retry,
            metadata=metadata, token=token, on_lost=on_lost, fair=fair,
        )

    def multi_lock(
        self,
        names: Iterable[str],
        *,
        ttl: float | None = None,
        auto_renew: bool = True,
        blocking_timeout: float | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
        fair: bool = False,
    ) -> Lock:
        """One :class:`Lock` over every name in ``names``, taken all-or-nothing.

        The handle takes every name in one atomic step or none of them, holds
        them under one token and one fence, and renews and releases them
        together. Nothing is sent to Redis until the lock is acquired.

        Args:
            names: the lock names, distinct; any iterable of ``str``.
            ttl, auto_renew, blocking_timeout, retry, metadata, token, on_lost,
                fair: see :class:`Lock`.

        Returns:
            A handle that does not hold the locks yet (unless ``token`` is
            given). Its ``name`` is a tuple when there are several names.

        Raises:
            TypeError: ``names`` is a ``str`` or not iterable, or an argument
                has the wrong type.
            ValueError: ``names`` is empty or repeats a name, an argument is
                out of range (see :class:`Lock`), or on a Redis Cluster the
                names fall in different hash slots (one script cannot span
                slots there).
        """
        if isinstance(names, str):
            raise TypeError("multi_lock takes a list of names, not a str (use client.lock for one name)")
        return self.lock(
            tuple(names), ttl=ttl, auto_renew=auto_renew, blocking_timeout=blocking_timeout, retry=retry,
            metadata=metadata, token=token, on_lost=on_lost, fair=fair,
        )

    def rwmutex(self, name: str, **options: Any) -> RWMutex:
        """An :class:`RWMutex` on ``name``: the same as ``RWMutex(self, name, ...)``.

        Keyword arguments as for :class:`RWMutex` (its signature is this
        method's). Nothing is sent to Redis until a handle is acquired.
        """
        return RWMutex(self, name, **options)


def _rwmutex_signature() -> inspect.Signature:
    """``RWMutex(client, name, ...)``'s signature, bound to a client."""
    sig = inspect.signature(RWMutex)
    return sig.replace(parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
                       + list(sig.parameters.values())[1:])


Client.rwmutex.__signature__ = _rwmutex_signature()  # type: ignore[attr-defined]
