"""The server the tests run against is the one asked for: ``redis-server``
from PATH, or the binary ``FERROLOCK_TEST_SERVER`` names (``make
test-servers`` runs the core suite against Redis 8.2 and Valkey 9 that way).
A run that fell back to another server fails here instead of passing the
suite against the wrong one."""

from __future__ import annotations

import os

import pytest

import ferrolock
from ferrolock.testing import TEST_URL, Raw, RedisServer, server_binary
from support.helpers import announced_server


def info(raw: Raw) -> dict:
    """INFO server, as a dict."""
    text = raw("INFO", "server").decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


@pytest.fixture(params=["session", "private"])
def started(request, redis_url):
    """Each way the tests start a server: the session's, and a test's own (replica pairs, restarts)."""
    if request.param == "session":
        if os.environ.get(TEST_URL):
            pytest.skip(f"the session's server is {TEST_URL}'s, not one the tests start")
        yield redis_url
    else:
        with RedisServer() as server:
            yield server.url


def test_the_server_started_is_the_binary_asked_for(started):
    binary = server_binary()
    name, version = announced_server(binary)
    fields = info(Raw(started))
    assert os.path.realpath(fields["executable"]) == os.path.realpath(binary)
    assert fields.get("server_name", "redis") == name, fields
    assert fields[f"{name}_version"] == version, fields
    print(f"the tests run against {name} {version} ({binary})")


def test_ferrolock_accepts_the_server(started):
    """The version check at connect lets the server through (Valkey 9
    reports redis_version 7.2.4 beside valkey_version in INFO, and its own
    version in HELLO, which the check reads), and a Lock works on it."""
    client = ferrolock.Client(started, prefix=f"test:servers:{os.getpid()}:")
    lock = client.lock("accepted")
    with lock:
        assert lock.locked()
    assert not lock.locked()
