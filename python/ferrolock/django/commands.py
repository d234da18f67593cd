"""Keep a management command from running twice at once: ``single_instance``."""

from __future__ import annotations

import datetime
import functools
import logging
import math
import os
import socket
from typing import Any, Callable, Optional, TypeVar, overload

from django.core.management.base import BaseCommand, CommandError

import ferrolock

H = TypeVar("H", bound=Callable[..., Any])

log = logging.getLogger("ferrolock.django")

NAME_PREFIX = "django:command:"
"""The default lock name of a guarded command is this followed by the command's name."""

_checker: Optional[ferrolock.Client] = None  # checks the lock options at decoration (a Client does no I/O)


def command_name(command: BaseCommand) -> str:
    """The name ``manage.py`` knows ``command`` by: the last part of its
    module's name (``myapp.management.commands.nightly`` is ``nightly``)."""
    return type(command).__module__.rpartition(".")[2]


@overload
def single_instance(handle: H, /) -> H: ...


@overload
def single_instance(
    *, name: Optional[str] = None, ttl: float = 30.0, wait: Optional[float] = 0.0
) -> Callable[[H], H]: ...


def single_instance(
    handle: Optional[H] = None, /, *, name: Optional[str] = None, ttl: float = 30.0, wait: Optional[float] = 0.0
) -> Any:
    """Decorate a management command's ``handle`` so that one run at a time
    goes on, across processes and hosts sharing the Redis of ``FERROLOCK``.

    The run holds a ferrolock ``Lock`` named ``name``
    (default: ``"django:command:"`` and the command's name, e.g.
    ``django:command:nightly``) from before ``handle`` starts until it
    returns or raises; the watchdog renews it every ``ttl / 3``. A process
    that dies (``kill -9``, a lost host) frees it within ``ttl`` seconds.
    Use it bare (``@single_instance``) or with arguments::

        class Command(BaseCommand):
            @single_instance(ttl=60)
            def handle(self, *args, **options): ...

    A run that finds the lock held (after ``wait``) does not start: it
    raises ``django.core.management.CommandError`` (``manage.py``
    prints it and exits with status 1) naming the command, the lock and its
    holder (host, pid and start time). A run that cannot reach Redis raises
    ``CommandError`` too, before ``handle`` runs. A hold lost during the run
    (Redis unreachable for longer than ``ttl``) does not stop ``handle``;
    when it returns, the run raises ``CommandError`` saying another run may
    have overlapped it.

    Args:
        handle: the ``handle`` method, when used without parentheses.
        name: the lock name; commands given the same name exclude each other.
        ttl: seconds the lock outlives a process that died holding it.
        wait: seconds to wait for a run in progress to end; ``0`` (the
            default) tries once, ``None`` waits as long as it takes.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``name`` is empty, ``ttl`` is out of the range a Lock
            takes, or ``wait`` is negative or not finite.
    """
    _check(name, ttl, wait)

    def decorate(handle: H) -> H:
        if not callable(handle):
            raise TypeError(f"single_instance decorates a command's handle method, not {type(handle).__name__}")

        @functools.wraps(handle)
        def run(command: BaseCommand, *args: Any, **options: Any) -> Any:
            return _run_holding(
                command,
                name or NAME_PREFIX + command_name(command),
                ttl,
                wait,
                lambda: handle(command, *args, **options),
            )

        return run  # type: ignore[return-value]

    return decorate if handle is None else decorate(handle)


def _check(name: Optional[str], ttl: float, wait: Optional[float]) -> None:
    global _checker
    if name is not None and not isinstance(name, str):
        raise TypeError(f"single_instance(name=...) takes a str, not {type(name).__name__}")
    if wait is not None:
        if isinstance(wait, bool) or not isinstance(wait, (int, float)):
            raise TypeError(f"single_instance(wait=...) takes seconds as a number or None, not {type(wait).__name__}")
        if wait < 0 or not math.isfinite(wait):
            raise ValueError(
                f"single_instance(wait={wait!r}): give 0 (try once), a positive number of seconds, "
                "or None (wait as long as it takes)"
            )
    if _checker is None:
        _checker = ferrolock.Client()
    ferrolock.Lock(_checker, NAME_PREFIX if name is None else name, ttl=ttl)  # the Lock's own checks of name and ttl


def _run_holding(command: BaseCommand, name: str, ttl: float, wait: Optional[float], body: Callable[[], Any]) -> Any:
    from . import get_client

    cmd = command_name(command)
    client = get_client()
    lock = client.lock(name, ttl=ttl, metadata=_holder(cmd))
    try:
        taken = lock.acquire(timeout=-1 if wait is None else wait)
    except ferrolock.LockError as exc:
        raise CommandError(f"{cmd} did not start: its lock {name!r} could not be taken: {exc}") from exc
    if not taken:
        raise CommandError(_busy(client, cmd, name, wait))
    try:
        result = body()
    except BaseException:
        _release(lock, cmd, quiet=True)
        raise
    _release(lock, cmd, quiet=False)
    return result


def _holder(cmd: str) -> str:
    """What a run stores beside its hold, for the message of a run that finds it held."""
    since = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"manage.py {cmd} on {socket.gethostname()}, pid {os.getpid()}, since {since}"


def _busy(client: ferrolock.Client, cmd: str, name: str, wait: Optional[float]) -> str:
    try:
        info = client.inspect(name)
    except ferrolock.LockError:
        info = None
    holder = info.metadata if info is not None and info.metadata else "another holder"
    waited = f"still running after {wait:g} s of waiting" if wait else "already running"
    return (
        f"{cmd} is {waited} (lock {name!r} held by {holder}); this run did not start. "
        "To wait for it instead, decorate handle with @single_instance(wait=SECONDS)."
    )


def _release(lock: ferrolock.Lock, cmd: str, *, quiet: bool) -> None:
    lost = lock.lost
    if not lost:
        try:
            lock.release()
        except ferrolock.LockNotOwned:
            lost = True
        except ferrolock.LockError as exc:  # unreachable: the hold ends in Redis after its ttl
            log.warning("%s: its lock %r could not be released (it expires after its ttl): %s", cmd, lock.name, exc)
    if lost and not quiet:
        raise CommandError(
            f"{cmd} ran to its end, but its lock {lock.name!r} was lost meanwhile (Redis "
            "unreachable for longer than its ttl, or its key removed): another run may have "
            "overlapped this one"
        )
