"""A kept RESP connection for the sampler, reopened after an error; one-off
commands and the final key scan: the plugin's RESP client (loopback only)."""

from __future__ import annotations

import socket
from typing import Optional

from ferrolock.testing import Connection as _Connection
from ferrolock.testing import Raw, RespError

__all__ = ["Connection", "RespError", "command", "scan"]


def command(port: int, *args):
    """Send one command to 127.0.0.1:`port` on a fresh connection and return the parsed reply."""
    return Raw(f"redis://127.0.0.1:{port}/0")(*args)


def scan(port: int, pattern: str) -> list:
    """Every key matching `pattern` (SCAN, so the server is never blocked)."""
    return Raw(f"redis://127.0.0.1:{port}/0").scan(pattern)


class Connection:
    """One kept connection, opened again after an error (the server may restart)."""

    def __init__(self, port: int, timeout: float = 1.0):
        self.port, self.timeout = port, timeout
        self._conn: Optional[_Connection] = None

    def __call__(self, *args):
        if self._conn is None:
            self._conn = _Connection(socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout))
        try:
            return self._conn(*args)
        except (OSError, RespError):
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
