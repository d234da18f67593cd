"""Shared test helpers: an awaitable on_lost probe, a LockEvents recorder,
key names, a hold's fields read from its key, a server's command counts, waiting (in a thread or a coroutine)
for a condition another thread or process brings about, and for waiters to
be subscribed, the server binary the tests run. A helper two suites need
lives here, not in a copy in each."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import threading
import time

import anyio

# libfaketime (Debian package `faketime`, installed by `make deps`): a
# process started with `skewed_clock(seconds)` in its environment sees its
# wall clock (and its monotonic clock) that far off.
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def skewed_clock(seconds: float) -> dict:
    """The environment of a process whose clocks run `seconds` ahead."""
    assert os.path.exists(FAKETIME_LIB), f"{FAKETIME_LIB} is missing: run `make deps` (installs faketime)"
    return {**os.environ, "LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"{seconds:+g}s"}


class LostProbe:
    """An on_lost callback that counts its calls and can be awaited."""

    def __init__(self):
        self.event = threading.Event()
        self.calls = 0
        self.threads: list = []
        self.at: float | None = None

    def __call__(self, *args):
        assert args == ()  # on_lost takes no arguments
        self.calls += 1
        self.threads.append(threading.current_thread())
        self.at = time.monotonic()
        self.event.set()

    def wait(self, timeout: float) -> bool:
        return self.event.wait(timeout)


class ThreadLag:
    """How late this process's Python threads ran while it was open: a
    ticker thread asks to wake every 5 ms and keeps the worst lateness. A
    callback that ferrolock schedules on time can run this much later on a
    busy machine (it waits for a core and the GIL like any thread), so a
    test bounding when a callback ran adds this, measured in the same
    window, rather than an idle machine's figure."""

    TICK = 0.005

    def __init__(self):
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def _tick(self) -> None:
        while True:
            due = time.monotonic() + self.TICK
            if self._stop.wait(self.TICK):
                return
            self.worst = max(self.worst, time.monotonic() - due)

    def __enter__(self) -> "ThreadLag":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class Events:
    """A ferrolock listener: the LockEvents of this process, with the
    monotonic time each arrived, that a test can wait on."""

    def __init__(self):
        self.seen: list = []
        self.cond = threading.Condition()

    def __call__(self, event) -> None:
        with self.cond:
            self.seen.append((time.monotonic(), event.kind, event.detail, event.names))
            self.cond.notify_all()

    def wait(self, predicate, timeout: float) -> bool:
        """Until an event `predicate(at, kind, detail, names)` holds, or `timeout`."""
        with self.cond:
            return self.cond.wait_for(lambda: any(predicate(*e) for e in self.seen), timeout)


def hold_of(value: bytes | str | None) -> dict:
    """The fields of a hold, from its key's value (`<token> <fence>
    <flags>[ <meta>]`, lua/lib/hold.lua): `token`, `fence`, `meta` when
    given, and each flag (`w`, `a`) as '1'; {} for no key. The values are
    bytes when `value` is."""
    if value is None:
        return {}
    text = value.decode() if isinstance(value, bytes) else value
    token, fence, rest = text.split(" ", 2)
    flags, given, meta = rest.partition(" ")
    found = {"token": token, "fence": fence, **dict.fromkeys(flags, "1")}
    if given:
        found["meta"] = meta
    found = {k: v for k, v in found.items() if v or k == "meta"}
    return {k: v.encode() for k, v in found.items()} if isinstance(value, bytes) else found


def hold_field(value: bytes | str | None, field: str) -> bytes | str | None:
    """One field of a hold (see `hold_of`), None when it has none."""
    return hold_of(value).get(field)


def hold_value(token: str, fence: int | str, flags: str = "", meta: str | None = None) -> str:
    """The value of a hold (see `hold_of`); token '' for a fence kept past
    its hold."""
    value = f"{token} {fence} {flags}"
    return value if meta is None else f"{value} {meta}"


def marked(value: bytes, flag: str) -> str:
    """A hold's value (see `hold_of`) with `flag` set."""
    token, fence, rest = value.decode().split(" ", 2)
    flags, given, meta = rest.partition(" ")
    return hold_value(token, fence, flags if flag in flags else flags + flag, meta if given else None)


def key(prefix: str, name: str) -> str:
    return f"{prefix}{{{name}}}"


def command_calls(server, *commands: str) -> int:
    """The calls of `commands` (lower case, as INFO commandstats names them)
    a server (a RedisServer, or a Raw client of one) has answered so far."""
    info = getattr(server, "command", server)("INFO", "commandstats")
    info = info.decode() if isinstance(info, bytes) else info
    heads = tuple(f"cmdstat_{c}:" for c in commands)
    return sum(int(line.split("calls=", 1)[1].split(",", 1)[0]) for line in info.splitlines() if line.startswith(heads))


