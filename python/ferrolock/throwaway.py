"""Throwaway ``redis-server`` processes and a minimal RESP client, for tests,
benchmarks and examples. Needs nothing but the standard library (the pytest
plugin :mod:`ferrolock.testing` re-exports all of it).

The server binary is ``redis-server`` on ``PATH``, or the one
``FERROLOCK_TEST_SERVER`` names (a path: another Redis version, or a
``valkey-server``), for every server started here.

Example (``REDIS_URL`` when set, else a server of the block's own)::

    from ferrolock.throwaway import redis_url

    with redis_url() as url:
        client = ferrolock.Client(url)

or, for a server of one's own to stop, kill and restart::

    with RedisServer() as server:
        server.command("CONFIG", "SET", "maxmemory", "64mb")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from typing import Any, Callable, Iterator, Optional

__all__ = [
    "Connection",
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

SERVER_BINARY = "FERROLOCK_TEST_SERVER"
"""The variable naming the server binary :class:`RedisServer` runs instead of
``redis-server`` on ``PATH`` (a path to another ``redis-server`` or a
``valkey-server``)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def env_url() -> Optional[str]:
    """The server ``REDIS_URL`` names, if set."""
    return os.environ.get("REDIS_URL") or None


# -- RESP -------------------------------------------------------------------


class RespError(RuntimeError):
    """Redis answered a raw command with an error."""


