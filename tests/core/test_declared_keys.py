"""Every script touches only the keys it declares in KEYS: Redis Cluster's
rule for scripts (a key of another slot fails there; one of the same slot
passes unnoticed), and Dragonfly's default (it refuses any undeclared key).

How this is checked, with nothing of our own that could drift from the
scripts: a private server's MONITOR sees every command a script runs (from
the client ``lua``), next to the EVALSHA (or EVAL) that ran it, with that
call's KEYS. The test drives every primitive and operator step through the
public API on that server; then, for each command a script ran, the server
itself says which of its arguments are keys (``COMMAND GETKEYS``: no table
of key positions to keep), and each must be one of the KEYS of the call that
ran it. The scripts are those the client sends, assembled with their
libraries: on a fresh server each is loaded once, so MONITOR shows its text,
and every step of ``lua/`` must be among those that ran (a new step the
drive misses fails here). The check itself is proven on a bad variant: a
real script, as loaded, with one ``redis.call`` on an undeclared key
(of the same slot, which a Cluster would not catch) is flagged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import socket
import threading
import time

import pytest

import redis

import ferrolock
from ferrolock.compat import redis_lock
from ferrolock._ferrolock import _debug_stats
from ferrolock.compat.redis_py import Lock as PyLock
from ferrolock.testing import Connection, RedisServer, read_reply
from support.helpers import hold_value, key, wait_for
from support import ROOT

LUA = ROOT / "lua"
SCRIPT_CALLS = {"eval", "evalsha", "eval_ro", "evalsha_ro"}
MARK = "ferrolock-declared-keys-done"


def unquote(text: str) -> bytes:
    """One argument of a MONITOR line, its escapes (``\\"``, ``\\n``, ``\\xHH``) undone."""
    out, i = bytearray(), 0
    simple = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}
    while i < len(text):
        if text[i] != "\\":
            out += text[i].encode()
            i += 1
        elif text[i + 1] == "x":
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            out += simple[text[i + 1]]
            i += 2
    return bytes(out)


LINE = re.compile(r"^\S+ \[\d+ ([^\]]+)\] (.*)$")
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


class Monitor:
    """The commands a server runs, from MONITOR: (client, [args as bytes]) each."""

    def __init__(self, server: RedisServer):
        self.server = server
        self.conn: Connection = server.connect()
        self.conn.sock.settimeout(None)  # a quiet server sends nothing for a while
        assert self.conn("MONITOR") == "OK"
        self.seen: list = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                line = read_reply(self.conn.file)
            except (ConnectionError, OSError, ValueError):
                return
            found = LINE.match(line)
            if found:
                self.seen.append((found[1], [unquote(a) for a in ARG.findall(found[2])]))

    def stop(self) -> list:
        """Every command seen so far (up to a marker sent now), and no more reading."""
        self.server.command("ECHO", MARK)
        marker = [b"echo", MARK.encode()]
        wait_for(
            lambda: any([args[0].lower(), *args[1:]] == marker for _, args in list(self.seen) if args),
            30,
            "MONITOR to see the marker",
        )
        self.close()
        return list(self.seen)

    def close(self) -> None:
        """No more reading; the connection closed (again: a no-op)."""
        if self.conn.sock.fileno() != -1:
            with contextlib.suppress(OSError):
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            self.thread.join(30)
            self.conn.close()


def script_runs(seen: list, lua_first: bool) -> list:
    """(script call args, [args of each command it ran]) for every script call
    seen; `lua_first`: the server shows a script's commands before the call."""
    runs: list = []
    pending: list = []
    for client, args in seen:
        if client == "lua":
            if lua_first:
                pending.append(args)
            else:
                assert runs, f"a script command with no script call before it: {args}"
                runs[-1][1].append(args)
        elif args and args[0].decode().lower() in SCRIPT_CALLS:
            runs.append((args, pending))
            pending = []
    assert not pending, f"script commands with no script call after them: {pending}"
    return runs


class KeysOf:
    """The keys among a command's arguments, as the server says (COMMAND
    GETKEYS; a command without key arguments by COMMAND INFO, as Redis 7.0
    refuses GETKEYS for a command of no argument)."""

    def __init__(self, server: RedisServer):
        self.server = server
        self.known: dict = {}
        self.keyless: dict = {}

    def _keyless(self, name: bytes) -> bool:
        if name not in self.keyless:
            (info,) = self.server.command("COMMAND", "INFO", name)
            flags, first_key = info[2], info[3]
            self.keyless[name] = first_key == 0 and "movablekeys" not in flags
        return self.keyless[name]

    def __call__(self, args: list) -> list:
        found = self.known.get(tuple(args))
        if found is None:
            keyless = self._keyless(args[0].lower())
            found = [] if keyless else self.server.command("COMMAND", "GETKEYS", *args)
            self.known[tuple(args)] = found
        return found


