"""A kept RESP connection for the sampler, reopened after an error; one-off
commands and the final key scan: the plugin's RESP client.

A server is named by its port: on loopback, or, for a server in a test
host (a run with partitions), through the unix socket `route` names for
that port, which no cut reaches."""

from __future__ import annotations

import socket
from typing import Optional

from ferrolock.testing import Connection as _Connection
from ferrolock.testing import Raw, RespError
from support.netns_agent import unix_connect

__all__ = ["Connection", "RespError", "command", "forget", "route", "scan"]

# port -> the unix socket of the server on that port (a server in a test host)
ROUTES: dict = {}


def route(routes: dict) -> None:
    """From now on, the servers of `routes` (port -> unix socket path) are reached through their sockets."""
    ROUTES.update(routes)


def forget(routes: dict) -> None:
    """The servers of `routes` are gone: their ports are loopback ones again."""
    for port in routes:
        ROUTES.pop(port, None)


def _raw(port: int) -> Raw:
    path = ROUTES.get(port)
    return Raw(f"unix://{path}" if path else f"redis://127.0.0.1:{port}/0")


def command(port: int, *args):
    """Send one command to the server on `port` on a fresh connection and return the parsed reply."""
    return _raw(port)(*args)


def scan(port: int, pattern: str) -> list:
    """Every key matching `pattern` (SCAN, so the server is never blocked)."""
    return _raw(port).scan(pattern)


class Connection:
    """One kept connection, opened again after an error (the server may restart)."""

    def __init__(self, port: int, timeout: float = 1.0):
        self.port, self.timeout = port, timeout
        self._conn: Optional[_Connection] = None

    def _open(self) -> socket.socket:
        path = ROUTES.get(self.port)
        if path is None:
            return socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        return unix_connect(path, self.timeout)

    def __call__(self, *args):
        if self._conn is None:
            self._conn = _Connection(self._open())
        try:
            return self._conn(*args)
        except (OSError, RespError):
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
