"""Start and stop throwaway redis-server processes on free loopback ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Optional


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server on 127.0.0.1 that can be stopped, killed and restarted on its port."""

    def __init__(self, port: Optional[int] = None, password: Optional[str] = None, extra: tuple = ()):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (run `make test`, which installs it)")
        self.binary = binary
        self.port = port or free_port()
        self.password = password
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix="ferrolock-redis-")
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _args(self) -> list:
        """The command line (a subclass may listen differently)."""
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", self.dir,
            "--enable-debug-command", "local",
        ]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self.extra)

    def _open(self) -> socket.socket:
        """A connected socket to the server (a subclass may wrap it in TLS)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(self._args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                if self.command("PING").startswith((b"+PONG", b"-NOAUTH")):
                    return self
            except OSError:
                time.sleep(0.02)  # the server is starting: nothing to await but its port
        raise RuntimeError("redis-server did not start within 10 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def command(self, *args: str) -> bytes:
        """Send one command in RESP over a fresh connection; returns the raw reply."""
        payload = f"*{len(args)}\r\n".encode()
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            payload += b"$%d\r\n%s\r\n" % (len(b), b)
        with self._open() as s:
            if self.password:
                auth = self.password.encode()
                s.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(auth), auth))
                s.recv(64)
            s.sendall(payload)
            return s.recv(1 << 20)


def env_url() -> Optional[str]:
    return os.environ.get("REDIS_URL") or None
