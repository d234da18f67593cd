"""The fencing guard for SQL databases, through SQLAlchemy 2.x.

The row keeps the fence of its last fenced write in a column of its own
(``fence`` by default: a ``BigInteger``, ``NULL`` until the first fenced
write; ferrolock's fences need 64 bits). :func:`fenced_update` writes one
row, picked by its primary key, with a single statement::

    UPDATE orders SET status = :status, fence = :fence
     WHERE orders.id = :id AND (orders.fence IS NULL OR orders.fence <= :fence)

so the database applies the write only when the fence offered is not below
the one on record (an equal fence is the same hold writing again), and
records it. When no row was updated, it looks whether the row is there:
a missing row raises ``sqlalchemy.exc.NoResultFound``, a greater fence
:class:`~ferrolock.StaleFence`. It runs in the caller's transaction (a Core
``Connection`` or an ORM ``Session``; ``afenced_update`` for their asyncio
versions), which the caller commits. Needs SQLAlchemy
(``pip install SQLAlchemy``, or ferrolock's ``sqlalchemy`` extra).
"""

from __future__ import annotations

from typing import Any, Mapping, Union

try:
    import sqlalchemy as sa
    from sqlalchemy.exc import NoInspectionAvailable, NoResultFound
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.orm import Mapper, Session
except ImportError as exc:  # tests/integrations/test_fencing.py imports it with the package hidden
    raise ImportError(
        "ferrolock.fencing.sqlalchemy needs SQLAlchemy 2: pip install SQLAlchemy, or install ferrolock with its "
        "[sqlalchemy] extra"
    ) from exc

from . import FenceLike, StaleFence, fence_of

__all__ = ["afenced_update", "fenced_update"]

Bind = Union[sa.Connection, Session]
AsyncBind = Union[AsyncConnection, AsyncSession]


class _Statements:
    """The fenced UPDATE of one row and, when it updated nothing, the SELECT
    of that row's fence that tells a missing row from a stale fence."""

    def __init__(self, target: Any, key: Any, values: Mapping[str, Any], fence: FenceLike, fence_column: str):
        try:
            found = sa.inspect(target)
        except NoInspectionAvailable:
            found = None
        table = found.local_table if isinstance(found, Mapper) else found
        if not isinstance(table, sa.Table):
            raise TypeError(f"fenced_update writes to a Table or an ORM class mapped to one, not {target!r}")
        primary_key = list(found.primary_key) if isinstance(found, Mapper) else list(table.primary_key.columns)
        if fence_column not in table.c:
            raise ValueError(
                f"table {table.name!r} has no column {fence_column!r} for the fence: add one (a BigInteger, "
                "nullable) or name yours with fence_column="
            )
        if not primary_key:
            raise ValueError(f"table {table.name!r} has no primary key: fenced_update picks its row by one")
        keys = tuple(key) if isinstance(key, tuple) else (key,)
        if len(keys) != len(primary_key):
            raise ValueError(
                f"table {table.name!r}'s primary key has {len(primary_key)} column(s) "
                f"({', '.join(c.name for c in primary_key)}), but the key given has {len(keys)}: {key!r}"
            )
        if fence_column in values:
            raise ValueError(f"values sets the fence column {fence_column!r}: the guard sets it, to the fence")
        self.fence = fence_of(fence)
        self.column = table.c[fence_column]
        self.row = sa.and_(*(c == k for c, k in zip(primary_key, keys)))
        self.resource = f"row {key!r} of table {table.name!r}"
        self.update = (
            sa.update(target)
            .where(self.row, sa.or_(self.column.is_(None), self.column <= self.fence))
            .values({**values, self.column: self.fence})
        )
        self.select = sa.select(self.column).where(self.row)

    def refusal(self, row: Any) -> Exception:
        """The error for an update that changed nothing, given the row's fence
        as selected after it (``None``: no row)."""
        if row is None:
            return NoResultFound(f"fenced_update wrote nothing: no {self.resource} (nothing matches its primary key)")
        if row[0] is None or row[0] <= self.fence:  # committed by another transaction since the update ran
            return NoResultFound(f"fenced_update wrote nothing: no {self.resource} when it ran (it was written since)")
        return StaleFence(self.fence, row[0], self.resource)


def fenced_update(
    bind: Bind,
    target: Any,
    key: Any,
    values: Mapping[str, Any],
    *,
    fence: FenceLike,
    fence_column: str = "fence",
) -> None:
    """Update the row of ``target`` whose primary key is ``key`` with
    ``values`` if ``fence`` is not below the fence on record in its
    ``fence_column``, and record ``fence`` there, in one ``UPDATE``.

    Args:
        bind: a ``Connection`` or an ORM ``Session``; the update joins its
            transaction, which the caller commits.
        target: a ``Table``, or an ORM-mapped class (``values`` then names
            its attributes).
        key: the row's primary key: a value, or a tuple for a composite key.
        values: the columns to set (not the fence column: the guard sets it).
        fence: an ``int``, or a held handle (a Lock, whose ``.fence`` is read).
        fence_column: the column that records the fence (``BigInteger``, nullable).

    Raises:
        StaleFence: the row records a greater fence; it was not changed.
        sqlalchemy.exc.NoResultFound: no row has that primary key.
        ValueError: the table has no such fence column or no primary key, the
            key does not fit it, ``values`` sets the fence column, or the
            handle holds nothing.
    """
    statements = _Statements(target, key, values, fence, fence_column)
    if bind.execute(statements.update).rowcount == 0:  # type: ignore[attr-defined]
        raise statements.refusal(bind.execute(statements.select).first())


async def afenced_update(
    bind: AsyncBind,
    target: Any,
    key: Any,
    values: Mapping[str, Any],
    *,
    fence: FenceLike,
    fence_column: str = "fence",
) -> None:
    """Asyncio version of :func:`fenced_update`, for an ``AsyncConnection``
    or an ``AsyncSession``."""
    statements = _Statements(target, key, values, fence, fence_column)
    if (await bind.execute(statements.update)).rowcount == 0:  # type: ignore[attr-defined]
        raise statements.refusal((await bind.execute(statements.select)).first())
