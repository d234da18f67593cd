"""A minimal RESP client for the nemesis and the final key scan (loopback only)."""

from __future__ import annotations

import socket


class RespError(Exception):
    """Redis answered with an error."""


def command(port: int, *args, timeout: float = 10.0):
    """Send one command to 127.0.0.1:`port` on a fresh connection and return the parsed reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(encode(args))
        return parse(s.makefile("rb"))


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
            return parse(self._file)
        except (OSError, RespError):
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._file.close()
            self._sock.close()
            self._sock = self._file = None


def encode(args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


def parse(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed before a reply")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise RespError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [parse(f) for _ in range(n)]
    raise RespError(f"unexpected reply {line!r}")


def scan(port: int, pattern: str) -> list:
    """Every key matching `pattern` (SCAN, so the server is never blocked)."""
    keys, cursor = set(), b"0"
    while True:
        cursor, batch = command(port, "SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        keys.update(k.decode() for k in batch)
        if cursor == b"0":
            return sorted(keys)
