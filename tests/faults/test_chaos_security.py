"""Security: TLS (certificate and host name checks, `#insecure`, ca_file
handling), Redis ACL users (credentials, the least set of commands ferrolock
needs, key permissions), secrets kept out of every message and log record,
and owner tokens (unique, unbiased, and the only key to a hold).

TLS servers run on certificates made for each module run with the openssl CLI
(tests/support/tls_certs.py); ACL users are made on private redis-servers."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.parse

import pytest

import ferrolock
from ferrolock import LockConfigurationError, LockConnectionError, LockError, LockNotOwned
from ferrolock.testing import RedisServer
from support import TESTS
from support.helpers import key
from support.tls_certs import TlsRedisServer, make_certs, remove

pytestmark = pytest.mark.chaos

TESTS_DIR = str(TESTS)


def q(secret: str) -> str:
    """A password as it must appear in a URL: every reserved character percent-encoded."""
    return urllib.parse.quote(secret, safe="")


# ====================================================================== TLS


@pytest.fixture(scope="module")
def certs():
    c = make_certs()
    yield c
    remove(c)


@pytest.fixture(scope="module")
def tls_server(certs):
    """TLS only (no plain port), listening on 127.0.0.1 and 127.0.0.2; the
    certificate names 127.0.0.1 and localhost only."""
    s = TlsRedisServer(certs, bind=("127.0.0.1", "127.0.0.2")).start()
    yield s
    s.close()


def round_trip(client: ferrolock.Client, name: str = "tls") -> None:
    lock = client.lock(name, ttl=2)
    with lock:
        assert lock.owned()
        info = client.inspect(name)
        assert info is not None and info.token == lock.token
    assert client.inspect(name) is None


def test_tls_with_ca_file_round_trip(tls_server, certs, prefix):
    client = ferrolock.Client(
        f"rediss://127.0.0.1:{tls_server.port}/0", ca_file=certs.ca, prefix=prefix, connect_timeout=2
    )
    assert repr(client).startswith('Client("rediss://127.0.0.1:')
    round_trip(client)
    # The server has no plain port at all, so the lock really went over TLS.
    assert tls_server.command("EXISTS", key(prefix, "tls")) == 0


def test_tls_ca_file_accepts_str_and_pathlike(tls_server, certs, prefix):
    for ca in (str(certs.ca), certs.ca):
        round_trip(ferrolock.Client(f"rediss://127.0.0.1:{tls_server.port}/0", ca_file=ca, prefix=prefix))


def test_tls_dns_name_in_san(tls_server, certs, prefix):
    client = ferrolock.Client(
        f"rediss://localhost:{tls_server.port}/0", ca_file=certs.ca, prefix=prefix, connect_timeout=2
    )
    round_trip(client)


def test_tls_without_ca_file_rejects_untrusted_certificate_quickly(tls_server, prefix):
    """System roots do not include the throwaway CA: refused at the handshake,
    well before the connect timeout, with a message that says why."""
    start = time.monotonic()
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(f"rediss://127.0.0.1:{tls_server.port}/0", prefix=prefix, connect_timeout=5).connect()
    assert time.monotonic() - start < 2
    msg = str(info.value)
    assert "certificate" in msg and "UnknownIssuer" in msg, msg
    assert f"rediss://127.0.0.1:{tls_server.port}/0" in msg, msg
    assert not isinstance(info.value, ConnectionError), "retrying cannot help: not a connection error"


@pytest.mark.parametrize("which", ["other_ca", "server_cert", "server_key", "empty"])
def test_tls_wrong_ca_file_is_not_trusted(tls_server, certs, prefix, tmp_path, which):
    """An unrelated CA, the server's own (non-CA) certificate, a key file with no
    certificate, an empty file: none makes the server trusted. (An unusable
    ca_file is found out at the handshake, as UnknownIssuer, not as ValueError.)"""
    if which == "empty":
        ca = tmp_path / "empty.pem"
        ca.write_text("")
    else:
        ca = getattr(certs, which)
    start = time.monotonic()
    with pytest.raises((LockConfigurationError, ValueError)) as info:
        client = ferrolock.Client(
            f"rediss://127.0.0.1:{tls_server.port}/0", ca_file=ca, prefix=prefix, connect_timeout=5
        )
        client.lock("x", ttl=1).acquire(blocking=False)
    assert time.monotonic() - start < 2
    if isinstance(info.value, LockConfigurationError):
        assert "certificate" in str(info.value), str(info.value)


def test_tls_host_name_mismatch_rejected(tls_server, certs, prefix):
    """The server listens on 127.0.0.2 too, but its certificate does not name it."""
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(
            f"rediss://127.0.0.2:{tls_server.port}/0", ca_file=certs.ca, prefix=prefix, connect_timeout=2
        ).connect()
    msg = str(info.value)
    assert "not valid for name" in msg and "127.0.0.2" in msg, msg


def test_insecure_fragment_skips_every_certificate_check(tls_server, certs, prefix):
    """`rediss://host:port/db#insecure` keeps the connection encrypted but turns
    certificate verification off completely: the chain is not checked (no CA
    needed, and an unrelated ca_file is ignored) and neither is the host name.
    It protects against passive eavesdropping only; anyone who can intercept
    the connection can impersonate the server and read the password. For tests
    and trusted networks only."""
    port = tls_server.port
    round_trip(ferrolock.Client(f"rediss://127.0.0.1:{port}/0#insecure", prefix=prefix, connect_timeout=2))
    round_trip(ferrolock.Client(f"rediss://127.0.0.2:{port}/0#insecure", prefix=prefix, connect_timeout=2))
    round_trip(
        ferrolock.Client(
            f"rediss://127.0.0.1:{port}/0#insecure", ca_file=certs.other_ca, prefix=prefix, connect_timeout=2
        )
    )


def test_missing_ca_file_is_value_error(tmp_path, prefix):
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(ValueError) as info:
        ferrolock.Client("rediss://127.0.0.1:1/0", ca_file=missing, prefix=prefix)
    assert "ca_file" in str(info.value) and str(missing) in str(info.value)
    with pytest.raises(ValueError, match="ca_file"):
        ferrolock.Client("rediss://127.0.0.1:1/0", ca_file=tmp_path, prefix=prefix)  # a directory


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "127.0.0.1:1", "unix:///tmp/ferrolock-none.sock"])
def test_ca_file_without_rediss_url_is_value_error(certs, url):
    with pytest.raises(ValueError, match="ca_file needs a rediss://"):
        ferrolock.Client(url, ca_file=certs.ca)


def test_ca_file_with_sentinel_url_is_value_error(certs):
    with pytest.raises(ValueError, match="ca_file"):
        ferrolock.Client("redis+sentinel://127.0.0.1:1/mymaster/0", ca_file=certs.ca, connect_timeout=0.5)


def test_tls_to_plain_port_fails_within_connect_timeout(server, certs, prefix):
    """A plain Redis does not answer a TLS ClientHello: no hang, the connect timeout applies."""
    for url, ca in (
        (f"rediss://127.0.0.1:{server.port}/0", certs.ca),
        (f"rediss://127.0.0.1:{server.port}/0#insecure", None),
    ):
        start = time.monotonic()
        with pytest.raises(LockConfigurationError) as info:
            ferrolock.Client(url, ca_file=ca, prefix=prefix, connect_timeout=0.5, command_timeout=0.5).connect()
        elapsed = time.monotonic() - start
        assert elapsed < 0.5 + 1.0, elapsed
        assert f"127.0.0.1:{server.port}" in str(info.value)
    assert server.command("PING") == "PONG"  # the server is unharmed


def test_plain_to_tls_port_fails_fast(tls_server, prefix):
    start = time.monotonic()
    with pytest.raises(LockConfigurationError):
        client = ferrolock.Client(
            f"redis://127.0.0.1:{tls_server.port}/0", prefix=prefix, connect_timeout=1, command_timeout=1
        )
        client.lock("x", ttl=1).acquire(blocking=False)
    assert time.monotonic() - start < 1 + 1.0


# ====================================================================== ACL

# What a Lock needs, found by taking each one away (test_acl_minimal_command_set):
# Channel access to `&<prefix>*`: releases announce themselves (PUBLISH from
# the scripts) on channels under the lock's own key name.
# PING (Client() checks the connection and credentials with it), EVALSHA and
# SCRIPT LOAD (EVALSHA falls back to SCRIPT LOAD on NOSCRIPT), MULTI and EXEC
# (a free name is taken by a transaction), and the commands the Lua scripts
# and the transaction call, which Redis 7 checks against the user too.
LOCK_COMMANDS = [
    "ping",
    "evalsha",
    "script|load",
    "multi",
    "exec",
    "publish",
    "get",
    "set",
    "pexpire",
    "pttl",
    "del",
    "time",
]
# SUBSCRIBE/UNSUBSCRIBE carry wake-ups to waiters; without them waiters poll.
LOCK_COMMANDS_RARE = ["subscribe", "unsubscribe"]
RWMUTEX_EXTRA = [
    "hget",
    "hset",
    "hdel",
    "exists",
    "zadd",
    "zcard",
    "zcount",
    "zrange",
    "zrem",
    "zremrangebyscore",
    "zscore",
]


@pytest.fixture(scope="module")
def acl_server():
    s = RedisServer().start()
    yield s
    s.close()


def setuser(server, name: str, *rules: str) -> None:
    assert server.command("ACL", "SETUSER", name, "reset", *rules) == "OK"


def lock_workload(url: str, prefix: str, renew: bool = False) -> None:
    """Every Lock operation once: acquire, busy, extend, inspect, restore by token,
    release, force_release, multi_lock; with `renew`, a hold renewed past its ttl."""
    client = ferrolock.Client(url, prefix=prefix, connect_timeout=2, command_timeout=2)
    owner = client.lock("a", ttl=2)
    assert owner.acquire(blocking=False)
    assert not client.lock("a", ttl=2).acquire(blocking=False)  # busy: GET + PTTL
    owner.extend(3)
    info = client.inspect("a")
    assert info is not None and info.token == owner.token
    assert owner.ttl() > 2
    restored = ferrolock.Lock(client, "a", token=owner.token)
    restored.extend()
    restored.release()
    with pytest.raises(LockNotOwned):
        owner.release()
    other = client.lock("b", ttl=2)
    assert other.acquire(blocking=False)
    assert client.force_release("b")
    with client.multi_lock(["m1", "m2"], ttl=2):
        pass
    if renew:
        held = client.lock("r", ttl=0.9)
        with held:
            time.sleep(1.0)  # past a ttl: renewed meanwhile
            assert not held.lost and held.ttl() > 0.3


def rw_workload(url: str, prefix: str) -> None:
    client = ferrolock.Client(url, prefix=prefix, connect_timeout=2, command_timeout=2)
    rw = client.rwmutex("doc", ttl=2)
    with rw.read():
        assert rw.readers() == 1
        r2 = rw.try_read()
        assert r2 is not None
        r2.extend()
        r2.release()
        assert rw.try_write() is None
    with rw.write():
        assert rw.locked()
    assert not rw.locked()


def test_acl_user_with_password(acl_server, prefix):
    setuser(acl_server, "locker", "on", ">s3cr3t-pw", "~ferrolock:*", "~test:*", "&*", "+@all")
    url = f"redis://locker:s3cr3t-pw@127.0.0.1:{acl_server.port}/0"
    client = ferrolock.Client(url, prefix=prefix)
    assert "s3cr3t" not in repr(client)
    round_trip(client, "acl")
    lock_workload(url, prefix, renew=True)


@pytest.mark.parametrize("user,password", [("locker", "wrong-pw"), ("nobody", "s3cr3t-pw"), ("", "s3cr3t-pw")])
def test_acl_wrong_credentials(acl_server, prefix, user, password):
    setuser(acl_server, "locker", "on", ">s3cr3t-pw", "~*", "+@all")
    with pytest.raises(LockConfigurationError) as info:
        ferrolock.Client(
            f"redis://{user}:{password}@127.0.0.1:{acl_server.port}/0", prefix=prefix, connect_timeout=2
        ).connect()
    msg = str(info.value)
    assert "credentials" in msg, msg
    assert password not in msg and password not in repr(info.value)


def test_acl_disabled_user_is_refused(acl_server, prefix):
    setuser(acl_server, "sleeper", "off", ">s3cr3t-pw", "~*", "+@all")
    with pytest.raises(LockConfigurationError, match="credentials"):
        ferrolock.Client(f"redis://sleeper:s3cr3t-pw@127.0.0.1:{acl_server.port}/0", prefix=prefix).connect()


def test_acl_key_permission_denied_is_clear(acl_server, prefix):
    """A user whose keys are `other:*` cannot touch ferrolock's keys: a LockError
    (a Redis error, not a connection problem) that says it is a permission problem."""
    setuser(acl_server, "confined", "on", ">s3cr3t-pw", "~other:*", "+@all")
    client = ferrolock.Client(f"redis://confined:s3cr3t-pw@127.0.0.1:{acl_server.port}/0", prefix=prefix)
    lock = client.lock("denied", ttl=2)
    with pytest.raises(LockError) as info:
        lock.acquire(blocking=False)
    assert not isinstance(info.value, (LockConnectionError, LockNotOwned))
    msg = str(info.value)
    assert "NoPerm" in msg and "no permissions" in msg and "keys" in msg, msg
    assert not lock.owned()
    with pytest.raises(LockError, match="no permissions"):
        with lock:
            pass
    with pytest.raises(LockError, match="no permissions"):
        client.inspect("denied")
    assert acl_server.command("KEYS", f"{prefix}*") == []


@pytest.mark.parametrize("dropped", [None] + LOCK_COMMANDS)
def test_acl_minimal_command_set(acl_server, prefix, dropped):
    """A user with only LOCK_COMMANDS (+ the rare ones) can use every Lock operation; without
    any one of LOCK_COMMANDS some operation fails with a permission error."""
    allowed = [c for c in LOCK_COMMANDS + LOCK_COMMANDS_RARE if c != dropped]
    user = f"min{dropped or ''}".replace("|", "_")
    setuser(acl_server, user, "on", ">pw", f"~{prefix}*", f"&{prefix}*", "-@all", *("+" + c for c in allowed))
    assert acl_server.command("SCRIPT", "FLUSH") == "OK"  # so SCRIPT LOAD is needed again
    url = f"redis://{user}:pw@127.0.0.1:{acl_server.port}/0"
    if dropped is None:
        lock_workload(url, prefix, renew=True)
        return
    with pytest.raises(LockError) as info:
        lock_workload(url, prefix)
    msg = str(info.value)
    assert "no permissions" in msg or "can't run this command" in msg, msg


def test_acl_rwmutex_command_set(acl_server, prefix):
    setuser(
        acl_server,
        "rwmin",
        "on",
        ">pw",
        f"~{prefix}*",
        f"&{prefix}*",
        "-@all",
        *("+" + c for c in LOCK_COMMANDS + LOCK_COMMANDS_RARE + RWMUTEX_EXTRA),
    )
    url = f"redis://rwmin:pw@127.0.0.1:{acl_server.port}/0"
    rw_workload(url, prefix)
    # and the Lock commands alone are not enough for an RWMutex
    setuser(
        acl_server,
        "rwless",
        "on",
        ">pw",
        f"~{prefix}*",
        f"&{prefix}*",
        "-@all",
        *("+" + c for c in LOCK_COMMANDS + LOCK_COMMANDS_RARE),
    )
    with pytest.raises(LockError, match="can't run this command|no permissions"):
        rw_workload(f"redis://rwless:pw@127.0.0.1:{acl_server.port}/0", prefix)


def test_acl_select_needed_for_other_databases(acl_server, prefix):
    setuser(acl_server, "db1", "on", ">pw", f"~{prefix}*", f"&{prefix}*", "-@all", *("+" + c for c in LOCK_COMMANDS))
    with pytest.raises(LockError, match="select"):
        ferrolock.Client(f"redis://db1:pw@127.0.0.1:{acl_server.port}/1", prefix=prefix).connect()
    setuser(
        acl_server,
        "db1",
        "on",
        ">pw",
        f"~{prefix}*",
        f"&{prefix}*",
        "-@all",
        "+select",
        *("+" + c for c in LOCK_COMMANDS),
    )
    round_trip(ferrolock.Client(f"redis://db1:pw@127.0.0.1:{acl_server.port}/1", prefix=prefix), "db1")


def test_missing_password_is_reported_at_construction(prefix):
    s = RedisServer(password="s3cr3t-pw").start()
    try:
        with pytest.raises(LockConfigurationError, match="credentials|NOAUTH"):
            ferrolock.Client(f"redis://127.0.0.1:{s.port}/0", prefix=prefix, connect_timeout=2).connect()
    finally:
        s.close()


# ====================================================================== secrets

PASSWORD = "p@ss/w:rd%"
WRONG = "Wr0ng/p@ss:w%rd"
ACL_PASSWORD = "s3cr3t-pw"

# Run in a fresh interpreter: logging is set to DEBUG on the root logger before
# ferrolock is imported (pyo3-log caches levels), so every record of ferrolock,
# redis-rs and rustls is captured. Prints one JSON document with the outcomes,
# and the records, to be searched for the passwords.
LEAK_SCRIPT = r"""
import json, logging, os, socket, sys, time, traceback, urllib.parse

