"""Leader election: ``client.election(name, ttl=..., max_hold=...)``.

Campaigners queue in arrival order for one term; the leader holds it like a
lock (renewed by the watchdog, reported lost like one), and its term number
strictly increases across leaders, so it serves as a fencing token. Changes
are pushed to watchers (pub/sub), not polled.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator, Optional, Type

from ._ferrolock import Election as _Election
from ._ferrolock import Leader
from .exceptions import LockNotAcquired, LockNotOwned

if TYPE_CHECKING:
    from ._ferrolock import Lock

__all__ = ["Election", "Leader", "Term"]


class Term:
    """This process's term as leader: a context manager that resigns at exit
    (raising :class:`LockLost` there if the term was lost meanwhile)."""

    def __init__(self, election: "Election", hold: "Lock[str]", value: str):
        self._election = election
        self._hold = hold
        self.value = value
        # The term's identity: kept, so it stays readable once the term ends.
        self._number: int = hold.fence or 0

    @property
    def number(self) -> int:
        """The term number: greater than every earlier leader's. It stays
        readable after the term ended (resigned or lost)."""
        return self._number

    @property
    def lost(self) -> bool:
        """True once the term was lost (not renewed in time, or taken over)."""
        return self._hold.lost

    @property
    def token(self) -> Optional[str]:
        """The term's owner token; None once it ended."""
        return self._hold.token

    def proclaim(self, value: str) -> None:
        """Publishes a new value without giving up the term."""
        self._election._core.proclaim(self._hold, value)
        self.value = value

    async def aproclaim(self, value: str) -> None:
        """Asyncio version of :meth:`proclaim`."""
        await self._election._core.aproclaim(self._hold, value)
        self.value = value

    def resign(self) -> None:
        """Gives the term up: the next campaigner leads within a round trip."""
        self._hold.release()

    async def aresign(self) -> None:
        """Asyncio version of :meth:`resign`."""
        await self._hold.arelease()

    async def wait_lost(self) -> bool:
        """Resolves when the term ends: True if it was lost."""
        return await self._hold.wait_lost()

    def __enter__(self) -> "Term":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        # None, not bool: the block's exception is never swallowed, and type
        # checkers know that code after a ``with`` that returns is unreachable.
        self._hold.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> "Term":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException] = None,
        tb: Optional[TracebackType] = None,
    ) -> None:
        await self._hold.__aexit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<ferrolock.Term {self._election.name!r} value={self.value!r} number={self._number}>"


class Election:
    """One election: ``campaign`` to lead, ``leader`` to see who does,
    ``observe`` / ``aobserve`` to follow every change."""

    def __init__(self, client: Any, name: str, *, ttl: float = 30.0, max_hold: Optional[float] = None):
        self._core = _Election(client, name)
        self._ttl = ttl
        self._max_hold = max_hold
        self.name = name
        self._term: Optional[Term] = None

    def _candidate(self, value: str, on_lost: Optional[Callable[[], object]]) -> "Lock[str]":
        return self._core.candidate(value, ttl=self._ttl, max_hold=self._max_hold, on_lost=on_lost)

    def campaign(
        self, value: str, timeout: Optional[float] = None, on_lost: Optional[Callable[[], object]] = None
    ) -> Term:
        """Blocks until this process leads with ``value`` (in arrival order
        among campaigners); :class:`LockNotAcquired` after ``timeout`` s."""
        hold = self._candidate(value, on_lost)
        if not hold.acquire(timeout=timeout):
            raise LockNotAcquired(f"election {self.name!r}: not elected within {timeout} s")
        self._term = Term(self, hold, value)
        return self._term

    async def acampaign(
        self, value: str, timeout: Optional[float] = None, on_lost: Optional[Callable[[], object]] = None
    ) -> Term:
        """Asyncio version of :meth:`campaign`."""
        hold = self._candidate(value, on_lost)
        if not await hold.aacquire(timeout=timeout):
            raise LockNotAcquired(f"election {self.name!r}: not elected within {timeout} s")
        self._term = Term(self, hold, value)
        return self._term

    def _leading(self) -> Term:
        if self._term is None:
            raise LockNotOwned(f"election {self.name!r}: this process has not campaigned")
        return self._term

    def proclaim(self, value: str) -> None:
        """This process's term (its last campaign) publishes ``value``;
        :class:`LockNotOwned` if it no longer leads."""
        self._leading().proclaim(value)

    async def aproclaim(self, value: str) -> None:
        """Asyncio version of :meth:`proclaim`."""
        await self._leading().aproclaim(value)

    def resign(self) -> None:
        """Gives this process's term up."""
        self._leading().resign()

    async def aresign(self) -> None:
        """Asyncio version of :meth:`resign`."""
        await self._leading().aresign()

    def leader(self) -> Optional[Leader]:
        """The current leader's value and term number, or None."""
        return self._core.leader()

    async def aleader(self) -> Optional[Leader]:
        """Asyncio version of :meth:`leader`."""
        return await self._core.aleader()

    def observe(self) -> Iterator[Optional[Leader]]:
        """Yields the leader now, then every change of leader or value as it
        happens (None while nobody leads)."""
        watcher = self._core.observer()
        while True:
            yield watcher.next()

    async def aobserve(self) -> AsyncIterator[Optional[Leader]]:
        """Asyncio version of :meth:`observe`."""
        watcher = self._core.observer()
        while True:
            yield await watcher.anext()

    def __repr__(self) -> str:
        return f"<ferrolock.Election {self.name!r} ttl={self._ttl}>"
