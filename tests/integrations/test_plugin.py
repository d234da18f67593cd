"""The ferrolock.testing pytest plugin, run by pytest's own pytester in a
fresh pytest process, as a user's test suite would load it."""

from __future__ import annotations

import pytest

import ferrolock
from ferrolock.testing import Helpers, Raw, RedisServer
from support.tls_certs import TlsRedisServer, make_certs, remove

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

def test_every_primitive_expires(ferrolock_client, ferrolock_helpers):
    permit, other = ferrolock_client.semaphore("pool", 2), ferrolock_client.semaphore("pool", 2)
    assert permit.acquire() and other.acquire()
    ferrolock_helpers.expire_now(permit)
    assert permit.lost and not other.lost and len(ferrolock_client.semaphore("pool", 2).inspect()) == 1
    other.release()
    fair = ferrolock_client.lock("fair", fair=True)
    multi = ferrolock_client.multi_lock(["m1", "m2"])
    writer = ferrolock_client.rwmutex("doc", fair=True).write()
    for lock in (fair, multi, writer):
        assert lock.acquire()
        ferrolock_helpers.expire_now(lock)
        assert lock.lost and ferrolock_client.describe(lock.names[0]) == [], lock
    election = ferrolock_client.election("cron", ttl=5)
    term = election.campaign("me")
    ferrolock_helpers.expire_now(term)
    assert term.lost and election.leader() is None
    with election.campaign("next") as again:
        assert again.number > term.number

def test_every_primitive_is_held_elsewhere(ferrolock_client, ferrolock_helpers):
    with ferrolock_helpers.hold_elsewhere("pool", kind="permit", permits=2):
        assert len(ferrolock_client.semaphore("pool", 2).inspect()) == 1
    with ferrolock_helpers.hold_elsewhere(["m1", "m2"]) as holder:
        assert ferrolock_client.inspect("m2").token == holder.token
    with ferrolock_helpers.hold_elsewhere("cron", kind="term", metadata="there") as holder:
        assert ferrolock_client.election("cron").leader().value == "there"
    assert ferrolock_client.election("cron").leader() is None
    with pytest.raises(ValueError, match="kind must be one of"):
        ferrolock_helpers.hold_elsewhere("x", kind="mutex")

def test_url(ferrolock_redis_url):
    open("url.txt", "w").write(ferrolock_redis_url)