records = []
class Capture(logging.Handler):
    def emit(self, record):
        records.append({"name": record.name, "level": record.levelname, "msg": record.getMessage(),
                        "args": repr(record.args), "exc": record.exc_text or ""})
root = logging.getLogger()
root.setLevel(logging.DEBUG)
root.addHandler(Capture(level=logging.DEBUG))
logging.getLogger("ferrolock").setLevel(logging.DEBUG)

sys.path.insert(0, os.environ["TESTS_DIR"])
import ferrolock
from ferrolock.testing import RedisServer, free_port
from support.tls_certs import TlsRedisServer, make_certs, remove

PASSWORD, WRONG, ACL = os.environ["PW"], os.environ["WRONG"], os.environ["ACL_PW"]
q = lambda s: urllib.parse.quote(s, safe="")
outcomes = {}
texts = []

def record(name, fn):
    try:
        value = fn()
        outcomes[name] = "ok"
        if value is not None:
            texts.append(repr(value))
    except BaseException as e:
        outcomes[name] = type(e).__name__
        texts.append(str(e)); texts.append(repr(e))
        texts.extend(str(n) for n in getattr(e, "__notes__", []))
        texts.append("".join(traceback.format_exception(e)))
        for linked in (e.__cause__, e.__context__):
            if linked is not None:
                texts.append(repr(linked))

