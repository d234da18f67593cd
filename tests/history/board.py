"""What each worker process is doing now, in shared memory, so the nemesis can aim:
Ctrl-C at a worker waiting in acquire, SIGSTOP preferably at one holding."""

from __future__ import annotations


class Board:
    def __init__(self, ctx, n: int):
        # Each slot is written by its own worker only; the parent just reads.
        self.waiting = ctx.Array("q", n, lock=False)  # when the wait in acquire began (ns), 0 when not waiting
        self.holding = ctx.Array("i", n, lock=False)  # holds of the process now (an async worker has several tasks)
        self.valid = ctx.Array("q", n, lock=False)  # holds of the process confirmed valid so far (holds_valid)
