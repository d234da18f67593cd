"""A kept RESP connection for the sampler, on the plugin's encoder and
parser; one-off commands and the final key scan use the plugin's `Raw`
(loopback only)."""

from __future__ import annotations

import socket

from ferrolock.testing import Raw, RespError, encode, read_reply

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
        self._sock = self._file = None

    def __call__(self, *args):
        if self._sock is None:
            self._sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
            self._file = self._sock.makefile("rb")
        try:
            self._sock.sendall(encode(args))
            return read_reply(self._file)
        except (OSError, RespError):
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._file.close()
            self._sock.close()
            self._sock = self._file = None
