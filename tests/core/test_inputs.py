"""Bad arguments: each is refused at once with the documented exception type and
a message naming what was wrong, and a refused call leaves nothing in Redis.
Also the exception tree, and that no password ever shows in a repr or a message."""

from __future__ import annotations

import math
import re
import time

import pytest

import ferrolock
from ferrolock import (
    LockConnectionError,
    LockError,
    LockLost,
    LockNotAcquired,
    LockNotOwned,
    Retry,
)
from ferrolock.testing import free_port

pytestmark = pytest.mark.chaos


def text_of(exc: BaseException) -> str:
    """The message, plus any notes PyO3 adds (``while processing 'arg'``)."""
    return " ".join([str(exc), *getattr(exc, "__notes__", ())])


# Each case: (id, call(client, url, prefix), exception type, regex the text must match).
# Calls that build a Client get the live server's URL, so a refusal can only come
# from the argument under test.
CASES = [
    # ttl
    ("ttl-zero", lambda c, u, p: c.lock("n", ttl=0), ValueError, r"\bttl\b"),
    ("ttl-negative", lambda c, u, p: c.lock("n", ttl=-1), ValueError, r"\bttl\b"),
    ("ttl-nan", lambda c, u, p: c.lock("n", ttl=math.nan), ValueError, r"\bttl\b.*NaN"),
    ("ttl-inf", lambda c, u, p: c.lock("n", ttl=math.inf), ValueError, r"\bttl\b"),
    ("ttl-str", lambda c, u, p: c.lock("n", ttl="3"), TypeError, r"\bttl\b.*str"),
    ("ttl-bool", lambda c, u, p: c.lock("n", ttl=True), TypeError, r"\bttl\b.*bool"),
    ("ttl-bytes", lambda c, u, p: c.lock("n", ttl=b"1"), TypeError, r"\bttl\b"),
    ("ttl-huge-int", lambda c, u, p: c.lock("n", ttl=10**30), ValueError, r"\bttl\b"),
    ("ttl-beyond-float", lambda c, u, p: c.lock("n", ttl=10**400), ValueError, r"\bttl\b"),
    ("ttl-below-1ms", lambda c, u, p: c.lock("n", ttl=1e-9), ValueError, r"\bttl\b"),
    ("ttl-over-a-year", lambda c, u, p: c.lock("n", ttl=400 * 86400), ValueError, r"\bttl\b"),
    ("extend-ttl-zero", lambda c, u, p: c.lock("n").extend(ttl=0), ValueError, r"\bttl\b"),
    ("extend-ttl-str", lambda c, u, p: c.lock("n").extend(ttl="1"), TypeError, r"\bttl\b"),
    # acquire(blocking, timeout)
    ("timeout-negative", lambda c, u, p: c.lock("n").acquire(timeout=-2), ValueError, r"timeout"),
    ("timeout-nan", lambda c, u, p: c.lock("n").acquire(timeout=math.nan), ValueError, r"timeout.*NaN"),
    ("timeout-str", lambda c, u, p: c.lock("n").acquire(timeout="1"), TypeError, r"timeout"),
    ("timeout-inf", lambda c, u, p: c.lock("n").acquire(timeout=math.inf), ValueError, r"timeout"),
    ("timeout-huge", lambda c, u, p: c.lock("n").acquire(timeout=10**30), OverflowError, r"timeout"),  # as threading
    (
        "nonblocking-with-timeout",
        lambda c, u, p: c.lock("n").acquire(blocking=False, timeout=1),
        ValueError,
        r"timeout.*non-blocking",
    ),
    ("blocking-str", lambda c, u, p: c.lock("n").acquire(blocking="yes"), TypeError, r"blocking"),
    # blocking_timeout
    ("blocking_timeout-negative", lambda c, u, p: c.lock("n", blocking_timeout=-1), ValueError, r"blocking_timeout"),
    ("blocking_timeout-nan", lambda c, u, p: c.lock("n", blocking_timeout=math.nan), ValueError, r"blocking_timeout"),
    ("blocking_timeout-inf", lambda c, u, p: c.lock("n", blocking_timeout=math.inf), ValueError, r"blocking_timeout"),
    ("blocking_timeout-str", lambda c, u, p: c.lock("n", blocking_timeout="x"), TypeError, r"blocking_timeout"),
    ("blocking_timeout-huge", lambda c, u, p: c.lock("n", blocking_timeout=10**30), ValueError, r"blocking_timeout"),
    # names
    ("name-empty", lambda c, u, p: c.lock(""), ValueError, r"lock name.*empty"),
    ("name-bytes", lambda c, u, p: c.lock(b"bytes"), TypeError, r"lock name.*bytes"),
    ("name-int", lambda c, u, p: c.lock(3), TypeError, r"lock name.*int"),
    ("name-none", lambda c, u, p: c.lock(None), TypeError, r"lock name.*NoneType"),
    ("name-lone-surrogate", lambda c, u, p: c.lock("\ud800"), ValueError, r"lock name.*surrogate"),
    ("name-too-long", lambda c, u, p: c.lock("x" * 5000), ValueError, r"lock name.*5000.*4096"),
    ("name-too-long-utf8", lambda c, u, p: c.lock("é" * 2049), ValueError, r"lock name.*4098"),
    ("names-duplicate", lambda c, u, p: c.lock(["a", "b", "a"]), ValueError, r"lock name.*'?\"?a.*twice"),
    ("names-empty-list", lambda c, u, p: c.lock([]), ValueError, r"at least one name"),
    ("names-empty-tuple", lambda c, u, p: c.lock(()), ValueError, r"at least one name"),
    ("names-non-str-member", lambda c, u, p: c.lock(["a", 3]), TypeError, r"lock name.*int"),
    ("names-empty-member", lambda c, u, p: c.lock(("a", "")), ValueError, r"lock name.*empty"),
    ("names-set", lambda c, u, p: c.lock({"a"}), TypeError, r"lock name.*set"),
    ("multi_lock-empty", lambda c, u, p: c.multi_lock([]), ValueError, r"at least one name"),
    ("force_release-empty", lambda c, u, p: c.force_release(""), ValueError, r"lock name.*empty"),
    ("inspect-int", lambda c, u, p: c.inspect(5), TypeError, r"lock name.*int"),
    # other Lock options
    ("metadata-int", lambda c, u, p: c.lock("n", metadata=5), TypeError, r"metadata.*int"),
    ("metadata-too-long", lambda c, u, p: c.lock("n", metadata="m" * 70000), ValueError, r"metadata"),
    ("token-empty", lambda c, u, p: c.lock("n", token=""), ValueError, r"token"),
    ("token-int", lambda c, u, p: c.lock("n", token=5), TypeError, r"token.*int"),
    ("token-too-long", lambda c, u, p: c.lock("n", token="t" * 600), ValueError, r"token"),
    ("on_lost-not-callable", lambda c, u, p: c.lock("n", on_lost=5), TypeError, r"on_lost.*callable"),
    ("retry-str", lambda c, u, p: c.lock("n", retry="x"), TypeError, r"retry|Retry"),
    ("auto_renew-int", lambda c, u, p: c.lock("n", auto_renew=1), TypeError, r"auto_renew"),
    ("unknown-option", lambda c, u, p: c.lock("n", ttll=1), TypeError, r"ttll"),
    ("synchronized-bad-ttl", lambda c, u, p: c.synchronized("n", ttl=0), ValueError, r"\bttl\b"),
    # Retry
    ("retry-fixed-zero", lambda c, u, p: Retry.fixed(0), ValueError, r"interval"),
    ("retry-fixed-negative", lambda c, u, p: Retry.fixed(-1), ValueError, r"interval"),
    ("retry-fixed-nan", lambda c, u, p: Retry.fixed(math.nan), ValueError, r"interval"),
    ("retry-fixed-str", lambda c, u, p: Retry.fixed("1"), TypeError, r"interval"),
    ("retry-fixed-attempts-zero", lambda c, u, p: Retry.fixed(1, attempts=0), ValueError, r"attempts"),
    ("retry-fixed-attempts-negative", lambda c, u, p: Retry.fixed(1, attempts=-3), ValueError, r"attempts"),
    ("retry-fixed-attempts-float", lambda c, u, p: Retry.fixed(1, attempts=1.5), TypeError, r"attempts"),
    ("retry-exponential-max-below-min", lambda c, u, p: Retry.exponential(1, 0.5), ValueError, r"max.*min"),
    ("retry-exponential-max-inf", lambda c, u, p: Retry.exponential(0.1, math.inf), ValueError, r"\bmax\b"),
    ("retry-exponential-jitter-int", lambda c, u, p: Retry.exponential(0.1, 1, jitter=1), TypeError, r"jitter"),
    ("retry-linear-step-zero", lambda c, u, p: Retry.linear(0, 1), ValueError, r"step"),
    ("retry-linear-max-negative", lambda c, u, p: Retry.linear(0.1, -1), ValueError, r"max_interval"),
    # Client
    ("url-empty", lambda c, u, p: ferrolock.Client("", prefix=p), ValueError, r"URL.*empty"),
    ("url-blank", lambda c, u, p: ferrolock.Client("   ", prefix=p), ValueError, r"URL.*empty"),
    ("url-scheme", lambda c, u, p: ferrolock.Client("nonsense://x", prefix=p), ValueError, r"URL"),
    ("url-port", lambda c, u, p: ferrolock.Client("redis://127.0.0.1:notaport", prefix=p), ValueError, r"URL"),
    ("url-db", lambda c, u, p: ferrolock.Client(u.rsplit("/", 1)[0] + "/abc", prefix=p), ValueError, r"URL"),
    ("url-int", lambda c, u, p: ferrolock.Client(5, prefix=p), TypeError, r"url.*int"),
    (
        "connect_timeout-zero",
        lambda c, u, p: ferrolock.Client(u, connect_timeout=0, prefix=p),
        ValueError,
        r"connect_timeout",
    ),
    (
        "connect_timeout-negative",
        lambda c, u, p: ferrolock.Client(u, connect_timeout=-1, prefix=p),
        ValueError,
        r"connect_timeout",
    ),
    (
        "connect_timeout-str",
        lambda c, u, p: ferrolock.Client(u, connect_timeout="1", prefix=p),
        TypeError,
        r"connect_timeout",
    ),
    (
        "command_timeout-nan",
        lambda c, u, p: ferrolock.Client(u, command_timeout=math.nan, prefix=p),
        ValueError,
        r"command_timeout",
    ),
    (
        "command_timeout-inf",
        lambda c, u, p: ferrolock.Client(u, command_timeout=math.inf, prefix=p),
        ValueError,
        r"command_timeout",
    ),
    ("prefix-int", lambda c, u, p: ferrolock.Client(u, prefix=5), TypeError, r"prefix.*int"),
    ("prefix-surrogate", lambda c, u, p: ferrolock.Client(u, prefix="\ud800"), ValueError, r"prefix"),
    (
        "ca_file-on-plain-url",
        lambda c, u, p: ferrolock.Client(u, ca_file="/etc/hosts", prefix=p),
        ValueError,
        r"ca_file.*rediss",
    ),
    ("ca_file-int", lambda c, u, p: ferrolock.Client(u, ca_file=5, prefix=p), TypeError, r"ca_file"),
]