def connect(url, **kw):
    kw.setdefault("connect_timeout", 1); kw.setdefault("command_timeout", 1)
    c = ferrolock.Client(url, prefix="test:leak:", **kw)
    texts.append(repr(c)); texts.append(str(c))
    c.connect()
    return c

def hold_through(client, name, disturb):
    lock = client.lock(name, ttl=0.5)
    texts.append(repr(lock))
    assert lock.acquire(timeout=2)
    disturb()
    lost = lock.lost
    try:
        lock.release()
    except ferrolock.LockError as e:
        texts.append(str(e)); texts.append(repr(e))
    return f"lost={lost}"

def kill_loop(server):
    def run():
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            server.command("CLIENT", "KILL", "TYPE", "normal")
            time.sleep(0.2)  # the fault's pace: connections dropped every 0.2 s for a second
    return run

# ---- a plain server with a password full of URL-reserved characters, and an ACL user
plain = RedisServer(password=PASSWORD).start()
plain.command("ACL", "SETUSER", "locker", "on", ">" + ACL, "~*", "&*", "+@all")
P = plain.port
good = f"redis://:{q(PASSWORD)}@127.0.0.1:{P}/0"
record("wrong_password", lambda: connect(f"redis://:{q(WRONG)}@127.0.0.1:{P}/0"))
record("wrong_password_user", lambda: connect(f"redis://default:{q(WRONG)}@127.0.0.1:{P}/0"))
record("wrong_password_unencoded", lambda: connect(f"redis://:{WRONG}@127.0.0.1:{P}/0"))
record("password_unencoded", lambda: connect(f"redis://:{PASSWORD}@127.0.0.1:{P}/0"))
record("password_bad_port", lambda: connect(f"redis://:{q(PASSWORD)}@127.0.0.1:notaport/0"))
record("password_bad_db", lambda: connect(f"redis://:{q(PASSWORD)}@127.0.0.1:{P}/x"))
record("password_dead_port", lambda: connect(f"redis://:{q(PASSWORD)}@127.0.0.1:{free_port()}/0"))
record("sentinel_dead", lambda: connect(f"redis+sentinel://:{q(PASSWORD)}@127.0.0.1:{free_port()}/mymaster/0"))
record("sentinel_bad_db", lambda: connect(f"redis+sentinel://:{q(PASSWORD)}@127.0.0.1:1/mymaster/x"))
record("acl_wrong", lambda: connect(f"redis://locker:{q(WRONG)}@127.0.0.1:{P}/0"))
record("acl_good", lambda: connect(f"redis://locker:{q(ACL)}@127.0.0.1:{P}/0").lock("acl", ttl=1).acquire())
client = connect(good)
record("client_kill", lambda: hold_through(client, "kill", kill_loop(plain)))
def restart():
    # Down past the hold's 0.5 s ttl, then up long enough for a renewal to find the hold gone.
    plain.stop(); time.sleep(0.7); plain.start(); time.sleep(0.3)