async def next_comer_gets(client, lock) -> None:
    """Nothing a cancelled acquire of `lock` sent takes it: another handle
    of `client` on the same name gets it at once, and then `lock` does
    (under asyncio or trio)."""
    other = client.lock(lock.name, ttl=10.0)
    assert other.acquire(blocking=False)
    other.release()
    assert await lock.aacquire(blocking=False)
    await lock.arelease()


def compares(server) -> bool:
    """Whether a server (a RedisServer, or a Raw client of one) has SET … IFEQ
    and DELIFEQ (Valkey 9.0 and later), as its HELLO says: a one-name Lock's
    renewals and release are those commands there, not scripts."""
    hello = server.command("HELLO")
    fields = dict(zip(hello[::2], hello[1::2])) if isinstance(hello, list) else hello
    name, version = fields[b"server"].decode(), fields[b"version"].decode()
    return name == "valkey" and tuple(int(p) for p in version.split(".")[:2]) >= (9, 0)


def script_calls(server) -> int:
    """Scripts run so far on a private server (EVALSHA, plus EVAL if any)."""
    return command_calls(server, "evalsha", "eval")


def waiting(server, channel: str, count: int = 1) -> bool:
    """`count` acquires of this process wait for a wake-up (or more), and
    `channel` (a lock's ``<key>:wake``) has its subscriber on `server` (a
    RedisServer, or a Raw client of one): a release now wakes them."""
    from ferrolock._ferrolock import _debug_stats

    ask = getattr(server, "command", server)
    return _debug_stats()["waiters"] >= count and ask("PUBSUB", "NUMSUB", channel)[1] >= 1


def wait_for(predicate, limit: float, what: str, ignoring: tuple = ()) -> float:
    """Waits until `predicate()` holds, and returns the seconds it took: the
    progress of another thread or process, seen only in Redis (or in another
    server's answers), has no event to await. An exception of `ignoring`
    (OSError: a server restarting) counts as not yet."""
    start = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - start
        except ignoring:
            pass
        assert time.monotonic() - start < limit, f"timed out waiting for {what} ({limit} s)"
        time.sleep(0.005)


async def until(predicate, limit: float, what: str) -> None:
    """wait_for in a coroutine, under asyncio or trio (anyio sleeps in either)."""
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what} ({limit} s)"
        await anyio.sleep(0.005)


def postponed(server) -> int:
    """How many clients Redis holds back under CLIENT PAUSE (it counts them
    as blocked): a write sent while paused waits there."""
    info = server.command("INFO", "clients").decode()
    return int(next(line.split(":")[1] for line in info.splitlines() if line.startswith("blocked_clients:")))


async def cancelled_after(awaitable, steps: int):
    """Runs `awaitable` as a task, cancels it after `steps` event-loop steps,
    and returns its result, or None if the cancellation landed first."""
    task = asyncio.ensure_future(awaitable)
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return None


async def sent_before(lock) -> None:
    """Returns once whatever a cancelled call of `lock` had sent has reached
    the server: one round trip on the same (multiplexed) connection, whose
    commands run in order. Only after it can the key be checked for what the
    call left: before, the call's command may still be on its way, and land
    after a check saw nothing."""
    await lock.alocked()


def announced_server(binary: str) -> tuple[str, str]:
    """What `binary --version` says it is: ``("redis", "7.0.15")``,
    ``("valkey", "9.1.2")``."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    found = re.match(r"(Redis|Valkey) server v=(\S+)", out)
    assert found, f"{binary} --version says {out!r}: neither a Redis nor a Valkey server"
    return found[1].lower(), found[2]


def wait_child(pid: int, limit: float) -> int | None:
    """The child's exit status, or None if it is still running after `limit`."""
    status = {}
    t = threading.Thread(target=lambda: status.setdefault("s", os.waitpid(pid, 0)[1]), daemon=True)
    t.start()
    t.join(limit)
    return status.get("s")


# The fair waiters of the hand-over tests (test_fair.py, test_fair_rwmutex.py,
# test_cluster.py) poll every 10 s: one that holds sooner than this was woken,
# however busy the machine (the counters then say how).
WOKEN_WITHIN_MS = 2000


def hand_over_ms(holder, waiter, waiting, keep: bool = False) -> float:
    """Milliseconds from `holder`'s release until `waiter`, queued (as
    `waiting()` sees in Redis) and polling only every 10 s, holds (and
    releases again, unless `keep`)."""
    result = {}

    def wait():
        ok = waiter.acquire(timeout=5)
        result["r"] = (ok, time.monotonic())

    t = threading.Thread(target=wait)
    t.start()
    wait_for(lambda: waiting() == 1, 5, "the waiter in the queue")
    released = time.monotonic()
    holder.release()
    t.join(5)
    ok, at = result["r"]
    assert ok, "the waiter never got in"
    if not keep:
        waiter.release()
    return 1000 * (at - released)
