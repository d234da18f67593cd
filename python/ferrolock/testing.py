"""A pytest plugin for testing code that uses ferrolock.

Installed with ferrolock and loaded by pytest on its own (the ``pytest11``
entry point ``ferrolock``); ``-p no:ferrolock`` turns it off. It brings:

* ``ferrolock_redis_url`` (session): a throwaway ``redis-server`` started on
  a free loopback port for the test session (stopped at its end), or the
  server ``FERROLOCK_TEST_URL`` names when set. The tests write to it, flush
  their keys and pause it (:meth:`Helpers.pause_server`), so the variable is
  ferrolock's own: the generic ``REDIS_URL``, which often names an
  application's server, is followed only when ``FERROLOCK_TEST_URL`` is not
  set, with a ``PytestDeprecationWarning`` (it will be ignored in a later
  version);
* ``ferrolock_prefix``: a key prefix unique to the test;
* ``ferrolock_client``: a :class:`ferrolock.Client` under that prefix; every
  key under it is deleted when the test ends;
* ``ferrolock_helpers``: a :class:`Helpers` to make a held lock expire now,
  hold a name from another process, pause the server, assert that a name is
  held or free or end every hold left (any kind: Lock, RWMutex, semaphore,
  election);
* ``ferrolock_private_server``: a ``redis-server`` of the test's own, which
  it may stop, kill and restart (:class:`RedisServer`).

Every server the plugin starts runs ``redis-server`` from ``PATH``, or the
binary ``FERROLOCK_TEST_SERVER`` names (another Redis version, a
``valkey-server``): the same tests then run against that server.

Example::

    def test_the_job_stops_when_its_lock_is_lost(ferrolock_client, ferrolock_helpers):
        lock = ferrolock_client.lock("nightly-report")
        with pytest.raises(ferrolock.LockLost):
            with lock:
                ferrolock_helpers.expire_now(lock)
                assert lock.lost
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
import warnings
from typing import Any, Iterator, Optional

import pytest

import ferrolock
from ferrolock._ferrolock import _semaphore
from ferrolock.throwaway import (
    Connection,
    Raw,
    RedisServer,
    RespError,
    encode,
    env_url,
    free_port,
    read_reply,
    redis_url,
    server_binary,
)

__all__ = [
    "Connection",
    "Helpers",
    "Holder",
    "Raw",
    "RedisServer",
    "RespError",
    "encode",
    "env_url",
    "free_port",
    "read_reply",
    "redis_url",
    "server_binary",
]


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


# What runs in the other process of Helpers.hold_elsewhere: it takes the
# name, prints its token, and holds until told to release (or killed).
_HOLDER = textwrap.dedent(
    """
    import json, sys
    import ferrolock
    a = json.loads(sys.argv[1])
    client = ferrolock.Client(a["url"], prefix=a["prefix"], ca_file=a["ca_file"])
    opts = dict(ttl=a["ttl"], fair=a["fair"], metadata=a["metadata"])
    kind = a["kind"]
    if kind == "lock":
        lock = client.lock(a["name"], **opts)
    elif kind == "permit":
        lock = client.semaphore(a["name"], a["permits"], **opts)
    elif kind == "term":
        election = client.election(a["name"], ttl=a["ttl"])
        lock = election._candidate(a["metadata"] or "", None)
    else:
        rw = client.rwmutex(a["name"], fair=a["fair"], ttl=a["ttl"], metadata=a["metadata"])
        lock = rw.read() if kind == "read" else rw.write()
    if not lock.acquire(timeout=a["timeout"]):
        print("busy", flush=True)
        sys.exit(3)
    print(lock.token, flush=True)
    sys.stdin.readline()
    lock.release()
    print("released", flush=True)
    """
)

KINDS = ("lock", "read", "write", "permit", "term")


class Holder:
    """A hold taken by another process (see :meth:`Helpers.hold_elsewhere`).

    A context manager: releases at the end of the ``with`` block."""

    def __init__(self, proc: "subprocess.Popen[str]", token: str):
        self.proc = proc
        self.token = token

    def release(self) -> None:
        """Release the hold (the other process exits)."""
        if self.proc.returncode is None:
            out, _ = self.proc.communicate("\n", timeout=30)
            if out.strip() != "released":
                raise RuntimeError(f"the holding process could not release: {out.strip()!r}")

    def crash(self) -> None:
        """Kill the other process (SIGKILL): its hold stays until its ttl runs out."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.communicate(timeout=30)

    def __enter__(self) -> "Holder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Helpers:
    """Ways to put a lock in the states worth testing, against the test's
    server and under its prefix.

    ``url`` is any URL :class:`ferrolock.Client` takes (``ca_file`` as its
    own, for ``rediss://``). :meth:`expire_now` and :meth:`hold_elsewhere`
    work on every topology; :meth:`pause_server` and :meth:`delete_all` talk
    to one server (see :class:`Raw`) and say so for a Sentinel, Cluster or
    quorum URL.
    """

    def __init__(self, url: Any, prefix: str, ca_file: Optional[str] = None):
        self.url = url
        self.prefix = prefix
        self.ca_file = ca_file
        self._raw: Optional[Raw] = None
        self._client: Optional[ferrolock.Client] = None

    def server(self, what: str) -> Raw:
        """The test's server, for a helper that needs one (`what`)."""
        if self._raw is None:
            try:
                self._raw = Raw(self.url, ca_file=self.ca_file)
            except ValueError as e:
                raise ValueError(f"{what} talks to one server: {e}") from None
        return self._raw

    @property
    def raw(self) -> Raw:
        """A :class:`Raw` client of the test's server."""
        return self.server("Helpers.raw")

    def expire_now(self, lock: Any) -> None:
        """Make ``lock``'s hold end now, as if its ttl had run out in Redis.

        ``lock`` is anything ferrolock hands out that holds: a
        :class:`ferrolock.Lock` (fair or not, a multi-lock), an RWMutex's read
        or write handle, a semaphore's permit, or an election's
        :class:`ferrolock.Term`. The hold is released in Redis under its own
        token (so for a reader or a permit, only this one goes; a fair one
        passes to the next in line), and the handle finds out at once:
        ``lock.lost`` turns ``True``, its ``on_lost`` is called, an ``async
        with`` block running under it is cancelled, and its ``with`` block
        ends in :class:`ferrolock.LockLost`. (Event listeners see that
        release, by a handle restored from the token, as a release.)
        """
        from ferrolock.election import Term

        hold = lock._hold if isinstance(lock, Term) else lock
        if not isinstance(hold, ferrolock.Lock):
            raise TypeError(
                "expire_now takes a ferrolock.Lock, an RWMutex's handle, a semaphore's permit "
                f"or an election's Term, not {type(lock).__name__}"
            )
        token = hold.token
        if token is None:
            raise ValueError(f"{lock!r} holds nothing: acquire it before expire_now")
        client, names = hold.client, list(hold.names)
        twin: ferrolock.Lock[Any]
        if isinstance(lock, Term):
            twin = lock._election._core.candidate(lock.value, token=token)
        elif hold.kind == "lock":
            twin = ferrolock.Lock(client, names, token=token, fair=hold.fair)
        elif hold.kind == "permit":
            twin = _semaphore(client, names[0], 1, token=token, fair=hold.fair)  # permits: not needed to release
        else:
            rw = ferrolock.RWMutex(client, names[0], fair=hold.fair)
            twin = rw.read(token=token) if hold.kind == "read" else rw.write(token=token)
        twin.release()
        with contextlib.suppress(ferrolock.LockNotOwned):
            hold.extend()  # finds the hold gone: reported lost now, not at the next renewal

    def hold_elsewhere(
        self,
        name: Any,
        *,
        kind: str = "lock",
        ttl: float = 30.0,
        fair: bool = False,
        metadata: Optional[str] = None,
        timeout: float = 10.0,
        permits: int = 1,
    ) -> Holder:
        """Take ``name`` in another process (a Python child running ferrolock),
        holding it until :meth:`Holder.release` (or the end of its ``with``
        block), or until :meth:`Holder.crash` and then its ``ttl``.

        Args:
            name: the name; for ``kind="lock"`` a list of names is a multi-lock.
            kind: ``"lock"``; ``"read"`` / ``"write"`` for an RWMutex;
                ``"permit"`` for one of a semaphore's ``permits``; ``"term"``
                for an election's term (``metadata`` is the leader's value).
            timeout: seconds the other process may wait to take it.

        Raises:
            ValueError: an unknown ``kind``.
            RuntimeError: it could not take the name within ``timeout``.
        """
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, not {kind!r}")
        args = dict(
            url=self.url,
            prefix=self.prefix,
            ca_file=self.ca_file,
            name=name,
            kind=kind,
            ttl=ttl,
            fair=fair,
            metadata=metadata,
            timeout=timeout,
            permits=permits,
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout
        token = proc.stdout.readline().strip()
        if not token or token == "busy":
            proc.kill()
            proc.communicate(timeout=30)
            raise RuntimeError(f"another process could not take {name!r} within {timeout} s")
        return Holder(proc, token)

    @contextlib.contextmanager
    def pause_server(self, seconds: float = 60.0) -> Iterator[None]:
        """Within the block, the server takes no writes (``CLIENT PAUSE ...
        WRITE``: every lock step waits, then times out after the client's
        ``command_timeout``); it serves again at the end of the block, or
        after ``seconds`` at most. Every client of the server is paused: on a
        shared ``FERROLOCK_TEST_URL`` server, other users wait too.

        Raises:
            ValueError: the URL is a Sentinel, Cluster or quorum one (see :class:`Raw`).
        """
        raw = self.server("pause_server")
        raw("CLIENT", "PAUSE", int(seconds * 1000), "WRITE")
        try:
            yield
        finally:
            raw("CLIENT", "UNPAUSE")

    def delete_all(self) -> int:
        """Delete every key under the prefix; returns how many there were.

        Raises:
            ValueError: the URL is a Sentinel, Cluster or quorum one (see :class:`Raw`).
        """
        raw = self.server("delete_all")
        keys = raw.scan(_glob_escape(self.prefix) + "*")
        for i in range(0, len(keys), 500):
            raw("DEL", *keys[i : i + 500])
        return len(keys)

    # -- what is held, whatever the kind (read from the key layout, as
    # `ferrolock ls` does: a Lock, an RWMutex, a semaphore, an election) ----

    def client(self) -> "ferrolock.Client":
        """A :class:`ferrolock.Client` of the test's server, under its prefix."""
        if self._client is None:
            self._client = ferrolock.Client(self.url, prefix=self.prefix, ca_file=self.ca_file)
        return self._client

    def assert_held(self, name: str, *, kind: Optional[str] = None, token: Optional[str] = None) -> Any:
        """Assert that ``name`` is held (as ``kind``: ``"lock"``, ``"rwmutex"``,
        ``"semaphore"`` or ``"election"``; any, when ``None``), by ``token``
        among its holders when given. Returns its :class:`ferrolock.LockState`
        (of that kind, else the first held).

        Raises:
            AssertionError: it is not, saying what is stored under the name.
        """
        states = [s for s in self.client().describe(name) if s.holders and kind in (None, s.kind)]
        held = [s for s in states if token is None or any(h.token == token for h in s.holders)]
        what = f"{name!r}" + (f" as a {kind}" if kind else "") + (f" by {token}" if token else "")
        assert held, f"{what} is not held; stored under it: {self.client().describe(name)!r}"
        return held[0]

    def assert_free(self, name: str) -> None:
        """Assert that nothing holds ``name``, as any kind of primitive
        (waiters may still queue).

        Raises:
            AssertionError: something does, saying what.
        """
        held = [s for s in self.client().describe(name) if s.holders]
        assert not held, f"{name!r} is held: {held!r}"

    def release_all(self, pattern: str = "*") -> int:
        """End every hold under the prefix whose name matches ``pattern``,
        whatever its kind (as ``ferrolock release --force`` does: waiters are
        woken, an election's watchers told); returns how many holds went.
        Works on one server and a Cluster (not a quorum, which
        :meth:`ferrolock.Client.scan` refuses)."""
        client = self.client()
        return sum(client.force_release(s.name, token=h.token) for s in client.scan(pattern) for h in s.holders)


TEST_URL = "FERROLOCK_TEST_URL"
"""The variable naming a server the plugin's tests may use (and pause)."""


def env_test_url() -> Optional[str]:
    """The server the session's tests use instead of a throwaway one:
    ``FERROLOCK_TEST_URL``; else, deprecated, ``REDIS_URL`` (with a warning);
    else ``None``."""
    url = os.environ.get(TEST_URL)
    if url:
        return url
    legacy = env_url()
    if legacy:
        warnings.warn(
            pytest.PytestDeprecationWarning(
                f"the ferrolock pytest plugin uses REDIS_URL ({legacy}) because {TEST_URL} is not set; its tests "
                f"write to that server and pause it, so set {TEST_URL} to a server tests may use (a later "
                "version will ignore REDIS_URL)"
            ),
            stacklevel=2,
        )
    return legacy


@pytest.fixture(scope="session")
def ferrolock_redis_url() -> Iterator[str]:
    """The URL of a throwaway redis-server for the session (or ``FERROLOCK_TEST_URL``)."""
    url = env_test_url()
    if url:
        yield url
        return
    with RedisServer() as server:
        yield server.url


@pytest.fixture
def ferrolock_prefix() -> str:
    """A key prefix unique to this test."""
    return f"test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def ferrolock_helpers(ferrolock_redis_url: str, ferrolock_prefix: str) -> Helpers:
    """Make a held lock expire now, hold a name from another process, pause the server."""
    return Helpers(ferrolock_redis_url, ferrolock_prefix)


@pytest.fixture
def ferrolock_client(ferrolock_redis_url: str, ferrolock_prefix: str) -> Iterator["ferrolock.Client"]:
    """A client whose keys live under a prefix of this test's own, all deleted at its end."""
    client = ferrolock.Client(ferrolock_redis_url, prefix=ferrolock_prefix)
    yield client
    Helpers(ferrolock_redis_url, ferrolock_prefix).delete_all()


@pytest.fixture
def ferrolock_private_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own, which it may stop, kill or restart."""
    with RedisServer() as server:
        yield server
