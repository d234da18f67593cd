"""Workers whose wall clock runs fast or slow: libfaketime (Debian's
``faketime`` package, installed by ``make deps``) preloaded into a worker
process with an offset such as ``+5s`` or ``-3s``.

Only the wall clock (``time.time()``, Rust's ``SystemTime``) is skewed:
``DONT_FAKE_MONOTONIC=1`` leaves CLOCK_MONOTONIC alone, so the history's
times still compare across processes and the library's timeouts still run
at the real pace. A skewed worker measures its offset from the server's
``TIME`` before it starts and logs it (a ``clock`` event); the checker
reports a worker whose clock is not off by what was asked
(``clock-not-skewed``), so a missing library cannot pass for a skewed run.

libfaketime 0.9.10 with ``DONT_FAKE_MONOTONIC`` fails clock_nanosleep on
CLOCK_MONOTONIC with EINVAL, which is how ``time.sleep`` waits: the workers
pause with ``sleep`` here (select's timeout) instead. Timed waits on locks,
events, selectors and asyncio work as usual.
"""

from __future__ import annotations

import contextlib
import glob
import os
import select
import time

from . import resp

# Where Debian's libfaketime lands (the multiarch directory varies).
LIBFAKETIME = "/usr/lib/*/faketime/libfaketime.so.1"
TOLERANCE_MS = 1000  # a measured offset this far from the asked one is no skew at all


def offset_s(offset: str) -> float:
    """``"+5s"`` -> 5.0, ``"-3s"`` -> -3.0 (the FAKETIME forms this harness uses)."""
    if not (offset[:1] in "+-" and offset.endswith("s")):
        raise ValueError(f"a clock offset is like '+5s' or '-3s', not {offset!r}")
    return float(offset[:-1])


def library() -> str:
    found = sorted(glob.glob(LIBFAKETIME))
    if not found:
        raise RuntimeError("libfaketime not found: install Debian's faketime package (make deps does)")
    return found[0]


@contextlib.contextmanager
def skewed_env(offset: str | None):
    """The environment a process started inside inherits: libfaketime with
    `offset` preloaded (nothing when `offset` is None). The parent's own
    clock is untouched: a preload acts only from the next exec on."""
    if offset is None:
        yield
        return
    offset_s(offset)
    keys = {"LD_PRELOAD": library(), "FAKETIME": offset, "DONT_FAKE_MONOTONIC": "1"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def measured_skew_ms(port: int) -> float:
    """This process's wall clock minus the server's (TIME), in ms, read at the
    middle of the round trip."""
    before = time.time()
    seconds, micros = resp.command(port, "TIME")
    after = time.time()
    return ((before + after) / 2 - (int(seconds) + int(micros) / 1e6)) * 1000


def sleep(seconds: float) -> None:
    """time.sleep without clock_nanosleep (see above); a signal handler's
    exception (Ctrl-C) interrupts it as it does time.sleep."""
    select.select([], [], [], seconds)
