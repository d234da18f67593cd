"""ferrolock.throwaway: the launcher and RESP client of the tests, benches and
examples (the plugin re-exports them)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

import ferrolock
from ferrolock.throwaway import RedisServer, RespError, redis_url, server_binary


def test_a_server_is_a_context_manager_and_command_parses_replies():
    with RedisServer(password="pw") as server:
        assert server.command("PING") == "PONG"
        assert server.command("SET", "k", "v") == "OK"
        assert server.command("GET", "k") == b"v"
        assert server.command("GET", "missing") is None
        assert server.command("EXISTS", "k") == 1
        assert server.command("MGET", "k", "missing") == [b"v", None]
        with pytest.raises(RespError, match="WRONGTYPE"):
            server.command("LPUSH", "k", "x")
        with server.connect() as conn:  # one kept connection, authenticated
            assert conn("INCR", "n") == 1 and conn("INCR", "n") == 2
        assert ferrolock.Client(server.url).lock("x").acquire(blocking=False)
        proc = server.proc
    assert proc.poll() is not None, "stopped at the end of the block"


def test_a_port_taken_before_the_server_binds_it_gives_another():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        server = RedisServer()
        server.port = taken.getsockname()[1]  # as if another process took the free port first
        try:
            server.start()
            assert server.port != taken.getsockname()[1]
            assert server.command("PING") == "PONG"
            server.kill()
            port = server.port
            server.start()  # a restart keeps its port
            assert server.port == port
        finally:
            server.close()


def test_redis_url_is_redis_url_when_set_else_a_throwaway_server(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://example.invalid:1/0")
    with redis_url() as url:
        assert url == "redis://example.invalid:1/0"
    monkeypatch.delenv("REDIS_URL")
    with redis_url() as url:
        assert ferrolock.Client(url).lock("x").acquire(blocking=False)
    with pytest.raises(ferrolock.LockConnectionError):
        ferrolock.Client(url, connect_timeout=1).lock("x").acquire(blocking=False)


def test_it_needs_no_pytest():
    code = "import sys; sys.modules['pytest'] = None; import ferrolock.throwaway"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_server_binary_is_the_one_ferrolock_test_server_names(monkeypatch, tmp_path):
    monkeypatch.delenv("FERROLOCK_TEST_SERVER", raising=False)
    path_binary = server_binary()
    assert os.path.basename(path_binary) == "redis-server"
    monkeypatch.setenv("FERROLOCK_TEST_SERVER", path_binary)
    with RedisServer() as server:
        assert server.binary == path_binary
        assert server.command("PING") == "PONG"
    missing = tmp_path / "no-such-server"
    monkeypatch.setenv("FERROLOCK_TEST_SERVER", str(missing))
    with pytest.raises(RuntimeError, match=rf"FERROLOCK_TEST_SERVER={missing} names no executable file.*make valkey"):
        RedisServer()
