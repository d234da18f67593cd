"""Type stub for ``ferrolock._ferrolock``, the native (Rust/PyO3) core of ferrolock.

Hand-written from the bindings in ``src/py/``; ``python -m mypy.stubtest
ferrolock._ferrolock`` checks it against the built module. Import these names
from :mod:`ferrolock`, which re-exports them (its ``Client`` adds
``synchronized``).

Conventions that hold throughout:

* Durations are seconds, as ``int`` or ``float`` (``bool`` is refused with
  ``TypeError``, NaN with ``ValueError``).
* Lock names are ``str`` (non-empty, at most 4096 UTF-8 bytes).
* Every method that talks to Redis releases the GIL while it waits, so other
  Python threads run meanwhile. Blocking ``Lock.acquire`` and ``with lock:``
  also wake every 50 ms to check for signals: Ctrl-C raises
  ``KeyboardInterrupt`` there and leaves no lock behind. Other synchronous
  calls are not interruptible but are bounded by the client's
  ``connect_timeout`` and ``command_timeout``.
* The ``a``-prefixed methods are the asyncio versions. They are plain
  functions returning an :class:`asyncio.Future`: they must be called while an
  event loop is running (else ``RuntimeError``), the work starts at the call
  and runs on ferrolock's own threads without the GIL, so the event loop is
  never blocked.
"""

import asyncio
import os
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import ClassVar, Literal, final

from typing_extensions import Self, TypeAlias, disjoint_base

__version__: str
"""The version of the ferrolock package (from ``Cargo.toml``)."""

__all__ = [
    "LockInfo",
    "LockState",
    "LockEvent",
    "add_listener",
    "remove_listener",
    "flush_events",
    "_dropped_events",
    "_at_exit",
    "_debug_stats",
    "Client",
    "Lock",
    "RWMutex",
    "Retry",
    "__version__",
    "LockError",
    "LockNotAcquired",
    "LockNotOwned",
    "LockLost",
    "LockConnectionError",
    "LockConfigurationError",
    "Election",
    "ElectionObserver",
    "Leader",
]

_Seconds: TypeAlias = float
"""A number of seconds; ``int`` is accepted too."""

_Names: TypeAlias = str | list[str] | tuple[str, ...]
"""One lock name, or a list or tuple of names for a multi-lock."""

# ---------------------------------------------------------------------------
# Exceptions

class LockError(Exception):
    """Base class of every ferrolock error.

    Raised as itself when Redis answers a command with an error (for example
    ``WRONGTYPE`` when a lock's key holds something that is not a lock).
    """

class LockNotAcquired(LockError):
    """The lock could not be taken in the time allowed.

    Raised by ``with lock:`` and ``async with lock:`` when ``blocking_timeout``
    passes, or the :class:`Retry` strategy runs out of attempts, before the lock
    is taken. ``Lock.acquire`` returns ``False`` instead.
    """

class LockNotOwned(LockError):
    """This handle does not hold the lock (any more).

    Raised by ``release`` and ``extend`` when the handle holds nothing, or when
    Redis shows that its hold had already expired or been taken over (nobody
    else's hold is touched then).
    """

class LockLost(LockError):
    """The lock was lost while held: mutual exclusion no longer covered the holder.

    Raised at the end of a ``with`` / ``async with`` block whose hold was lost
    while the block ran (renewal failed, the ttl ran out with ``auto_renew``
    off, or someone else took the lock over), when the block itself raised
    nothing. An exception raised by the block propagates unchanged instead (so
    Ctrl-C stays ``KeyboardInterrupt``), with a note (``__notes__``, Python
    3.11+) saying the lock was lost too; the loss is also logged.
    """

class LockConnectionError(LockError, ConnectionError):
    """Redis could not be reached, refused the credentials, or did not answer in time.

    Both a :class:`LockError` and a builtin :class:`ConnectionError`, so either
    ``except`` clause catches it.
    """

class LockConfigurationError(LockConnectionError):
    """The server answered, but the client's settings do not fit it.

    Raised when connecting, with a message that names the server (never the
    password), the cause and what to change:

    * the URL points at a port where something other than Redis listens;
    * a password is given to a server that has none, or the credentials are
      refused, or the server needs a password and the URL gives none;
    * the database number is one the server does not have;
    * ``rediss://`` (TLS) points at a plain-TCP port;
    * the server is older than Redis 6.2 (7.0 for a Cluster).

    Retrying does not help. It is a :class:`LockConnectionError` (and so a
    :class:`ConnectionError`) too, so code that catches those catches it.
    """

# ---------------------------------------------------------------------------
# Retry

