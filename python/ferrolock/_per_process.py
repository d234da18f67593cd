"""Objects built once per process, shared by its threads: what an
integration keeps one of (a :class:`~ferrolock.Client` per URL), rebuilt in a
forked child, which must not share its parent's connections."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable, Dict, Generic, Hashable, TypeVar

V = TypeVar("V")


class PerProcess(Generic[V]):
    """Values by key, each built by the first :meth:`get` of its key in this
    process (once, whichever threads ask together) and forgotten in a forked
    child, whose first :meth:`get` builds its own."""

    def __init__(self) -> None:
        self._values: Dict[Hashable, V] = {}
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=_forget_in_child(weakref.ref(self)))

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value for ``key``, built by ``build()`` when this process has
        none; an exception from ``build`` leaves none, for the next call."""
        value = self._values.get(key)
        if value is not None:
            return value
        with self._lock:
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = build()
            return value

    def clear(self) -> None:
        """Forgets every value: the next :meth:`get` of a key builds it again.
        What was built is not closed; whoever holds it may go on using it."""
        self._values = {}

    def _after_fork(self) -> None:
        # Another thread of the parent may have held the lock at the fork.
        self._lock = threading.Lock()
        self._values = {}


def _forget_in_child(ref: "weakref.ref[PerProcess[Any]]") -> Callable[[], None]:
    """The fork hook of the :class:`PerProcess` behind ``ref`` (held weakly,
    so that registering it keeps nothing alive)."""

    def hook() -> None:
        values = ref()
        if values is not None:
            values._after_fork()

    return hook
