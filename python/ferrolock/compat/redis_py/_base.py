"""What the sync and asyncio redis-py ``Lock`` twins share: the
constructor, the token (bytes, as redis-py keeps it), and the ferrolock
handle behind each hold."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Union

from redis.exceptions import LockError, LockNotOwnedError

import ferrolock
from ferrolock import _ferrolock
from ferrolock.compat import client_for

Number = Union[int, float]


def _text(value: Union[str, bytes, memoryview], what: str) -> str:
    """A key or token as ferrolock's core takes it: UTF-8 text."""
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"ferrolock.compat.redis_py takes a {what} of UTF-8 text, got {bytes(value)!r}") from None


class LockBase:
    """redis-py's ``Lock`` attributes, and ferrolock's handles behind them."""

    def __init__(
        self,
        redis: Any,
        name: Union[str, bytes, memoryview],
        timeout: Optional[Number] = None,
        sleep: Number = 0.1,
        blocking: bool = True,
        blocking_timeout: Optional[Number] = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
        *,
        auto_renew: bool = False,
        on_lost: Optional[Callable[[], object]] = None,
    ) -> None:
        self.redis = redis
        self.name: Any = name  # as given (redis-py takes str, bytes or memoryview)
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local: Any = threading.local() if self.thread_local else SimpleNamespace()
        self.local.token = None
        self.auto_renew = auto_renew
        self.on_lost = on_lost
        self._client = client_for(redis)
        self._key = _text(name, "lock name")
        # The ferrolock handle of each hold this object took, by its token:
        # with thread_local, each thread's token is its own.
        self._holds: Dict[bytes, ferrolock.Lock] = {}

    def _encoder(self) -> Any:
        try:
            return self.redis.connection_pool.get_encoder()
        except AttributeError:  # a RedisCluster
            return self.redis.get_encoder()

    def _token_of(self, token: Optional[Union[str, bytes]]) -> Optional[bytes]:
        """A token the caller gave, encoded as redis-py encodes it."""
        return None if token is None else self._encoder().encode(token)

    def _ttl(self) -> Optional[Number]:
        """The hold's time to live: redis-py takes a hold without expiry when ``timeout`` is falsy."""
        return self.timeout if self.timeout else None

    def _new_hold(self, token: Optional[bytes], sleep: Number) -> ferrolock.Lock:
        """A ferrolock handle for one acquire, polling every ``sleep`` as redis-py does."""
        ttl = self._ttl()
        return _ferrolock._plain_lock(
            self._client,
            self._key,
            ttl=ttl,
            token=None if token is None else _text(token, "token"),
            auto_renew=bool(self.auto_renew and ttl),
            on_lost=self.on_lost,
            retry=ferrolock.Retry.fixed(max(float(sleep), 0.001)),
        )

    def _keep(self, hold: ferrolock.Lock) -> bytes:
        """Keeps the handle of a hold just taken; returns its token, as bytes."""
        for token, old in list(self._holds.items()):
            if old.token is None or old.lost:
                self._holds.pop(token, None)
        token = str(hold.token).encode()
        self._holds[token] = hold
        return token

    def _hold_of(self, token: bytes) -> ferrolock.Lock:
        """The handle holding ``token``: this object's own, or one restored
        from the token (a token set by hand, or a hold taken by another object)."""
        hold = self._holds.get(token)
        if hold is not None and hold.token is not None:
            return hold
        return _ferrolock._plain_lock(self._client, self._key, ttl=self._ttl(), token=_text(token, "token"), adopt=True)

    def _token_to_release(self) -> bytes:
        """The token ``release`` gives up, or redis-py's ``LockError`` when there is none."""
        token = self.local.token
        if token is None:
            raise LockError("Cannot release a lock that's not owned or is already unlocked.", lock_name=self.name)
        return token  # type: ignore[no-any-return]

    def _token_to_extend(self, verb: str) -> bytes:
        """The token ``extend`` or ``reacquire`` (``verb``) acts on, or
        redis-py's ``LockError`` when there is none or no timeout to move."""
        token = self.local.token
        if token is None:
            raise LockError(f"Cannot {verb} an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError(f"Cannot {verb} a lock with no timeout", lock_name=self.name)
        return token  # type: ignore[no-any-return]

    def _not_owned(self, verb: str) -> LockNotOwnedError:
        """redis-py's error for a ``verb`` the key no longer allows this token."""
        return LockNotOwnedError(f"Cannot {verb} a lock that's no longer owned", lock_name=self.name)

    @staticmethod
    def _wait(blocking: Any, blocking_timeout: Optional[Number]) -> Dict[str, Any]:
        """ferrolock's acquire arguments for redis-py's ``blocking`` and ``blocking_timeout``."""
        if not blocking:
            return {"blocking": False}
        return {"blocking": True, "timeout": -1 if blocking_timeout is None else max(float(blocking_timeout), 0.0)}

    @property
    def hold(self) -> Optional[ferrolock.Lock]:
        """The ferrolock :class:`~ferrolock.Lock` handle of the hold
        ``local.token`` names, taken by this object, or ``None``: its
        ``fence``, ``lost``, ``ttl()``, ``wait_lost()``."""
        token = getattr(self.local, "token", None)  # another thread's local has none yet
        return None if token is None else self._holds.get(token)

    @property
    def fence(self) -> Optional[int]:
        """The fence of the hold ``local.token`` names (strictly greater than
        every earlier hold's of the name taken through ferrolock: the
        server's clock in microseconds when it was taken), or ``None``."""
        hold = self.hold
        return None if hold is None else hold.fence

    @property
    def lost(self) -> bool:
        """Whether the hold ``local.token`` names was lost: its timeout ran
        out, or it was taken over or deleted, before it was released."""
        hold = self.hold
        return hold is not None and hold.lost