def _params():
    for case in CASES:
        if hasattr(case, "marks"):  # already a pytest.param
            yield case
        else:
            yield pytest.param(*case, id=case[0])


@pytest.mark.parametrize("label, call, exc_type, pattern", list(_params()))
def test_bad_input_is_refused(label, call, exc_type, pattern, client, redis_url, prefix, raw):
    start = time.monotonic()
    with pytest.raises(exc_type) as info:
        call(client, redis_url, prefix)
    elapsed = time.monotonic() - start
    assert elapsed < 1.0, f"{label}: refusing took {elapsed:.3f} s"
    assert type(info.value) is exc_type or not issubclass(type(info.value), LockError), (
        f"{label}: a bad argument should not look like a lock/Redis failure: {info.value!r}"
    )
    assert re.search(pattern, text_of(info.value), re.IGNORECASE | re.DOTALL), (
        f"{label}: message {text_of(info.value)!r} does not match {pattern!r}"
    )
    # A refused call takes nothing: no key under this test's prefix.
    assert raw.keys(prefix + "*") == []


def test_table_is_large_enough():
    assert len(CASES) >= 30


def test_refusals_leave_no_lock_and_the_client_still_works(client, raw, prefix):
    for bad in (dict(ttl=0), dict(metadata=5), dict(token=""), dict(on_lost=5), dict(blocking_timeout=-1)):
        with pytest.raises((ValueError, TypeError)):
            client.lock("same", **bad)
        assert raw.keys(prefix + "*") == []
    lock = client.lock("same", ttl=5)
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-2)
    assert lock.token is None
    assert raw.keys(prefix + "*") == []
    # The same handle is usable after the refusals.
    assert lock.acquire(blocking=False)
    assert raw.keys(prefix + "*") == [prefix + "{same}"]
    lock.release()
    assert raw.keys(prefix + "*") == []


