"""Fencing at the storage: the store refuses a stale holder's late write.

A holder can lose its lock without knowing it: a GC pause, a SIGSTOP, a
partition or a failover outlasts its ttl, another process takes the lock and
writes, and then the first one wakes up and writes too. Every hold carries a
fence that is strictly greater than every earlier one for the name
(``lock.fence``), so the store can tell the two writes apart if it checks
the fence where the data is written: it keeps the last fence written with the
data and takes a write only when the fence offered is not below it. The
guards here do that check and the write in one atomic step:

- :mod:`ferrolock.fencing.redis`: ``RedisGuard`` / ``AsyncRedisGuard``, for
  data in Redis written with redis-py (extra ``redis``);
- :mod:`ferrolock.fencing.sqlalchemy`: ``fenced_update`` /
  ``afenced_update``, an ``UPDATE`` of one row conditioned on its fence
  column, for SQL databases through SQLAlchemy (extra ``sqlalchemy``).

A refused write raises :class:`StaleFence` (also ``ferrolock.StaleFence``).
An equal fence is taken: it is the same hold writing again. A guard takes the
fence as an ``int`` or as anything with a ``.fence`` (a :class:`~ferrolock.Lock`,
an :class:`~ferrolock.RWMutex`'s writer, a semaphore's permit); pass an
election's ``term.number``.
"""

from __future__ import annotations

from typing import Optional, Protocol, Union

from ..exceptions import LockError

__all__ = ["Fenced", "StaleFence", "fence_of"]

# The largest fence taken, exclusive: Lua numbers (a Redis script) and JSON
# readers hold every integer below 2**53 exactly. ferrolock's fences (server
# microseconds, about 1.8e15 in 2026) are far below it.
FENCE_LIMIT = 2**53


class Fenced(Protocol):
    """Anything with a ``fence``: a held :class:`~ferrolock.Lock`, an
    RWMutex's writer, a semaphore's permit."""

    @property
    def fence(self) -> Optional[int]:
        """The fence of the current hold, or ``None`` when it holds nothing."""
        ...


FenceLike = Union[int, Fenced]
"""What a guard takes as a fence: an ``int``, or a handle with ``.fence``."""


class StaleFence(LockError):
    """A write refused by a fencing guard: its fence is below the last one
    recorded for the data.

    The holder that offered it lost its lock some time before (it was paused
    or cut off past its ttl, or a failover handed the lock to another), and a
    later holder has written with a greater fence since. Nothing of the
    refused write was applied; the later holder's data stands. A
    :class:`~ferrolock.LockError`.
    """

    fence: int
    """The fence offered with the refused write."""
    recorded: int
    """The fence on record for the data: greater than :attr:`fence`."""
    resource: str
    """The data the write was for (a Redis key, a table's row)."""

    def __init__(self, fence: int, recorded: int, resource: str) -> None:
        super().__init__(
            f"write to {resource} refused: its fence {fence} is below fence {recorded}, on record there since a "
            "later holder wrote; this holder lost its lock before it wrote, so the later holder's data stands"
        )
        self.fence = fence
        self.recorded = recorded
        self.resource = resource

    def __reduce__(self) -> tuple[type[StaleFence], tuple[int, int, str]]:
        return (type(self), (self.fence, self.recorded, self.resource))


def fence_of(fence: FenceLike) -> int:
    """``fence`` as an ``int``: the value itself, or ``fence.fence`` of a handle.

    Raises:
        TypeError: ``fence`` is neither an ``int`` nor has an ``int`` ``.fence``.
        ValueError: the handle holds nothing (``fence`` is ``None``: acquire it
            first; an RWMutex's reader never has one), or the fence is not
            between 1 and 2**53 - 1.
    """
    value = fence if isinstance(fence, int) else getattr(fence, "fence", fence)
    if value is None:
        raise ValueError(
            f"{fence!r} holds nothing, so it has no fence: write while it holds (after acquire); an RWMutex's "
            "reader has no fence, write under its writer"
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a fence is an int or a handle with .fence (a Lock), not {type(fence).__name__}")
    if not 0 < value < FENCE_LIMIT:
        raise ValueError(f"fence {value} is out of range: a fence is between 1 and 2**53 - 1")
    return value
