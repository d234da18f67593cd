"""One attempt to take and hold a lock, as the history records it.

The recorded valid interval of a hold runs from just after acquire returned
to the last clock reading taken *before* a check that found ``lost == False``.
Both ends lie inside the hold the library vouches for, so two recorded
intervals that overlap are a real violation, whatever a SIGSTOP or a slow
log write did in between.
"""

from __future__ import annotations

import threading
import traceback

import ferrolock

from .events import EventLog, now_ns
from .scenarios import PERMITS

# After a loss, how long a worker waits for on_lost beyond the hold's ttl.
ON_LOST_GRACE_S = 1.0


class Attempt:
    def __init__(self, log: EventLog, w: str, seq: int, kind: str, names: tuple, ttl: float, how: str, board):
        self.log, self.w, self.seq, self.how = log, w, seq, how
        self.board, self.slot = board  # the board (its counts of holds), and this worker's slot
        self.kind, self.names, self.ttl = kind, names, ttl
        self.phase = "acquire"
        self.asked = now_ns()
        self.last_valid: int | None = None
        self.fence: int | None = None  # the hold's, kept once it ends (for a late write)
        self.lost_seen = False
        self.reported = threading.Event()

    def write(self, ev: str, t: int | None = None, **fields) -> None:
        self.log.write(self.w, self.seq, ev, t, how=self.how, kind=self.kind, names=list(self.names), **fields)

    def on_lost(self) -> None:
        """The handle's on_lost: runs on a library thread, possibly after the attempt ended."""
        self.write("lost", src="on_lost")
        self.reported.set()

    def granted(self, handle: ferrolock.Lock, **fields) -> None:
        t = now_ns()
        self.phase = "hold"
        self.board.holding[self.slot] += 1
        self.fence = handle.fence
        if self.kind == "permit":
            fields["permits"] = PERMITS
        self.write(
            "granted",
            t,
            ttl=self.ttl,
            fence=self.fence,
            token=handle.token,
            t_ask=self.asked,
            **fields,
        )

    def still_valid(self, handle: ferrolock.Lock) -> bool:
        t = now_ns()  # read before the check: if `lost` is False then, the hold was valid at t
        if handle.lost:
            self.lost("property")
            return False
        self.last_valid = t
        return True

    def end_hold(self) -> None:
        """Called once the holder stops acting as holder, before it releases."""
        if self.phase != "hold":
            return
        self.phase = "release"
        self.board.holding[self.slot] -= 1
        if self.last_valid is not None:
            self.write("valid", self.last_valid, t_rel=now_ns())
            self.board.valid[self.slot] += 1

    def lost(self, src: str, **fields) -> None:
        self.lost_seen = True
        self.write("lost", src=src, **fields)

    def released(self) -> None:
        self.phase = "done"
        self.write("released")

    def timeout(self, **fields) -> None:
        self.write("timeout", phase=self.phase, **fields)

    def error(self, exc: BaseException) -> None:
        self.write("error", phase=self.phase, error=f"{type(exc).__name__}: {exc}")

    def unexpected(self, exc: BaseException) -> None:
        self.write(
            "error",
            phase=self.phase,
            error=f"{type(exc).__name__}: {exc}",
            unexpected=True,
            traceback=traceback.format_exc(),
        )

    def report_wait_s(self) -> float:
        return self.ttl + ON_LOST_GRACE_S