@final
class Retry:
    """How long to wait between attempts to take a busy lock.

    Immutable. Made only with the static constructors :meth:`none`,
    :meth:`fixed`, :meth:`linear` and :meth:`exponential` (``Retry()`` raises
    ``TypeError``). Two ``Retry`` objects are equal when they describe the same
    strategy; they are not hashable.

    Whatever the strategy, a wait never outlasts the remaining ttl of the
    current holder, nor the deadline of the acquire. A lock made without
    ``retry=`` uses ``Retry.exponential(0.002, 0.1, attempts=None, jitter=True)``.

    Waiting is woken by the holder's release (pub/sub) and the retry's waits
    are the safety net: after the first failed attempt the waiter subscribes
    to the lock's wake-up channel and tries once more at once (a release in
    between is not missed); later attempts come on a wake-up, or when the
    retry's wait (capped by the holder's remaining ttl) runs out.

    ``attempts`` counts every attempt, the first one included: when that many
    have failed the acquire gives up (``acquire`` returns ``False``, ``with``
    raises :class:`LockNotAcquired`), even if its timeout has not passed.
    """

    def __hash__(self) -> int:
        """Equal strategies hash equal."""

    def __eq__(self, other: object, /) -> bool:
        """Whether ``other`` is a ``Retry`` with the same strategy and parameters."""

    def __ne__(self, other: object, /) -> bool:
        """The negation of ``==``."""

    @staticmethod
    def none() -> Retry:
        """One attempt, no waiting.

        Returns:
            A strategy that gives up after the first failed attempt.
        """

    @staticmethod
    def fixed(interval: _Seconds, attempts: int | None = None) -> Retry:
        """The same wait between every two attempts.

        Args:
            interval: seconds to wait after each failed attempt; positive and
                finite.
            attempts: the most attempts in all (the first included), a
                positive whole number; ``None`` (the default) for no limit.

        Returns:
            The strategy.

        Raises:
            TypeError: ``interval`` is not a number, or ``attempts`` is not an
                ``int`` or ``None`` (``bool`` included).
            ValueError: ``interval`` is not positive and finite, or
                ``attempts`` is not between 1 and 2**32 - 1.
        """

    @staticmethod
    def linear(step: _Seconds, max_interval: _Seconds, attempts: int | None = None) -> Retry:
        """Waits that grow by ``step``: ``step``, ``2*step``, ``3*step``, ...

        Args:
            step: seconds added to the wait after each failed attempt; positive
                and finite.
            max_interval: the longest wait, in seconds; positive and finite.
            attempts: the most attempts in all (the first included), a
                positive whole number; ``None`` (the default) for no limit.

        Returns:
            The strategy.

        Raises:
            TypeError: an argument has the wrong type (see :meth:`fixed`).
            ValueError: ``step`` or ``max_interval`` is not positive and
                finite, or ``attempts`` is out of range.
        """

    @staticmethod
    def exponential(
        min: _Seconds,
        max: _Seconds,
        attempts: int | None = None,
        jitter: bool = True,
    ) -> Retry:
        """Waits that double: ``min``, ``2*min``, ``4*min``, ... capped at ``max``.

        Args:
            min: the first wait, in seconds; positive and finite.
            max: the longest wait, in seconds; positive, finite and not less
                than ``min``.
            attempts: the most attempts in all (the first included), a
                positive whole number; ``None`` (the default) for no limit.
            jitter: when ``True`` (the default), each wait is drawn at random
                from ``[wait/2, wait)`` so that contending clients spread out.

        Returns:
            The strategy.

        Raises:
            TypeError: an argument has the wrong type (see :meth:`fixed`).
            ValueError: ``min`` or ``max`` is not positive and finite, ``max``
                is less than ``min``, or ``attempts`` is out of range.
        """

    def delay(self, failed: int) -> float | None:
        """The wait after ``failed`` failed attempts.

        Args:
            failed: how many attempts have failed so far (1 after the first),
                between 0 and 2**32 - 1.

        Returns:
            The wait in seconds (random with ``jitter``), or ``None`` when the
            strategy gives up.

        Raises:
            OverflowError: ``failed`` is negative or too large.
        """

# ---------------------------------------------------------------------------
# LockInfo

@final
class LockInfo:
    """Who holds a lock, as ``Client.inspect`` or ``Lock.inspect`` found it.

    A read-only snapshot taken from Redis at the time of the call; it does not
    follow later changes. Instances are made by ferrolock only (``LockInfo()``
    raises ``TypeError``); two snapshots are equal when every field is.
    """

    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __eq__(self, other: object, /) -> bool:
        """Whether every field of ``other`` is equal."""

    def __ne__(self, other: object, /) -> bool:
        """The negation of ``==``."""

    @property
    def name(self) -> str:
        """The lock name (without the client's prefix)."""

    @property
    def token(self) -> str:
        """The holder's owner token (32 hex digits for tokens ferrolock made)."""

    @property
    def metadata(self) -> str | None:
        """The ``metadata`` the holder gave its ``Lock``, or ``None`` (none, or empty)."""

    @property
    def fence(self) -> int:
        """The fencing token of the hold (see :attr:`Lock.fence`)."""

    @property
    def ttl(self) -> float | None:
        """Seconds left before the hold expires (millisecond precision), or
        ``None`` when the key has no expiry set."""