def test_bad_extend_leaves_the_hold_alone(client, raw, prefix):
    lock = client.lock("held", ttl=5)
    assert lock.acquire(blocking=False)
    before = raw("GET", prefix + "{held}")
    for bad, exc in ((0, ValueError), (-1, ValueError), (math.nan, ValueError), ("1", TypeError), (10**9, ValueError)):
        with pytest.raises(exc, match="ttl"):
            lock.extend(ttl=bad)
    assert raw("GET", prefix + "{held}") == before
    assert 4000 < raw("PTTL", prefix + "{held}") <= 5000
    assert not lock.lost
    lock.release()
    assert raw.keys(prefix + "*") == []


def test_valid_edge_values_are_accepted(client, raw, prefix):
    # The documented forms right at the edges must not be refused.
    assert client.lock("n", ttl=0.001).ttl() is None
    lock = client.lock("n", ttl=1, blocking_timeout=0)
    assert lock.acquire(blocking=False, timeout=-1)
    lock.release()
    assert lock.acquire(blocking=True, timeout=0)
    lock.release()
    assert lock.acquire(timeout=None)
    lock.release()
    Retry.fixed(0.001, attempts=1)
    Retry.exponential(0.5, 0.5)
    Retry.linear(0.1, 0.1)
    assert raw.keys(prefix + "*") == []


