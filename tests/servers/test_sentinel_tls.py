"""Sentinel over TLS with ACL users: `rediss+sentinel://` speaks TLS to the
Sentinels and to the data nodes (both checked against `ca_file`); the data
nodes' ACL user is in the URL's user info, the Sentinels' own in its query
(`?sentinel_username=...&sentinel_password=...`). Settings that do not fit
the deployment are refused with a LockConfigurationError (or ValueError)
that names the problem and the fix, and never the passwords."""

from __future__ import annotations

import shutil
import threading
import time
from urllib.parse import quote

import pytest

import ferrolock
from ferrolock import LockConfigurationError, Retry
from support.redis_sentinel import APP, WATCHER, SentinelDeployment
from support.helpers import hold_field

pytestmark = pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel not installed")

SECRETS = (APP[1], WATCHER[1], quote(APP[1], safe=""), quote(WATCHER[1], safe=""), "nope-pw")


@pytest.fixture(scope="module")
def secure():
    """TLS everywhere, ACL users on the data nodes and on the Sentinel."""
    d = SentinelDeployment(tls=True, acl=True).start()
    yield d
    d.close()


@pytest.fixture(scope="module")
def plain():
    d = SentinelDeployment().start()
    yield d
    d.close()


def refusal(url: str, **kw) -> str:
    """The message of the LockConfigurationError that Client(url) raises, checked for secrets."""
    start = time.monotonic()
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(url, connect_timeout=kw.pop("connect_timeout", 2), **kw).connect()
    assert time.monotonic() - start < 4
    msg = str(info.value)
    for secret in SECRETS:
        assert secret not in msg, msg
    return msg


def test_locks_work_through_tls_sentinels_with_acl_users(secure, prefix):
    client = ferrolock.Client(secure.url(), ca_file=secure.ca_file, prefix=prefix, connect_timeout=3)
    assert repr(client).count("rediss+sentinel://127.0.0.1:") == 1
    for secret in SECRETS:
        assert secret not in repr(client)
    holder = client.lock("job", ttl=5)
    assert holder.acquire()
    fence = holder.fence
    master = secure.master
    assert hold_field(master("GET", f"{prefix}{{job}}"), "token") == holder.token
    # The library's connections to the master are the app user's, over TLS.
    users = {
        f.split("=", 1)[1]
        for line in master("CLIENT", "LIST").splitlines()
        for f in line.split()
        if f.startswith("user=")
    }
    assert "app" in users, users
    # A waiter is woken over the TLS pub/sub connection.
    waiter = client.lock("job", retry=Retry.fixed(10.0))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ok", waiter.acquire(timeout=5)))
    t.start()
    # The waiter's subscription, seen on the server: nothing in this process to await.
    secure.wait_for(lambda: f"{prefix}{{job}}:wake" in master("PUBSUB", "CHANNELS", f"{prefix}*"), 5, "subscribed")
    released = time.monotonic()
    holder.release()
    t.join(5)
    assert got.get("ok") is True and time.monotonic() - released < 1.0
    assert waiter.fence > fence
    waiter.release()


def test_a_failover_is_followed_over_tls(prefix):
    d = SentinelDeployment(tls=True, acl=True).start()
    try:
        client = ferrolock.Client(d.url(), ca_file=d.ca_file, prefix=prefix, connect_timeout=5)
        with client.lock("job", ttl=5) as first:
            fence = first.fence
        old = d.kill_master().port
        d.await_sentinels(lambda: d.failover_named(old), 30, "the Sentinel to promote the replica")
        after = client.lock("job", ttl=5)
        assert after.acquire(timeout=15), "the same Client did not follow the failover"
        assert hold_field(d.master("GET", f"{prefix}{{job}}"), "token") == after.token
        assert after.fence > fence
        after.release()
    finally:
        d.close()


def test_wrong_sentinel_password(secure):
    msg = refusal(secure.url(watcher=("watcher", "nope-pw")), ca_file=secure.ca_file)
    assert f"Sentinel at 127.0.0.1:{secure.sentinels[0].port} refused the credentials" in msg, msg
    assert "sentinel_username and sentinel_password" in msg, msg