@final
class LockState:
    """One name used as one kind of primitive, as :meth:`Client.scan` or
    :meth:`Client.describe` found it in Redis.

    A read-only snapshot. A name may be used both as a Lock and as an
    RWMutex (their keys never overlap): then it has one state of each kind.
    Instances are made by ferrolock only; two snapshots are equal when every
    field is.
    """

    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        """Whether every field of ``other`` is equal."""

    def __ne__(self, other: object) -> bool:
        """The negation of ``==``."""

    @property
    def name(self) -> str:
        """The name (without the client's prefix)."""

    @property
    def kind(self) -> Literal["lock", "rwmutex"]:
        """``"lock"`` (a :class:`Lock`, fair or not) or ``"rwmutex"``."""

    @property
    def holder(self) -> LockInfo | None:
        """A Lock's holder, or an RWMutex's writer; ``None`` when there is none."""

    @property
    def readers(self) -> list[tuple[str, float]]:
        """An RWMutex's live readers: (token, seconds left) each."""

    @property
    def queued_readers(self) -> int:
        """Readers waiting in a fair RWMutex's queue (live ones)."""

    @property
    def queued_writers(self) -> int:
        """Writers waiting in a fair queue (a fair Lock's waiters count here)."""

    @property
    def writer_intent(self) -> float | None:
        """Seconds left on a waiting writer's intent (an RWMutex with writer
        preference holding new readers back), or ``None``."""

    @property
    def waiters(self) -> int:
        """Waiters Redis knows of: both fair queues, plus one for a writer's
        intent. Waiters of a non-fair Lock are not stored in Redis and do not
        count."""

@final
class LockEvent:
    """One thing that happened to a lock of this process, as given to the
    listeners of :func:`add_listener`.

    ``kind`` says what happened, and ``seconds`` and ``detail`` what it
    measured:

    ==================  ============================  =========================================
    ``kind``            ``seconds``                   ``detail``
    ==================  ============================  =========================================
    ``acquired``        how long the acquire waited   ``"acquired"``
    ``acquire_failed``  how long the acquire waited   ``"timed_out"``, ``"not_acquired"``
                                                      (busy, or the retry gave up),
                                                      ``"error"`` or ``"cancelled"``
    ``released``        how long the hold lasted      ``None``
    ``lost``            how long the hold lasted      ``"expired"`` (ttl ran out, no renewal),
                                                      ``"taken_over"`` (gone from Redis) or
                                                      ``"unreachable"``
    ``renewed``         the renewal's round trip      ``None``
    ``woken``           ``None``                      ``"pubsub"``, ``"handover"`` (a fair
                                                      release named this waiter) or ``"poll"``
    ==================  ============================  =========================================
    """

    @property
    def kind(self) -> Literal["acquired", "acquire_failed", "released", "lost", "renewed", "woken"]:
        """What happened (see the table above)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every name of the lock (one, unless it is a multi-lock)."""

    @property
    def lock_kind(self) -> Literal["lock", "read", "write"]:
        """A :class:`Lock`, or an RWMutex's read or write handle."""

    @property
    def fair(self) -> bool:
        """Whether the lock takes turns in arrival order."""

    @property
    def seconds(self) -> float | None:
        """The duration measured (see the table above)."""

    @property
    def detail(self) -> str | None:
        """The outcome, cause or kind of wake-up (see the table above)."""

    @property
    def blocking(self) -> bool:
        """For an acquire: whether it could wait (``False`` for one attempt,
        and for every other kind of event)."""

    @property
    def hold(self) -> int | None:
        """Tells apart the holds alive at one time in this process: the same
        number in a hold's ``acquired``, ``renewed``, ``released`` or ``lost``
        events. ``None`` for an acquire that took nothing, and for ``woken``."""

    @property
    def time(self) -> float:
        """When it happened, in seconds since the epoch (as :func:`time.time`)."""

def add_listener(listener: Callable[[LockEvent], object]) -> None:
    """Call ``listener(event)`` for every :class:`LockEvent` of this process.

    Listeners are called one event at a time, in order, on a thread of
    ferrolock's (never on a thread that takes or renews locks, so a slow
    listener never delays a lock; past 65536 events behind, new ones are
    dropped and a warning is logged). An exception a listener raises goes to
    :func:`sys.unraisablehook`; the next listener is called all the same.
    While no listener is registered, events cost nothing.

    Raises:
        TypeError: ``listener`` is not callable.
    """

def remove_listener(listener: Callable[[LockEvent], object]) -> None:
    """Stop calling ``listener`` (the very object given to :func:`add_listener`).

    Raises:
        ValueError: it is not registered.
    """

def flush_events(timeout: _Seconds | None = None) -> bool:
    """Wait until the listeners have been called with every event so far.

    The GIL is released while waiting.

    Args:
        timeout: the most seconds to wait; ``None`` (the default) waits for as
            long as it takes.

    Returns:
        ``True`` when they have been, ``False`` when ``timeout`` passed first.

    Raises:
        RuntimeError: called by a listener (it would wait for itself).
        TypeError, ValueError: ``timeout`` is not a positive number of seconds.
    """

def _dropped_events() -> int:
    """Events dropped so far because the listeners fell behind."""

# ---------------------------------------------------------------------------
# Client

