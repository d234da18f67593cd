"""What a type checker makes of ferrolock's API: run by tests/docs/test_typing.py
with mypy --strict and basedpyright, never executed.

Every line a checker must reject carries an ignore comment naming the error;
mypy's --strict (--warn-unused-ignores) then fails if one of them is accepted,
so this file tests both what passes and what fails. Lines that must pass
carry none."""

from __future__ import annotations

from typing import Union

import ferrolock
from ferrolock import Lock, Retry


def elected_term_number(client: ferrolock.Client) -> int:
    # Term.__exit__ returns None: the `return` inside the block is no
    # false "missing return statement".
    with client.election("cron").campaign("worker-1") as term:
        return term.number


async def elected_term_number_async(client: ferrolock.Client) -> int:
    async with await client.election("cron").acampaign("worker-1") as term:
        return term.number


def held_fence(client: ferrolock.Client) -> int | None:
    with client.lock("orders:42") as lock:
        return lock.fence


async def held_fence_async(client: ferrolock.Client) -> int | None:
    async with client.lock("orders:42") as lock:
        return lock.fence


def held_by_rlock(client: ferrolock.Client) -> bool:
    with client.rlock("ledger"):
        return True


def names(client: ferrolock.Client) -> list[str]:
    # A lock on one name has a str name; a multi-lock's may be a tuple.
    one: str = client.lock("x").name.upper()
    direct: str = Lock(client, "x").name
    permit: str = client.semaphore("s", 3).name
    reader: str = client.rwmutex("rw").read().name
    several: Union[str, tuple[str, ...]] = client.multi_lock(["a", "b"]).name
    listed: Union[str, tuple[str, ...]] = client.lock(["a", "b"]).name
    annotated: Lock[str] = client.lock("y")
    wide: Lock = annotated  # Lock[str] is a Lock
    assert isinstance(several, tuple) and isinstance(listed, tuple) and wide
    return [one, direct, permit, reader, *client.multi_lock(["c"]).names]


def not_a_str(client: ferrolock.Client) -> None:
    client.multi_lock(["a", "b"]).name.upper()  # type: ignore[union-attr]


def acquire_flags(lock: Lock) -> bool:
    return lock.acquire(blocking=1) and lock.acquire(0) and lock.acquire(True, timeout=2)


def bad_blocking(lock: Lock) -> None:
    lock.acquire(blocking=2)  # type: ignore[arg-type]


def options_as_documented(client: ferrolock.Client) -> None:
    client.lock("x", ttl=5, retry=Retry.fixed(0.1), on_lost=lambda: None, fair=True, blocking_timeout=0.3)
    client.rlock("x", ttl=5, auto_renew=False)
    client.multi_lock(["a", "b"], blocking_timeout=2.0)
    client.semaphore("s", 3, metadata="w")
    client.rwmutex("rw", writer_preference=True, fair=False).write(ttl=1.5)
    ferrolock.RWMutex(client, "rw", ttl=2).try_read(token=None)
    Lock(client, "y", auto_renew=False)
    ferrolock.RLock(client, "y", metadata="m")

    @client.synchronized("job", ttl=60)
    def job() -> int:
        return 1


# Every factory refuses a misspelt option.
def option_typos(client: ferrolock.Client, rw: ferrolock.RWMutex) -> None:
    Lock(client, "x", tll=5)  # type: ignore[call-arg]
    client.lock("x", tll=5)  # type: ignore[call-arg]
    client.rlock("x", tll=5)  # type: ignore[call-arg]
    client.multi_lock(["a"], tll=5)  # type: ignore[call-arg]
    client.semaphore("s", 2, tll=5)  # type: ignore[call-arg]
    client.synchronized("s", tll=5)  # type: ignore[call-arg]
    client.rwmutex("rw", writer_preferece=True)  # type: ignore[call-arg]
    ferrolock.RWMutex(client, "rw", tll=5)  # type: ignore[call-arg]
    ferrolock.RLock(client, "x", tll=5)  # type: ignore[call-arg]
    rw.read(tll=5)  # type: ignore[call-arg]
    rw.write(tll=5)  # type: ignore[call-arg]
    rw.try_read(tll=5)  # type: ignore[call-arg]
    rw.try_write(tll=5)  # type: ignore[call-arg]
    rw.read(fair=True)  # type: ignore[call-arg]
    client.election("e", tll=5)  # type: ignore[call-arg]


# ... and a mistyped one.
def option_types(client: ferrolock.Client) -> None:
    client.lock("x", ttl="5")  # type: ignore[arg-type]
    client.semaphore("s", 2, auto_renew="yes")  # type: ignore[arg-type]
    client.rwmutex("rw", fair=1.0)  # type: ignore[arg-type]


def retry_is_hashable() -> set[Retry]:
    return {Retry.none(), Retry.fixed(0.1)}
