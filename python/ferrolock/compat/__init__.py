"""Drop-in classes for the locks teams run today, on the same keys.

- :mod:`ferrolock.compat.redis_py`: ``Lock`` with redis-py's ``Lock``
  constructor and methods (``redis.lock.Lock``, 8.1), and
  :mod:`ferrolock.compat.redis_py.asyncio` its asyncio twin
  (``redis.asyncio.lock.Lock``);
- :mod:`ferrolock.compat.redis_lock`: ``Lock`` with python-redis-lock's
  (4.0.1), its exceptions, and ``reset_all``.

Each takes your own redis-py client and keeps its hold where the library it
replaces keeps it (redis-py: the name itself, a string whose value is the
token; python-redis-lock: ``lock:<name>``, whose value is the lock's id), so
during a rolling deploy the old and the new processes exclude each other,
in both directions: neither deletes or extends the other's hold, a waiter
of either gets the lock when a holder of the other releases it. Migrating
is an import change. On top, each hold has ferrolock's extras: a fence from
the server's clock, the loss told (``lost``, ``on_lost``), renewal by the
process's watchdog where asked (no thread per lock), and acquires that
cancellation and Ctrl-C never leave held.

docs/migrating/redis-py.md and docs/migrating/python-redis-lock.md compare
each name and unit with ferrolock's own API and give the rolling-deploy
recipe.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import ferrolock

__all__ = ["client_for"]

_clients: "weakref.WeakKeyDictionary[Any, ferrolock.Client]" = weakref.WeakKeyDictionary()
_making = threading.Lock()


def client_for(redis: Any) -> ferrolock.Client:
    """The ferrolock :class:`~ferrolock.Client` for the deployment of the
    redis-py client ``redis`` (see :meth:`ferrolock.Client.from_redis`), made
    once per connection pool (once per ``RedisCluster``) and kept as long as
    the pool lives, so every lock on one redis-py client shares one.

    Raises:
        TypeError: ``redis`` is not a redis-py client or connection pool.
        ValueError: a setting of it cannot be carried over (the message
            names it).
    """
    owner = redis if hasattr(redis, "nodes_manager") else getattr(redis, "connection_pool", redis)
    try:
        return _clients[owner]
    except KeyError:
        pass
    except TypeError:  # an object that takes no weak reference: not kept
        return ferrolock.Client.from_redis(redis)
    with _making:
        client = _clients.get(owner)
        if client is None:
            client = _clients[owner] = ferrolock.Client.from_redis(redis)
        return client