record("restart", lambda: hold_through(client, "restart", restart))
record("after_restart", lambda: client.lock("after", ttl=1).acquire(timeout=2))
plain.close()
record("server_gone", lambda: client.lock("gone", ttl=1).acquire(timeout=0.5))

# ---- TLS
certs = make_certs()
tls = TlsRedisServer(certs, password=PASSWORD).start()
T = tls.port
tgood = f"rediss://:{q(PASSWORD)}@127.0.0.1:{T}/0"
record("tls_no_ca", lambda: connect(tgood))
record("tls_wrong_ca", lambda: connect(tgood, ca_file=certs.other_ca))
record("tls_wrong_password", lambda: connect(f"rediss://:{q(WRONG)}@127.0.0.1:{T}/0", ca_file=certs.ca))
record("tls_wrong_password_insecure", lambda: connect(f"rediss://:{q(WRONG)}@127.0.0.1:{T}/0#insecure"))
record("tls_unencoded", lambda: connect(f"rediss://:{PASSWORD}@127.0.0.1:{T}/0", ca_file=certs.ca))
record("tls_ca_missing", lambda: connect(tgood, ca_file=str(certs.dir / "missing.pem")))
record("tls_ca_plain_url", lambda: connect(good, ca_file=certs.ca))
record("plain_to_tls_port", lambda: connect(f"redis://:{q(PASSWORD)}@127.0.0.1:{T}/0").lock("x").acquire(timeout=0.5))
silent = socket.socket(); silent.bind(("127.0.0.1", 0)); silent.listen(1)
record("tls_silent_port", lambda: connect(f"rediss://:{q(PASSWORD)}@127.0.0.1:{silent.getsockname()[1]}/0",
                                          ca_file=certs.ca, connect_timeout=0.5))