def undeclared(runs: list, keys_of: KeysOf) -> list:
    """(script sha, command, key) for every key a script touched that its call did not declare."""
    wrong = []
    for call, commands in runs:
        numkeys = int(call[2])
        declared = set(call[3 : 3 + numkeys])
        sha = call[1].decode() if call[0].lower().startswith(b"evalsha") else hashlib.sha1(call[1]).hexdigest()
        for args in commands:
            for k in keys_of(args):
                if k not in declared:
                    wrong.append((sha, b" ".join(args).decode(errors="replace"), k.decode(errors="replace")))
    return wrong


def loaded_scripts(seen: list) -> dict:
    """sha1 -> text of every script loaded (SCRIPT LOAD) or sent whole (EVAL)."""
    texts = {}
    for _, args in seen:
        verb = args[0].lower() if args else b""
        if verb == b"script" and len(args) > 2 and args[1].lower() == b"load":
            text = args[2]
        elif verb in (b"eval", b"eval_ro"):
            text = args[1]
        else:
            continue
        texts[hashlib.sha1(text).hexdigest()] = text
    return texts


def steps() -> dict:
    """Every step of lua/ (not its libraries): file name -> source."""
    return {p.name: p.read_bytes() for p in sorted(LUA.glob("*.lua"))}


def lua_comes_first(server: RedisServer) -> bool:
    """Whether this server's MONITOR shows a script's commands before its call."""
    monitor = Monitor(server)
    server.command("EVAL", "return redis.call('EXISTS', KEYS[1])", 1, "declared-keys-probe")
    seen = [(c, a) for c, a in monitor.stop() if c == "lua" or (a and a[0].lower() == b"eval")]
    assert len(seen) == 2, seen
    return seen[0][0] == "lua"


def drive(url: str, prefix: str) -> None:
    """Every primitive and operator step once through the public API: each
    script of lua/ runs (the test checks that it did)."""
    client = ferrolock.Client(url, prefix=prefix)
    other = ferrolock.Client(url, prefix=prefix)

    # Lock: acquire, busy (a waiter marks what it waits for), extend, inspect, release.
    lock = client.lock("lock", ttl=30)
    with lock:
        assert not other.lock("lock").acquire(timeout=0.2)
        lock.extend()
        assert lock.inspect()[0].token == lock.token
        assert client.inspect("lock").token == lock.token
    multi = client.lock(["m1", "m2"], ttl=30)
    with multi:
        assert multi.locked()
    # Fair Lock: queue, hand-over, release.
    fair = client.lock("fair", fair=True, ttl=30)
    with fair:
        assert not other.lock("fair", fair=True).acquire(timeout=0.2)
    # RWMutex: readers, a writer that waits and withdraws, the writer, inspection.
    rw = client.rwmutex("rw", ttl=30)
    with rw.read() as reader:
        reader.extend()
        assert not other.rwmutex("rw").write().acquire(timeout=0.2)
        assert rw.readers()
    with rw.write() as writer:
        writer.extend()
        assert not other.rwmutex("rw").read().acquire(timeout=0.2)
    # Fair RWMutex.
    frw = client.rwmutex("frw", fair=True, ttl=30)
    with frw.read():
        assert not other.rwmutex("frw", fair=True).write().acquire(timeout=0.2)
    with frw.write():
        assert not other.rwmutex("frw", fair=True).read().acquire(timeout=0.2)
    # Semaphore, fair and not.
    for fair_sem in (False, True):
        sem = client.semaphore(f"sem-{fair_sem}", 1, fair=fair_sem, ttl=30)
        with sem:
            sem.extend()
            assert not other.semaphore(f"sem-{fair_sem}", 1, fair=fair_sem).acquire(timeout=0.2)
            assert sem.inspect()
    # Election.
    election = client.election("election", ttl=30)
    with election.campaign("a") as term:
        term.proclaim("a2")
        assert election.leader().value == "a2"
    # Renewals in batches: holds taken together fall due together, and one
    # call renews several of them (one-name Locks, whose value their owner
    # knows: refresh_compared.lua; two-name Locks: refresh_batch.lua;
    # readers' leases: lease_refresh_batch.lua); three rounds, so that one
    # finds them together.
    together = [client.lock([f"batch{i}", f"batch{i}b"], ttl=1.0) for i in range(10)]
    together += [client.lock(f"compared{i}", ttl=1.0) for i in range(10)]
    batched_rw = client.rwmutex("batch-rw", ttl=1.0)
    together += [batched_rw.read() for _ in range(10)]

    async def take_together() -> list:
        return await asyncio.gather(*(h.aacquire(blocking=False) for h in together))

    assert all(asyncio.run(take_together()))
    renewed = _debug_stats()["renewals"]
    wait_for(lambda: _debug_stats()["renewals"] >= renewed + 3 * len(together), 15, "three rounds of renewals")
    for h in together:
        h.release()
    # Plain holds (ferrolock.compat): taken by a transaction, renewed, extended, released
    # (with python-redis-lock's signal list), force-released.
    conn = redis.Redis.from_url(url)
    plain = PyLock(conn, f"{prefix}plain", timeout=30)
    with plain:
        plain.extend(5)
        plain.reacquire()
        assert not PyLock(conn, f"{prefix}plain").acquire(blocking=False)
    signalled = redis_lock.Lock(conn, f"{prefix}signalled", expire=30)
    with signalled:
        signalled.extend(60)
    signalled.acquire()
    signalled.reset()
    conn.close()
    # The operator's tools: describe, scan, force release (every kind).
    held = [
        client.lock("lock"),
        client.rwmutex("rw").write(),
        client.semaphore("sem-False", 1),
        client.lock("fair", fair=True),
    ]
    for h in held:
        h.acquire()
    reader = client.rwmutex("frw", fair=True).read()
    reader.acquire()
    for state in client.scan():
        assert client.describe(state.name)
        for holder in state.holders:
            client.force_release(state.name, token=holder.token)
    assert client.rwmutex("rw").force_release() is False
    for h in held + [reader]:
        with contextlib.suppress(ferrolock.LockNotOwned):
            h.release()
        assert not h.locked()


