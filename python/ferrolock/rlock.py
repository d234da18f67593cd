"""A reentrant lock: ``client.rlock(name, **options)``, in ``threading.RLock``'s shape.

The thread (or asyncio or trio task) that holds it may take it again; each take adds
one to a count, each release takes one off, and the hold in Redis is given
back when the count returns to zero. The hold is a plain :class:`Lock`'s (one
fresh handle per first take), so everything that reads a Lock (``ferrolock
ls``, ``inspect``, ``Client.scan``, the pytest plugin) reads it unchanged.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Coroutine, Literal, Optional, Type, Union

from ._ferrolock import Lock
from .exceptions import LockLost

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._ferrolock import Client, _LockOptions, _Names, _Seconds

__all__ = ["RLock"]


def _caller() -> object:
    """Who takes the lock: the running asyncio or trio task, or else the thread."""
    try:
        task: object = asyncio.current_task()
    except RuntimeError:  # no event loop running in this thread
        task = None
        if "trio" in sys.modules:  # imported, so maybe running (no dependency of ours)
            from ._trio import current

            task = current()
    return task if task is not None else threading.get_ident()


class RLock:
    """A reentrant distributed lock: its owner may take it again.

    The owner is the asyncio or trio task that took it when one is running (for the
    sync and the async API alike), else the thread. The owner's takes are
    counted and the lock stays held in Redis until the count is back at zero;
    any other thread, task or process waits for it like for a :class:`Lock`.
    ``with`` / ``async with`` take it as a Lock's do (``blocking_timeout``,
    :class:`LockNotAcquired`) and the outermost block ends in
    :class:`LockLost` if the hold was lost. A nested take (``acquire``,
    ``with``, ``async with``) of a hold known to be lost (:attr:`lost`)
    raises :class:`LockLost` at once, leaving the count as it was: no nested
    block runs unguarded. Keyword arguments are the handle
    options of :class:`Lock` (``fair=True`` included), but ``token``: a
    reentrant lock does not restore a hold taken elsewhere.

    Raises:
        TypeError: an argument has the wrong type, or a keyword is unknown.
        ValueError: an argument is out of range (see :class:`Lock`), or
            ``token`` is given.
    """

    def __init__(self, client: Client, name: _Names, **options: Unpack[_LockOptions]):
        if options.get("token") is not None:
            raise ValueError(
                "an RLock takes no token: restore a hold taken elsewhere with client.lock(name, token=...)"
            )
        self._client = client
        self._options = options
        # Checks the name and options now; answers locked() and checks timeouts.
        self._probe = Lock(client, name, **options)
        self._guard = threading.Lock()  # over the three fields below
        self._owner: object = None
        self._count = 0
        self._hold: Optional[Lock] = None

    # -- the count -------------------------------------------------------------

    def _check(self, blocking: Union[bool, Literal[0, 1]], timeout: Optional[_Seconds]) -> None:
        """Raises what ``Lock.acquire`` raises for these arguments, sending
        nothing: the operation is closed before it is ever stepped."""
        self._probe.aacquire(blocking, timeout).close()

    def _reenter(self, me: object) -> bool:
        """One more take if ``me`` holds it already. A hold known to be lost
        takes no more: the nested block would run unguarded, so it raises
        :class:`LockLost` and the count stays (the outermost exit still
        reports the loss)."""
        with self._guard:
            if self._count and self._owner == me:
                hold = self._hold
                if hold is not None and hold.lost:
                    raise LockLost(
                        f"lock {self._probe.name!r} was lost while held (count {self._count}): "
                        "a nested take would run unguarded, so it is refused"
                    )
                self._count += 1
                return True
            return False

    def _took(self, me: object, hold: Lock) -> None:
        with self._guard:
            self._owner, self._count, self._hold = me, 1, hold

    def _leave(self) -> Optional[Lock]:
        """One take fewer; the hold to give back when that was the last."""
        me = _caller()
        with self._guard:
            if not self._count or self._owner != me:
                raise RuntimeError("cannot release un-acquired lock")
            self._count -= 1
            if self._count:
                return None
            hold, self._owner, self._hold = self._hold, None, None
            return hold

    def _fresh(self) -> Lock:
        return Lock(self._client, self._probe.name, **self._options)

    # -- sync ----------------------------------------------------------------

    def acquire(self, blocking: Union[bool, Literal[0, 1]] = True, timeout: Optional[_Seconds] = None) -> bool:
        """Takes the lock, or one more time if the caller holds it already.

        Args and errors as for :meth:`Lock.acquire` (``timeout`` in seconds;
        ``None``: the ``blocking_timeout`` option, no limit when it is unset;
        ``-1``: no limit).

        Returns:
            ``True`` once held; ``False`` when the wait passed (or, with
            ``blocking=False``, another holder has it).

        Raises:
            LockLost: a nested take while the caller's hold is known to be
                lost (:attr:`lost`); the count stays as it was.
        """
        me = _caller()
        if self._owner == me and self._count:  # only ``me`` changes that: nobody else can take it from me
            self._check(blocking, timeout)  # a first take's Lock.acquire checks them itself
            if self._reenter(me):
                return True
        hold = self._fresh()
        if not hold.acquire(blocking, timeout):
            return False
        self._took(me, hold)
        return True

    def release(self) -> None:
        """Takes one off the count; at zero, releases the lock in Redis.

        Raises:
            RuntimeError: the caller does not hold it (as ``threading.RLock``).
            LockNotOwned: at zero, the hold was lost meanwhile.
        """
        hold = self._leave()
        if hold is not None:
            hold.release()

    def __enter__(self) -> RLock:
        me = _caller()
        if not self._reenter(me):
            hold = self._fresh()
            hold.__enter__()
            self._took(me, hold)
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        hold = self._leave()
        return False if hold is None else hold.__exit__(exc_type, exc, tb)

    # -- asyncio ---------------------------------------------------------------

    def aacquire(
        self, blocking: Union[bool, Literal[0, 1]] = True, timeout: Optional[_Seconds] = None
    ) -> Coroutine[Any, Any, bool]:
        """:meth:`acquire` for the current task; bad arguments raise at the
        call, before any await."""
        self._check(blocking, timeout)
        return self._aacquire(blocking, timeout)

    async def _aacquire(self, blocking: Union[bool, Literal[0, 1]], timeout: Optional[_Seconds]) -> bool:
        me = _caller()
        if self._reenter(me):
            return True
        hold = self._fresh()
        if not await hold.aacquire(blocking, timeout):
            return False
        self._took(me, hold)
        return True

    async def arelease(self) -> None:
        """:meth:`release` for the current task."""
        hold = self._leave()
        if hold is not None:
            await hold.arelease()

    async def __aenter__(self) -> RLock:
        me = _caller()
        if not self._reenter(me):
            hold = self._fresh()
            await hold.__aenter__()
            self._took(me, hold)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException] = None,
        tb: Optional[TracebackType] = None,
    ) -> Literal[False]:
        hold = self._leave()
        return False if hold is None else await hold.__aexit__(exc_type, exc, tb)

    # -- state ---------------------------------------------------------------

    @property
    def name(self) -> Union[str, tuple[str, ...]]:
        """The lock name (a tuple of names for a multi-lock)."""
        return self._probe.name

    @property
    def count(self) -> int:
        """How many times the owner holds it now (0: nobody in this process)."""
        return self._count

    def owned(self) -> bool:
        """Whether the calling thread (or task) holds it, as this process
        counts (no call to Redis: :attr:`lost` says whether the hold ended)."""
        with self._guard:
            return bool(self._count) and self._owner == _caller()

    def locked(self) -> bool:
        """Whether anybody holds the name in Redis (any process)."""
        return self._probe.locked()

    async def alocked(self) -> bool:
        """Asyncio version of :meth:`locked`."""
        return await self._probe.alocked()

    @property
    def lost(self) -> bool:
        """True once the current hold was lost (not renewed in time, or
        released behind its back); False when not held."""
        hold = self._hold
        return hold is not None and hold.lost

    @property
    def token(self) -> Optional[str]:
        """The current hold's owner token; None when not held."""
        hold = self._hold
        return None if hold is None else hold.token

    @property
    def fence(self) -> Optional[int]:
        """The current hold's fencing token; None when not held."""
        hold = self._hold
        return None if hold is None else hold.fence

    def __repr__(self) -> str:
        hold, count = self._hold, self._count
        state = f" held count={count} fence={hold.fence}" if hold is not None and count else ""
        return f'<ferrolock.RLock "{", ".join(self._probe.names)}"{state}>'
