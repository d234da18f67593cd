"""Types of ``ferrolock._ferrolock``, the native (Rust/PyO3) core of ferrolock.

Types only: the documentation lives in the module itself (``help(ferrolock.Lock)``),
written once in the Rust bindings (``src/py/``). ``python -m mypy.stubtest
ferrolock._ferrolock`` checks this stub against the built module.
"""

import asyncio
import os
from collections.abc import Callable, Coroutine, Generator
from types import TracebackType
from typing import Any, ClassVar, Literal, TypeVar, final

from typing_extensions import Self, TypeAlias, disjoint_base

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
    "LockConnectionError",
]

_Seconds: TypeAlias = float
"""A number of seconds; ``int`` is accepted too."""

_Names: TypeAlias = str | list[str] | tuple[str, ...]
"""One lock name, or a list or tuple of names for a multi-lock."""

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

class LockConnectionError(LockError, ConnectionError):
    ...

# ---------------------------------------------------------------------------
# Retry

@final
class Retry:
    def __new__(cls) -> Self: ...
    def __hash__(self) -> int:
        ...

    def __eq__(self, other: object) -> bool:
        ...

    def __ne__(self, other: object) -> bool:
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

    def __eq__(self, other: object) -> bool:
        ...

    def __ne__(self, other: object) -> bool:
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

@disjoint_base
class Client:
    ...

    def __new__(
        cls,
        url: str | None = None,
        *,
        connect_timeout: _Seconds | None = None,
        command_timeout: _Seconds | None = None,
        prefix: str | None = None,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> Self:
        ...

    @property
    def prefix(self) -> str:
        ...

    def force_release(self, name: str) -> bool:
        ...

    def aforce_release(self, name: str) -> Operation[bool]:
        ...

    def inspect(self, name: str) -> LockInfo | None:
        ...

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
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
        fair: bool = False,
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
        *,
        writer_preference: bool | None = None,
        fair: bool = False,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        on_lost: Callable[[], object] | None = None,
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

    def read(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock:
        ...

    def write(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock:
        ...

    def try_read(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock | None:
        ...

    def try_write(
        self,
        *,
        ttl: _Seconds | None = None,
        auto_renew: bool = True,
        blocking_timeout: _Seconds | None = None,
        retry: Retry | None = None,
        metadata: str | None = None,
        token: str | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> Lock | None:
        ...

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
