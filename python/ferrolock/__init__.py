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
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable, Generator, Iterable, TypeVar, Union

from ._ferrolock import _at_exit, _semaphore
from .exceptions import (
    LockConfigurationError,
    LockConnectionError,
    LockError,
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    LockNotReplicated,
)
from ._ferrolock import (
    Client as _Client,
    Lock,
    LockEvent,
    LockInfo,
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
    "RLock",
    "RWMutex",
    "Retry",
    "StaleFence",
    "Term",
    "__version__",
    "add_listener",
    "flush_events",
    "remove_listener",
]

from . import _from_redis  # noqa: E402
from .election import Election, Leader, Term  # noqa: E402  (needs the extension loaded above)
from .fencing import StaleFence  # noqa: E402  (needs the extension loaded above)
from .rlock import RLock  # noqa: E402  (needs the extension loaded above)

if TYPE_CHECKING:  # the keyword arguments, typed: generated into the stub from src/py/options.rs
    from typing_extensions import Unpack

    from ._ferrolock import _LockOptions, _RWMutexOptions

logging.getLogger("ferrolock").addHandler(logging.NullHandler())
atexit.register(_at_exit)

F = TypeVar("F", bound=Callable[..., Any])
_N = TypeVar("_N", bound=Union[str, "list[str]", "tuple[str, ...]"])  # what a lock is made on: Lock[str] for one name