def test_exception_tree():
    for exc in (LockNotAcquired, LockNotOwned, LockLost, LockConnectionError):
        assert issubclass(exc, LockError), exc
    assert issubclass(LockError, Exception)
    assert issubclass(LockConnectionError, ConnectionError)
    assert issubclass(LockConnectionError, OSError)
    for exc in (LockNotAcquired, LockNotOwned, LockLost):
        assert not issubclass(exc, ConnectionError), exc
    assert LockConnectionError.__module__ == "ferrolock"
    assert LockConnectionError.__name__ == "LockConnectionError"
    # except ConnectionError catches what ferrolock raises for an unreachable Redis.
    try:
        raise LockConnectionError("x")
    except ConnectionError as e:
        assert isinstance(e, LockError)


def test_connection_errors_are_both_lock_and_connection_errors():
    port = free_port()
    with pytest.raises(LockConnectionError) as info:
        ferrolock.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5).connect()
    assert isinstance(info.value, ConnectionError)
    assert isinstance(info.value, LockError)


SECRET = "s3cretpw"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:{{port}}/0",
        f"redis://someuser:{SECRET}@127.0.0.1:{{port}}/0",
        f"{SECRET}@127.0.0.1:{{port}}",
    ],
    ids=["password-only", "user-and-password", "password-at-host"],
)
def test_password_not_in_connection_error(url):
    port = free_port()
    with pytest.raises(LockConnectionError) as info:
        ferrolock.Client(url.format(port=port), connect_timeout=0.5).connect()
    assert SECRET not in text_of(info.value)
    assert SECRET not in repr(info.value)
    assert str(port) in str(info.value)  # the address is named, just not the password


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:notaport/0",
        f"redis://u:{SECRET}@[not-an-ip/0",
        f"rediss://:{SECRET}@127.0.0.1:1/x",
        f"redis://:{SECRET}/x@127.0.0.1:1/0",
    ],
)
def test_password_not_in_invalid_url_error(url):
    with pytest.raises(ValueError) as info:
        ferrolock.Client(url, connect_timeout=0.5).connect()
    assert SECRET not in text_of(info.value)
    assert SECRET not in repr(info.value)


def test_password_not_in_repr(prefix):
    from ferrolock.testing import RedisServer

    server = RedisServer(password=SECRET).start()
    try:
        for url in (
            server.url,
            f"redis://default:{SECRET}@127.0.0.1:{server.port}/0",
            f"{SECRET}@127.0.0.1:{server.port}",
        ):
            c = ferrolock.Client(url, prefix=prefix)
            assert SECRET not in repr(c)
            assert str(server.port) in repr(c)
            lock = c.lock("n")
            assert SECRET not in repr(lock)
            assert lock.acquire(blocking=False)
            assert SECRET not in repr(lock)
            lock.release()
    finally:
        server.close()


def test_retry_is_hashable_as_its_docstring_says():
    assert hash(ferrolock.Retry.fixed(0.1)) == hash(ferrolock.Retry.fixed(0.1))
    assert len({ferrolock.Retry.none(), ferrolock.Retry.none(), ferrolock.Retry.exponential(0.1, 1)}) == 2
    assert "not hashable" not in ferrolock.Retry.__doc__ and "hash alike" in ferrolock.Retry.__doc__


def test_wait_lost_says_what_it_waits_for():
    doc = ferrolock.Lock.wait_lost.__doc__
    assert "seed" not in doc
    assert doc.startswith("Resolve when the current hold ends, whether it was lost or released.")
