"""Shared test helpers: an awaitable on_lost probe and key names."""

from __future__ import annotations

import threading
import time


class LostProbe:
    """An on_lost callback that counts its calls and can be awaited."""

    def __init__(self):
        self.event = threading.Event()
        self.calls = 0
        self.threads: list = []
        self.at: float | None = None

    def __call__(self, *args):
        assert args == ()  # on_lost takes no arguments
        self.calls += 1
        self.threads.append(threading.current_thread())
        self.at = time.monotonic()
        self.event.set()

    def wait(self, timeout: float) -> bool:
        return self.event.wait(timeout)


def key(prefix: str, name: str) -> str:
    return f"{prefix}{{{name}}}"


def script_calls(server) -> int:
    """Scripts run so far on a private server (EVALSHA, plus EVAL if any)."""
    info = server.command("INFO", "commandstats").decode()
    total = 0
    for line in info.splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
            total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total
