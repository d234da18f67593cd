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
    LockEvent,
    LockInfo,
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    LockState,
    Retry,
    RWMutex,
    __version__,
    add_listener,
    flush_events,
    remove_listener,
)

__all__ = [
    "Client",
    "Lock",
    "LockConnectionError",
    "LockError",
    "LockEvent",
    "LockInfo",
    "LockLost",
    "LockNotAcquired",
    "LockNotOwned",
    "LockState",
    "RWMutex",
    "Retry",
    "__version__",
    "add_listener",
    "flush_events",
    "remove_listener",
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

    def multi_lock(self, names: Iterable[str], **options: Any) -> Lock:
        """One :class:`Lock` over every name in ``names``, taken all-or-nothing."""
        return super().multi_lock(names, **options)
