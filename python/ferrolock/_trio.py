"""How a ferrolock coroutine waits under trio (and anyio's trio backend).

An operation (``ferrolock.Operation``) whose result is not in at its first
step parks its task with trio's low-level API: it yields what
:func:`trio.lowlevel.wait_task_rescheduled` yields, and the runtime thread
that finishes the operation wakes the task through the run's
:class:`trio.lowlevel.TrioToken` (``run_sync_soon`` is thread-safe). A
cancellation (``move_on_after``, a cancelled nursery) calls the abort
function on trio's thread: the operation is cancelled there exactly as
asyncio's ``throw`` cancels it (its guards undo what it started in Redis).
While that undo is under way the abort fails and the task stays parked:
the runtime wakes it once the undo is over, with the ``Cancelled`` trio's
``raise_cancel`` gives, so an acquire that raised ``Cancelled`` holds
nothing and will hold nothing. A release refuses the abort and runs to its
end, the cancellation then landing at the task's next checkpoint.

This module is imported only once trio is (it is looked for in
``sys.modules``), so trio is no dependency of ferrolock.
"""

from __future__ import annotations

from typing import Any, Callable, Coroutine, Optional, Tuple

import outcome
import trio
from trio.lowlevel import (
    Abort,
    TrioToken,
    current_task,
    current_trio_token,
    in_trio_run,
    reschedule,
    wait_task_rescheduled,
)

__all__: list[str] = []


def park(
    abandon: Callable[[], Optional[bool]],
) -> Optional[Tuple[Coroutine[Any, Any, Any], Callable[[bool], None]]]:
    """Parks the current trio task, or None when no trio run is on this thread.

    Returns the coroutine the operation steps in place of its own wait (it
    ends when the task is woken, or raises ``trio.Cancelled``), and ``wake``,
    callable from any thread: ``wake(False)`` once the operation's result is
    in, ``wake(True)`` once a cancelled operation is settled (what it
    started undone). ``abandon`` cancels the operation: True when nothing is
    left to undo, None while its undo is under way (``wake(True)`` follows),
    False when it may not be cancelled (a release).
    """
    if not in_trio_run():
        return None
    task = current_task()
    token = current_trio_token()
    # Read and written on trio's thread only.
    waiting = True
    # The cancellation to raise once the operation is settled.
    cancelled: Optional[Callable[[], Any]] = None

    def resume(settled: bool) -> None:
        nonlocal waiting
        if not waiting or settled != (cancelled is not None):
            return  # a result that came in as it was cancelled: undone
        waiting = False
        reschedule(task, outcome.capture(cancelled) if cancelled is not None else outcome.Value(None))

    def abort(raise_cancel: Callable[[], Any]) -> Abort:
        nonlocal waiting, cancelled
        if not waiting:
            return Abort.FAILED
        answer = abandon()
        if answer is None:
            # Raised once what the operation started is undone.
            cancelled = raise_cancel
            return Abort.FAILED
        if not answer:
            return Abort.FAILED
        waiting = False
        return Abort.SUCCEEDED

    def wake(settled: bool) -> None:
        try:
            token.run_sync_soon(resume, settled)
        except trio.RunFinishedError:
            pass  # the run is over: nobody waits any more

    return wait_task_rescheduled(abort), wake


def loss_scope() -> Optional[Tuple[trio.CancelScope, TrioToken]]:
    """For ``async with lock`` under trio: the cancel scope a lost hold
    cancels (entered when the block starts, left when it ends) and the
    run's token, whose ``run_sync_soon`` schedules that on trio's thread
    from any thread; None outside trio."""
    if not in_trio_run():
        return None
    return trio.CancelScope(), current_trio_token()


def current() -> Optional[object]:
    """The running trio task, or None outside trio (the owner of an RLock)."""
    return current_task() if in_trio_run() else None
