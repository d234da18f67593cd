"""Celery tasks that never run twice at once for the same arguments.

>>> from celery import Celery
>>> from ferrolock.celery import Singleton
>>> app = Celery("reports", broker="redis://127.0.0.1:6379/0")
>>> @app.task(base=Singleton, lock_ttl=60)
... def export(report_id): ...

``export.delay(7)`` takes the lock on ``export``'s name and its arguments
when it enqueues; while that task is queued or running, ``export.delay(7)``
returns the first one's ``AsyncResult`` (the same id) instead of a second
task, or raises :class:`DuplicateTask` with ``raise_on_duplicate=True``;
a duplicate inside a group, chord or chain is sent, waits in a worker for
the first one's result and ends with it. The worker takes the hold over
when the task starts, renews it while the task runs, and releases it when
the task ends or is revoked; a killed worker's hold ends within
``lock_ttl``; a message the broker delivers again while its task runs
elsewhere is skipped.

The Redis URL is ``app.conf.ferrolock_url``, else the broker's when it is
Redis (``redis://``, ``rediss://``); ``app.conf.ferrolock_prefix`` sets the
key prefix (else the :class:`~ferrolock.Client`'s default). Each process
builds one :class:`~ferrolock.Client` per URL and prefix, at its first
use, and a forked child (the prefork pool) builds its own.

The lock name is ``celery:<task name>:<digest>``: the digest is the first
128 bits, in hex, of the SHA-256 of the arguments bound to the task's
signature (defaults filled in, so ``export(7)`` and
``export(report_id=7)`` are one task), restricted to ``unique_on`` when
given, as canonical JSON (sorted keys, no spaces). ``ferrolock ls
'celery:*'`` lists them; the holder's metadata is the task id.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import inspect
import json
import logging
import time
import uuid
import warnings
from typing import Any, Iterator, Optional, Sequence, Union

import celery  # type: ignore[import-untyped]  # Celery ships no type hints
from celery import signals, states
from celery.backends.base import DisabledBackend  # type: ignore[import-untyped]
from celery.exceptions import Ignore, Retry  # type: ignore[import-untyped]

from . import Client, Lock, LockLost, LockNotAcquired, LockNotOwned
from ._per_process import PerProcess

__all__ = ["DuplicateTask", "Hold", "Singleton"]

log = logging.getLogger("ferrolock")

HEADER = "ferrolock_hold"
"""The message header that carries a queued task's hold (``{"name", "token"}``)."""

FOLLOW = "ferrolock_follow"
"""The message header of a duplicate sent to wait for the first task's
result (``{"name", "task_id"}``: the lock name and the first task's id)."""

AWAITED = ("link", "link_error", "chain", "chord", "group_id")
"""Options that only the message of the call that has them can act on."""


class DuplicateTask(LockNotAcquired):
    """A task with these arguments is already queued or running.

    Raised by ``delay`` / ``apply_async`` of a :class:`Singleton` task with
    ``raise_on_duplicate=True`` (or by one inside a group, chord or chain
    when the task's results are not stored: no result backend, or
    ``ignore_result``), and by a worker that starts a task whose
    name another task holds (one queued longer than ``lock_ttl``, whose hold
    ran out and was taken by a later duplicate; or one sent by name, without
    a hold, while another runs): that task then fails with it, unrun.

    Attributes:
        name: the lock name (``celery:<task name>:<digest>``).
        task_id: the id of the task that holds it, or ``None`` if it is not known.
    """

    def __init__(self, name: str, task_id: Optional[str], why: str = ""):
        super().__init__(name, task_id)
        self.name = name
        self.task_id = task_id
        self._why = why

    def __str__(self) -> str:
        told = f"{self.name} is held by task {self.task_id}: a task with these arguments is queued or running"
        return f"{told}; {self._why}" if self._why else told


