"""Types of ``ferrolock._ferrolock``, the native (Rust/PyO3) core of ferrolock.

Types only: the documentation lives in the module itself (``help(ferrolock.Lock)``),
written once in the Rust bindings (``src/py/``). ``python -m mypy.stubtest
ferrolock._ferrolock`` checks this stub against the built module.
"""

import asyncio
import os
from collections.abc import Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import Any, ClassVar, Literal, TypeVar, final

from typing_extensions import Self, TypeAlias, TypedDict, Unpack, disjoint_base

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
    "LockError",
    "LockNotAcquired",
    "LockNotOwned",
    "LockLost",
    "LockNotReplicated",
    "LockConnectionError",
    "LockConfigurationError",
    "LockState",
    "LockEvent",
    "add_listener",
    "remove_listener",
    "flush_events",
    "_dropped_events",
    "_semaphore",
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

# ---------------------------------------------------------------------------
# Exceptions

class LockError(Exception):
    ...

class LockNotAcquired(LockError):
    ...

class LockNotOwned(LockError):
    ...

class LockLost(LockError):
    ...

class LockNotReplicated(LockError):
    ...

class LockConnectionError(LockError, ConnectionError):
    ...

class LockConfigurationError(LockConnectionError):
    """The server answered, but the client's settings do not fit it.

    Raised when connecting, with a message that names the server (never the
    password), the cause and what to change:

    * the URL points at a port where something other than Redis listens;
    * a password is given to a server that has none, or the credentials are
      refused, or the server needs a password and the URL gives none;
    * the database number is one the server does not have;
    * ``rediss://`` (TLS) points at a plain-TCP port;
    * the server is older than Redis 6.2 (7.0 for a Cluster), or older than
      7.2 with ``replica_fsync=True`` (``WAITAOF`` came with 7.2).

    Retrying does not help. It is a :class:`LockConnectionError` (and so a
    :class:`ConnectionError`) too, so code that catches those catches it.
    """

# ---------------------------------------------------------------------------
# Retry

@final
class Retry:
    def __new__(cls) -> Self: ...
    def __hash__(self) -> int:
        ...

    def __eq__(self, other: object, /) -> bool:
        ...

    def __ne__(self, other: object, /) -> bool:
        ...

    @staticmethod
    def none() -> Retry:
        ...

    @staticmethod
    def fixed(interval: _Seconds, attempts: int | None = None) -> Retry:
        ...

    @staticmethod
    def linear(step: _Seconds, max_interval: _Seconds, attempts: int | None = None) -> Retry:
        ...

    @staticmethod
    def exponential(
        min: _Seconds,
        max: _Seconds,
        attempts: int | None = None,
        jitter: bool = True,
    ) -> Retry:
        ...

    def delay(self, failed: int) -> float | None:
        ...

# ---------------------------------------------------------------------------
# LockInfo

