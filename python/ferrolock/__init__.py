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

from ._ferrolock import _at_exit, _semaphore
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
    LockNotReplicated,
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
    "LockNotReplicated",
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
    prefix=None, ca_file=None, replicas=None, replica_timeout=None,
    replica_policy=None, replica_fsync=False)`` checks the options and
    connects at once. A server that answers but does not fit the settings
    (not Redis, a password or database it lacks, plain TCP where ``rediss://``
    asks for TLS, a Redis older than 6.2, or older than 7.2 with
    ``replica_fsync=True``) raises :class:`LockConfigurationError` saying what
    to change; one that cannot be reached in time, :class:`LockConnectionError`.
    ``url`` may also be a list of URLs of independent masters: a quorum, on
    which a lock is held while a majority of them hold it (Redlock).
    With ``replicas=N``, every grant and renewal waits until N replicas
    acknowledge it (``WAIT``), and ``replica_policy`` says what happens when
    they do not in time (``"fail"``: :class:`LockNotReplicated`, nothing left
    behind; ``"warn"``: kept, logged, counted). Every argument is described in
    the API reference and the type stubs.
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
            ttl: see :class:`Lock`.
            auto_renew: see :class:`Lock`.
            blocking_timeout: see :class:`Lock`.
            retry: see :class:`Lock`.
            metadata: see :class:`Lock`.
            token: see :class:`Lock`.
            on_lost: see :class:`Lock`.
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
            ttl: see :class:`Lock`.
            auto_renew: see :class:`Lock`.
            blocking_timeout: see :class:`Lock`.
            retry: see :class:`Lock`.
            metadata: see :class:`Lock`.
            token: see :class:`Lock`.
            on_lost: see :class:`Lock`.
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

    def semaphore(
        self,
        name: str,
        permits: int,
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
        """A handle on one permit of the semaphore ``name``: up to ``permits`` holders at once.

        The handle is a :class:`Lock` in every respect, except that up to
        ``permits`` handles hold the name at once. Each permit is its own
        lease: a holder that dies frees its permit after its own ttl, never
        sooner. ``fair=True`` hands permits out in arrival order across
        processes; ``inspect()`` lists the holders.

        Raises:
            ValueError: ``permits`` is 0 or above 1,000,000, an option is out
                of range, or (at ``acquire``) another process uses a different
                ``permits`` for this name while a permit is held.
            OverflowError: ``permits`` is negative.
        """
        return _semaphore(
            self, name, permits, ttl=ttl, auto_renew=auto_renew, blocking_timeout=blocking_timeout,
            retry=retry, metadata=metadata, token=token, on_lost=on_lost, fair=fair,
        )

    def election(self, name: str, *, ttl: float = 30.0) -> Election:
        """The leader election ``name``: a leader's term lasts ``ttl`` seconds
        unless renewed (the watchdog renews it while the leader lives)."""
        return Election(self, name, ttl=ttl)

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


try:
    Client.rwmutex.__signature__ = _rwmutex_signature()  # type: ignore[attr-defined]
except ValueError:  # Python 3.9 reads no signature off a native class: help() shows **options there
    pass
