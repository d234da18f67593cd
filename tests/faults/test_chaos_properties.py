"""Property-based tests (hypothesis) over names, ttls and timeouts: whatever
the input, either a clear ValueError / TypeError, or a lock that behaves."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ferrolock

pytestmark = pytest.mark.chaos

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Any text, including braces, '%', control characters and astral planes.
names = st.text(min_size=1, max_size=120)


@FAST
@given(a=names, b=names)
def test_any_two_names_are_independent_locks(client, raw, prefix, a, b):
    la, lb = client.lock(a, ttl=5), client.lock(b, ttl=5)
    assert la.acquire(blocking=False)
    try:
        # b is a different lock unless it is the same name.
        assert lb.acquire(blocking=False) is (a != b)
        assert client.inspect(a).token == la.token
        keys = raw.keys(prefix + "*")
        assert len(keys) == (2 if a != b else 1)
        for k in keys:  # one hash tag per key, none broken by the name
            tag = k[k.index("{") + 1 : k.index("}")]
            assert "{" not in tag and k.count("{") == 1 and k.count("}") == 1
    finally:
        la.release()
        if lb.token is not None:
            lb.release()
    assert raw.keys(prefix + "*") == []


@FAST
@given(ttl=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12)))
def test_any_ttl_is_refused_clearly_or_kept_to_the_millisecond(client, raw, prefix, ttl):
    valid = isinstance(ttl, (int, float)) and math.isfinite(ttl) and 0.001 <= ttl <= 366 * 24 * 3600
    if not valid:
        with pytest.raises(ValueError, match="ttl"):
            client.lock("t", ttl=ttl)
        return
    lock = client.lock("t", ttl=ttl, auto_renew=False)
    asked = time.monotonic()
    assert lock.acquire()
    try:
        pttl = raw("PTTL", f"{prefix}{{t}}")
        elapsed = (time.monotonic() - asked) * 1000  # what can have run out of the ttl meanwhile
        expected = int(ttl * 1000)
        # ms precision kept (no truncation to whole seconds); the key may
        # already be gone for a 1-2 ms ttl.
        assert pttl == -2 or expected - max(50, elapsed) <= pttl <= expected, (ttl, pttl, elapsed)
    finally:
        try:
            lock.release()
        except ferrolock.LockNotOwned:
            assert ttl < 0.1  # it expired on its own
    assert raw.keys(prefix + "*") == []


@FAST
@given(timeout=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, min_value=None), st.integers(-5, 5)))
def test_any_timeout_is_refused_clearly_or_honoured(client, timeout):
    holder = client.lock("busy", ttl=5)
    assert holder.acquire()
    try:
        waiter = client.lock("busy", ttl=5)
        if timeout is None or timeout == -1:
            return  # waits forever: covered elsewhere
        if isinstance(timeout, float) and math.isnan(timeout) or timeout < 0 or math.isinf(timeout):
            with pytest.raises(ValueError, match="timeout"):
                waiter.acquire(timeout=timeout)
            return
        bounded = min(timeout, 0.05)
        start = time.monotonic()
        assert waiter.acquire(timeout=bounded) is False
        took = time.monotonic() - start
        assert bounded <= took + 0.002 and took < bounded + 0.5, (timeout, took)
    finally:
        holder.release()
