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