"""


@pytest.fixture
def user_suite(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_the_plugin_serves_a_users_suite_and_cleans_up(user_suite, redis_url, monkeypatch):
    monkeypatch.setenv("FERROLOCK_TEST_URL", redis_url)
    monkeypatch.setenv("REDIS_URL", "redis://an-apps-own-server.invalid:1/0")  # not followed
    result = user_suite.runpytest_subprocess("-p", "pytester")
    result.assert_outcomes(passed=9)
    assert (user_suite.path / "url.txt").read_text() == redis_url
    prefix = (user_suite.path / "prefix.txt").read_text()
    assert prefix.startswith("test:")
    assert Raw(redis_url).scan(prefix + "*") == [], "ferrolock_client deleted its keys"


def test_without_redis_url_the_session_starts_its_own_server(user_suite, redis_url, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("FERROLOCK_TEST_URL", raising=False)
    result = user_suite.runpytest_subprocess("-k", "url or another")
    result.assert_outcomes(passed=2, deselected=7)
    url = (user_suite.path / "url.txt").read_text()
    assert url.startswith("redis://127.0.0.1:") and url != redis_url
    with pytest.raises(OSError):
        Raw(url)("PING")  # stopped at the end of that session


def test_redis_url_alone_is_still_followed_with_a_deprecation_warning(user_suite, redis_url, monkeypatch):
    """The generic REDIS_URL often names an application's server, which the
    plugin's helpers pause: it is followed only without FERROLOCK_TEST_URL,
    and then with a warning saying which variable to set."""
    monkeypatch.delenv("FERROLOCK_TEST_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", redis_url)
    result = user_suite.runpytest_subprocess("-k", "url")
    result.assert_outcomes(passed=1, deselected=8, warnings=1)
    result.stdout.fnmatch_lines(["*PytestDeprecationWarning*REDIS_URL*FERROLOCK_TEST_URL*"])
    assert (user_suite.path / "url.txt").read_text() == redis_url


def test_the_plugin_can_be_turned_off(user_suite):
    result = user_suite.runpytest_subprocess("-p", "no:ferrolock", "-k", "url")
    result.assert_outcomes(errors=1, deselected=8)
    result.stdout.fnmatch_lines(["*fixture 'ferrolock_redis_url' not found*"])


def test_the_suite_uses_the_plugins_fixtures(request, client, prefix, redis_url, ferrolock_client):
    """This suite's own fixtures are the plugin's, under their old names."""
    plugin = request.config.pluginmanager.get_plugin("ferrolock")
    assert plugin is not None and plugin.__name__ == "ferrolock.testing"
    assert client is ferrolock_client
    assert client.prefix == prefix == request.getfixturevalue("ferrolock_prefix")
    assert redis_url == request.getfixturevalue("ferrolock_redis_url")


@pytest.mark.parametrize("how", ["acl-user", "password", "unix-socket"])
def test_every_helper_serves_every_url_a_client_takes(user_suite, monkeypatch, how):
    """The whole user suite (pause_server, delete_all at each teardown,
    expire_now, hold_elsewhere) against a server reached by an ACL user with
    a %-escaped password, by a %-escaped password alone, or by a unix socket
    with a database number and credentials."""
    if how == "acl-user":
        server = RedisServer(user="app", password="p@ss:w/rd%")
    elif how == "password":
        server = RedisServer(password="p@ss w%rd")
    else:
        server = RedisServer(user="app", password="p@ss", unix_socket=True)
    server.start()
    try:
        url = server.unix_url.replace("db=0", "db=3") if how == "unix-socket" else server.url
        assert "%40" in url or how == "unix-socket"
        monkeypatch.setenv("FERROLOCK_TEST_URL", url)
        result = user_suite.runpytest_subprocess("-p", "pytester")
        result.assert_outcomes(passed=9)
        prefix = (user_suite.path / "prefix.txt").read_text()
        raw = Raw(url)
        assert raw("PING") == "PONG" and raw.scan(prefix + "*") == [], "delete_all deleted the test's keys"
        if how == "unix-socket":
            assert raw.db == 3 and Raw(server.url)("DBSIZE") == 0, "the keys were in database 3"
    finally:
        server.close()


def test_helpers_over_tls_with_a_ca_file(prefix):
    certs = make_certs()
    server = TlsRedisServer(certs, password="tls pw").start()
    try:
        url = f"rediss://:tls%20pw@127.0.0.1:{server.port}/0"
        client = ferrolock.Client(url, prefix=prefix, ca_file=str(certs.ca))
        helpers = Helpers(url, prefix, ca_file=str(certs.ca))
        lock = client.lock("job")
        assert lock.acquire()
        helpers.expire_now(lock)
        assert lock.lost
        with helpers.hold_elsewhere("job") as holder:
            assert client.inspect("job").token == holder.token
        assert client.lock("job", ttl=60).acquire()
        with helpers.pause_server(30):
            assert helpers.raw("CLIENT", "INFO")
        assert helpers.delete_all() == 1
        assert client.inspect("job") is None
    finally:
        server.close()
        remove(certs)


@pytest.mark.parametrize(
    "url",
    [
        ["redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0", "redis://127.0.0.1:3/0"],
        "redis+sentinel://127.0.0.1:26379/mymaster",
        "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
    ],
    ids=["quorum", "sentinel", "cluster"],
)
def test_a_helper_that_needs_one_server_says_so(url, prefix):
    helpers = Helpers(url, prefix)
    with pytest.raises(ValueError, match="delete_all talks to one server: .*give the URL of"):
        helpers.delete_all()
    with pytest.raises(ValueError, match="pause_server talks to one server"):
        with helpers.pause_server():
            pass


def test_helpers_assert_held_or_free_and_release_all_of_every_kind(client, redis_url, prefix):
    """`assert_held`, `assert_free` and `release_all` read every kind from
    the key layout: a Lock, an RWMutex's reader, a semaphore's permit and an
    election's leader alike."""
    helpers = Helpers(redis_url, prefix)
    lock, reader = client.lock("job"), client.rwmutex("doc").read()
    permit = client.semaphore("partner-api", 2, metadata="worker")
    for handle in (lock, reader, permit):
        assert handle.acquire(blocking=False)
    term = client.election("leader-x", ttl=30).campaign("host-a")
    assert helpers.assert_held("partner-api", kind="semaphore", token=permit.token).limit == 2
    assert helpers.assert_held("leader-x").holder.token == term.token
    helpers.assert_held("doc", kind="rwmutex", token=reader.token)
    with pytest.raises(AssertionError, match="'partner-api' as a lock is not held"):
        helpers.assert_held("partner-api", kind="lock")
    with pytest.raises(AssertionError, match="'leader-x' is held"):
        helpers.assert_free("leader-x")
    assert helpers.release_all("[pl]*") == 2  # the permit and the leader
    helpers.assert_free("partner-api")
    helpers.assert_free("leader-x")
    assert client.election("leader-x").leader() is None
    assert helpers.release_all() == 2  # the lock and the reader
    for name in ("job", "doc"):
        helpers.assert_free(name)
    assert lock.owned() is False and reader.owned() is False
