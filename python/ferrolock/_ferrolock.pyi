"""Types of ``ferrolock._ferrolock``, the native (Rust/PyO3) core of ferrolock.

Signatures, types and comments are written here by hand; ``python -m
mypy.stubtest ferrolock._ferrolock`` checks them against the built module.
Every docstring is generated: written once as a doc comment in the Rust
bindings (``src/py/``), it is copied from the built module by ``make stubs``
(``scripts/gen_stubs.py``), and ``tests/docs/test_stubs.py`` fails when they differ.
Edit a docstring in ``src/py/``, never here.
"""

import contextvars
import os
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import Any, ClassVar, Generic, Literal, TypeVar, final, overload

from typing_extensions import Self, TypeAlias, TypedDict, Unpack, disjoint_base
from typing_extensions import TypeVar as _DefaultTypeVar

__version__: str
"""The version of the ferrolock package (from ``Cargo.toml``)."""

__all__ = [
    "LockInfo",
    "_at_exit",
    "_debug_stats",
    "Client",
    "Lock",
    "RWMutex",
    "Retry",
    "Operation",
    "__version__",
    "LockState",
    "LockEvent",
    "add_listener",
    "remove_listener",
    "flush_events",
    "_dropped_events",
    "_semaphore",
    "_plain_lock",
    "_plain_force_release",
    "_plain_inspect",
    "_handle_options",
    "Election",
    "ElectionObserver",
    "Leader",
]

_Seconds: TypeAlias = float
"""A number of seconds; ``int`` is accepted too."""

_Names: TypeAlias = str | list[str] | tuple[str, ...]
"""One lock name, or a list or tuple of names for a multi-lock."""

# handle options: generated from src/py/options.rs by `make options`; do not edit

class _CommonOptions(TypedDict, total=False):
    """The keyword arguments every handle takes."""

    ttl: _Seconds | None
    auto_renew: bool
    blocking_timeout: _Seconds | None
    retry: Retry | None
    metadata: str | None
    on_lost: Callable[[], object] | None
    max_hold: _Seconds | None

class _LockOptions(_CommonOptions, total=False):
    """The keyword arguments of ``Lock(...)``, ``Client.lock``, ``multi_lock``, ``semaphore``, ``synchronized``."""

    token: str | None
    fair: bool

class _RWMutexOptions(_CommonOptions, total=False):
    """The keyword arguments of ``RWMutex(...)``, ``Client.rwmutex``."""

    fair: bool
    writer_preference: bool | None

class _HandleOptions(_CommonOptions, total=False):
    """The keyword arguments of ``RWMutex.read``, ``write``, ``try_read``, ``try_write``."""

    token: str | None

# end of the generated handle options

# The exceptions are Python's: ferrolock/exceptions.py (the core raises those classes).

# ---------------------------------------------------------------------------
# Retry

@final
class Retry:
    """How long to wait between attempts to take a busy lock.

    Immutable. Made only with the static constructors :meth:`none`,
    :meth:`fixed`, :meth:`linear` and :meth:`exponential` (``Retry()`` raises
    ``TypeError``). Two ``Retry`` objects are equal when they describe the same
    strategy, and equal ones hash alike, so a ``Retry`` can be a dict key or
    a set member.

    Whatever the strategy, a wait never outlasts the remaining ttl of the
    current holder, nor the deadline of the acquire. A lock made without
    ``retry=`` uses ``Retry.exponential(0.002, 0.1, attempts=None, jitter=True)``.

    Waiting is woken by the holder's release (pub/sub) and the retry's waits
    are the safety net: after the first failed attempt the waiter subscribes
    to the lock's wake-up channel and tries once more at once (a release in
    between is not missed); later attempts come on a wake-up, or when the
    safety net runs out (capped by the holder's remaining ttl): 0.5 to 1 s
    with the default strategy, the strategy's longest wait with one given. A
    subscribed waiter skips the ramp from the first, short waits, which only
    a waiter that could not subscribe walks, polling.

    ``attempts`` counts every attempt, the first one included: when that many
    have failed the acquire gives up (``acquire`` returns ``False``, ``with``
    raises :class:`LockNotAcquired` saying the retry gave up), even if its
    timeout has not passed: the attempts and the wait are two limits, and the
    first one reached ends the acquire. So ``Retry.none()`` (a single attempt)
    with ``acquire(timeout=2)`` returns ``False`` at once on a busy lock; that
    is what it asks for (a wait that should try again needs a strategy that
    waits, such as :meth:`fixed`).
    """

    def __new__(cls) -> Self: ...
    def __hash__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
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

    def __new__(
        cls, name: str, token: str, metadata: str | None = None, fence: int = 0, ttl: float | None = None
    ) -> Self: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    @property
    def name(self) -> str:
        """The lock name (without the client's prefix)."""

    @property
    def token(self) -> str:
        """The holder's owner token (32 hex digits for tokens ferrolock made)."""

    @property
    def metadata(self) -> str | None:
        """The ``metadata`` the holder gave its ``Lock`` (``""`` when it gave
        ``""``), or ``None`` when it gave none.
        """

    @property
    def fence(self) -> int:
        """The fencing token of the hold (see :attr:`Lock.fence`); 0 when Redis
        has none: a plain hold's, or a Lock's before its first renewal (or
        :meth:`Lock.extend`) records the fence its take by a transaction gave.
        """

    @property
    def ttl(self) -> float | None:
        """Seconds left before the hold expires (millisecond precision), or
        ``None`` when the key has no expiry set.
        """