class Client(_Client):
    """A connection to one Redis deployment, shared by every lock made from it.

    ``Client(url=None, *, connect_timeout=None, command_timeout=None,
    prefix=None, ca_file=None, replicas=None, replica_timeout=None,
    replica_policy=None, replica_fsync=False)`` checks the options and does no
    network I/O: the first use connects (or :meth:`connect` /
    :meth:`aconnect`, to check at once), and ``close()`` / ``aclose()`` or a
    ``with`` / ``async with`` block closes its connections. Connecting, a
    server that answers but does not fit the settings
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

    @classmethod
    def from_redis(cls, redis: Any, **options: Any) -> Client:
        """A client of the deployment a redis-py client connects to: the same
        server (or unix socket), database, credentials, timeouts, TLS
        settings (``ssl_ca_certs``, ``ssl_certfile`` / ``ssl_keyfile``,
        ``ssl_cert_reqs``, ``ssl_check_hostname``), client name and TCP
        keepalive; the same Sentinel service, Sentinels and their
        credentials; the same Cluster's nodes.

        It opens connections of its own (ferrolock's multiplexed ones) and
        never uses the redis-py client's. Settings that shape only redis-py's
        connections or replies (``decode_responses``, retries, health checks,
        ``max_connections``, ``protocol``, ...) do not matter here and are
        left behind.

        Args:
            redis: a ``redis.Redis`` or ``redis.asyncio.Redis`` (or a
                ``ConnectionPool`` of either), a client made by
                ``redis.Sentinel(...).master_for(...)``, or a
                ``redis.cluster.RedisCluster``.
            **options: :class:`Client`'s keyword arguments (``prefix``,
                ``replicas``, ...), over what was carried over.

        Raises:
            TypeError: ``redis`` is none of those.
            ValueError: a setting cannot be carried over (a credential
                provider, an encrypted key, CA data given in memory, a
                replica's client, ...): the message names it and what to do.
        """
        url, carried = _from_redis.url_and_options(redis)
        return cls(url, **{**carried, **options})

    def synchronized(self, name: str, **options: Unpack[_LockOptions]) -> Callable[[F], F]:
        """Decorate a function to run holding the lock ``name``.

        Plain and ``async`` functions hold it for the call. Generator and
        async-generator functions hold it across the iteration: it is taken
        at the first ``next()`` / ``__anext__()`` (not when the generator is
        made) and released when the generator finishes, raises, or is closed
        (``close()`` / ``aclose()``, or garbage-collected unfinished), so the
        body never runs unlocked. Each call takes a fresh handle, so
        concurrent calls exclude each other. Keyword arguments are those of
        :class:`Lock`.
        """
        Lock(self, name, **options)  # check the options now, not at the first call

        def hold() -> Lock:
            return Lock(self, name, **options)

        def decorate(func: F) -> F:
            if inspect.isasyncgenfunction(func):
                return functools.wraps(func)(_locked_async_generator(func, hold))  # type: ignore[return-value]
            if inspect.isgeneratorfunction(func):
                return functools.wraps(func)(_locked_generator(func, hold))  # type: ignore[return-value]
            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    async with hold():
                        return await func(*args, **kwargs)

                return run_async  # type: ignore[return-value]

            @functools.wraps(func)
            def run(*args: Any, **kwargs: Any) -> Any:
                with hold():
                    return func(*args, **kwargs)

            return run  # type: ignore[return-value]

        return decorate

    def lock(self, name: _N, **options: Unpack[_LockOptions]) -> Lock[_N]:
        """A new :class:`Lock` handle on ``name``: the same as ``Lock(self, name, ...)``.

        Nothing is sent to Redis until the lock is acquired. Keyword
        arguments are the handle options of :class:`Lock` (its signature is
        this method's).

        Args:
            name: the lock name, or a list or tuple of names for a multi-lock.

        Returns:
            A handle that does not hold the lock yet (unless ``token`` is given).
            For type checkers its :attr:`~Lock.name` is a ``str`` when
            ``name`` is one (``Lock[str]``).

        Raises:
            TypeError: an argument has the wrong type, or a keyword is unknown.
            ValueError: an argument is out of range (see :class:`Lock`).
        """
        return Lock(self, name, **options)

    def rlock(self, name: str | list[str] | tuple[str, ...], **options: Unpack[_LockOptions]) -> RLock:
        """A new :class:`RLock` on ``name``: a lock its owner (thread, or
        asyncio or trio task) may take again, held in Redis until every take is
        released. The same as ``RLock(self, name, ...)``.

        Keyword arguments are the handle options of :class:`Lock`, but
        ``token``. Nothing is sent to Redis until it is acquired.

        Raises:
            TypeError: an argument has the wrong type, or a keyword is unknown.
            ValueError: an argument is out of range (see :class:`Lock`), or
                ``token`` is given.
        """
        return RLock(self, name, **options)

    def multi_lock(self, names: Iterable[str], **options: Unpack[_LockOptions]) -> Lock:
        """One :class:`Lock` over every name in ``names``, taken all-or-nothing.

        The handle takes every name in one atomic step or none of them, holds
        them under one token and one fence, and renews and releases them
        together. Nothing is sent to Redis until the lock is acquired.
        Keyword arguments are the handle options of :class:`Lock` (its
        signature is this method's).

        Args:
            names: the lock names, distinct; any iterable of ``str``.

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
        return Lock(self, tuple(names), **options)

    def semaphore(self, name: str, permits: int, **options: Unpack[_LockOptions]) -> Lock[str]:
        """A handle on one permit of the semaphore ``name``: up to ``permits`` holders at once.

        The handle is a :class:`Lock` in every respect, except that up to
        ``permits`` handles hold the name at once. Each permit is its own
        lease: a holder that dies frees its permit after its own ttl, never
        sooner. ``fair=True`` hands permits out in arrival order across
        processes; ``inspect()`` lists the holders. Keyword arguments are the
        handle options of :class:`Lock`.

        Raises:
            TypeError: ``permits`` is not an ``int``, or an option has the
                wrong type.
            ValueError: ``permits`` is not between 1 and 1,000,000, an
                option is out of range, or (at ``acquire``) another process
                uses a different ``permits`` for this name while a permit is
                held (the message names the semaphore).
        """
        return _semaphore(self, name, permits, **options)

    def election(self, name: str, *, ttl: float = 30.0, max_hold: float | None = None) -> Election:
        """The leader election ``name``: a leader's term lasts ``ttl`` seconds
        unless renewed (the watchdog renews it while the leader lives). With
        ``max_hold``, a term ends that many seconds after it began, however
        long its leader lives (renewal stops; the term is reported lost)."""
        return Election(self, name, ttl=ttl, max_hold=max_hold)

    def rwmutex(self, name: str, **options: Unpack[_RWMutexOptions]) -> RWMutex:
        """An :class:`RWMutex` on ``name``: the same as ``RWMutex(self, name, ...)``.

        Keyword arguments as for :class:`RWMutex` (its signature is this
        method's). Nothing is sent to Redis until a handle is acquired.
        """
        return RWMutex(self, name, **options)


def _locked_generator(func: Callable[..., Generator[Any, Any, Any]], hold: Callable[[], Lock]) -> Callable[..., Any]:
    """``func``'s generators, run holding a fresh ``hold()`` from the first
    ``next()`` to their end; ``send``, ``throw`` and ``close`` reach them."""

    def run(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        with hold():
            return (yield from func(*args, **kwargs))

    return run


def _locked_async_generator(
    func: Callable[..., AsyncGenerator[Any, Any]], hold: Callable[[], Lock]
) -> Callable[..., AsyncGenerator[Any, Any]]:
    """``func``'s async generators, run holding a fresh ``hold()`` from the
    first ``__anext__()`` to their end; ``asend``, ``athrow`` and ``aclose``
    reach them (Python has no ``yield from`` for async generators)."""

    async def run(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        async with hold():
            inner = func(*args, **kwargs)
            try:
                value = await inner.__anext__()
                while True:
                    try:
                        sent = yield value
                    except GeneratorExit:
                        raise
                    except BaseException as exc:  # thrown in by athrow(): the inner generator's to handle
                        value = await inner.athrow(exc)
                    else:
                        value = await inner.asend(sent)
            except StopAsyncIteration:
                return
            finally:
                await inner.aclose()

    return run


def _signature(native: Any, first: str) -> inspect.Signature:
    """``native``'s signature (its keywords come from src/py/options.rs) for a
    ``Client`` method: ``self`` and ``first`` in place of ``client, name``."""
    params = list(inspect.signature(native).parameters.values())[2:]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter("self", kind), inspect.Parameter(first, kind), *params])


for _method, _native, _first in (
    (Client.synchronized, Lock, "name"),
    (Client.lock, Lock, "name"),
    (Client.rlock, Lock, "name"),
    (Client.multi_lock, Lock, "names"),
    (Client.semaphore, _semaphore, "name"),
    (Client.rwmutex, RWMutex, "name"),
):
    try:
        _method.__signature__ = _signature(_native, _first)  # type: ignore[union-attr]
    except ValueError:  # Python 3.9 reads no signature off a native class: help() shows **options there
        pass
del _method, _native, _first
