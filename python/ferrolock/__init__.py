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
    LockConfigurationError,
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
    "Election",
    "Leader",
    "Lock",
    "LockConfigurationError",
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
    "Term",
    "__version__",
    "add_listener",
    "flush_events",
    "remove_listener",
]

from .election import Election, Leader, Term  # noqa: E402  (needs the extension loaded above)

logging.getLogger("ferrolock").addHandler(logging.NullHandler())
atexit.register(_at_exit)

F = TypeVar("F", bound=Callable[..., Any])


class Client(_Client):
    """A connection to one Redis deployment, shared by every lock made from it.

    ``Client(url=None, *, connect_timeout=None, command_timeout=None,
    prefix=None, ca_file=None)`` checks the options and connects at once. A
    server that answers but does not fit the settings (not Redis, a password
    or database it lacks, plain TCP where ``rediss://`` asks for TLS, a Redis
    older than 6.2) raises :class:`LockConfigurationError` saying what to
    change; one that cannot be reached in time, :class:`LockConnectionError`.
    Every argument is described in the API reference and the type stubs.
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

    def election(self, name: str, *, ttl: float = 30.0) -> Election:
        """The leader election ``name``: a leader's term lasts ``ttl`` seconds
        unless renewed (the watchdog renews it while the leader lives)."""
        return Election(self, name, ttl=ttl)