# ---------------------------------------------------------------------------
# Client

@final
class LockState:
    """One name used as one kind of primitive, as :meth:`Client.scan` or
    :meth:`Client.describe` found it in Redis.

    A read-only snapshot. A name may be used as several kinds of primitive
    at once (a Lock, an RWMutex, a semaphore, an election: their keys never
    overlap): then it has one state of each kind.
    Instances are made by ferrolock only; two snapshots are equal when every
    field is.
    """

    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    @property
    def prefix(self) -> str:
        """The key prefix it lives under: the client's own, unless listed with
        ``scan(all_prefixes=True)``.
        """

    @property
    def name(self) -> str:
        """The name (without the prefix)."""

    @property
    def kind(self) -> Literal["lock", "rwmutex", "semaphore", "election"]:
        """``"lock"`` (a :class:`Lock`, fair or not), ``"rwmutex"``,
        ``"semaphore"`` or ``"election"`` (from the key layout table).
        """

    @property
    def holder(self) -> LockInfo | None:
        """A Lock's holder, an RWMutex's writer, or an election's leader (its
        value as ``metadata``, its term number as ``fence``); ``None`` when
        there is none (a semaphore's holders are in :attr:`holders`).
        """

    @property
    def readers(self) -> list[tuple[str, float]]:
        """An RWMutex's live readers: (token, seconds left) each."""

    @property
    def holders(self) -> list[LockInfo]:
        """Every live hold, whatever the kind: :attr:`holder` first, then an
        RWMutex's readers (``metadata`` ``None``, ``fence`` 0) and a
        semaphore's permit holders (token, metadata, fence, seconds left),
        earliest expiry first. Remove one with
        ``Client.force_release(name, token=...)``.
        """

    @property
    def limit(self) -> int | None:
        """How many may hold at once where Redis stores it (a semaphore's
        permits, while any is held), else ``None``.
        """

    @property
    def queued_readers(self) -> int:
        """Readers waiting in a fair RWMutex's queue (live ones)."""

    @property
    def queued_writers(self) -> int:
        """Writers waiting in a fair queue (a fair Lock's, a fair semaphore's
        waiters and an election's campaigners count here).
        """

    @property
    def writer_intent(self) -> float | None:
        """Seconds left on a waiting writer's intent (an RWMutex with writer
        preference holding new readers back), or ``None``.
        """

    @property
    def subscribed(self) -> int:
        """Connections subscribed to its wake-ups while it is held: one per
        process (and client) with a waiter, however many of its threads or
        tasks wait; a waiter that polls (its subscription failed) is not
        counted, nor is any where the Redis user may not run ``PUBSUB``.
        """

    @property
    def waiters(self) -> int:
        """How many wait, as far as Redis can tell: the live waiters of the
        fair queues plus one for a writer's intent, or, where more,
        :attr:`subscribed`. A non-fair primitive keeps no queue, so its
        waiters count by process: three threads of one process waiting for a
        Lock count as 1.
        """

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
                                                      ``"taken_over"`` (gone from Redis),
                                                      ``"unreachable"`` or ``"unreplicated"``
                                                      (renewals not acknowledged by the
                                                      replicas, ``replica_policy="fail"``)
    ``renewed``         the renewal's round trip      ``None``
    ``woken``           ``None``                      ``"pubsub"`` (a release's message),
                                                      ``"handover"`` (a fair release named
                                                      this waiter) or ``"poll"`` (no message:
                                                      its retry delay ran out, or its
                                                      subscription dropped)
    ``unreplicated``    ``None``                      the step fewer replicas than the client's
                                                      ``replicas`` acknowledged in time:
                                                      ``"acquire"``, ``"renewal"`` or
                                                      ``"extend"`` (whatever ``replica_policy``
                                                      then did with it)
    ==================  ============================  =========================================
    """

    @property
    def kind(
        self,
    ) -> Literal["acquired", "acquire_failed", "released", "lost", "renewed", "woken", "unreplicated"]:
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
        and for every other kind of event).
        """

    @property
    def hold(self) -> int | None:
        """Tells apart the holds alive at one time in this process: the same
        number in a hold's ``acquired``, ``renewed``, ``released``, ``lost``
        and ``unreplicated`` events. ``None`` for an acquire that took nothing,
        for ``woken``, and for an ``unreplicated`` grant that was undone.
        """

    @property
    def time(self) -> float:
        """When it happened, in seconds since the epoch (as :func:`time.time`)."""

    @property
    def context(self) -> contextvars.Context | None:
        """The :class:`contextvars.Context` of the call the event came from (an
        acquire's, sync or async, as it was when the call was made), or
        ``None`` (a renewal, a loss found by the watchdog).
        """

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
    """Events dropped because the listeners fell more than 65536 behind."""

# ---------------------------------------------------------------------------
# Client

@disjoint_base
class Client:
    """A connection to one Redis deployment, shared by every lock made from it.

    The connection is multiplexed and reconnects by itself; a forked child
    process opens its own. Thread-safe: share one client between threads,
    tasks and locks. :class:`ferrolock.Client` subclasses this class and adds
    ``synchronized``.

    Check the options; no network I/O.

    Making a client never connects, so one can be built at import (a Django
    settings module, a Celery app) while Redis is down. The first use
    connects and checks the server, and raises what that found (the errors
    below); :meth:`connect` does that now. :meth:`close` (or the end of a
    ``with`` / ``async with`` block) closes its connections.

    Args:
        url: where Redis is: ``redis://[user:password@]host[:port][/db]``,
            ``rediss://...`` (TLS; ``#insecure`` at the end skips certificate
            checks), ``unix:///path/to/redis.sock?db=N``,
            ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
            (the master is asked of the Sentinels at every reconnect and every
            second in use, so a failover is followed; the credentials are the
            data nodes'), ``rediss+sentinel://...`` (TLS to the Sentinels and
            the data nodes); either takes the Sentinels' own ACL user as
            ``?sentinel_username=USER&sentinel_password=PASSWORD``
            (percent-encoded),
            ``redis+cluster://[user:password@]host:port[,host:port...]``
            (a Redis Cluster, seeded by any of its nodes;
            ``rediss+cluster://`` for TLS; wake-ups use sharded pub/sub), or
            ``[password@]host[:port]``. A ``redis://``, ``rediss://`` or
            ``unix://`` URL's query takes redis-py's parameters (``db``,
            ``socket_timeout``, ``client_name``, ``ssl_cert_reqs``, ...):
            each is honoured, not used (it shapes only redis-py's own
            connections: the reason is logged) or refused by name, see "URL
            query parameters" in the API reference.
            ``None`` (the default) means
            ``"redis://127.0.0.1:6379/0"``. A list of URLs of independent
            masters (three or five, each a server or a Sentinel service)
            makes a quorum: a lock is held while a majority of them hold it
            (Redlock); Lock (not fair), multi_lock and RWMutex (not fair)
            are supported on it, and the other primitives raise
            ``ValueError`` naming that.
        connect_timeout: seconds allowed to connect (and later to
            reconnect); positive and finite. ``None`` means 5 seconds.
        command_timeout: seconds allowed for Redis to answer one command;
            positive and finite. ``None`` means 5 seconds.
        prefix: prepended to every key, to keep the locks of one
            application apart from others. ``None`` means ``"ferrolock:"``.
        ca_file: path of a PEM file of the certificate authorities to trust
            for a ``rediss://``, ``rediss+cluster://`` or ``rediss+sentinel://``
            URL (Sentinels and data nodes alike); ``None`` (the default) uses the
            system's trusted roots.
        replicas: how many replicas must acknowledge every grant (a lock,
            a read or write hold, a permit, a term) and every renewal or
            extend before it counts: ``WAIT replicas replica_timeout`` is sent
            right behind each such script on the same connection. ``None``
            (the default) or ``0`` turns it off. See ``docs/reliability.md``
            for what it guarantees, and what it does not.
        replica_timeout: seconds the server waits for those replicas;
            at least 0.001, and shorter than ``command_timeout``. ``None``
            means 0.1 seconds.
        replica_policy: what happens when fewer replicas acknowledge in time.
            ``"fail"`` (``None``, the default): a grant is undone (nothing is
            left in Redis) and the acquire raises :class:`LockNotReplicated`;
            a renewal does not count (the hold keeps its last acknowledged
            validity, the watchdog retries, and the hold is lost if none is
            acknowledged in time); ``extend`` raises :class:`LockNotReplicated`.
            ``"warn"``: the step counts, a warning is logged (at most one per
            10 s) and an ``unreplicated`` :class:`LockEvent` is told.
        replica_fsync: wait until the replicas have also written each step
            to their append-only file (``WAITAOF 0 replicas replica_timeout``),
            not only received it. Needs Redis 7.2 or newer and ``replicas``
            of 1 or more.

    Raises:
        ValueError: the URL or an option is invalid, ``ca_file`` cannot be
            read, or ``ca_file`` is given without a ``rediss://`` URL;
            ``replicas`` is negative, ``replica_timeout`` is under 0.001 s or
            not shorter than ``command_timeout``, ``replica_policy`` is neither
            ``"fail"`` nor ``"warn"``, or ``replica_fsync`` is set without
            ``replicas``.
        TypeError: an argument has the wrong type.
    """

    def __new__(
        cls,
        url: str | Sequence[str] | None = None,
        *,
        connect_timeout: _Seconds | None = None,
        command_timeout: _Seconds | None = None,
        prefix: str | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        replicas: int | None = None,
        replica_timeout: _Seconds | None = None,
        replica_policy: Literal["fail", "warn"] | None = None,
        replica_fsync: bool = False,
    ) -> Self: ...
    @property
    def prefix(self) -> str:
        """The prefix of every key this client uses (as given, unescaped)."""

    @property
    def masters(self) -> int:
        """How many independent masters this client locks on: 1, or the length
        of the list of URLs it was given (a quorum).
        """
    def connect(self) -> None:
        """Connect to Redis and check the server now, rather than at the first
        use; nothing is done when this process has connected already.

        The GIL is released while connecting, which takes at most
        ``connect_timeout`` (a quorum: until a majority of its masters are
        connected).

        Raises:
            LockConnectionError: Redis cannot be reached within
                ``connect_timeout``, or it refused the credentials.
            LockConfigurationError: the server answered but does not fit the
                settings (see its documentation), including
                ``replica_fsync=True`` on a server older than Redis 7.2, or two
                URLs of one server in a quorum.
            ValueError: the client is closed.
        """
    def aconnect(self) -> Operation[None]:
        """Asyncio version of :meth:`connect`.

        Returns:
            A future of ``None``, done once connected.

        Raises:
            RuntimeError: awaited with no event loop running.
            LockConnectionError: as :meth:`connect` (when awaited).
            LockConfigurationError: as :meth:`connect` (when awaited).
            ValueError: the client is closed (when awaited).
        """
    def close(self) -> None:
        """Close this client's connections (commands, wake-ups) now, rather
        than when it is garbage-collected; every later use raises
        ``ValueError``. Closing twice does nothing more.

        Holds taken through this client are not released: their renewals
        fail from then on, so they end at their ttl.
        """
    def aclose(self) -> Operation[None]:
        """Asyncio version of :meth:`close`.

        Returns:
            A future of ``None``, done once closed.
        """
    def __enter__(self) -> Self:
        """Returns the client; the end of the ``with`` block closes it (:meth:`close`)."""
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]:
        """Closes the client (:meth:`close`); an exception of the block propagates."""
    def __aenter__(self) -> Operation[Self]:
        """Returns the client; the end of the ``async with`` block closes it (:meth:`aclose`)."""
    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Operation[Literal[False]]:
        """Closes the client (:meth:`aclose`); an exception of the block propagates."""
    def force_release(self, name: str, token: str | None = None) -> bool:
        """End the holds of ``name`` whoever holds them; with ``token``, only
        the hold of that token.

        For recovery by an operator: the holder is not told until its next
        renewal finds its hold gone (then its hold is lost). Every kind of
        primitive stored under the name is covered: a Lock (plain or fair),
        an RWMutex's writer and readers, a semaphore's permit holders, an
        election's term (its leader is deposed). With ``token`` (the
        holder's, as :meth:`inspect` or :meth:`describe` showed it) the check
        and the delete are one atomic step in Redis, so a hold taken since by
        someone else is never removed. Waiters are woken (the next in line
        proceeds) and an election's watchers are told, as by a release. On a
        quorum (Locks only), every master's copy of the hold goes (of that
        token's hold only, when given). The GIL is released while waiting
        for Redis.

        Args:
            name: the lock name.
            token: remove only this holder's hold (``None``: whoever holds).

        Returns:
            ``True`` if a hold was removed; ``False`` if nothing was held, or
            (with ``token``) no hold of that token was.

        Raises:
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            TypeError: ``name`` or ``token`` is not a ``str``.
            ValueError: ``name`` is empty or too long; ``token`` is empty or too long.
        """

    def aforce_release(self, name: str, token: str | None = None) -> Operation[bool]:
        """Asyncio version of :meth:`force_release`.

        Args:
            name: the lock name.
            token: remove only this holder's hold (``None``: whoever holds).

        Returns:
            A future of ``True`` if a hold was removed, ``False`` if the lock
            was free or (with ``token``) held by another token.

        Raises:
            RuntimeError: awaited with no event loop running.
            TypeError: ``name`` or ``token`` is not a ``str``, raised at the call (before any await).
            ValueError: ``name`` is empty or too long, raised at the call (before any await);
                ``token`` is empty or too long (when awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def inspect(self, name: str) -> LockInfo | None:
        """Who holds the lock ``name``, as Redis sees it now.

        On one server, a name not held as a Lock gives its first hold as
        another kind: an RWMutex's writer (else its first reader), a
        semaphore's permit holder (the earliest to expire), an election's
        leader (its value as ``metadata``, its term as ``fence``);
        :meth:`describe` shows every hold. The GIL is released while waiting
        for Redis.

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

    def scan(self, pattern: str | None = None, *, all_prefixes: bool = False) -> list[LockState]:
        """Every name whose name matches the glob ``pattern``, held or waited
        for as any kind of primitive (Lock, RWMutex, semaphore, election):
        one :class:`LockState` per name and kind. With ``all_prefixes=True``,
        under every key prefix, not only this client's (each state says its
        :attr:`~LockState.prefix`); a key of another application shaped as
        ferrolock's (``<prefix>{<name>}``) that Redis cannot read as a
        primitive is left out.
        """
    def ascan(self, pattern: str | None = None, *, all_prefixes: bool = False) -> Operation[list[LockState]]:
        """Asyncio version of :meth:`scan`."""
    def describe(self, name: str) -> list[LockState]:
        """Everything stored under ``name``: one :class:`LockState` per kind of
        primitive held or waited for (Lock, RWMutex, semaphore, election).
        """
    def adescribe(self, name: str) -> Operation[list[LockState]]:
        """Asyncio version of :meth:`describe`."""
    def ainspect(self, name: str) -> Operation[LockInfo | None]:
        """Asyncio version of :meth:`inspect`.

        Args:
            name: the lock name.

        Returns:
            A future of the holder's :class:`LockInfo`, or of ``None`` when the
            lock is free.

        Raises:
            RuntimeError: awaited with no event loop running.
            TypeError: ``name`` is not a ``str``, raised at the call (before any await).
            ValueError: ``name`` is empty or too long, raised at the call (before any await).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

# ---------------------------------------------------------------------------
# Operation: what every a* method returns

_T_co = TypeVar("_T_co", covariant=True)

@final
class Operation(Coroutine[Any, Any, _T_co]):
    """A coroutine over one core future (see the module's description)."""

    def __await__(self) -> Generator[Any, None, _T_co]:
        """Return an iterator to be used in await expression."""
    def __next__(self) -> Any:
        """Implement next(self)."""
    def send(self, value: object) -> Any:
        """Steps the coroutine (`value` must be None, as for a fresh coroutine)."""
    def throw(self, exc: object, value: object = None, _tb: object = None) -> Any:
        """Raises `exc` where the coroutine waits, after cancelling the operation
        (a release still completes). While what the operation started is
        being undone, the coroutine first waits for that (yields), and
        raises `exc` once it is over.
        """
    def close(self) -> None:
        """Cancels the operation (see `throw`); one never stepped did nothing."""
    @property
    def __name__(self) -> str: ...
    @property
    def __qualname__(self) -> str: ...

# ---------------------------------------------------------------------------
# Lock

_NameT_co = _DefaultTypeVar("_NameT_co", bound=_Names, default=_Names, covariant=True)
"""What a Lock was made on: ``str`` for one name (``Lock[str]``, whose
:attr:`Lock.name` is a ``str``), a list or tuple for a multi-lock."""

_NameArg = TypeVar("_NameArg", bound=_Names)

@final
class _LockName:
    """:attr:`Lock.name`'s type: ``str`` on a ``Lock[str]``, else
    ``str | tuple[str, ...]`` (a list of one name is a plain lock)."""

    @overload
    def __get__(self, instance: None, owner: type[Any], /) -> _LockName: ...
    @overload
    def __get__(self, instance: Lock[str], owner: type[Any], /) -> str: ...
    @overload
    def __get__(self, instance: Lock[Any], owner: type[Any], /) -> str | tuple[str, ...]: ...

@final
class Lock(Generic[_NameT_co]):
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

    Make a handle on the lock ``name``; nothing is sent to Redis yet.

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
        blocking_timeout: the most seconds that ``with`` / ``async with``, and
            :meth:`Lock.acquire` / :meth:`Lock.aacquire` called without a
            ``timeout``, wait to take the lock (non-negative and finite; 0
            means a single attempt); ``None`` (the default) waits forever.
        retry: how long to wait between attempts while the lock is busy;
            ``None`` means ``Retry.exponential(0.002, 0.1)``.
        metadata: text stored beside the owner token (at most 65536 bytes),
            readable by anyone with :meth:`Lock.inspect`; ``None`` for none
            (an RWMutex stores it with writers only).
        token: the owner token of a hold taken elsewhere (another handle,
            process or machine), 1 to 512 printable ASCII characters with no
            space. The new handle then
            starts out holding it without any call to Redis: it can
            :meth:`Lock.release` or :meth:`Lock.extend` it, and
            :meth:`Lock.acquire` adopts the hold (keeping its fence once Redis
            has it: a hold's first renewal or :meth:`Lock.extend` records it;
            adopted before, the hold gets a newer fence) and starts
            renewing it. A restored hold is not renewed, and ``on_lost`` is not
            called for it, until it is adopted. ``None`` (the default) for a
            handle that holds nothing.
        on_lost: called once, with no arguments, when a hold of this
            handle is lost. It runs on a background thread (neither the
            caller's thread nor the event loop's), with the GIL; an
            exception it raises goes to :func:`sys.unraisablehook`.
        max_hold: the most seconds a hold may last, however long its holder
            keeps it (a stuck job): renewal stops this long after the hold
            was taken, so it ends by then in Redis and is reported lost
            like any loss (``on_lost``, :attr:`Lock.lost`); :meth:`Lock.extend`
            cannot pass it. At least ``ttl``; ``None`` (the default): no limit.
        fair: take turns in arrival order, across processes. Waiters
            queue in Redis. A release hands over straight to the oldest
            live waiter (an RWMutex's: every reader queued before the next
            writer), so no newcomer can barge in. A waiter keeps its place
            while its process runs, whatever its threads do; one that gives
            up loses it at once, one whose process dies or is stopped
            (SIGSTOP) after at most min(ttl, 2 s). Use it with one name, on
            every handle of that name
            (an RWMutex takes it as a whole, not per handle).

    Raises:
        TypeError: an argument has the wrong type (for example a ``bool``
            ttl, or an ``on_lost`` that is not callable).
        ValueError: a name is empty, too long or repeated, an option is
            out of range, or ``fair`` is asked of a multi-lock.
    """

    def __new__(
        cls,
        client: Client,
        name: _NameArg,
        **options: Unpack[_LockOptions],
    ) -> Lock[_NameArg]: ...

    # -- acquire / release --------------------------------------------------

    def acquire(self, blocking: bool | Literal[0, 1] = True, timeout: _Seconds | None = None) -> bool:
        """Take the lock, with the semantics of :meth:`threading.Lock.acquire`.

        The GIL is released while waiting; the wait wakes every 50 ms to check
        for signals, so Ctrl-C raises ``KeyboardInterrupt`` promptly and leaves
        no lock behind (a hold granted in the meantime is released first).

        Args:
            blocking: when ``False`` (or ``0``), make one attempt and return
                at once.
            timeout: the most seconds to wait when ``blocking``; ``None`` (the
                default) waits up to the handle's ``blocking_timeout``, which
                is forever unless it was set (as redis-py's ``Lock.acquire``);
                ``-1`` waits forever whatever ``blocking_timeout`` says; ``0``
                makes one attempt. Must be ``None`` or ``-1`` when
                ``blocking`` is ``False``.

        Returns:
            ``True`` once the lock is taken; ``False`` when the wait passed,
            ``blocking`` is ``False`` and the lock is busy, or the
            :class:`Retry` strategy ran out of attempts. The retry's
            ``attempts`` and the wait are two limits and the first one reached
            ends the acquire: with ``retry=Retry.none()`` (one attempt) a busy
            lock returns ``False`` at once, whatever ``timeout`` says.

        Raises:
            ValueError: a ``timeout`` with ``blocking=False``; a negative
                ``timeout`` other than ``-1``; an infinite or NaN ``timeout``;
                an int ``blocking`` other than ``0`` or ``1``.
            TypeError: ``blocking`` is not a ``bool`` or an ``int``, or
                ``timeout`` is not a number or ``None``.
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
            KeyboardInterrupt: Ctrl-C while waiting (no lock is left behind).
        """

    def aacquire(self, blocking: bool | Literal[0, 1] = True, timeout: _Seconds | None = None) -> Operation[bool]:
        """Asyncio version of :meth:`acquire`.

        Cancelling the future (or the task awaiting it) leaves no lock behind,
        even when Redis had already granted it.

        Args:
            blocking: when ``False`` (or ``0``), make one attempt only.
            timeout: as for :meth:`acquire` (``None``: the handle's
                ``blocking_timeout``).

        Returns:
            A future of ``True`` once the lock is taken, or ``False`` (as for
            :meth:`acquire`).

        Raises:
            RuntimeError: awaited with no event loop running.
            ValueError: invalid ``timeout``, raised at the call (before any await).
            TypeError: an argument has the wrong type, raised at the call (before any await).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def take_over(self, token: str) -> bool:
        """Take the lock in one attempt, taking over the hold of ``token`` if
        that token holds it.

        As ``acquire(blocking=False)``, and where ``token`` (another handle's,
        process's or machine's) holds the lock, that hold becomes this
        handle's in the same atomic step: under a token of this handle's own
        (:attr:`token` afterwards), with its fence kept (on a quorum, whose
        masters may disagree, the highest of theirs; a newer one when the
        hold's fence is not in Redis yet, before its first renewal) and its metadata set to
        this handle's (kept when the handle has none). Whoever else knows
        ``token`` can then no longer adopt, extend or release it, where
        ``Lock(client, name, token=token).acquire()`` would share it. The
        handle renews it from then on, as after :meth:`acquire`. On a quorum
        it is taken over where ``token`` holds it on a majority of masters.

        Args:
            token: the owner token of the hold to take over, 1 to 512
                printable ASCII characters with no space.

        Returns:
            ``True`` once the lock is this handle's (taken over, or taken
            because it was free); ``False`` when another token holds it.

        Raises:
            ValueError: ``token`` is empty or too long; the handle is a fair
                Lock's, an RWMutex's or a semaphore's, or was restored from a
                token (its ``acquire`` adopts that hold).
            TypeError: ``token`` is not a ``str``.
            LockConnectionError: Redis could not be reached in time.
            LockError: Redis answered with an error.
        """
    def atake_over(self, token: str) -> Operation[bool]:
        """Asyncio version of :meth:`take_over`.

        Cancelling the future (or the task awaiting it) leaves no lock behind,
        even when Redis had already granted it: the hold it took over is
        then released.

        Args:
            token: as for :meth:`take_over`.

        Returns:
            A future of ``True`` once the lock is this handle's, or ``False``
            (as for :meth:`take_over`).

        Raises:
            RuntimeError: awaited with no event loop running.
            ValueError: as for :meth:`take_over` (when awaited).
            TypeError: ``token`` is not a ``str``, raised at the call (before any await).
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

    def arelease(self) -> Operation[None]:
        """Asyncio version of :meth:`release`.

        The release goes through even when the awaiting task is cancelled.

        Returns:
            A future that resolves once the lock is released.

        Raises:
            RuntimeError: awaited with no event loop running.
            LockNotOwned: as for :meth:`release` (when awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def extend(self, ttl: _Seconds | None = None) -> None:
        """Set the hold's expiry to ``ttl`` seconds from now: it does not add to the time left.

        ``extend(5)`` on a hold with 10 s left leaves 5 s (redis-py's
        ``Lock.extend(5)`` adds, leaving 15 s; its ``replace_ttl=True`` is
        this one; ``ferrolock.compat.redis_py.Lock.extend`` adds, as
        redis-py's). The ttl is a time to live from now everywhere in
        ferrolock: the option, each renewal, and this. Later renewals keep
        this ttl, and the watchdog re-plans its next renewal for it. The GIL
        is released while waiting for Redis.

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

    def aextend(self, ttl: _Seconds | None = None) -> Operation[None]:
        """Asyncio version of :meth:`extend`: the expiry set to ``ttl`` seconds from now, not added to.

        Args:
            ttl: as for :meth:`extend`.

        Returns:
            A future that resolves once the expiry is pushed.

        Raises:
            RuntimeError: awaited with no event loop running.
            ValueError: ``ttl`` is out of range, raised at the call (before any await).
            TypeError: ``ttl`` is not a number or ``None``, raised at the call (before any await).
            LockNotOwned: as for :meth:`extend` (when awaited).
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def _extend_plain(self, seconds: _Seconds, add: bool) -> int:
        """A plain hold's extend (``ferrolock.compat``): its expiry set to
        ``seconds`` from now, or with ``add`` those seconds added to the time
        left. Returns 1 when extended, 0 when the hold is no longer this
        handle's (it is reported lost), 2 when it was taken without expiry
        (nothing changed).
        """
    def _aextend_plain(self, seconds: _Seconds, add: bool) -> Operation[int]:
        """Asyncio version of :meth:`_extend_plain`."""

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

    def alocked(self) -> Operation[bool]:
        """Asyncio version of :meth:`locked`.

        Returns:
            A future of whether anyone holds the lock now.

        Raises:
            RuntimeError: awaited with no event loop running.
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

    def aowned(self) -> Operation[bool]:
        """Asyncio version of :meth:`owned`.

        Returns:
            A future of whether this handle holds the lock now.

        Raises:
            RuntimeError: awaited with no event loop running.
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

    def attl(self) -> Operation[float | None]:
        """Asyncio version of :meth:`ttl`.

        Returns:
            A future of the seconds left on this handle's hold, or ``None``.

        Raises:
            RuntimeError: awaited with no event loop running.
            LockConnectionError: Redis could not be reached in time (when
                awaited).
            LockError: Redis answered with an error (when awaited).
        """

    def wait_lost(self) -> Operation[bool]:
        """Resolve when the current hold ends, whether it was lost or released.

        A holder can await it beside its work (for example in
        :func:`asyncio.wait` with ``FIRST_COMPLETED``) to stop as soon as the
        lock is no longer its own.

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

    name: _LockName
    """The lock name: a ``str`` for a single lock, a ``tuple`` of the
    names for a multi-lock (one with two names or more).
    """

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
    def kind(self) -> Literal["lock", "read", "write", "permit"]:
        """`"lock"`, `"read"`, `"write"` (an RWMutex's handles) or `"permit"` (a semaphore's)."""
    @property
    def fair(self) -> bool:
        """Whether it takes its turn in arrival order (a fair Lock or RWMutex)."""
    @property
    def client(self) -> Client:
        """The client this lock was made from."""

    # -- context managers ----------------------------------------------------

    def __class_getitem__(cls, item: Any) -> types.GenericAlias:
        """``Lock[str]`` in an annotation: the type of a lock on one name."""
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

    def __aenter__(self) -> Operation[Self]:
        """Take the lock without blocking the event loop, waiting up to
        ``blocking_timeout``.

        Until the block ends, a loss of the hold cancels the task running the
        block (``CancelledError`` inside it); ``__aexit__`` then raises
        :class:`LockLost` instead. Cancelling the task while it waits to enter
        leaves no lock behind.

        Returns:
            A future of this lock.

        Raises:
            RuntimeError: awaited with no event loop running.
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
    ) -> Operation[Literal[False]]:
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
            RuntimeError: awaited with no event loop running.
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

    Make the mutex; the handle options become every handle's defaults.

    Args:
        client: the :class:`Client` to use.
        name: the mutex name: a non-empty ``str`` of at most 4096 bytes.
        ttl: seconds a hold lasts without renewal, between 0.001 and
            366 days; ``None`` means 30 seconds.
        auto_renew: when ``True`` (the default) the hold is renewed every
            ``ttl / 3`` for as long as it is held; when ``False`` it
            expires after ``ttl`` and is then reported lost.
        blocking_timeout: the most seconds that ``with`` / ``async with``, and
            :meth:`Lock.acquire` / :meth:`Lock.aacquire` called without a
            ``timeout``, wait to take the lock (non-negative and finite; 0
            means a single attempt); ``None`` (the default) waits forever.
        retry: how long to wait between attempts while the lock is busy;
            ``None`` means ``Retry.exponential(0.002, 0.1)``.
        metadata: text stored beside the owner token (at most 65536 bytes),
            readable by anyone with :meth:`Lock.inspect`; ``None`` for none
            (an RWMutex stores it with writers only).
        on_lost: called once, with no arguments, when a hold of this
            handle is lost. It runs on a background thread (neither the
            caller's thread nor the event loop's), with the GIL; an
            exception it raises goes to :func:`sys.unraisablehook`.
        max_hold: the most seconds a hold may last, however long its holder
            keeps it (a stuck job): renewal stops this long after the hold
            was taken, so it ends by then in Redis and is reported lost
            like any loss (``on_lost``, :attr:`Lock.lost`); :meth:`Lock.extend`
            cannot pass it. At least ``ttl``; ``None`` (the default): no limit.
        fair: take turns in arrival order, across processes. Waiters
            queue in Redis. A release hands over straight to the oldest
            live waiter (an RWMutex's: every reader queued before the next
            writer), so no newcomer can barge in. A waiter keeps its place
            while its process runs, whatever its threads do; one that gives
            up loses it at once, one whose process dies or is stopped
            (SIGSTOP) after at most min(ttl, 2 s). Use it with one name, on
            every handle of that name
            (an RWMutex takes it as a whole, not per handle).
        writer_preference: hold new readers back while a writer waits;
            ``None`` means ``True`` (``False`` cannot be combined with ``fair``).

    Raises:
        TypeError: an argument has the wrong type, an unknown keyword was
            given, or ``token`` was given here rather than to ``read()`` /
            ``write()``.
        ValueError: an argument is out of range, or ``fair=True`` is
            combined with ``writer_preference=False``.
    """

    def __new__(
        cls,
        client: Client,
        name: str,
        **options: Unpack[_RWMutexOptions],
    ) -> Self: ...
    @property
    def name(self) -> str:
        """The mutex name."""

    @property
    def fair(self) -> bool:
        """Whether readers and writers are served in arrival order."""

    @property
    def writer_preference(self) -> bool:
        """Whether a waiting writer holds new readers back."""

    def read(self, **options: Unpack[_HandleOptions]) -> Lock[str]:
        """A read handle, shared with other readers, not holding yet.

        Keyword arguments override the mutex's defaults for this handle.
        """

    def write(self, **options: Unpack[_HandleOptions]) -> Lock[str]:
        """A write handle, exclusive against readers and writers, not holding yet.

        Keyword arguments override the mutex's defaults for this handle.
        """

    def try_read(self, **options: Unpack[_HandleOptions]) -> Lock[str] | None:
        """One attempt to read now: a read handle already holding, or ``None``.

        The GIL is released during the single round trip.
        """

    def try_write(self, **options: Unpack[_HandleOptions]) -> Lock[str] | None:
        """One attempt to write now: a write handle already holding, or ``None``.

        Leaves no intent behind when it fails.
        """

    def force_release(self, token: str | None = None) -> bool:
        """Ends every hold (writer and readers) whoever holds it; with
        ``token``, only that writer's hold or that reader's lease (checked and
        removed in one atomic step). True if a hold was removed; False if
        none was (with ``token``: that token holds nothing now).
        """
    def aforce_release(self, token: str | None = None) -> Operation[bool]:
        """Asyncio version of :meth:`force_release`."""
    def readers(self) -> int:
        """Live readers now (each counts until its own expiry). Releases the GIL."""

    def areaders(self) -> Operation[int]:
        """Like :meth:`readers`, awaitable."""

    def locked(self) -> bool:
        """Held by a writer or by any live reader. Releases the GIL."""

    def alocked(self) -> Operation[bool]:
        """Like :meth:`locked`, awaitable."""

def _at_exit() -> None:
    """Registered with ``atexit``: stop calling into the exiting interpreter.

    From then on, losses and log records are not reported into an interpreter
    that is finalizing (holds simply expire). Blocking threads already on
    their way into Python (a callback) are let finish first, for at most a
    second: a thread that takes the GIL once finalization has begun is torn
    down by Python, which aborts the process.
    """

def _debug_stats() -> dict[str, int]:
    """Diagnostics of this process: ``watchdogs`` (live watchdog tasks), ``waiters`` (waiting acquires),
    ``handed_over`` (holds taken straight from a fair release's wake-up), ``renewals`` (renewals made)
    and ``log_records`` (core log records handed to Python's ``logging``).
    """

def _handle_options() -> list[tuple[str, str, str, list[str], str]]:
    """The table, for the stub generator and the tests: one
    `(name, type, default, kinds, doc)` per option, in signature order.
    """

def _semaphore(
    client: Client,
    name: str,
    permits: int,
    **options: Unpack[_LockOptions],
) -> Lock[str]:
    """A handle on one permit of the semaphore ``name`` (see ``Client.semaphore``)."""

def _plain_lock(
    client: Client,
    key: str,
    *,
    ttl: _Seconds | None = None,
    token: str | None = None,
    adopt: bool = False,
    auto_renew: bool = False,
    on_lost: Callable[[], object] | None = None,
    retry: Retry | None = None,
    signal: tuple[str, float] | None = None,
    wake: bool = True,
) -> Lock[str]:
    """_plain_lock(client, key, *, ttl=None, token=None, adopt=False, auto_renew=False, on_lost=None, retry=None, signal=None, wake=True)
    --

    A ``Lock`` handle on the plain hold at ``key``: the string key itself,
    no prefix, its value the owner's token. ``ttl``: seconds (``None``:
    taken without expiry, never renewed). ``token``: the token every hold
    of the handle takes (``None``: a fresh one each); with ``adopt``, the
    handle starts out holding it. ``signal``: ``(list, expire_seconds)``,
    python-redis-lock's signal list, pushed by each release. ``wake``:
    ferrolock's waiters are woken on a channel of the key's (else they poll
    on ``retry``).
    """

def _plain_force_release(client: Client, key: str, *, signal: tuple[str, float] | None = None) -> bool:
    """_plain_force_release(client, key, *, signal=None)
    --

    Ends the plain hold at ``key`` whoever holds it (python-redis-lock's
    ``reset``), pushing the signal list as a release does. Returns whether
    a hold was there.
    """

def _plain_inspect(client: Client, key: str) -> LockInfo | None:
    """_plain_inspect(client, key)
    --

    Who holds the plain hold at ``key``: a ``LockInfo`` named ``key`` (the
    key's value as its token, ``fence`` 0: none is stored), or ``None``.
    """

@final
class Leader:
    """The leader of an election: its value, its term number (strictly
    increasing across leaders) and the seconds left on its term (None: no
    expiry).
    """

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
    """Follows an election: each ``next`` / ``anext`` returns the leader (or
    None) once it changed.
    """

    def next(self) -> Leader | None:
        """Waits for the next change (the current leader the first time)."""
    def anext(self) -> Operation[Leader | None]:
        """Asyncio version of :meth:`next`."""

@final
class Election:
    """The core of :class:`ferrolock.Election` (use ``client.election(name)``)."""

    def __new__(cls, client: Client, name: str) -> Election: ...
    @property
    def name(self) -> str:
        """The election's name (without the client's prefix)."""
    def candidate(
        self,
        value: str,
        **options: Unpack[_LockOptions],
    ) -> Lock[str]:
        """A campaigner for `value`: a fair Lock on the election's term, whose
        acquire campaigns and whose fence is the term number.
        """
    def leader(self) -> Leader | None:
        """The leader now, or None."""
    def aleader(self) -> Operation[Leader | None]:
        """Asyncio version of :meth:`leader`."""
    def proclaim(self, term: Lock, value: str) -> None:
        """The leader holding `term` publishes `value`; LockNotOwned if it no longer leads."""
    def aproclaim(self, term: Lock, value: str) -> Operation[None]:
        """Asyncio version of :meth:`proclaim`."""
    def observer(self) -> ElectionObserver:
        """A watcher of this election's changes."""
