"""A pytest plugin for testing code that uses ferrolock.

Installed with ferrolock and loaded by pytest on its own (the ``pytest11``
entry point ``ferrolock``); ``-p no:ferrolock`` turns it off. It brings:

* ``ferrolock_redis_url`` (session): a throwaway ``redis-server`` started on
  a free loopback port for the test session (stopped at its end), or the
  server ``REDIS_URL`` names when set;
* ``ferrolock_prefix``: a key prefix unique to the test;
* ``ferrolock_client``: a :class:`ferrolock.Client` under that prefix; every
  key under it is deleted when the test ends;
* ``ferrolock_helpers``: a :class:`Helpers` to make a held lock expire now,
  hold a name from another process, pause the server, assert that a name is
  held or free or end every hold left (any kind: Lock, RWMutex, semaphore,
  election);
* ``ferrolock_private_server``: a ``redis-server`` of the test's own, which
  it may stop, kill and restart (:class:`RedisServer`).

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
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
import uuid
from typing import Any, Iterator, Optional

import pytest

import ferrolock

__all__ = ["Helpers", "Holder", "Raw", "RedisServer", "env_url", "free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_url() -> Optional[str]:
    """The server ``REDIS_URL`` names, if set."""
    return os.environ.get("REDIS_URL") or None


def encode(args: Any) -> bytes:
    """One command in RESP."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