@final
class LockInfo:
    def __new__(
        cls, name: str, token: str, metadata: str | None = None, fence: int = 0, ttl: float | None = None
    ) -> Self: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __eq__(self, other: object, /) -> bool:
        ...

    def __ne__(self, other: object, /) -> bool:
        ...

    @property
    def name(self) -> str:
        ...

    @property
    def token(self) -> str:
        ...

    @property
    def metadata(self) -> str | None:
        ...

    @property
    def fence(self) -> int:
        ...

    @property
    def ttl(self) -> float | None:
        ...

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

    def __eq__(self, other: object, /) -> bool:
        """Whether every field of ``other`` is equal."""

    def __ne__(self, other: object, /) -> bool:
        """The negation of ``==``."""

    @property
    def name(self) -> str:
        """The name (without the client's prefix)."""

    @property
    def kind(self) -> Literal["lock", "rwmutex", "semaphore", "election"]:
        """``"lock"`` (a :class:`Lock`, fair or not), ``"rwmutex"``,
        ``"semaphore"`` or ``"election"``."""

    @property
    def holder(self) -> LockInfo | None:
        """A Lock's holder, an RWMutex's writer, or an election's leader (its
        value as ``metadata``, its term number as ``fence``); ``None`` when
        there is none (a semaphore's holders are in :attr:`holders`)."""

    @property
    def readers(self) -> list[tuple[str, float]]:
        """An RWMutex's live readers: (token, seconds left) each."""

    @property
    def holders(self) -> list[LockInfo]:
        """Every live hold, whatever the kind: :attr:`holder` first, then an
        RWMutex's readers (``metadata`` ``None``, ``fence`` 0) and a
        semaphore's permit holders (token, metadata, fence, seconds left),
        earliest expiry first. Remove one with
        ``Client.force_release(name, token=...)``."""

    @property
    def limit(self) -> int | None:
        """How many may hold at once where Redis stores it (a semaphore's
        permits, while any is held), else ``None``."""

    @property
    def queued_readers(self) -> int:
        """Readers waiting in a fair RWMutex's queue (live ones)."""

    @property
    def queued_writers(self) -> int:
        """Writers waiting in a fair queue (a fair Lock's, a fair semaphore's
        waiters and an election's campaigners count here)."""

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
                                                      ``"taken_over"`` (gone from Redis),
                                                      ``"unreachable"`` or ``"unreplicated"``
                                                      (renewals not acknowledged by the
                                                      replicas, ``replica_policy="fail"``)
    ``renewed``         the renewal's round trip      ``None``
    ``woken``           ``None``                      ``"pubsub"``, ``"handover"`` (a fair
                                                      release named this waiter) or ``"poll"``
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
        and for every other kind of event)."""

    @property
    def hold(self) -> int | None:
        """Tells apart the holds alive at one time in this process: the same
        number in a hold's ``acquired``, ``renewed``, ``released``, ``lost``
        and ``unreplicated`` events. ``None`` for an acquire that took nothing,
        for ``woken``, and for an ``unreplicated`` grant that was undone."""

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
    ...

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
    ) -> Self:
        ...

    @property
    def prefix(self) -> str:
        ...

    @property
    def masters(self) -> int: ...
    def connect(self) -> None: ...
    def aconnect(self) -> Operation[None]: ...
    def close(self) -> None: ...
    def aclose(self) -> Operation[None]: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...
    def __aenter__(self) -> Operation[Self]: ...
    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Operation[Literal[False]]: ...
    def force_release(self, name: str, token: str | None = None) -> bool:
        ...

    def aforce_release(self, name: str, token: str | None = None) -> Operation[bool]:
        ...

    def inspect(self, name: str) -> LockInfo | None:
        ...

    def scan(self, pattern: str | None = None) -> list[LockState]: ...
    def ascan(self, pattern: str | None = None) -> Operation[list[LockState]]: ...
    def describe(self, name: str) -> list[LockState]: ...
    def adescribe(self, name: str) -> Operation[list[LockState]]: ...
    def ainspect(self, name: str) -> Operation[LockInfo | None]:
        ...

# ---------------------------------------------------------------------------
# Operation: what every a* method returns

_T_co = TypeVar("_T_co", covariant=True)

@final
class Operation(Coroutine[Any, Any, _T_co]):
    def __await__(self) -> Generator[Any, None, _T_co]: ...
    def __next__(self) -> Any: ...
    def send(self, value: object) -> Any: ...
    def throw(self, exc: object, value: object = None, _tb: object = None) -> Any: ...
    def close(self) -> None: ...
    @property
    def __name__(self) -> str: ...  # type: ignore[override]
    @property
    def __qualname__(self) -> str: ...  # type: ignore[override]

# ---------------------------------------------------------------------------
# Lock

@final
class Lock:
    ...

    def __new__(
        cls,
        client: Client,
        name: _Names,
        **options: Unpack[_LockOptions],
    ) -> Self:
        ...

    # -- acquire / release --------------------------------------------------

    def acquire(self, blocking: bool = True, timeout: _Seconds | None = None) -> bool:
        ...

    def aacquire(self, blocking: bool = True, timeout: _Seconds | None = None) -> Operation[bool]:
        ...

    def release(self) -> None:
        ...

    def arelease(self) -> Operation[None]:
        ...

    def extend(self, ttl: _Seconds | None = None) -> None:
        ...

    def aextend(self, ttl: _Seconds | None = None) -> Operation[None]:
        ...

    # -- state, as Redis sees it ----------------------------------------------

    def locked(self) -> bool:
        ...

    def alocked(self) -> Operation[bool]:
        ...

    def owned(self) -> bool:
        ...

    def aowned(self) -> Operation[bool]:
        ...

    def ttl(self) -> float | None:
        ...

    def attl(self) -> Operation[float | None]:
        ...

    def wait_lost(self) -> Operation[bool]:
        ...

    def inspect(self) -> list[LockInfo | None]:
        ...

    # -- local state (no call to Redis) -----------------------------------

    @property
    def name(self) -> str | tuple[str, ...]:
        ...

    @property
    def names(self) -> tuple[str, ...]:
        ...

    @property
    def token(self) -> str | None:
        ...

    @property
    def fence(self) -> int | None:
        ...

    @property
    def lost(self) -> bool:
        ...

    @property
    def kind(self) -> Literal["lock", "read", "write", "permit"]: ...
    @property
    def fair(self) -> bool: ...
    @property
    def client(self) -> Client:
        ...

    # -- context managers ----------------------------------------------------

    def __enter__(self) -> Self:
        ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]:
        ...

    def __aenter__(self) -> Operation[Self]:
        ...

    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        _exc: BaseException | None = None,
        _tb: TracebackType | None = None,
    ) -> Operation[Literal[False]]:
        ...

# ---------------------------------------------------------------------------
# RWMutex

@final
class RWMutex:
    ...

    def __new__(
        cls,
        client: Client,
        name: str,
        **options: Unpack[_RWMutexOptions],
    ) -> Self:
        ...

    @property
    def name(self) -> str:
        ...

    @property
    def fair(self) -> bool:
        ...

    @property
    def writer_preference(self) -> bool:
        ...

    def read(self, **options: Unpack[_HandleOptions]) -> Lock:
        ...

    def write(self, **options: Unpack[_HandleOptions]) -> Lock:
        ...

    def try_read(self, **options: Unpack[_HandleOptions]) -> Lock | None:
        ...

    def try_write(self, **options: Unpack[_HandleOptions]) -> Lock | None:
        ...

    def force_release(self, token: str | None = None) -> bool: ...
    def aforce_release(self, token: str | None = None) -> Operation[bool]: ...
    def readers(self) -> int:
        ...

    def areaders(self) -> Operation[int]:
        ...

    def locked(self) -> bool:
        ...

    def alocked(self) -> Operation[bool]:
        ...

def _at_exit() -> None:
    ...

def _debug_stats() -> dict[str, int]:
    ...

def _handle_options() -> list[tuple[str, str, str, list[str], str]]: ...

def _semaphore(
    client: Client,
    name: str,
    permits: int,
    **options: Unpack[_LockOptions],
) -> Lock: ...

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
    def anext(self) -> Operation[Leader | None]: ...

@final
class Election:
    """The core of :class:`ferrolock.Election` (use ``client.election(name)``)."""

    def __new__(cls, client: Client, name: str) -> Election: ...
    @property
    def name(self) -> str: ...
    def candidate(
        self,
        value: str,
        **options: Unpack[_LockOptions],
    ) -> Lock:
        """A campaigner for ``value``: acquiring the handle campaigns, its fence is the term number."""
    def leader(self) -> Leader | None: ...
    def aleader(self) -> Operation[Leader | None]: ...
    def proclaim(self, term: Lock, value: str) -> None: ...
    def aproclaim(self, term: Lock, value: str) -> Operation[None]: ...
    def observer(self) -> ElectionObserver: ...
