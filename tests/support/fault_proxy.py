"""A TCP proxy between ferrolock and a real redis-server, on loopback, that
injects network faults the server cannot: hold back one direction of the
command or the pub/sub connections (a partition of one side), slow a
SUBSCRIBE, or let a command run on the server and drop the connection
before its reply reaches the client.

Connections are told apart by what the client sends: one that has sent
SUBSCRIBE or SSUBSCRIBE (as a command, not a word in a script's text) is a
pub/sub connection, any other a command one.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Optional

from ferrolock.testing import free_port

KINDS = ("command", "pubsub")


class _Gate:
    """Open or closed; a closed gate holds data back until it opens."""

    def __init__(self):
        self._open = threading.Event()
        self._open.set()

    def close(self):
        self._open.clear()

    def open(self):
        self._open.set()

    def wait(self):
        self._open.wait()


class FaultProxy:
    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list = []
        # (kind, direction) -> gate; direction "up" is client -> server.
        self._gates = {(k, d): _Gate() for k in KINDS for d in ("up", "down")}
        self._subscribe_delay = 0.0
        self.subscribe_seen = threading.Event()
        self._drop_after: Optional[bytes] = None
        self.dropped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    # -- faults ---------------------------------------------------------

    def hold(self, kind: str, direction: str) -> None:
        """Hold back data of `kind` connections going `direction` ("up": to
        the server, "down": to the client) until `resume`."""
        self._gates[(kind, direction)].close()

    def resume(self, kind: str, direction: str) -> None:
        self._gates[(kind, direction)].open()

    def slow_subscribe(self, seconds: float) -> None:
        """Forward every SUBSCRIBE `seconds` late (`subscribe_seen` is set first)."""
        self._subscribe_delay = seconds

    def drop_reply_to(self, marker: bytes) -> None:
        """The next command containing `marker` reaches the server and runs;
        its reply is swallowed and the client's connection closed."""
        self.dropped.clear()
        self._drop_after = marker

    def close(self) -> None:
        self._closed.set()
        for gate in self._gates.values():
            gate.open()
        self._listener.close()
        with self._lock:
            for pair in self._pairs:
                pair.close()

    # -- plumbing -------------------------------------------------------

    def _accept(self):
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            pair = _Pair(self, client, server)
            with self._lock:
                self._pairs.append(pair)
            pair.start()


class _Pair:
    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket):
        self.proxy, self.client, self.server = proxy, client, server
        self.kind = "command"
        self.swallow = threading.Event()

    def start(self):
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def close(self):
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _up(self):
        p = self.proxy
        try:
            while True:
                data = self.client.recv(65536)
                if not data:
                    break
                upper = data.upper()
                # The command's name, a bulk string of its own: a script's
                # text may say "subscribe" too (lua/lib/hold.lua does).
                if b"\r\nSUBSCRIBE\r\n" in upper or b"\r\nSSUBSCRIBE\r\n" in upper:
                    self.kind = "pubsub"
                    if p._subscribe_delay:
                        p.subscribe_seen.set()
                        time.sleep(p._subscribe_delay)  # the fault itself: a slow SUBSCRIBE
                p._gates[(self.kind, "up")].wait()
                marker = p._drop_after
                if marker is not None and marker in data:
                    p._drop_after = None
                    self.swallow.set()
                self.server.sendall(data)
        except OSError:
            pass
        self.close()

    def _down(self):
        p = self.proxy
        try:
            while True:
                data = self.server.recv(65536)
                if not data:
                    break
                if self.swallow.is_set():
                    p.dropped.set()
                    break
                p._gates[(self.kind, "down")].wait()
                self.client.sendall(data)
        except OSError:
            pass
        self.close()
