"""ferrolock's exceptions: one tree, defined here and raised by the native
core as these classes (``ferrolock`` re-exports each).

::

    LockError                      any ferrolock error
    ├── LockNotAcquired            not taken in time            retrying can help
    ├── LockNotOwned (RuntimeError) this handle holds nothing   retrying cannot
    ├── LockLost                   lost while held              redo the work under a new hold
    ├── LockNotReplicated          replicas did not acknowledge retrying can help
    ├── LockConnectionError (ConnectionError)  Redis unreachable  retrying can help
    └── LockConfigurationError     the settings do not fit      retrying cannot: fix them

A configuration error is not a connection error: an ``except
ConnectionError`` (or ``except LockConnectionError``) loop that retries
until Redis answers does not spin forever on a wrong password, a missing
database or a plain-TCP port given to ``rediss://``; it fails at once.

Bad arguments are the builtin ``ValueError`` and ``TypeError``, never a
``LockError``. The ``redis.exceptions`` classes are not among the bases, so
the tree is the same whether redis-py is installed or not (redis-py's
``LockError`` is a ``ValueError``, which would make every lock outcome one):
:mod:`ferrolock.compat`'s drop-in classes raise redis-py's and
python-redis-lock's own exceptions, and docs/migrating/ maps each of theirs
to these.
"""

from __future__ import annotations

__all__ = [
    "LockConfigurationError",
    "LockConnectionError",
    "LockError",
    "LockLost",
    "LockNotAcquired",
    "LockNotOwned",
    "LockNotReplicated",
]


class LockError(Exception):
    """Base class of every ferrolock error.

    Raised as itself when Redis answers a command with an error (for example
    ``WRONGTYPE`` when a lock's key holds something that is not a lock).
    Whether retrying helps depends on the subclass; as itself, it does not
    (the same command meets the same error).
    """

    __module__ = "ferrolock"


class LockNotAcquired(LockError):
    """The lock could not be taken in the time allowed.

    Raised by ``with lock:`` and ``async with lock:`` when ``blocking_timeout``
    passes, or the :class:`Retry` strategy runs out of attempts, before the lock
    is taken. ``Lock.acquire`` returns ``False`` instead.

    Retrying can help: the holder may have released it since.
    """

    __module__ = "ferrolock"


class LockNotOwned(LockError, RuntimeError):
    """This handle does not hold the lock (any more).

    Raised by ``release`` and ``extend`` when the handle holds nothing, or when
    Redis shows that its hold had already expired or been taken over (nobody
    else's hold is touched then).

    Both a :class:`LockError` and a builtin :class:`RuntimeError` (what
    ``threading.Lock.release`` raises for a lock it does not hold), so either
    ``except`` clause catches it.

    Retrying the same call does not help: the hold is gone. Acquire again.
    """

    __module__ = "ferrolock"


class LockLost(LockError):
    """The lock was lost while held: mutual exclusion no longer covered the holder.

    Raised at the end of a ``with`` / ``async with`` block whose hold was lost
    while the block ran (renewal failed, the ttl ran out with ``auto_renew``
    off, or someone else took the lock over), when the block itself raised
    nothing. An exception raised by the block propagates unchanged instead (so
    Ctrl-C stays ``KeyboardInterrupt``), with a note (``__notes__``, Python
    3.11+) saying the lock was lost too; the loss is also logged.

    Retrying means doing the block's work again under a new hold: what it did
    while the hold was gone may have overlapped another holder's (fences let
    the store refuse such writes).
    """

    __module__ = "ferrolock"


class LockNotReplicated(LockError):
    """Fewer replicas than the client's ``replicas`` acknowledged a step in time.

    Raised under ``replica_policy="fail"`` by an acquire whose grant the
    replicas did not acknowledge within ``replica_timeout`` (the grant is undone
    first: nothing is left in Redis), and by ``extend`` (the hold keeps its
    previous validity). A renewal by the watchdog that is not acknowledged does
    not count, and is retried; if none is acknowledged before the hold's validity
    runs out, the hold is lost (``LockLost`` says the replicas are why).

    Retrying can help, once the replicas catch up.
    """

    __module__ = "ferrolock"


class LockConnectionError(LockError, ConnectionError):
    """Redis could not be reached, did not answer in time, or refused the
    credentials on a reconnect (they changed while the client ran).

    Both a :class:`LockError` and a builtin :class:`ConnectionError`, so either
    ``except`` clause catches it.

    Retrying can help: the server may be restarting, failing over, or out of
    reach for a while. A server that answers but does not fit the settings
    raises :class:`LockConfigurationError` instead, which is not one of these.
    """

    __module__ = "ferrolock"


class LockConfigurationError(LockError):
    """The server answered, but the client's settings do not fit it.

    Raised when connecting, with a message that names the server (never the
    password), the cause and what to change:

    * the URL points at a port where something other than Redis listens;
    * a password is given to a server that has none, or the credentials are
      refused, or the server needs a password and the URL gives none;
    * the database number is one the server does not have;
    * ``rediss://`` (TLS) points at a plain-TCP port, or the server's
      certificate is refused;
    * the server is older than Redis 6.2 (7.0 for a Cluster), or older than
      7.2 with ``replica_fsync=True`` (``WAITAOF`` came with 7.2).

    Retrying does not help: change the setting the message names. It is not
    a :class:`LockConnectionError` nor a builtin :class:`ConnectionError`, so
    a loop that retries those until Redis answers stops at once on it.
    """

    __module__ = "ferrolock"