class Hold:
    """The hold of a running :class:`Singleton` task: ``self.request.singleton``
    in a task made with ``bind=True``.

    The worker renews it while the task runs. If it is lost anyway (Redis
    lost it, the worker stalled past ``lock_ttl``), :attr:`lost` turns
    ``True`` at once and the task ends in :class:`~ferrolock.LockLost` (the
    body's own exception, if it raised one, carries a note saying so), so
    its result says that another task may have run beside it. Pass
    :attr:`fence` to the storage you write to, to have it refuse a stale
    holder's writes.
    """

    def __init__(self, lock: Lock[str]):
        self._lock: Optional[Lock[str]] = lock
        self.name: str = lock.name
        """The lock name."""
        self.token: str = lock.token or ""
        """The owner token: the worker's own, taken over from the message's as the task started."""
        self.fence: Optional[int] = lock.fence
        """The fencing token of the hold, strictly greater than any earlier holder's of this name."""
        self._lost = False

    @property
    def lost(self) -> bool:
        """Whether the hold was lost while the task ran."""
        return self._lost or (self._lock is not None and self._lock.lost)

    def _end(self, error: Optional[BaseException]) -> None:
        """Release the hold when the task ends; raise :class:`LockLost` (or
        note it on the task's own ``error``) if it was lost meanwhile."""
        lock, self._lock = self._lock, None
        assert lock is not None
        try:
            lock.release()
        except LockNotOwned:
            pass  # lost: told below
        except Exception as exc:  # Redis unreachable: the hold, no longer renewed, ends at its ttl
            log.warning("the hold %r of a finished task was not released (%r): it ends within its ttl", self.name, exc)
        self._lost = lock.lost
        if not self._lost:
            return
        message = f"the hold on {self.name} was lost while the task ran: another task may have run beside it"
        if error is None:
            raise LockLost(message)
        if hasattr(error, "add_note"):
            error.add_note(message)
        log.warning("%s", message)

    def _hand_back(self, ttl: float) -> None:
        """Keep the hold for ``ttl`` more seconds and stop renewing it: the
        retry's message, which carries its token, owns it now."""
        lock, self._lock = self._lock, None
        assert lock is not None
        try:
            lock.extend(ttl)
        except Exception as exc:  # lost, or Redis unreachable: the retry's adopt tells
            log.warning("the hold %r was not extended for the retry (%r)", self.name, exc)
        with _letting_go():
            del lock