def encode(args: Any) -> bytes:
    """One command in RESP."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


def read_reply(f: Any) -> Any:
    """One RESP reply from the file `f`; `RespError` for an error reply.

    Simple strings come back as ``str``, bulk strings as ``bytes``, integers
    as ``int``, arrays as lists, nil as ``None``."""
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


class Connection:
    """One connection to a server, kept until :meth:`close` (or the end of
    its ``with`` block): ``conn("GET", "k")`` sends a command and returns
    its parsed reply (see :func:`read_reply`).

    Args:
        sock: a connected socket (plain, unix or TLS); the connection owns it.
        auth: ``(password,)`` or ``(user, password)``, sent first with AUTH.
        db: a database to SELECT first (0: none).
    """

    def __init__(self, sock: socket.socket, auth: tuple[str, ...] = (), db: int = 0):
        self.sock = sock
        self.file = sock.makefile("rb")
        try:
            if auth:
                self("AUTH", *auth)
            if db:
                self("SELECT", db)
        except BaseException:
            self.close()
            raise

    def __call__(self, *args: Any) -> Any:
        self.sock.sendall(encode(args))
        return read_reply(self.file)

    def close(self) -> None:
        """Close the connection."""
        self.file.close()
        self.sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
                "Raw talks to one server: a quorum's list of URLs has several; give the URL of the master to talk to"
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

    def connect(self) -> Connection:
        """A kept connection to the server, authenticated, on the URL's database."""
        if self.password is None:
            auth: tuple[str, ...] = ()
        else:
            auth = (self.username, self.password) if self.username else (self.password,)
        return Connection(self._open(), auth, self.db)

    def __call__(self, *args: Any) -> Any:
        with self.connect() as conn:
            return conn(*args)

    def command(self, *args: Any) -> Any:
        """The same call, named as :meth:`RedisServer.command`."""
        return self(*args)

    def scan(self, pattern: str) -> list[str]:
        """Every key matching the glob ``pattern``, with SCAN."""
        cursor, found = b"0", []
        while True:
            cursor, keys = self("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            found += [k.decode() for k in keys]
            if cursor == b"0":
                return sorted(set(found))

    def keys(self, pattern: str) -> list[str]:
        """Like :meth:`scan` (named after KEYS; it never blocks the server)."""
        return self.scan(pattern)


# -- the server ----------------------------------------------------------------


def server_binary() -> str:
    """The server binary :class:`RedisServer` runs: the path
    ``FERROLOCK_TEST_SERVER`` names, else ``redis-server`` on ``PATH``.

    Raises:
        RuntimeError: the binary named is not an executable file, or no
            ``redis-server`` is installed.
    """
    named = os.environ.get(SERVER_BINARY)
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise RuntimeError(
                f"{SERVER_BINARY}={named} names no executable file: set it to the path of a redis-server "
                "or valkey-server binary (`make valkey` fetches one into target/valkey/), or unset it to "
                "run redis-server from PATH"
            )
        return named
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(
            "redis-server is not installed: install it (Debian/Ubuntu: apt-get install "
            f"redis-server, or `make deps`), set {SERVER_BINARY} to a server binary, or set REDIS_URL "
            "to a server tests may use"
        )
    return binary


def _await(ready: Callable[[], bool], proc: "subprocess.Popen[bytes]", what: str) -> bool:
    """Until `ready()` (True), or `proc` exits (False); RuntimeError after 10 s."""
    deadline = time.monotonic() + 10
    while proc.poll() is None:
        try:
            if ready() and proc.poll() is None:  # not another process on its port
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within 10 s")
        time.sleep(0.02)  # the process is starting: nothing to await but its port
    return False


class RedisServer:
    """A ``redis-server`` on 127.0.0.1 that can be stopped, killed and
    restarted on its port, with no data saved to disk (the binary of
    :func:`server_binary`: ``FERROLOCK_TEST_SERVER`` picks another). A context manager:
    started on entry, stopped and its directory removed on exit.

    It runs in a session of its own, so a Ctrl-C reaches only the caller,
    which stops it (:meth:`close`).

    Args:
        port: the port (default: a free one, another if it is taken before
            the server binds it).
        password: the password clients give (``requirepass``), or with
            ``user`` that ACL user's (the default user is then off).
        extra: more command-line arguments (``("--maxclients", "10000")``).
        user: an ACL user allowed everything, the only one.
        unix_socket: also listen on a unix socket in the server's directory
            (:attr:`unix_url`).
    """

    def __init__(
        self,
        port: Optional[int] = None,
        password: Optional[str] = None,
        extra: tuple[str, ...] = (),
        user: Optional[str] = None,
        unix_socket: bool = False,
    ):
        self.binary = server_binary()
        self._port_chosen = port is None
        self.port = port or free_port()
        self.password = password
        self.user = user
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix="ferrolock-redis-")
        self.socket = os.path.join(self.dir, "redis.sock") if unix_socket else None
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def _auth(self) -> str:
        """The ``user:password@`` part of a URL (%-escaped), or ''."""
        if not self.password:
            return ""
        return f"{urllib.parse.quote(self.user or '', safe='')}:{urllib.parse.quote(self.password, safe='')}@"

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``, with the password when it has one."""
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

    def _args(self) -> list[str]:
        """The command line (a subclass may listen differently)."""
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--enable-debug-command",
            "local",
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

    def _answers(self) -> bool:
        try:
            self.command("PING")
        except RespError:
            pass  # it answered (NOAUTH, say): it is up
        return True

    def start(self) -> "RedisServer":
        """Start it (again, on the same port, after :meth:`stop` or :meth:`kill`)."""
        first = self.proc is None and self._port_chosen
        for _ in range(3 if first else 1):
            self.proc = proc = subprocess.Popen(
                self._args(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            if _await(self._answers, proc, "redis-server"):
                self._port_chosen = False  # it has its port now: a restart keeps it
                return self
            if not first:
                break
            self.port = free_port()  # another process took the port before the server bound it
        raise RuntimeError(f"redis-server exited with {proc.returncode}")

    def pause(self) -> None:
        """SIGSTOP: its port still accepts connections (the kernel queues them), nothing answers."""
        assert self.proc is not None, "pause a started server"
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT, after :meth:`pause`."""
        assert self.proc is not None, "resume a started server"
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (a paused server resumed first; SIGKILL if it is not gone within 10 s)."""
        if self.proc and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        """Kill it (SIGKILL) without a save, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        """Stop it and remove its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> Connection:
        """A kept connection to it, authenticated."""
        auth = () if not self.password else ((self.user, self.password) if self.user else (self.password,))
        return Connection(self._open(), auth)

    def command(self, *args: Any) -> Any:
        """Send one command over a fresh connection; returns the parsed reply
        (see :func:`read_reply`), or raises :class:`RespError`."""
        with self.connect() as conn:
            return conn(*args)


@contextlib.contextmanager
def redis_url(**options: Any) -> Iterator[str]:
    """``REDIS_URL`` when set, else the URL of a :class:`RedisServer`
    (``options``) started for the block and stopped at its end."""
    url = env_url()
    if url:
        yield url
        return
    with RedisServer(**options) as server:
        yield server.url