class RedisServer:
    """A ``redis-server`` on 127.0.0.1 that can be stopped, killed and
    restarted on its port, with no data saved to disk.

    Args:
        password: the password clients give (``requirepass``), or with
            ``user`` that ACL user's (the default user is then off).
        user: an ACL user allowed everything, the only one.
        unix_socket: also listen on a unix socket in the server's directory
            (:attr:`unix_url`).
    """

    def __init__(self, port: Optional[int] = None, password: Optional[str] = None, extra: tuple = (),
                 user: Optional[str] = None, unix_socket: bool = False):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: install it (Debian/Ubuntu: apt-get install "
                "redis-server), or set REDIS_URL to a server tests may use"
            )
        self.binary = binary
        self.port = port or free_port()
        self.password = password
        self.user = user
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix="ferrolock-redis-")
        self.socket = os.path.join(self.dir, "redis.sock") if unix_socket else None
        self.proc: Optional[subprocess.Popen] = None

    def _auth(self) -> str:
        """The ``user:password@`` part of a URL (%-escaped), or ''."""
        if not self.password:
            return ""
        return f"{urllib.parse.quote(self.user or '', safe='')}:{urllib.parse.quote(self.password, safe='')}@"

    @property
    def url(self) -> str:
        return f"redis://{self._auth()}127.0.0.1:{self.port}/0"

    @property
    def unix_url(self) -> str:
        """The ``unix://`` URL of its socket (``unix_socket=True``), database 0."""
        if self.socket is None:
            raise ValueError("this server listens on no unix socket: start it with unix_socket=True")
        query = {"db": "0"}
        if self.password:
            query.update({"user": self.user, "pass": self.password} if self.user else {"pass": self.password})
        return f"unix://{self.socket}?{urllib.parse.urlencode(query)}"

    def _args(self) -> list:
        """The command line (a subclass may listen differently)."""
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", self.dir,
            "--enable-debug-command", "local",
        ]
        if self.user:
            args += ["--user", "default", "off", "--user", self.user, "on", f">{self.password}", "~*", "&*", "+@all"]
        elif self.password:
            args += ["--requirepass", self.password]
        if self.socket:
            args += ["--unixsocket", self.socket, "--unixsocketperm", "700"]
        return args + list(self.extra)

    def _open(self) -> socket.socket:
        """A connected socket to the server (a subclass may wrap it in TLS)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(self._args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                if self.command("PING").startswith((b"+PONG", b"-NOAUTH")):
                    return self
            except OSError:
                time.sleep(0.02)  # the server is starting: nothing to await but its port
        raise RuntimeError("redis-server did not start within 10 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def command(self, *args: Any) -> bytes:
        """Send one command over a fresh connection; returns the raw reply."""
        with self._open() as s:
            if self.password:
                s.sendall(encode(("AUTH", self.user, self.password) if self.user else ("AUTH", self.password)))
                s.recv(64)
            s.sendall(encode(args))
            return s.recv(1 << 20)


class Raw:
    """A minimal Redis client (RESP over a fresh connection per command), to
    look at Redis behind ferrolock's back. ``Raw(url)("GET", "k")``.

    Takes the URLs of one server that :class:`ferrolock.Client` takes:
    ``redis://`` and ``rediss://`` (TLS, checked against ``ca_file`` when
    given, else the system's authorities), ``unix:///path?db=N``, with
    ``user:password@`` (an ACL user) or ``:password@`` (%-escapes decoded,
    as ``Client`` does; a ``unix://`` URL's are ``?user=U&pass=P``).

    Raises:
        ValueError: a Sentinel, Cluster or quorum URL (more than one server:
            give the URL of the one server to talk to), or an unknown scheme.
    """

    def __init__(self, url: Any, ca_file: Optional[str] = None):
        if not isinstance(url, str):
            raise ValueError(
                "Raw talks to one server: a quorum's list of URLs has several; "
                "give the URL of the master to talk to"
            )
        parts = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        self.tls = parts.scheme == "rediss"
        self.ca_file = ca_file
        self.path: Optional[str] = None
        if parts.scheme in ("unix", "redis+unix"):
            self.path = urllib.parse.unquote(parts.netloc + parts.path)
            self.username, self.password = query.get("user"), query.get("pass")
            db = query.get("db", "0")
        elif parts.scheme in ("redis", "rediss"):
            self.host = parts.hostname or "127.0.0.1"
            self.addr = (self.host, parts.port or 6379)
            self.username = urllib.parse.unquote(parts.username) if parts.username else None
            self.password = urllib.parse.unquote(parts.password) if parts.password else None
            db = parts.path.strip("/") or query.get("db", "0")
        else:
            raise ValueError(
                f"Raw talks to one server by a redis://, rediss:// or unix:// URL, not {parts.scheme}://: "
                "for a Sentinel or Cluster deployment, give the URL of the node to talk to"
            )
        if not db.isdigit():
            raise ValueError(f"the database in {url!r} must be a number, not {db!r}")
        self.db = int(db)

    def _open(self) -> socket.socket:
        if self.path is not None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            try:
                s.connect(self.path)
            except OSError:
                s.close()
                raise
            return s
        s = socket.create_connection(self.addr, timeout=10)
        if self.tls:
            context = ssl.create_default_context(cafile=self.ca_file)
            return context.wrap_socket(s, server_hostname=self.host)
        return s

    def __call__(self, *args: Any) -> Any:
        with self._open() as s:
            f = s.makefile("rb")
            if self.password is not None:
                auth = ("AUTH", self.username, self.password) if self.username else ("AUTH", self.password)
                s.sendall(encode(auth))
                read_reply(f)
            if self.db:
                s.sendall(encode(("SELECT", self.db)))
                read_reply(f)
            s.sendall(encode(args))
            return read_reply(f)

    def command(self, *args: Any) -> Any:
        """The same call, named as :meth:`RedisServer.command`."""
        return self(*args)

    def scan(self, pattern: str) -> list:
        """Every key matching the glob ``pattern``, with SCAN."""
        cursor, found = b"0", []
        while True:
            cursor, keys = self("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            found += [k.decode() for k in keys]
            if cursor == b"0":
                return sorted(set(found))

    def keys(self, pattern: str) -> list:
        """Like :meth:`scan` (named after KEYS; it never blocks the server)."""
        return self.scan(pattern)


class RespError(RuntimeError):
    """Redis answered a raw command with an error."""


def read_reply(f: Any) -> Any:
    """One RESP reply from the file `f`; `RespError` for an error reply."""
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed before a reply")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise RespError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise RespError(f"unexpected reply {line!r}")


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

    def __init__(self, proc: subprocess.Popen, token: str):
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
        if isinstance(lock, Term):
            twin = lock._election._core.candidate(lock.value, token=token)
        elif hold.kind == "lock":
            twin = client.lock(names, token=token, fair=hold.fair)
        elif hold.kind == "permit":
            twin = client.semaphore(names[0], 1, token=token, fair=hold.fair)  # permits: not needed to release
        else:
            rw = client.rwmutex(names[0], fair=hold.fair)
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
            url=self.url, prefix=self.prefix, ca_file=self.ca_file, name=name, kind=kind, ttl=ttl, fair=fair,
            metadata=metadata, timeout=timeout, permits=permits,
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, json.dumps(args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
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
        shared ``REDIS_URL`` server, other users wait too.

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
            raw("DEL", *keys[i:i + 500])
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
        return sum(
            client.force_release(s.name, token=h.token) for s in client.scan(pattern) for h in s.holders
        )


@pytest.fixture(scope="session")
def ferrolock_redis_url() -> Iterator[str]:
    """The URL of a throwaway redis-server for the session (or ``REDIS_URL``)."""
    url = env_url()
    if url:
        yield url
        return
    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.close()


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
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()