@contextlib.contextmanager
def _letting_go() -> Iterator[None]:
    """Around the drop of a holding handle that is not released: its renewal
    stops and the hold stays in Redis for whoever carries its token (a
    queued message). Not a leak, so the handle's ResourceWarning is not shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        yield


class Singleton(celery.Task):  # type: ignore[misc]  # Task is Any to a type checker
    """A Celery task base: at most one task per task name and arguments,
    queued or running. ``@app.task(base=Singleton, lock_ttl=60)``.

    **Enqueue** (``delay``, ``apply_async``, a signature's, a retry's): the
    lock is taken, without renewal, for ``lock_ttl`` seconds plus any
    ``countdown`` / ``eta``, with the task id as its metadata, and its
    token travels in the message's headers (the task's signature is
    untouched). When it is held already, the first task's ``AsyncResult``
    is returned (same id), or :class:`DuplicateTask` raised with
    ``raise_on_duplicate=True``. A task that waits in the queue longer than
    that loses its hold (it takes the name again as it starts, if it is
    free): a duplicate enqueued after that is a task of its own and holds
    the name, so the older task, starting while the newer holds it, fails
    with :class:`DuplicateTask` unrun. Give ``lock_ttl`` room for the
    longest queue wait.

    **A duplicate inside a group, chord or chain** (one that names a task
    id of its own, as each canvas member does, or carries ``link`` /
    ``link_error`` callbacks) is sent all the same, since Celery waits on
    the id it gave the member: in the worker it does not run the body but
    waits for the first task's result and ends with it (its value, or its
    exception raised again), so the group completes, the chord's body runs
    and the chain goes on. If the first task's hold ends and no result
    comes within ``lock_ttl`` more (its worker died), the member takes the
    name and runs the body itself. It holds a worker slot while it waits.
    When the task's results are not stored (no result backend,
    ``ignore_result``), sending it raises :class:`DuplicateTask` at once
    (``tests/integrations/test_celery.py::test_a_group_a_chord_and_a_chain_holding_a_duplicate_complete_with_the_first_tasks_result``,
    ``::test_a_duplicate_in_a_canvas_gets_the_first_tasks_failure``,
    ``::test_a_duplicate_in_a_canvas_runs_itself_when_the_first_tasks_worker_died``,
    ``::test_a_duplicate_in_a_canvas_whose_result_is_not_stored_is_refused_at_once``).

    **Worker**: the task takes the hold over from the message as it starts
    (:meth:`ferrolock.Lock.take_over`: in one step, under a token of the
    worker's own, so no other delivery of the message can adopt it; a
    message without one, sent by name, takes the lock there) and the
    watchdog renews it every ``lock_ttl / 3`` while the body runs;
    ``self.request.singleton`` is its :class:`Hold`. It is released when
    the body returns or raises (success, failure, retries exhausted,
    ``Ignore``, ``Reject``), before the result is stored, so a caller that
    saw the result can enqueue the next one at once. A retry keeps it: it
    is handed to the retry's message (``lock_ttl`` plus the retry's
    countdown). A task revoked before it ran releases it when a worker
    discards its message (Celery's ``task_revoked`` signal, which also
    covers an expired message and a terminated task). A killed worker stops
    renewing, so its hold ends within ``lock_ttl``.

    **A message delivered again** (``acks_late``, and the broker hands the
    message out again: past Redis's ``visibility_timeout``, while the task
    runs or after its worker died) finds the name held under the task's
    own id by another worker's token. It waits for that hold to end, at
    most ``4/3 lock_ttl``: a live worker renews it, so the delivery is
    skipped (``Ignore``: acknowledged, nothing stored under the task's id);
    a dead worker's runs out within ``lock_ttl``, and the delivery takes the
    name and runs the body, unless the task's result is stored by then. At
    most one body per name and arguments runs at a time
    (``tests/integrations/test_celery.py::test_a_message_redelivered_while_its_task_runs_is_skipped``,
    ``::test_a_message_redelivered_after_its_worker_died_runs_once_the_hold_ran_out``).

    Why ``__call__`` rather than ``before_start`` / ``after_return``: one
    ``try`` around the body sees every way it ends, where Celery skips
    ``after_return`` for a retry, ``Ignore`` and ``Reject``; and the release
    comes before the result is stored. A direct call (``export(7)``, no
    worker, no request) runs the body without the lock, as Celery's direct
    calls skip the queue.
    """

    lock_ttl: float = 60.0
    """Seconds the hold lasts unrenewed: the most a queued task waits and
    keeps its hold, and how soon a killed worker's hold ends."""

    unique_on: Optional[Sequence[str]] = None
    """The argument names that make tasks duplicates (``None``: all of them;
    ``[]``: the task name alone)."""

    raise_on_duplicate: bool = False
    """Raise :class:`DuplicateTask` on a duplicate, instead of returning the first's ``AsyncResult``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        task = cls.__dict__.get("name") or cls.__name__
        ttl = cls.lock_ttl
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0.001 <= ttl <= 366 * 86400:
            raise ValueError(f"{task}: lock_ttl must be a number of seconds, 0.001 to 366 days, not {ttl!r}")
        if not isinstance(cls.raise_on_duplicate, bool):
            raise TypeError(f"{task}: raise_on_duplicate must be True or False, not {cls.raise_on_duplicate!r}")
        names = cls.unique_on
        if names is None:
            return
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{task}: unique_on must be a list of argument names, not {names!r}")
        run = cls.__dict__.get("run")
        if run is not None:
            params = inspect.signature(getattr(run, "__func__", run)).parameters
            unknown = [n for n in names if n not in params]
            if unknown:
                raise ValueError(
                    f"{task}: unique_on names {unknown}, which are not arguments of the task "
                    f"(its arguments: {list(params)})"
                )

    # -- the lock name --------------------------------------------------------

    def lock_name(self, *args: Any, **kwargs: Any) -> str:
        """The lock name of this task with these arguments:
        ``celery:<task name>:<digest>`` (see the module's documentation).

        Raises:
            TypeError: the arguments do not fit the task's signature, or one
                that counts is not JSON-serializable (name the arguments that
                count with ``unique_on``).
        """
        bound = inspect.signature(self.run).bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        if self.unique_on is not None:
            values = {n: values[n] for n in self.unique_on}
        try:
            canonical = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{self.name}: the arguments that make a task unique must be JSON-serializable ({exc}); "
                "name those that count with unique_on=[...]"
            ) from None
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:32]
        return f"celery:{self.name}:{digest}"

    def unlock(self, *args: Any, **kwargs: Any) -> bool:
        """Remove the hold of this task with these arguments, whoever holds
        it (for an operator: a task purged from the queue keeps its hold
        until ``lock_ttl`` otherwise). A running holder is told at its next
        renewal.

        Returns:
            ``True`` if a hold was removed.
        """
        return self._client().force_release(self.lock_name(*args, **kwargs))

    def _client(self) -> Client:
        return _client_for(self.app)

    # -- enqueue --------------------------------------------------------------

    def apply_async(self, args: Any = None, kwargs: Any = None, task_id: Optional[str] = None, **options: Any) -> Any:
        """Enqueue the task holding its lock; when it is held, the first
        one's ``AsyncResult``, or a message that waits for its result (see
        the class); Celery's arguments.

        Raises:
            DuplicateTask: it is held and ``raise_on_duplicate`` is set, or
                held outside Celery; or a duplicate that must wait for the
                first's result finds no result stored to wait for.
            LockConnectionError: Redis could not be reached in time.
        """
        headers = dict(options.pop("headers", None) or {})
        if HEADER in headers or FOLLOW in headers:  # a retry, or a message sent again: it carries its part
            return super().apply_async(args, kwargs, task_id=task_id, headers=headers, **options)
        name = self.lock_name(*(args or ()), **(kwargs or {}))
        own_id = task_id or str(uuid.uuid4())
        ttl = self.lock_ttl + _delay(options.get("countdown"), options.get("eta"))
        for _ in range(5):
            lock = self._client().lock(name, ttl=ttl, auto_renew=False, metadata=own_id)
            if lock.acquire(blocking=False):
                break
            info = self._client().inspect(name)
            if info is not None:  # held: by the first task
                return self._duplicate(name, info.metadata, args, kwargs, task_id, headers, options)
        else:  # freed between each attempt and the look: taken and released again and again
            raise LockNotAcquired(f"{name} changed hands five times while {self.name} was enqueued; try again")
        headers[HEADER] = {"name": name, "token": lock.token}
        try:
            result = super().apply_async(args, kwargs, task_id=own_id, headers=headers, **options)
        except BaseException:
            lock.release()
            raise
        with _letting_go():
            del lock
        return result

    def _duplicate(
        self,
        name: str,
        first: Optional[str],
        args: Any,
        kwargs: Any,
        task_id: Optional[str],
        headers: dict[str, Any],
        options: dict[str, Any],
    ) -> Any:
        """A duplicate of the task ``first`` (its id; ``None``: held outside
        Celery). A call that only wants the task gets the first's
        ``AsyncResult``. One whose own message is waited on (it names a task
        id of its own, as each member of a group, chord or chain does, or
        carries callbacks) is sent, to wait for the first's result in a
        worker and end with it."""
        if self.raise_on_duplicate or first is None:
            raise DuplicateTask(name, first)
        if task_id == first or (task_id is None and not any(options.get(o) for o in AWAITED)):
            return self.AsyncResult(first)
        if isinstance(self.backend, DisabledBackend) or self.ignore_result:
            raise DuplicateTask(
                name,
                first,
                "a duplicate in a group, chord or chain (or with callbacks) ends with "
                "the first task's result, and this task's result is not stored (no "
                "result backend, or ignore_result)",
            )
        headers[FOLLOW] = {"name": name, "task_id": first}
        return super().apply_async(args, kwargs, task_id=task_id or str(uuid.uuid4()), headers=headers, **options)

    # -- worker ---------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the body holding the task's lock (taken over from the
        message, renewed while it runs, released at its end); a duplicate
        sent to wait ends with the first task's result; a direct call runs
        the body without the lock."""
        request = self.request
        if request.called_directly:
            return super().__call__(*args, **kwargs)
        follow = _follow_of(request)
        if follow is None:
            hold = self._adopt(request, args, kwargs)
        else:
            outcome = self._follow(request, *follow)
            if not isinstance(outcome, Hold):
                return _forward(outcome)
            hold = outcome
        request.singleton = hold
        # A retry's message carries this hold, under the token it has now.
        headers = {k: v for k, v in (request.headers or {}).items() if k != FOLLOW}
        request.headers = {**headers, HEADER: {"name": hold.name, "token": hold.token}}
        try:
            result = super().__call__(*args, **kwargs)
        except Retry as exc:
            hold._hand_back(self.lock_ttl + _delay(exc.when, None))
            raise
        except BaseException as exc:
            hold._end(exc)
            raise
        hold._end(None)
        return result

    def _adopt(self, request: Any, args: Any, kwargs: Any) -> Hold:
        """The hold, as the task starts: the message's, taken over under
        this worker's own token in one step (or the name, if it is free);
        the name, for a message sent without a hold."""
        spec = _spec_of(request)
        name = spec[0] if spec else self.lock_name(*args, **kwargs)
        client = self._client()
        for _ in range(5):
            lock = client.lock(name, ttl=self.lock_ttl, metadata=request.id)
            if lock.take_over(spec[1]) if spec else lock.acquire(blocking=False):
                return Hold(lock)
            info = client.inspect(name)
            if info is None:
                continue  # freed between the attempt and the look
            if info.metadata != request.id:
                raise DuplicateTask(name, info.metadata)
            return self._delivered_again(request, lock)
        raise LockNotAcquired(f"{name} changed hands five times while {self.name} started")

    def _delivered_again(self, request: Any, lock: Lock[str]) -> Hold:
        """This task's message was handed out again (``acks_late``: past
        the broker's visibility timeout, or after its worker died) while
        an earlier delivery holds the name under its worker's token. That
        hold is waited for, at most ``4/3 lock_ttl``: a live worker renews
        it every ``lock_ttl / 3``, so it outlasts the wait and this delivery
        is skipped; a dead worker's runs out within ``lock_ttl`` and this
        delivery runs, unless the task has its result already (it ended
        while this one waited). Skipped: ``Ignore``, so the message is
        acknowledged and nothing is stored under the task's id."""
        if not lock.acquire(timeout=self.lock_ttl * 4 / 3):
            log.warning(
                "task %s[%s] was delivered again while it runs in another worker: this delivery is skipped",
                self.name,
                request.id,
            )
            raise Ignore()
        if not self._has_result(request.id):
            return Hold(lock)
        lock.release()
        log.warning(
            "task %s[%s] was delivered again and ended while this delivery waited: it is skipped", self.name, request.id
        )
        raise Ignore()

    def _has_result(self, task_id: str) -> bool:
        """Whether the result backend has the task's result."""
        if isinstance(self.backend, DisabledBackend):
            return False
        try:
            return _meta(self.backend, task_id) is not None
        except Exception as exc:  # the backend unreachable: the hold is this delivery's, it runs
            log.warning("the result of task %s[%s] could not be read (%r)", self.name, task_id, exc)
            return False

    def _follow(self, request: Any, name: str, first: str) -> Union[dict[str, Any], Hold]:
        """A duplicate sent to wait: the first task's result (as the
        backend stores it) once it is stored. If the first's hold ends and
        no result comes within ``lock_ttl`` more (its worker died, and
        nothing runs it again), this task takes the name and gets its
        :class:`Hold` instead, to run the body itself; a task that holds
        the name by then is followed in turn."""
        client = self._client()
        while True:
            meta = _wait_for_meta(self.backend, first, self.lock_ttl / 3)
            if meta is not None:
                return meta
            info = client.inspect(name)
            if info is not None and info.metadata == first:
                continue  # still queued or running
            # It ended: its result comes at once, unless its worker died.
            meta = _wait_for_meta(self.backend, first, self.lock_ttl)
            if meta is not None:
                return meta
            lock = client.lock(name, ttl=self.lock_ttl, metadata=request.id)
            if lock.acquire(blocking=False):
                meta = _meta(self.backend, first)
                if meta is None:
                    return Hold(lock)
                lock.release()
                return meta
            info = client.inspect(name)
            if info is not None and info.metadata != first:
                if info.metadata is None:
                    raise DuplicateTask(name, None)
                first = info.metadata


def _meta(backend: Any, task_id: str) -> Optional[dict[str, Any]]:
    """The task's result as the backend stores it (``status``, ``result``:
    its value, or its exception), or ``None`` while it has none."""
    meta: dict[str, Any] = backend.get_task_meta(task_id)
    return meta if meta.get("status") in states.READY_STATES else None


def _wait_for_meta(backend: Any, task_id: str, timeout: float) -> Optional[dict[str, Any]]:
    """``_meta``, looked at again for up to ``timeout`` seconds, every
    50 ms at first and at most every second. Polled rather than waited for
    through the backend's pub/sub (``AsyncResult.get``): the same for every
    backend, and no subscription in the worker (Celery 5.5's Redis backend
    can deadlock when an ``AsyncResult`` is collected during such a wait)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        meta = _meta(backend, task_id)
        left = deadline - time.monotonic()
        if meta is not None or left <= 0:
            return meta
        time.sleep(min(pause, left))
        pause = min(pause * 2, 1.0)


def _forward(meta: dict[str, Any]) -> Any:
    """A stored result as this task's own: its value, or its exception raised again."""
    result = meta.get("result")
    if meta.get("status") == states.SUCCESS:
        return result
    if isinstance(result, BaseException):
        raise result
    raise celery.exceptions.TaskError(f"task {meta.get('task_id')} ended {meta.get('status')}: {result!r}")


def _spec_of(request: Any) -> Optional[tuple[str, str]]:
    """The (name, token) a task's message carries, if any."""
    spec = _header(request, HEADER)
    if isinstance(spec, dict) and isinstance(spec.get("name"), str) and isinstance(spec.get("token"), str):
        return spec["name"], spec["token"]
    return None


def _follow_of(request: Any) -> Optional[tuple[str, str]]:
    """The (name, first task's id) of a duplicate sent to wait, if it is one."""
    spec = _header(request, FOLLOW)
    if isinstance(spec, dict) and isinstance(spec.get("name"), str) and isinstance(spec.get("task_id"), str):
        return spec["name"], spec["task_id"]
    return None


def _header(request: Any, key: str) -> Any:
    headers = getattr(request, "headers", None) or {}
    return headers.get(key) or getattr(request, key, None)


def _delay(countdown: Any, eta: Any) -> float:
    """Seconds until a task made with ``countdown`` or ``eta`` may start."""
    if isinstance(countdown, (int, float)) and not isinstance(countdown, bool):
        return max(0.0, float(countdown))
    if isinstance(countdown, datetime.datetime):  # Retry.when is either
        eta = countdown
    if isinstance(eta, str):
        eta = datetime.datetime.fromisoformat(eta)
    if isinstance(eta, datetime.datetime):
        return max(0.0, eta.timestamp() - time.time())
    return 0.0


def _on_revoked(sender: Any = None, request: Any = None, **_: Any) -> None:
    """A revoked (or expired, or terminated) task's hold goes with it:
    the hold its id holds, under whichever token (the message's, or the
    worker's that took it over)."""
    if not isinstance(sender, Singleton):
        return
    spec = _spec_of(request)
    if spec is None:
        return
    name = spec[0]
    try:
        info = sender._client().inspect(name)
        if info is not None and info.metadata == request.id:
            sender._client().force_release(name, info.token)
    except Exception as exc:
        log.warning("the hold %r of a revoked task was not released (%r): it ends within its ttl", name, exc)


signals.task_revoked.connect(_on_revoked, weak=False)


# -- one Client per URL and prefix, per process -------------------------------

_clients: PerProcess[Client] = PerProcess()


def _client_for(app: Any) -> Client:
    """This process's Client for ``app``: ``ferrolock_url``, else the
    broker's URL when it is Redis."""
    url = app.conf.get("ferrolock_url")
    if url is None:
        broker = app.conf.get("broker_write_url") or app.conf.get("broker_url")
        if not isinstance(broker, str) or not broker.startswith(("redis://", "rediss://")):
            raise ValueError(
                f"ferrolock.celery needs a Redis URL: the broker ({broker!r}) is not redis:// or rediss://; "
                "set app.conf.ferrolock_url = 'redis://host:6379/0'"
            )
        url = broker
    prefix = app.conf.get("ferrolock_prefix")
    return _clients.get((url, prefix), lambda: Client(url, prefix=prefix))
