"""The ferrolock.testing pytest plugin, run by pytest's own pytester in a
fresh pytest process, as a user's test suite would load it."""

from __future__ import annotations

import pytest

from ferrolock.testing import Raw

USER_TESTS = """
import asyncio, json, threading, pytest, ferrolock

def test_a_loss_ends_the_block_in_lock_lost(ferrolock_client, ferrolock_helpers, ferrolock_prefix):
    lost = threading.Event()
    lock = ferrolock_client.lock("report", on_lost=lost.set)
    with pytest.raises(ferrolock.LockLost):
        with lock:
            ferrolock_helpers.expire_now(lock)
            assert lock.lost
            assert lost.wait(10)
    open("prefix.txt", "w").write(ferrolock_prefix)

def test_a_reader_expires_alone(ferrolock_client, ferrolock_helpers):
    rw = ferrolock_client.rwmutex("doc")
    mine, other = rw.read(), rw.read()
    assert mine.acquire() and other.acquire()
    ferrolock_helpers.expire_now(mine)
    assert mine.lost and not other.lost and rw.readers() == 1
    other.release()

def test_another_process_holds(ferrolock_client, ferrolock_helpers):
    with ferrolock_helpers.hold_elsewhere("report", metadata="elsewhere") as holder:
        assert ferrolock_client.inspect("report").token == holder.token
        assert not ferrolock_client.lock("report").acquire(blocking=False)
    assert ferrolock_client.lock("report").acquire(blocking=False)

def test_a_crashed_holder_expires(ferrolock_client, ferrolock_helpers):
    holder = ferrolock_helpers.hold_elsewhere("report", ttl=0.2)
    holder.crash()
    assert ferrolock_client.lock("report").acquire(timeout=10)

def test_a_paused_server_times_out(ferrolock_redis_url, ferrolock_prefix, ferrolock_helpers):
    client = ferrolock.Client(ferrolock_redis_url, prefix=ferrolock_prefix, command_timeout=0.2)
    with ferrolock_helpers.pause_server(30):
        with pytest.raises(ferrolock.LockConnectionError):
            client.lock("report").acquire(blocking=False)
    assert client.lock("report").acquire(blocking=False)

@pytest.mark.asyncio
async def test_async_with_is_cancelled_by_a_loss(ferrolock_client, ferrolock_helpers):
    lock = ferrolock_client.lock("report")
    with pytest.raises(ferrolock.LockLost):
        async with lock:
            ferrolock_helpers.expire_now(lock)
            await asyncio.sleep(30)

def test_url(ferrolock_redis_url):
    open("url.txt", "w").write(ferrolock_redis_url)
"""


@pytest.fixture
def user_suite(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_the_plugin_serves_a_users_suite_and_cleans_up(user_suite, redis_url, monkeypatch):
    monkeypatch.setenv("REDIS_URL", redis_url)
    result = user_suite.runpytest_subprocess("-p", "pytester")
    result.assert_outcomes(passed=7)
    assert (user_suite.path / "url.txt").read_text() == redis_url
    prefix = (user_suite.path / "prefix.txt").read_text()
    assert prefix.startswith("test:")
    assert Raw(redis_url).scan(prefix + "*") == [], "ferrolock_client deleted its keys"


def test_without_redis_url_the_session_starts_its_own_server(user_suite, redis_url, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    result = user_suite.runpytest_subprocess("-k", "url or another")
    result.assert_outcomes(passed=2, deselected=5)
    url = (user_suite.path / "url.txt").read_text()
    assert url.startswith("redis://127.0.0.1:") and url != redis_url
    with pytest.raises(OSError):
        Raw(url)("PING")  # stopped at the end of that session


def test_the_plugin_can_be_turned_off(user_suite):
    result = user_suite.runpytest_subprocess("-p", "no:ferrolock", "-k", "url")
    result.assert_outcomes(errors=1, deselected=6)
    result.stdout.fnmatch_lines(["*fixture 'ferrolock_redis_url' not found*"])


def test_the_suite_uses_the_plugins_fixtures(request, client, prefix, redis_url, ferrolock_client):
    """This suite's own fixtures are the plugin's, under their old names."""
    plugin = request.config.pluginmanager.get_plugin("ferrolock")
    assert plugin is not None and plugin.__name__ == "ferrolock.testing"
    assert client is ferrolock_client
    assert client.prefix == prefix == request.getfixturevalue("ferrolock_prefix")
    assert redis_url == request.getfixturevalue("ferrolock_redis_url")