@disjoint_base
class Client:
    """A connection to one Redis deployment, shared by every lock made from it.

    The connection is multiplexed and reconnects by itself; a forked child
    process opens its own. Thread-safe: share one client between threads,
    tasks and locks. :class:`ferrolock.Client` subclasses this class and adds
    ``synchronized``.
    """

    def __new__(
        cls,
        url: str | None = None,
        *,
        connect_timeout: _Seconds | None = None,
        command_timeout: _Seconds | None = None,
        prefix: str | None = None,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> Self:
        """Check the options and connect to Redis now.

        The GIL is released while connecting, which takes at most
        ``connect_timeout``.

        Args:
            url: where Redis is: ``redis://[user:password@]host[:port][/db]``,
                ``rediss://...`` (TLS; ``#insecure`` at the end skips certificate
                checks), ``unix:///path/to/redis.sock?db=N``,
                ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
                (the master is asked of the Sentinels at every reconnect, so a
                failover is followed; the credentials are the data nodes'),
                ``redis+cluster://[user:password@]host:port[,host:port...]``
                (a Redis Cluster, seeded by any of its nodes;
                ``rediss+cluster://`` for TLS; wake-ups use sharded pub/sub), or
                ``[password@]host[:port]``. ``None`` (the default) means
                ``"redis://127.0.0.1:6379/0"``.
            connect_timeout: seconds allowed to connect (and later to
                reconnect); positive and finite. ``None`` means 5 seconds.
            command_timeout: seconds allowed for Redis to answer one command;
                positive and finite. ``None`` means 5 seconds.
            prefix: prepended to every key, to keep the locks of one
                application apart from others. ``None`` means ``"ferrolock:"``.
            ca_file: path of a PEM file of the certificate authorities to trust
                for a ``rediss://`` or ``rediss+cluster://`` URL; ``None`` (the default) uses the
                system's trusted roots.

        Raises:
            LockConfigurationError: the server answered, but does not fit the
                settings (not Redis, refused or unexpected credentials, no
                such database, plain TCP where TLS was asked, a Redis older
                than 6.2); the message says what to change.
            LockConnectionError: Redis cannot be reached within
                ``connect_timeout``.
            ValueError: the URL or an option is invalid, ``ca_file`` cannot be
                read, or ``ca_file`` is given without a ``rediss://`` URL.
            TypeError: an argument has the wrong type.
        """

    @property
    def prefix(self) -> str:
        """The prefix of every key this client uses (as given, unescaped)."""

    def lock(
        self,
        name: _Names,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
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

        Returns:
            A handle that does not hold the lock yet (unless ``token`` is given).

        Raises:
            TypeError: an argument has the wrong type.
            ValueError: an argument is out of range (see :class:`Lock`).
        """

    def multi_lock(
        self,
        names: Iterable[str],
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
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

        Returns:
            A handle that does not hold the locks yet (unless ``token`` is
            given). Its ``name`` is a tuple when there are several names.

        Raises:
            TypeError: ``names`` is not iterable, or an argument has the wrong
                type.
            ValueError: ``names`` is empty or repeats a name, an argument is
                out of range (see :class:`Lock`), or on a Redis Cluster the
                names fall in different hash slots (one script cannot span
                slots there).
        """

    def semaphore(
        self,
        name: str,
        permits: int,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
        fair: bool = False,
    ) -> Lock:
        """A handle on one permit of the semaphore ``name``: up to ``permits``
        holders at once.

        The handle is a :class:`Lock` in every respect (``acquire`` /
        ``release``, ``with`` / ``async with``, the watchdog, ``lost`` /
        ``on_lost`` / ``LockLost``, ``fence``, ``token`` to restore it in
        another process), except that up to ``permits`` handles hold the name
        at once. Each permit is its own lease: a holder that dies frees its
        permit after its own ttl, never sooner, and nobody else's permit is
        affected. A release wakes a waiter (no polling interval); with
        ``fair=True`` permits go to waiters in arrival order across processes.
        ``inspect()`` lists every holder with its metadata, fence and ttl.

        Every process must pass the same ``permits`` for one name while any
        permit is held; a different count raises ``ValueError`` at
        ``acquire``. Once no permit is held, the next count given applies.

        Args:
            name: the semaphore's name (its keys never collide with a Lock's
                or an RWMutex's of the same name).
            permits: how many holders at once, 1 to 1,000,000.
            ttl: see :class:`Lock`.
            auto_renew: see :class:`Lock`.
            blocking_timeout: see :class:`Lock`.
            retry: see :class:`Lock`.
            metadata: see :class:`Lock`.
            token: see :class:`Lock`.
            on_lost: see :class:`Lock`.
            fair: permits in arrival order across processes.

        Raises:
            ValueError: ``permits`` is 0 or above the limit, or an option is
                out of range (see :class:`Lock`).
            OverflowError: ``permits`` is negative.
        """

    def rwmutex(
        self,
        name: str,
        *,
        writer_preference: bool | None = None,
        fair: bool = False,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> RWMutex:
        """An :class:`RWMutex` on ``name``; the same as ``RWMutex(client, name, ...)``.

        Nothing is sent to Redis until a handle is acquired.
        """

    def force_release(self, name: str) -> bool:
        """Delete the lock ``name`` whoever holds it.

        For recovery by an operator: the holder is not told until its next
        renewal finds the lock gone (then its hold is lost). The GIL is
        released while waiting for Redis.

        Args:
            name: the lock name.

        Returns:
            ``True`` if the lock was held, ``False`` if it was free.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            TypeError: ``name`` is not a ``str``.
            ValueError: ``name`` is empty or too long.
        """

    def aforce_release(self, name: str) -> asyncio.Future[bool]:
        """Asyncio version of :meth:`force_release`.

        Args:
            name: the lock name.

        Returns:
            A future of ``True`` if the lock was held, ``False`` if it was free.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            TypeError: ``name`` is not a ``str`` (raised at the call).
            ValueError: ``name`` is empty or too long (raised at the call).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def scan(self, pattern: str | None = None) -> list[LockState]:
        """Every lock and RWMutex of this client's prefix whose name matches
        ``pattern``, held or waited for, sorted by name, then kind.

        Found with SCAN, never KEYS, so the server is not blocked (a name
        taken or freed meanwhile may or may not show); on a Redis Cluster on
        every master. Then each name's state is read with one script. The
        GIL is released while waiting for Redis.

        Args:
            pattern: a glob over names, as Redis's ``MATCH`` reads one:
                ``*``, ``?``, ``[abc]``, ``[a-z]``, ``[^a]``, and a backslash
                to match the next character itself. ``None`` (the default)
                matches every name.

        Returns:
            One :class:`LockState` per name and kind found.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            TypeError: ``pattern`` is not a ``str``.
            ValueError: ``pattern`` is empty.
        """

    def ascan(self, pattern: str | None = None) -> asyncio.Future[list[LockState]]:
        """Asyncio version of :meth:`scan`."""

    def describe(self, name: str) -> list[LockState]:
        """Everything stored under ``name``, as Redis sees it now: its state as
        a Lock and as an RWMutex, each only when held or waited for.

        Returns:
            An empty list when the name is free, else one or two
            :class:`LockState` (a Lock's first).

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            TypeError: ``name`` is not a ``str``.
            ValueError: ``name`` is empty or too long.
        """

    def adescribe(self, name: str) -> asyncio.Future[list[LockState]]:
        """Asyncio version of :meth:`describe`."""

    def inspect(self, name: str) -> LockInfo | None:
        """Who holds the lock ``name``, as Redis sees it now.

        The GIL is released while waiting for Redis.

        Args:
            name: the lock name.

        Returns:
            The holder's token, metadata, fence and remaining ttl, or ``None``
            when the lock is free.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            TypeError: ``name`` is not a ``str``.
            ValueError: ``name`` is empty or too long.
        """

    def ainspect(self, name: str) -> asyncio.Future[LockInfo | None]:
        """Asyncio version of :meth:`inspect`.

        Args:
            name: the lock name.

        Returns:
            A future of the holder's :class:`LockInfo`, or of ``None`` when the
            lock is free.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            TypeError: ``name`` is not a ``str`` (raised at the call).
            ValueError: ``name`` is empty or too long (raised at the call).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

# ---------------------------------------------------------------------------
# Lock

@final
class Lock:
    """A handle on an exclusive lock over one name, or over several names taken
    all-or-nothing.

    Ownership belongs to the handle, not to a thread or task: any thread may
    release a hold that another thread acquired through the same handle, and
    a handle holds at most one hold at a time, so a second ``acquire`` on a
    handle that holds (from any thread or task) waits until it is released,
    like :class:`threading.Lock` (the lock is not re-entrant). Use one handle
    per holder to exclude each other, e.g. one per thread or per call.

    While held, a background watchdog renews the hold every ``ttl / 3`` (with
    ``auto_renew``) and reports it lost when it ends behind the holder's back:
    :attr:`lost` turns ``True``, ``on_lost`` is called, and the enclosing
    ``with`` / ``async with`` block ends in :class:`LockLost`.

    Use as ``with lock:`` or ``async with lock:``: entering waits up to
    ``blocking_timeout`` (forever by default) and raises
    :class:`LockNotAcquired` when the lock was not taken; leaving releases it
    and raises :class:`LockLost` if the hold was lost meanwhile.
    """

    def __new__(
        cls,
        client: Client,
        name: _Names,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
        fair: bool = False,
    ) -> Self:
        """Make a handle on the lock ``name``; nothing is sent to Redis yet.

        Args:
            client: the Redis connection to use.
            name: the lock name; or a list or tuple of distinct names for a
                multi-lock, taken all-or-nothing (a list of one name is a plain
                lock).
            ttl: seconds a hold lasts without renewal, between 0.001 and
                366 days; ``None`` means 30 seconds.
            auto_renew: when ``True`` (the default) the hold is renewed every
                ``ttl / 3`` for as long as it is held; when ``False`` it
                expires after ``ttl`` and is then reported lost.
            blocking_timeout: the most seconds that ``with`` / ``async with``
                wait to take the lock (non-negative and finite; 0 means a
                single attempt); ``None`` (the default) waits forever. Does not
                apply to :meth:`acquire`.
            retry: how long to wait between attempts while the lock is busy;
                ``None`` means ``Retry.exponential(0.002, 0.1)``.
            metadata: text stored beside the owner token (at most 65536 bytes),
                readable by anyone with :meth:`inspect`; ``None`` for none.
            token: the owner token of a hold taken elsewhere (another handle,
                process or machine), 1 to 512 bytes. The new handle then
                starts out holding it without any call to Redis: it can
                :meth:`release` or :meth:`extend` it, and :meth:`acquire`
                adopts the hold (keeping its fence) and starts renewing it.
                A restored hold is not renewed, and ``on_lost`` is not called
                for it, until it is adopted. ``None`` (the default) for a
                handle that holds nothing.
            on_lost: called once, with no arguments, when a hold of this
                handle is lost. It runs on a background thread (neither the
                caller's thread nor the event loop's), with the GIL; an
                exception it raises goes to :func:`sys.unraisablehook`.
            fair: take the lock in arrival order, across processes. Waiters
                queue in Redis. A release hands the lock straight to the oldest
                live waiter, so no newcomer can barge in. A waiter that dies or
                gives up loses its place; a dead waiter keeps it for at most
                min(ttl, 2 s). Use it with one name, and on every handle of
                that name.

        Raises:
            TypeError: an argument has the wrong type (for example a ``bool``
                ttl, or an ``on_lost`` that is not callable).
            ValueError: a name is empty, too long or repeated, an option is
                out of range, or ``fair`` is asked of a multi-lock.
        """

    # -- acquire / release --------------------------------------------------

    def acquire(self, blocking: bool = True, timeout: _Seconds | None = None) -> bool:
        """Take the lock, with the semantics of :meth:`threading.Lock.acquire`.

        The GIL is released while waiting; the wait wakes every 50 ms to check
        for signals, so Ctrl-C raises ``KeyboardInterrupt`` promptly and leaves
        no lock behind (a hold granted in the meantime is released first).

        Args:
            blocking: when ``False``, make one attempt and return at once.
            timeout: the most seconds to wait when ``blocking``; ``-1`` or
                ``None`` (the default) waits forever; ``0`` makes one attempt.
                Must be ``None`` or ``-1`` when ``blocking`` is ``False``.

        Returns:
            ``True`` once the lock is taken; ``False`` when ``timeout`` passed,
            ``blocking`` is ``False`` and the lock is busy, or the
            :class:`Retry` strategy ran out of attempts.

        Raises:
            ValueError: a ``timeout`` with ``blocking=False``; a negative
                ``timeout`` other than ``-1``; an infinite or NaN ``timeout``.
            TypeError: ``blocking`` is not a ``bool``, or ``timeout`` is not
                a number or ``None``.
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            KeyboardInterrupt: Ctrl-C while waiting (no lock is left behind).
        """

    def aacquire(self, blocking: bool = True, timeout: _Seconds | None = None) -> asyncio.Future[bool]:
        """Asyncio version of :meth:`acquire`.

        Cancelling the future (or the task awaiting it) leaves no lock behind,
        even when Redis had already granted it.

        Args:
            blocking: when ``False``, make one attempt only.
            timeout: as for :meth:`acquire`.

        Returns:
            A future of ``True`` once the lock is taken, or ``False`` (as for
            :meth:`acquire`).

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            ValueError: invalid ``timeout`` (raised at the call).
            TypeError: an argument has the wrong type (raised at the call).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def release(self) -> None:
        """Give the lock up and stop renewing it.

        May be called from any thread, not only the one that acquired. The
        handle no longer holds afterwards, whatever the outcome (if Redis
        cannot be reached, the key expires after its ttl, no longer renewed).
        The GIL is released while waiting for Redis.

        Raises:
            LockNotOwned: this handle holds nothing, or its hold had already
                expired or been taken over (the other holder is left alone;
                the hold is then reported lost).
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def arelease(self) -> asyncio.Future[None]:
        """Asyncio version of :meth:`release`.

        The release goes through even when the awaiting task is cancelled.

        Returns:
            A future that resolves once the lock is released.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            LockNotOwned: as for :meth:`release` (when awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def extend(self, ttl: _Seconds | None = None) -> None:
        """Push the expiry of the hold to ``ttl`` seconds from now.

        Later renewals keep this ttl, and the watchdog re-plans its next
        renewal for it. The GIL is released while waiting for Redis.

        Args:
            ttl: the new time to live, in seconds, between 0.001 and 366 days;
                ``None`` (the default) means the handle's ``ttl``.

        Raises:
            LockNotOwned: this handle holds nothing, its hold was lost, or
                Redis shows it expired or was taken over (the hold is then
                reported lost; it is not brought back).
            ValueError: ``ttl`` is out of range.
            TypeError: ``ttl`` is not a number or ``None``.
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def aextend(self, ttl: _Seconds | None = None) -> asyncio.Future[None]:
        """Asyncio version of :meth:`extend`.

        Args:
            ttl: as for :meth:`extend`.

        Returns:
            A future that resolves once the expiry is pushed.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            ValueError: ``ttl`` is out of range (raised at the call).
            TypeError: ``ttl`` is not a number or ``None`` (raised at the call).
            LockNotOwned: as for :meth:`extend` (when awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    # -- state, as Redis sees it ----------------------------------------------

    def locked(self) -> bool:
        """Whether anyone holds the lock now (any of its names, for a multi-lock).

        Asks Redis; the GIL is released while waiting.

        Returns:
            ``True`` when some holder, this handle or another, holds a name.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def alocked(self) -> asyncio.Future[bool]:
        """Asyncio version of :meth:`locked`.

        Returns:
            A future of whether anyone holds the lock now.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def owned(self) -> bool:
        """Whether this handle holds the lock now, as Redis sees it.

        Asks Redis; the GIL is released while waiting.

        Returns:
            ``True`` when this handle's token holds every name of the lock.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def aowned(self) -> asyncio.Future[bool]:
        """Asyncio version of :meth:`owned`.

        Returns:
            A future of whether this handle holds the lock now.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def ttl(self) -> float | None:
        """Seconds left before this handle's hold expires, as Redis sees it now.

        Asks Redis; the GIL is released while waiting.

        Returns:
            The remaining time in seconds (the least over the names of a
            multi-lock, millisecond precision), or ``None`` when this handle
            does not hold the lock.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def attl(self) -> asyncio.Future[float | None]:
        """Asyncio version of :meth:`ttl`.

        Returns:
            A future of the seconds left on this handle's hold, or ``None``.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def wait_lost(self) -> asyncio.Future[bool]:
        """Resolve when the current hold ends, lost or released.

        Returns:
            ``True`` when the hold was lost (renewal failed, the ttl ran out, or
            it was taken over), ``False`` when it was released. Resolves at
            once with ``False`` when the handle holds nothing. Waiting costs no
            round trip.
        """

    def inspect(self) -> list[LockInfo | None]:
        """Who holds each name of this lock, as Redis sees it now.

        Asks Redis; the GIL is released while waiting.

        Returns:
            One entry per name, in the order of :attr:`names`: the holder's
            :class:`LockInfo`, or ``None`` for a free name.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    # -- local state (no call to Redis) -----------------------------------

    @property
    def name(self) -> str | tuple[str, ...]:
        """The lock name: a ``str`` for a single lock, a ``tuple`` of the
        names for a multi-lock (one with two names or more)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every name of the lock, always as a tuple (one item for a single lock)."""

    @property
    def token(self) -> str | None:
        """The owner token of this handle's current hold (32 hex digits when
        ferrolock made it), or ``None`` when it holds nothing.

        Pass it as ``Lock(client, name, token=...)`` to release or adopt the
        hold from another handle, process or machine.
        """

    @property
    def fence(self) -> int | None:
        """The fencing token of the current hold, or ``None`` when this handle
        holds nothing or holds a restored hold not yet adopted.

        Strictly increasing per name: every hold gets a fence greater than
        every earlier one for that name (the Redis server's time in
        microseconds when taken, kept above the last fence on record). A
        multi-lock's hold has one fence for all of its names. Hand it to the
        resource you protect so that it can refuse writes from a stale holder.
        """

    @property
    def lost(self) -> bool:
        """Whether the current, or else the latest, hold of this handle was lost.

        Turns ``True`` as soon as the hold's validity has run out without a
        renewal, before the watchdog reports it; stays ``True`` after the
        release, until the handle acquires again. ``False`` after a hold that
        ended by a successful release.
        """

    @property
    def client(self) -> Client:
        """The client this lock was made from."""

    @property
    def kind(self) -> Literal["lock", "read", "write"]:
        """``"lock"``, or ``"read"`` / ``"write"`` for an RWMutex's handles."""

    @property
    def fair(self) -> bool:
        """Whether it takes its turn in arrival order (a fair Lock, or a
        handle of a fair RWMutex)."""

    # -- context managers ----------------------------------------------------

    def __enter__(self) -> Self:
        """Take the lock, waiting up to ``blocking_timeout``.

        Blocks like :meth:`acquire`: the GIL is released, and Ctrl-C raises
        ``KeyboardInterrupt`` within 50 ms, leaving no lock behind.

        Returns:
            This lock.

        Raises:
            LockNotAcquired: the lock was not taken within ``blocking_timeout``,
                or the :class:`Retry` strategy ran out of attempts.
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            KeyboardInterrupt: Ctrl-C while waiting.
        """

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]:
        """Release the lock; never suppresses the block's exception.

        The GIL is released while waiting for Redis.

        Args:
            exc_type: the type of the exception that ended the block, or ``None``.
            exc: that exception, or ``None``.
            tb: its traceback, or ``None``.

        Returns:
            ``False``.

        Raises:
            LockLost: the hold was lost while the block ran and the block
                raised nothing itself (its own exception propagates instead,
                noted with the loss).
            LockNotOwned: the handle held nothing any more at the end of the
                block (it was released inside the block).
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def __aenter__(self) -> asyncio.Future[Self]:
        """Take the lock without blocking the event loop, waiting up to
        ``blocking_timeout``.

        Until the block ends, a loss of the hold cancels the task running the
        block (``CancelledError`` inside it); ``__aexit__`` then raises
        :class:`LockLost` instead. Cancelling the task while it waits to enter
        leaves no lock behind.

        Returns:
            A future of this lock.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            LockNotAcquired: the lock was not taken within ``blocking_timeout``,
                or the :class:`Retry` strategy ran out of attempts (when
                awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        _exc: BaseException | None = None,
        _tb: TracebackType | None = None,
    ) -> asyncio.Future[Literal[False]]:
        """Release the lock; never suppresses the block's exception.

        The release goes through even when the task is cancelled meanwhile.
        If the block was cancelled because the hold was lost, that
        cancellation is taken back (``Task.uncancel`` on Python 3.11+) and
        :class:`LockLost` is raised in its place; a cancellation from
        elsewhere propagates unchanged.

        Args:
            exc_type: the type of the exception that ended the block, or ``None``.
            _exc: that exception, or ``None``.
            _tb: its traceback, or ``None``.

        Returns:
            A future of ``False``.

        Raises:
            RuntimeError: no event loop is running (raised at the call).
            LockLost: the hold was lost while the block ran (when awaited).
            LockNotOwned: the handle held nothing any more at the end of the
                block (it was released inside the block) (when awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

# ---------------------------------------------------------------------------
# RWMutex

@final
class RWMutex:
    """A read/write mutex: any number of readers together, or one writer.

    ``read()`` and ``write()`` return :class:`Lock` handles, which wait, hold,
    renew, report loss and cancel exactly as an exclusive ``Lock`` does.
    Readers carry no fence (``fence`` is ``None``); writers get one from the
    same strictly increasing sequence as a ``Lock``.

    Each reader has its own expiry, measured by the Redis server's clock. A
    reader whose process dies stops counting after its own ttl, even while
    other readers keep renewing theirs.

    With ``writer_preference`` (the default), a writer that has to wait for
    readers leaves an intent. New readers then wait behind it, so a steady
    stream of readers cannot starve a writer. The intent expires by itself
    after the writer's ttl if the waiting writer dies, and is taken back when
    the writer stops waiting (timeout, retry exhausted, cancellation,
    Ctrl-C). With ``writer_preference=False``, readers join whatever writers
    wait.

    With ``fair=True``, readers and writers take turns in arrival order,
    across processes, through a queue in Redis. A writer's release lets in
    every reader queued before the next writer, or else that writer; the last
    reader out lets in the next writer. The release script hands the mutex
    over itself and names the new holders in the wake-up, so nobody can barge
    in between. A waiter that dies loses its place after
    ``min(ttl, 2 s)``. Fairness belongs to the whole mutex: every process
    using the name must construct it with ``fair=True``.

    All keys of one mutex share one Redis Cluster hash tag.
    """

    def __new__(
        cls,
        client: Client,
        name: str,
        *,
        writer_preference: bool | None = None,
        fair: bool = False,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Self:
        """Make the mutex; the handle options become every handle's defaults.

        Args:
            client: the :class:`Client` to use.
            name: the mutex name: a non-empty ``str`` of at most 4096 bytes.
            writer_preference: hold new readers back while a writer waits
                (default ``True``).
            fair: serve readers and writers in arrival order (see above).
            ttl: see :class:`Lock`.
            auto_renew: see :class:`Lock`.
            blocking_timeout: see :class:`Lock`.
            retry: see :class:`Lock`.
            metadata: see :class:`Lock` (stored with writers only).
            on_lost: see :class:`Lock`.

        Raises:
            TypeError: an argument has the wrong type, an unknown keyword was
                given, or ``token`` was given here rather than to ``read()`` /
                ``write()``.
            ValueError: an argument is out of range, or ``fair=True`` is
                combined with ``writer_preference=False``.
        """

    @property
    def name(self) -> str:
        """The mutex name."""

    @property
    def fair(self) -> bool:
        """Whether readers and writers are served in arrival order."""

    @property
    def writer_preference(self) -> bool:
        """Whether a waiting writer holds new readers back."""

    def read(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock:
        """A read handle, shared with other readers, not holding yet.

        Keyword arguments override the mutex's defaults for this handle.
        """

    def write(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock:
        """A write handle, exclusive against readers and writers, not holding yet.

        Keyword arguments override the mutex's defaults for this handle.
        """

    def try_read(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock | None:
        """One attempt to read now: a read handle already holding, or ``None``.

        The GIL is released during the single round trip.
        """

    def try_write(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock | None:
        """One attempt to write now: a write handle already holding, or ``None``.

        Leaves no intent behind when it fails.
        """

    def readers(self) -> int:
        """Live readers now (each counts until its own expiry). Releases the GIL."""

    def areaders(self) -> asyncio.Future[int]:
        """Like :meth:`readers`, awaitable."""

    def force_release(self) -> bool:
        """End every hold of this mutex, the writer's and every reader's,
        whoever holds them; a writer's intent goes too. For recovery by an
        operator: the holders find out at their next renewal (then their hold
        is lost); queued waiters keep their places and are woken. Releases
        the GIL.

        Returns:
            ``True`` if anyone held it.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """

    def aforce_release(self) -> asyncio.Future[bool]:
        """Asyncio version of :meth:`force_release`."""

    def locked(self) -> bool:
        """Held by a writer or by any live reader. Releases the GIL."""

    def alocked(self) -> asyncio.Future[bool]:
        """Like :meth:`locked`, awaitable."""

def _at_exit() -> None:
    """Registered with ``atexit``: stop calling into the exiting interpreter."""

def _debug_stats() -> dict[str, int]:
    """Diagnostics of this process: ``watchdogs`` (live watchdog tasks) and
    ``handed_over`` (holds taken straight from a fair release's wake-up)."""

@final
class Leader:
    """The leader of an election, as Redis has it now."""

    @property
    def value(self) -> str:
        """The value the leader campaigned with, or proclaimed since."""
    @property
    def term(self) -> int:
        """The term number: strictly greater than every earlier leader's."""
    @property
    def ttl(self) -> float | None:
        """Seconds left on the term unless renewed (None: no expiry)."""
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@final
class ElectionObserver:
    """Follows an election: each call returns the leader (or None) once it changed."""

    def next(self) -> Leader | None:
        """Waits for the next change (the current leader the first time)."""
    def anext(self) -> asyncio.Future[Leader | None]: ...

@final
class Election:
    """The core of :class:`ferrolock.Election` (use ``client.election(name)``)."""

    def __new__(cls, client: Client, name: str) -> Election: ...
    @property
    def name(self) -> str: ...
    def candidate(
        self,
        value: str,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
        fair: bool = False,
    ) -> Lock:
        """A campaigner for ``value``: acquiring the handle campaigns, its fence is the term number."""
    def leader(self) -> Leader | None: ...
    def aleader(self) -> asyncio.Future[Leader | None]: ...
    def proclaim(self, term: Lock, value: str) -> None: ...
    def aproclaim(self, term: Lock, value: str) -> asyncio.Future[None]: ...
    def observer(self) -> ElectionObserver: ...
