"""``Lock``: python-redis-lock's ``Lock`` (``redis_lock.Lock``, 4.0.1) on
ferrolock, holding the same keys, with its exceptions and ``reset_all``.

Change the import and nothing else::

    from ferrolock.compat import redis_lock   # was: import redis_lock

    with redis_lock.Lock(conn, "report", expire=60, auto_renewal=True):
        ...

The hold is where python-redis-lock keeps it: ``lock:<name>``, a string
whose value is the lock's ``id``; a release pushes one element on the
signal list ``lock-signal:<name>`` (expiring after ``signal_expire``
milliseconds), which python-redis-lock's waiters block on (``BLPOP``) and
this class's waiters too. So a process still running python-redis-lock and
one running this class exclude each other, each releases or extends only
its own hold, and a waiter of either is woken by a release of the other.
The constructor, ``acquire``, ``release``, ``extend``, ``locked``,
``get_owner_id``, ``reset``, ``id``, ``with`` and ``reset_all`` behave as
python-redis-lock's and raise its exceptions: python-redis-lock's own
classes when it is installed (so ``except redis_lock.NotAcquired`` keeps
catching them), else classes of the same names defined here.

What ferrolock adds: ``auto_renewal=True`` renews the hold from the
process's watchdog (a task, not a thread per lock), ``fence`` (the server's
clock when the hold was taken), ``lost`` and ``on_lost=`` (told when the
hold expires or is reset before it is released), and an acquire that
Ctrl-C never leaves held. Unlike python-redis-lock, a fractional
``timeout`` is kept as given (it truncates it to whole seconds), and a
waiter also wakes when the holder's expiry passes (a hold that expires
pushes no signal).
"""

from __future__ import annotations

import logging
import time
from base64 import b64encode
from os import urandom
from types import TracebackType
from typing import Any, Callable, Optional, Type, Union

import ferrolock
from ferrolock import _ferrolock
from ferrolock.compat import client_for

__all__ = [
    "AlreadyAcquired",
    "AlreadyStarted",
    "InvalidTimeout",
    "Lock",
    "NotAcquired",
    "NotExpirable",
    "TimeoutNotUsable",
    "TimeoutTooLarge",
    "reset_all",
]

logger_for_acquire = logging.getLogger("redis_lock.acquire")

try:  # python-redis-lock's own classes, so that its users' except clauses catch these
    from redis_lock import (  # type: ignore[import-untyped]
        AlreadyAcquired,
        AlreadyStarted,
        InvalidTimeout,
        NotAcquired,
        NotExpirable,
        TimeoutNotUsable,
        TimeoutTooLarge,
    )
except ImportError:

    class AlreadyAcquired(RuntimeError):  # type: ignore[no-redef]
        """``acquire`` on a lock whose key already holds this lock's ``id``."""

    class NotAcquired(RuntimeError):  # type: ignore[no-redef]
        """``release`` or ``extend`` of a hold that is not this lock's ``id``'s
        (never taken, released, expired or reset); nothing was changed."""

    class AlreadyStarted(RuntimeError):  # type: ignore[no-redef]
        """python-redis-lock's renewal thread was started twice (never raised
        here: renewal is the watchdog's)."""

    class TimeoutNotUsable(RuntimeError):  # type: ignore[no-redef]
        """``acquire(blocking=False, timeout=...)``: a timeout needs blocking."""

    class InvalidTimeout(RuntimeError):  # type: ignore[no-redef]
        """``acquire`` with a negative timeout."""

    class TimeoutTooLarge(RuntimeError):  # type: ignore[no-redef]
        """``acquire`` with a timeout longer than ``expire``, without ``auto_renewal``."""

    class NotExpirable(RuntimeError):  # type: ignore[no-redef]
        """``extend`` of a hold that was taken without expiry."""


# The longest a waiter blocks on the signal list between two attempts: a
# release wakes it at once; this bounds a wait whose wake-up went to another
# waiter, or expired before it blocked (python-redis-lock waits `expire` then).
SAFETY_NET = 1.0
# The shortest BLPOP timeout sent (0 would block forever).
SHORTEST_WAIT = 0.01


def _redis_classes() -> tuple[type, ...]:
    import redis

    return (redis.StrictRedis,)