def test_missing_sentinel_credentials(secure):
    msg = refusal(secure.url(watcher=None), ca_file=secure.ca_file)
    assert f"Sentinel at 127.0.0.1:{secure.sentinels[0].port} needs a password" in msg, msg
    assert "?sentinel_password=" in msg and "the URL gives none" in msg, msg


def test_a_sentinel_user_that_may_not_ask_for_the_master(secure):
    sentinel = secure.sentinels[0]
    assert sentinel("ACL", "SETUSER", "blind", "on", ">blind-pw", "+ping") == "OK"
    msg = refusal(secure.url(watcher=("blind", "blind-pw")), ca_file=secure.ca_file)
    assert "+sentinel|get-master-addr-by-name" in msg, msg


def test_wrong_data_node_password(secure):
    msg = refusal(secure.url(app=("app", "nope-pw")), ca_file=secure.ca_file)
    assert f"the master 127.0.0.1:{secure.master_port()} the Sentinels named refused" in msg, msg
    assert "before the '@'" in msg, msg


def test_missing_data_node_credentials(secure):
    msg = refusal(secure.url(app=None), ca_file=secure.ca_file)
    assert "needs a password (NOAUTH)" in msg and "USER:PASSWORD@" in msg, msg


def test_unknown_service_name(secure):
    msg = refusal(secure.url(service="nosuch"), ca_file=secure.ca_file)
    assert 'monitors no master named "nosuch" (it monitors: mymaster)' in msg, msg
    assert "sentinel monitor NAME" in msg, msg


def test_tls_url_to_a_plain_sentinel(plain):
    url = plain.url().replace("redis+sentinel://", "rediss+sentinel://")
    msg = refusal(url, connect_timeout=1)
    assert f"Sentinel at 127.0.0.1:{plain.sentinels[0].port} answers plain Redis, not TLS" in msg, msg
    assert "use redis+sentinel://" in msg, msg


def test_plain_url_to_a_tls_sentinel(secure):
    url = secure.url().replace("rediss+sentinel://", "redis+sentinel://")
    msg = refusal(url, connect_timeout=1)
    assert f"Sentinel at 127.0.0.1:{secure.sentinels[0].port} answers TLS only" in msg, msg
    assert "use rediss+sentinel://" in msg, msg


def test_a_ca_that_did_not_sign_the_certificates(secure):
    from support.tls_certs import make_ca

    other = make_ca(secure.tls_dir, "unrelated")[0]
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(secure.url(), ca_file=str(other), connect_timeout=1).connect()
    assert "Sentinel at 127.0.0.1:" in str(info.value)


def test_a_dead_sentinel_is_skipped(secure, prefix):
    from ferrolock.testing import free_port

    url = secure.url(sentinels=[free_port(), secure.sentinels[0].port])
    client = ferrolock.Client(url, ca_file=secure.ca_file, prefix=prefix, connect_timeout=2)
    with client.lock("x", ttl=2):
        pass


@pytest.mark.parametrize(
    "url, pattern",
    [
        ("redis+sentinel://h:1/m?sentinel_pasword=x", 'unknown option "sentinel_pasword"'),
        ("rediss+sentinel://h:1/m?sentinel_password=%zz", "bad percent-encoding in sentinel_password"),
        ("rediss+sentinel://h:1/m/0/extra", 'unexpected "extra"'),
        ("rediss+sentinel://h:1", "expected /service_name"),
    ],
)
def test_bad_sentinel_urls(url, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        ferrolock.Client(url)
    assert "%zz" not in str(info.value) or "sentinel_password=***" in str(info.value)


def test_ca_file_needs_a_tls_sentinel_url(plain, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not used")
    with pytest.raises(ValueError, match=r"ca_file needs a rediss\+sentinel:// URL"):
        ferrolock.Client(plain.url(), ca_file=str(ca))


def test_sentinel_password_is_redacted_from_invalid_url_errors():
    with pytest.raises(ValueError) as info:
        ferrolock.Client("rediss+sentinel://app:s3cr3t-a@h:1/m/x?sentinel_password=s3cr3t-b")
    assert "s3cr3t" not in str(info.value), str(info.value)
    assert "sentinel_password=***" in str(info.value)
