"""A throwaway redis-server on a free loopback port, for the demo and the
benchmark: no persistence, its own directory, stopped by the caller."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator


def start_redis(workdir: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (make redis, or apt-get install redis-server)")
    for _ in range(3):  # another process may take the free port before redis binds it
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C goes to us; we stop redis ourselves
        )
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG") and proc.poll() is None:
                        return proc, port
            except OSError:
                time.sleep(0.02)  # still starting: nothing to await but its port
        stop_redis(proc)
    raise RuntimeError("could not start redis-server")


def stop_redis(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    """REDIS_URL when set, else a throwaway redis-server's URL for the block."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_redis(Path(tmp))
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            stop_redis(proc)