def quorum_drive(servers: list, prefix: str) -> None:
    """A quorum's steps: the fence raised on the masters that gave less than
    the highest. Two of the three masters hold fences ahead of every clock,
    a different one each, so whichever majority decides (a master answering
    late is left out) gives fences that differ, and the raise runs."""
    ahead = int(time.time() * 1e6) + 60_000_000  # a minute past every clock (fences follow the clock)
    for server, fence in zip(servers, (ahead, ahead - 1)):
        server.command("SET", key(prefix, "fenced"), hold_value("", fence))
        server.command("PEXPIRE", key(prefix, "fenced"), "120000")
    lock = ferrolock.Client([s.url for s in servers], prefix=prefix).lock("fenced", ttl=30)
    with lock:
        assert lock.fence in (ahead, ahead + 1)


@pytest.fixture
def monitored():
    """Three fresh servers (no script loaded yet), and whether their MONITOR
    shows a script's commands before its call."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(RedisServer()) for _ in range(3)]
        yield servers, lua_comes_first(servers[0])


def assembled_from(text: bytes, source: bytes) -> bool:
    """Whether the script `text` was assembled from the step `source`: its end,
    or the two parts around the line where its libraries go (lua/README.md)."""
    above, here, below = source.partition(b"\n-- libraries here\n")
    if not here:
        return text.rstrip().endswith(source.rstrip())
    return above in text and text.rstrip().endswith(below.rstrip())


def test_every_script_touches_only_the_keys_it_declares(monitored, prefix):
    servers, lua_first = monitored
    monitors = [Monitor(s) for s in servers]
    try:
        drive(servers[0].url, prefix)
        quorum_drive(servers, prefix)
        seen_by_server = [m.stop() for m in monitors]
    finally:
        for m in monitors:
            m.close()
    seen = [line for lines in seen_by_server for line in lines]
    runs = [run for lines in seen_by_server for run in script_runs(lines, lua_first)]
    wrong = undeclared(runs, KeysOf(servers[0]))
    assert not wrong, f"scripts touched keys they did not declare: {wrong}"
    texts = loaded_scripts(seen)
    ran = {
        call[1].decode() if call[0].lower().startswith(b"evalsha") else hashlib.sha1(call[1]).hexdigest()
        for call, _ in runs
    }
    ran_texts = [texts[sha] for sha in ran if sha in texts]
    missed = [name for name, source in steps().items() if not any(assembled_from(t, source) for t in ran_texts)]
    assert not missed, f"steps of lua/ the drive did not run (drive them in this test): {missed}"


def test_a_script_touching_an_undeclared_key_is_caught(monitored, prefix):
    """The check is not vacuous: release.lua as the client loads it, with one
    read of an undeclared key of the same slot (hash tag) added, is flagged;
    the script as shipped, run the same way (the release's own arguments), is not."""
    server, lua_first = monitored[0][0], monitored[1]
    monitor = Monitor(server)
    # Two names: a one-name Lock's release is DELIFEQ where the server has it.
    with ferrolock.Client(server.url, prefix=prefix).lock(["x", "y"]):
        pass
    seen = monitor.stop()
    release = steps()["release.lua"]
    sha, text = next((h, t) for h, t in loaded_scripts(seen).items() if assembled_from(t, release))
    call = next(a for c, a in seen if a[:1] in ([b"EVALSHA"], [b"evalsha"]) and a[1].decode() == sha)
    name = call[3].decode()
    assert name == key(prefix, "x")
    bad = b"redis.call('GET', KEYS[1] .. ':undeclared')\n" + text
    monitor = Monitor(server)
    for script in (text, bad):
        server.command("EVAL", script, *call[2:])
    seen = monitor.stop()
    calls = [r for r in script_runs(seen, lua_first) if r[0][0].lower() == b"eval"]
    assert len(calls) == 2
    good_run, bad_run = calls
    keys_of = KeysOf(server)
    assert undeclared([good_run], keys_of) == []
    wrong = undeclared([bad_run], keys_of)
    assert [w[2] for w in wrong] == [name + ":undeclared"], wrong
