"""A quorum's masters for tests: `n` throwaway loopback redis-servers that a
test may kill, restart empty or pause (SIGSTOP), and a quorum client over
them."""

from __future__ import annotations

from contextlib import contextmanager

import ferrolock
from ferrolock.testing import RedisServer
from support.helpers import hold_field, key


class Masters:
    """`n` throwaway servers, and a quorum client over them."""

    def __init__(self, n: int, prefix: str):
        self.servers = [RedisServer().start() for _ in range(n)]
        self.prefix = prefix

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def client(self, **options) -> ferrolock.Client:
        return ferrolock.Client(self.urls, prefix=self.prefix, **options)

    def field(self, i: int, name: str, field: str) -> bytes | None:
        return hold_field(self.servers[i].command("GET", key(self.prefix, name)), field)

    def holders(self, name: str) -> list[bytes | None]:
        return [self.field(i, name, "token") for i in range(len(self.servers))]

    def pttls(self, k: str, first: int = 0, end: int | None = None) -> list[int]:
        """How long key `k` has left on masters `first` to `end`, in ms (-2: none)."""
        return [s.command("PTTL", k) for s in self.servers[first:end]]

    def restart_empty(self, i: int) -> None:
        server = self.servers[i]
        server.kill()
        server.start()

    @contextmanager
    def paused(self, i: int):
        self.servers[i].pause()
        try:
            yield
        finally:
            self.servers[i].resume()

    def close(self) -> None:
        for s in self.servers:
            s.close()