class Lock:
    """python-redis-lock's ``Lock(redis_client, name, expire=None, id=None,
    auto_renewal=False, strict=True, signal_expire=1000, blocking=True)`` on
    ferrolock, holding the same keys; see the module's documentation.

    ``expire``: the hold's time to live in whole seconds (``None``: it never
    expires); ``id``: the value stored (random when ``None``), the same for
    every hold of this object; ``auto_renewal``: renew every ``expire * 2 /
    3`` seconds while held (by ferrolock's watchdog); ``signal_expire``:
    milliseconds a release's wake-up stays on the signal list; ``blocking``:
    what ``with`` passes to ``acquire``. Keyword-only extra: ``on_lost``,
    called once, with no arguments, when a hold is lost before it is released.

    Raises:
        ValueError: ``strict`` and ``redis_client`` is not a
            ``redis.StrictRedis``; ``auto_renewal`` without ``expire``; a
            negative ``expire``; a setting of the client that cannot be
            carried over (named).
        TypeError: ``id`` is neither ``str`` nor ``bytes``.
    """

    def __init__(
        self,
        redis_client: Any,
        name: str,
        expire: Optional[Union[int, float]] = None,
        id: Optional[Union[str, bytes]] = None,
        auto_renewal: bool = False,
        strict: bool = True,
        signal_expire: int = 1000,
        blocking: bool = True,
        *,
        on_lost: Optional[Callable[[], object]] = None,
    ) -> None:
        if strict and not isinstance(redis_client, _redis_classes()):
            raise ValueError(
                "redis_client must be instance of StrictRedis. Use strict=False if you know what you're doing."
            )
        if auto_renewal and expire is None:
            raise ValueError("Expire may not be None when auto_renewal is set")
        self._client = redis_client
        if expire:
            expire = int(expire)
            if expire < 0:
                raise ValueError("A negative expire is not acceptable.")
        else:
            expire = None
        self._expire = expire
        self._signal_expire = signal_expire
        if id is None:
            self._id = b64encode(urandom(18)).decode("ascii")
        elif isinstance(id, bytes):
            try:
                self._id = id.decode("ascii")
            except UnicodeDecodeError:
                self._id = b64encode(id).decode("ascii")
        elif isinstance(id, str):
            self._id = id
        else:
            raise TypeError(f"Incorrect type for `id`. Must be bytes/str not {type(id)}.")
        self._name = "lock:" + name
        self._signal = "lock-signal:" + name
        self._lock_renewal_interval = float(expire) * 2 / 3 if auto_renewal and expire else None
        self.blocking = blocking
        self.on_lost = on_lost
        self._ferrolock = client_for(redis_client)
        # The ferrolock handle of the hold this object took last.
        self._hold: Optional[ferrolock.Lock] = None

    def _handle(self, adopt: bool = False) -> ferrolock.Lock:
        """A ferrolock handle on this lock's key, taking (or with ``adopt``,
        holding already) this lock's ``id``."""
        return _ferrolock._plain_lock(
            self._ferrolock,
            self._name,
            ttl=self._expire,
            token=self._id,
            adopt=adopt,
            auto_renew=self._lock_renewal_interval is not None and not adopt,
            on_lost=None if adopt else self.on_lost,
            signal=(self._signal, self._signal_expire / 1000),
            wake=False,
        )

    def _holding(self) -> ferrolock.Lock:
        """The handle that holds this ``id``'s hold: this object's own, or
        one restored from the ``id`` (a hold taken by another object or process)."""
        hold = self._hold
        if hold is not None and hold.token is not None:
            return hold
        return self._handle(adopt=True)

    @property
    def _held(self) -> bool:
        return self.id == self.get_owner_id()

    @property
    def id(self) -> str:
        """The value this lock stores in its key: its owner's id."""
        return self._id

    def get_owner_id(self) -> Optional[str]:
        """The id stored in the key now (whoever holds it), or ``None``."""
        owner_id = self._client.get(self._name)
        if isinstance(owner_id, bytes):
            owner_id = owner_id.decode("ascii", "replace")
        return None if owner_id is None else str(owner_id)

    def acquire(self, blocking: bool = True, timeout: Optional[Union[int, float]] = None) -> bool:
        """Take the lock; ``True`` once taken, ``False`` when not blocking
        and it is held, or when ``timeout`` seconds passed first.

        Raises:
            AlreadyAcquired: the key holds this lock's ``id`` already.
            TimeoutNotUsable: ``timeout`` with ``blocking=False``.
            InvalidTimeout: a negative ``timeout``.
            TimeoutTooLarge: ``timeout`` is longer than ``expire``, without
                ``auto_renewal``.
        """
        logger_for_acquire.debug("Acquiring Lock(%r) ...", self._name)
        if self._held:
            raise AlreadyAcquired("Already acquired from this Lock instance.")
        if not blocking and timeout is not None:
            raise TimeoutNotUsable("Timeout cannot be used if blocking=False")
        if timeout:
            if not isinstance(timeout, float):
                timeout = int(timeout)  # as python-redis-lock reads it ("123" too); a float is kept as given
            if timeout < 0:
                raise InvalidTimeout(f"Timeout ({timeout}) cannot be less than or equal to 0")
            if self._expire and not self._lock_renewal_interval and timeout > self._expire:
                raise TimeoutTooLarge(f"Timeout ({timeout}) cannot be greater than expire ({self._expire})")
        deadline = time.monotonic() + timeout if timeout else None
        hold = self._handle()
        while not hold.acquire(blocking=False):
            if not blocking:
                logger_for_acquire.warning("Failed to acquire Lock(%r).", self._name)
                return False
            wait = SAFETY_NET
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return False
            holder = hold.inspect()[0]
            if holder is not None and holder.ttl is not None:
                wait = min(wait, holder.ttl)
            self._client.blpop(self._signal, max(wait, SHORTEST_WAIT))
        logger_for_acquire.info("Acquired Lock(%r).", self._name)
        self._hold = hold
        return True

    def extend(self, expire: Optional[Union[int, float]] = None) -> None:
        """Make the hold expire ``expire`` seconds from now (``None``: the
        lock's own ``expire``).

        Raises:
            TypeError: neither ``expire`` nor the lock's ``expire`` is set.
            ValueError: a negative ``expire``.
            NotAcquired: the key does not hold this lock's ``id`` (expired,
                released, reset, never taken).
            NotExpirable: the hold was taken without expiry.
        """
        if expire:
            expire = int(expire)
            if expire < 0:
                raise ValueError("A negative expire is not acceptable.")
        elif self._expire is not None:
            expire = self._expire
        else:
            raise TypeError(
                "To extend a lock 'expire' must be provided as an argument to extend() method or at "
                "initialization time."
            )
        error = self._holding()._extend_plain(expire, False)
        if error == 0:
            raise NotAcquired(f"Lock {self._name} is not acquired or it already expired.")
        if error == 2:
            raise NotExpirable(f"Lock {self._name} has no assigned expiration time")

    def release(self) -> None:
        """Release the hold of this lock's ``id`` (taken by this object or,
        with the same ``id``, elsewhere), waking a waiter.

        Raises:
            NotAcquired: the key does not hold this lock's ``id``; nothing was changed.
        """
        logging.getLogger("redis_lock.release").debug("Releasing Lock(%r).", self._name)
        hold, self._hold = self._holding(), None
        try:
            hold.release()
        except ferrolock.LockNotOwned:
            raise NotAcquired(f"Lock({self._name}) is not acquired or it already expired.") from None

    def locked(self) -> bool:
        """Whether the key is held, by any id."""
        return bool(self._client.exists(self._name) == 1)

    def reset(self) -> None:
        """Forcibly delete the lock, whoever holds it, waking a waiter. Use this with care."""
        _ferrolock._plain_force_release(self._ferrolock, self._name, signal=(self._signal, self._signal_expire / 1000))

    @property
    def fence(self) -> Optional[int]:
        """The fence of the hold this object holds (the server's clock in
        microseconds when it was taken), or ``None``."""
        return None if self._hold is None else self._hold.fence

    @property
    def lost(self) -> bool:
        """Whether the hold this object took last was lost before it was released."""
        return self._hold is not None and self._hold.lost

    def __enter__(self) -> "Lock":
        acquired = self.acquire(blocking=self.blocking)
        if not acquired:
            if self.blocking:
                raise AssertionError(f"Lock({self._name}) wasn't acquired, but blocking=True was used!")
            raise NotAcquired(f"Lock({self._name}) is not acquired or it already expired.")
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]] = None,
        exc_value: Optional[BaseException] = None,
        traceback: Optional[TracebackType] = None,
    ) -> None:
        self.release()


def reset_all(redis_client: Any) -> None:
    """Forcibly delete every ``lock:*`` key (their holders' and waiters'
    alike), waking a waiter of each. Found with ``SCAN``, one key at a time
    (python-redis-lock runs ``KEYS`` in one script). Use this with care."""
    client = client_for(redis_client)
    for key in redis_client.scan_iter(match="lock:*", count=1000):
        name = (key.decode() if isinstance(key, bytes) else key)[len("lock:") :]
        if name:
            _ferrolock._plain_force_release(client, "lock:" + name, signal=("lock-signal:" + name, 1.0))