tclient = connect(tgood, ca_file=certs.ca)
record("tls_client_kill", lambda: hold_through(tclient, "kill", kill_loop(tls)))
record("tls_insecure", lambda: connect(tgood + "#insecure").lock("i", ttl=1).acquire())
tls.close()
remove(certs)

logging.shutdown()
print(json.dumps({"outcomes": outcomes, "texts": texts, "records": records}))
"""


def fragments(secret: str, n: int = 6) -> set:
    """Every n-character piece of the secret, raw and percent-encoded."""
    out = set()
    for form in {secret, q(secret), urllib.parse.quote(secret)}:
        out |= {form[i : i + n] for i in range(len(form) - n + 1)}
    return out


def test_secrets_never_leak(tmp_path):
    env = dict(os.environ, TESTS_DIR=TESTS_DIR, PW=PASSWORD, WRONG=WRONG, ACL_PW=ACL_PASSWORD, PYTHONPATH=TESTS_DIR)
    done = subprocess.run(
        [sys.executable, "-c", LEAK_SCRIPT], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    out = report["outcomes"]
    assert out == {
        "wrong_password": "LockConfigurationError",
        "wrong_password_user": "LockConfigurationError",
        "wrong_password_unencoded": "ValueError",
        "password_unencoded": "ValueError",
        "password_bad_port": "ValueError",
        "password_bad_db": "ValueError",
        "password_dead_port": "LockConnectionError",
        "sentinel_dead": "LockConnectionError",
        "sentinel_bad_db": "ValueError",
        "acl_wrong": "LockConfigurationError",
        "acl_good": "ok",
        "client_kill": "ok",
        "restart": "ok",
        "after_restart": "ok",
        "server_gone": "LockConnectionError",
        "tls_no_ca": "LockConfigurationError",  # a certificate or scheme to fix, said so
        "tls_wrong_ca": "LockConfigurationError",  # a certificate or scheme to fix, said so
        "tls_wrong_password": "LockConfigurationError",
        "tls_wrong_password_insecure": "LockConfigurationError",
        "tls_unencoded": "ValueError",
        "tls_ca_missing": "ValueError",
        "tls_ca_plain_url": "ValueError",
        "plain_to_tls_port": "LockConfigurationError",  # a certificate or scheme to fix, said so
        "tls_silent_port": "LockConnectionError",
        "tls_client_kill": "ok",
        "tls_insecure": "ok",
    }, out
    records = report["records"]
    # The faults were real: the watchdog warned, and addresses (not credentials) were logged.
    assert any(r["level"] == "WARNING" and r["name"].startswith("ferrolock") for r in records), records
    assert any("127.0.0.1" in r["msg"] for r in records), records
    assert any(r["name"] == "ferrolock.client" and "dropped" in r["msg"] for r in records), records
    assert any(r["level"] == "WARNING" and "lost" in r["msg"] for r in records), records
    whole = done.stdout + done.stderr
    for secret in (PASSWORD, WRONG, ACL_PASSWORD):
        for piece in fragments(secret):
            assert piece not in whole, (
                secret,
                piece,
                [t for t in report["texts"] + [r["msg"] for r in records] if piece in t][:3],
            )


def test_password_at_host_form_with_colon_not_leaked():
    with pytest.raises(ValueError) as info:
        ferrolock.Client(f"{PASSWORD}@127.0.0.1:1", connect_timeout=0.5)
    for piece in fragments(PASSWORD, 4):
        assert piece not in str(info.value), str(info.value)


def test_password_at_host_form_without_colon_not_leaked():
    pw = "p@ss/w0rd%!"
    s = RedisServer(password=pw).start()
    try:
        client = ferrolock.Client(f"{pw}@127.0.0.1:{s.port}", prefix="test:pw-at-host:")
        assert pw not in repr(client)
        round_trip(client, "pw-at-host")
        with pytest.raises(LockConfigurationError) as info:
            ferrolock.Client(f"{pw}x@127.0.0.1:{s.port}", prefix="test:pw-at-host:").connect()
        assert "ss/w0" not in str(info.value) and "ss%2Fw0" not in str(info.value)
    finally:
        s.close()


# ====================================================================== tokens

HEX32 = re.compile(r"[0-9a-f]{32}")


def test_tokens_unique_and_unbiased(client):
    lock = client.lock("tokens", ttl=5)
    tokens = []
    for _ in range(1000):
        assert lock.acquire(blocking=False)
        tokens.append(lock.token)
        lock.release()
    assert all(HEX32.fullmatch(t) for t in tokens), [t for t in tokens if not HEX32.fullmatch(t)][:3]
    assert len(set(tokens)) == 1000
    values = [int(t, 16) for t in tokens]
    for bit in range(128):
        ones = sum((v >> bit) & 1 for v in values)
        assert 400 <= ones <= 600, (bit, ones)  # binomial(1000, 1/2): 600 is 6.3 sigma away
    # the tokens of independently made handles differ too
    others = set()
    for i in range(50):
        h = client.lock(f"tokens-{i}", ttl=5)
        assert h.acquire(blocking=False)
        others.add(h.token)
        h.release()
    assert len(others) == 50 and not others & set(tokens)


def wrong_tokens(t: str) -> dict:
    flip = lambda i: t[:i] + format((int(t[i], 16) + 1) % 16, "x") + t[i + 1 :]  # noqa: E731
    cases = {
        "random": secrets.token_hex(16),
        "first char": flip(0),
        "middle char": flip(15),
        "last char": flip(31),
        "prefix 31": t[:31],
        "prefix 16": t[:16],
        "prefix 1": t[:1],
        "suffix 31": t[1:],
        "extended": t + "0",
        "doubled": t + t,
        "trailing space": t + " ",
        "trailing NUL": t + "\x00",
        "the value's next part": f"{t} 1",
        "glob": "*",
        "lua pattern": ".*",
        "percent": "%",
    }
    if t.upper() != t:
        cases["upper case"] = t.upper()
    return cases


def test_wrong_tokens_can_never_release_or_extend(client):
    owner = client.lock("victim", ttl=5)
    assert owner.acquire(blocking=False)
    t = owner.token
    for label, wrong in wrong_tokens(t).items():
        assert wrong != t
        if not (wrong.isascii() and wrong.isprintable() and " " not in wrong):
            # A hold's value ends its token at the first space: refused up front.
            with pytest.raises(ValueError, match="printable ASCII characters with no space"):
                ferrolock.Lock(client, "victim", token=wrong, ttl=60)
            continue
        h = ferrolock.Lock(client, "victim", token=wrong, ttl=60)
        assert not h.owned(), label
        with pytest.raises(LockNotOwned):
            h.release()
        h = ferrolock.Lock(client, "victim", token=wrong, ttl=60)
        with pytest.raises(LockNotOwned):
            h.extend(60)
        h = ferrolock.Lock(client, "victim", token=wrong, ttl=60)
        assert h.acquire(blocking=False) is False, label  # cannot adopt the hold either
        info = client.inspect("victim")
        assert info is not None and info.token == t, label
        assert info.ttl <= 5, (label, info.ttl)  # no wrong extend reached Redis
    assert owner.owned() and not owner.lost
    owner.extend()
    # the owner's token on another name is no key to that one
    other = client.lock("bystander", ttl=5)
    assert other.acquire(blocking=False)
    with pytest.raises(LockNotOwned):
        ferrolock.Lock(client, "bystander", token=t).release()
    assert client.inspect("bystander").token == other.token
    other.release()
    owner.release()
    assert client.inspect("victim") is None


def test_empty_or_oversized_token_rejected(client):
    with pytest.raises(ValueError, match="token"):
        ferrolock.Lock(client, "x", token="")
    with pytest.raises(ValueError, match="token"):
        ferrolock.Lock(client, "x", token="a" * 513)
    with pytest.raises(TypeError):
        ferrolock.Lock(client, "x", token=b"0" * 32)


def test_right_token_restores_the_hold(client):
    owner = client.lock("restored", ttl=5)
    assert owner.acquire(blocking=False)
    t = owner.token
    h = ferrolock.Lock(client, "restored", token=t)
    assert h.owned()
    h.extend(10)
    assert client.inspect("restored").ttl > 9
    h.release()
    assert client.inspect("restored") is None
    with pytest.raises(LockNotOwned):
        owner.release()
    # a released token is dead: restoring it again holds nothing
    with pytest.raises(LockNotOwned):
        ferrolock.Lock(client, "restored", token=t).release()
