"""Under gevent's monkey-patching (gunicorn -k gevent, Celery's gevent pool),
every blocking call waits cooperatively: the hub keeps running, so other
greenlets (the holder that will release, a ticker) are served while one
waits; timeouts, Timeout, greenlet.kill() and Ctrl-C still end a
wait, and leave nothing behind in Redis.

Each test runs a child process that patches first, as such a server does.
A ticker greenlet in the child sleeps 10 ms at a time and records the
longest gap between two ticks: a liveness bound (200 ms), not a speed
target. Without cooperative waits the hub stops while a greenlet waits, so
the holder never runs to release: the child deadlocks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from support.fault_proxy import FaultProxy
from support.helpers import key, wait_for

# How long a greenlet may go unserved while another waits.
MAX_GAP = 0.2

CHILD = textwrap.dedent(
    """
    import sys
    url, prefix, lib, scenario, kind = sys.argv[1:6]
    if lib == "gevent":
        from gevent import monkey
        monkey.patch_all()
        from gevent import GreenletExit, Timeout, sleep, spawn
        result = lambda g: g.get()
        kill = lambda g: g.kill(block=False)
    else:
        import eventlet
        eventlet.monkey_patch()
        from eventlet import Timeout, sleep, spawn
        from greenlet import GreenletExit
        result = lambda g: g.wait()
        kill = lambda g: g.kill()

    import json, time
    import ferrolock
    from ferrolock._ferrolock import _debug_stats

    client = ferrolock.Client(url, prefix=prefix, command_timeout=3.0)


    def say(**what):
        print(json.dumps(what), flush=True)


    def until(condition):
        # awaits what other greenlets bring about
        while not condition():
            sleep(0.005)


    def waiting():
        until(lambda: _debug_stats()["waiters"] >= 1)


    class Ticker:
        # a greenlet ticking every 10 ms: the longest gap between two ticks
        # is how long the hub served no other greenlet
        def __init__(self):
            self.ticks, self.gap = 0, 0.0
            self.greenlet = spawn(self.run)

        def run(self):
            last = time.monotonic()
            while True:
                sleep(0.01)
                now = time.monotonic()
                self.gap, last = max(self.gap, now - last), now
                self.ticks += 1

        def served(self, ticks):
            start = self.ticks
            until(lambda: self.ticks >= start + ticks)

        def stop(self):
            self.greenlet.kill()
            return self.gap


    HANDLES = {  # kind: (the holder's handle, a waiter's)
        "lock": (lambda: client.lock("l"), lambda: client.lock("l")),
        "fair-lock": (lambda: client.lock("l", fair=True), lambda: client.lock("l", fair=True)),
        "rlock": (lambda: client.lock("l"), lambda: client.rlock("l")),
        "read": (lambda: client.rwmutex("rw").write(), lambda: client.rwmutex("rw").read()),
        "write": (lambda: client.rwmutex("rw").read(), lambda: client.rwmutex("rw").write()),
        "fair-write": (lambda: client.rwmutex("rw", fair=True).read(),
                       lambda: client.rwmutex("rw", fair=True).write()),
        "semaphore": (lambda: client.semaphore("s", 1), lambda: client.semaphore("s", 1)),
        "fair-semaphore": (lambda: client.semaphore("s", 1, fair=True),
                           lambda: client.semaphore("s", 1, fair=True)),
        "multi-lock": (lambda: client.lock("b"), lambda: client.multi_lock(["a", "b"])),
        "with": (lambda: client.lock("l"), lambda: client.lock("l")),
    }


    def hold():
        # takes the primitive; returns how to give it back
        if kind == "election":
            return client.election("e").campaign("holder").resign
        handle = HANDLES[kind][0]()
        assert handle.acquire()
        return handle.release


    def take(**wait):
        # waits for the primitive, then gives it back; False: not acquired
        if kind == "election":
            client.election("e").campaign("waiter", **wait).resign()
            return True
        handle = HANDLES[kind][1]()
        if kind == "with":
            with handle:
                return True
        if not handle.acquire(**wait):
            return False
        handle.release()
        return True


    if scenario == "contend":
        # two greenlets, no timeout: the holder releases once the other waits
        ticker = Ticker()
        def holder():
            release = hold()
            waiter = spawn(take)
            waiting()
            ticker.served(20)
            release()
            return result(waiter)
        say(acquired=result(spawn(holder)), gap=ticker.stop())

    elif scenario == "acquire-timeout":
        release = hold()
        ticker = Ticker()
        got = result(spawn(take, timeout=0.3))
        say(acquired=got, gap=ticker.stop(), ticks=ticker.ticks)
        release()

    elif scenario in ("kill", "hub-timeout"):
        release = hold()
        def waiter():
            try:
                with Timeout(1.0):
                    take()
            except Timeout:
                return "timed out"
            except GreenletExit:
                return "killed"
            return "acquired"
        first = spawn(waiter)
        waiting()
        if scenario == "kill":
            first.kill()
        say(first=result(first))
        sys.stdin.readline()  # the test looks at Redis
        second = spawn(take)
        waiting()
        release()
        say(second=result(second))

    elif scenario == "sigint":
        # the main greenlet waits; the holder is the test itself
        ticker = Ticker()
        def watch():
            waiting()
            ticker.served(5)
            say(waiting=True)  # the hub serves others while the main greenlet waits
        spawn(watch)
        try:
            take()
            say(outcome="acquired")
        except KeyboardInterrupt:
            say(outcome="interrupted", gap=ticker.stop())

    elif scenario == "observe":
        # an election observer waits for the next change of leader
        ticker = Ticker()
        election = client.election("e")
        changes = election.observe()
        first = next(changes)
        watcher = spawn(next, changes)
        ticker.served(20)  # the watcher waits meanwhile
        term = election.campaign("one")
        leader = result(watcher)
        term.resign()
        say(first=first, leader=leader.value, gap=ticker.stop())

    elif scenario == "slow-reply":
        # release and inspect while their replies are held back; a release
        # killed meanwhile completes all the same
        handle = client.lock("l")
        assert handle.acquire()
        say(held=True)
        sys.stdin.readline()  # the test holds the replies back
        ticker = Ticker()
        calls = {"release": handle.release, "inspect": lambda: client.inspect("l"), "killed-release": handle.release}
        call = spawn(calls[kind])
        ticker.served(30)
        if kind == "killed-release":
            kill(call)
        say(ticking=True)
        try:
            killed = isinstance(result(call), GreenletExit)
        except GreenletExit:
            killed = True
        say(gap=ticker.stop(), released=not handle.owned(), killed=killed)
        if handle.owned():
            handle.release()
    """
)


class Child:
    """The child process running one scenario; `said()` is its next line."""

    def __init__(self, url: str, prefix: str, lib: str, scenario: str, kind: str):
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, prefix, lib, scenario, kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put("")

    def said(self, limit: float = 60.0) -> dict:
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            raise AssertionError(f"the child said nothing in {limit} s: its hub is blocked") from None
        assert line, f"the child ended with {self.p.wait()} before saying anything"
        return json.loads(line)

    def go(self) -> None:
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def close(self) -> None:
        """Lets the child finish (its last step gives back what it holds);
        kills it if it does not."""
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.reader.join()
        self.p.stdout.close()


@pytest.fixture(params=["gevent", "eventlet"])
def lib(request) -> str:
    """Which library patches the child (a test runs with each)."""
    if importlib.util.find_spec(request.param) is None:  # not imported here: eventlet warns on import
        pytest.skip(f"{request.param} is not installed (tests/requirements.txt)")
    return request.param


@pytest.fixture
def child(redis_url, prefix, raw, lib):
    children: list[Child] = []

    def start(scenario: str, kind: str = "lock", url: str = redis_url) -> Child:
        children.append(Child(url, prefix, lib, scenario, kind))
        return children[-1]

    yield start
    for c in children:
        c.close()
    assert raw.keys(prefix + "*") == [], "left behind in Redis"


KINDS = [
    "lock",
    "fair-lock",
    "rlock",
    "read",
    "write",
    "fair-write",
    "semaphore",
    "fair-semaphore",
    "multi-lock",
    "election",
    "with",
]


def test_two_greenlets_contend_a_lock_without_timeout(child):
    said = child("contend", "lock").said()
    assert said["acquired"] is True, "both greenlets finished, the waiter with the lock"
    assert said["gap"] < MAX_GAP, f"the hub served no greenlet for {said['gap']:.3f} s"


@pytest.mark.parametrize("kind", KINDS)
def test_every_primitive_waits_cooperatively(child, kind):
    said = child("contend", kind).said()
    assert said["acquired"] is True, f"{kind}: the waiter got it once the holder released"
    assert said["gap"] < MAX_GAP, f"{kind}: the hub served no greenlet for {said['gap']:.3f} s"


@pytest.mark.parametrize("kind", ["lock", "fair-lock", "write", "fair-semaphore"])
def test_acquire_timeout_holds_and_the_hub_runs_meanwhile(child, kind):
    said = child("acquire-timeout", kind).said()
    assert said["acquired"] is False
    assert said["ticks"] > 0 and said["gap"] < MAX_GAP, f"{kind}: the hub was blocked ({said})"


def test_an_election_observer_waits_cooperatively(child):
    said = child("observe").said()
    assert said["first"] is None and said["leader"] == "one", said
    assert said["gap"] < MAX_GAP, f"the hub served no greenlet for {said['gap']:.3f} s"


def waiting_in_redis(raw, prefix, kind) -> int:
    """What a waiter of `kind` keeps in Redis while it waits."""
    k = lambda name: key(prefix, name)  # noqa: E731
    if kind == "lock":
        return raw("PUBSUB", "NUMSUB", f"{k('l')}:wake")[1]
    if kind == "fair-lock":
        return raw("ZCARD", f"{k('l')}:q")
    if kind == "write":
        return raw("EXISTS", f"{k('rw')}:rw:i")
    return raw("ZCARD", f"{k('s')}:sem:q")


@pytest.mark.parametrize("how", ["kill", "hub-timeout"])
@pytest.mark.parametrize("kind", ["lock", "fair-lock", "write", "fair-semaphore"])
def test_a_waiter_killed_leaves_nothing_and_the_next_is_woken(child, raw, prefix, kind, how):
    c = child(how, kind)
    said = c.said()
    assert said["first"] == ("killed" if how == "kill" else "timed out")
    assert waiting_in_redis(raw, prefix, kind) == 0, f"{kind}: the killed waiter left its place"
    c.go()
    assert c.said() == {"second": True}, "the holder's release woke the next waiter"


@pytest.mark.parametrize("kind", ["lock", "fair-lock", "write", "fair-semaphore"])
def test_ctrl_c_during_a_cooperative_wait(child, client, raw, prefix, kind):
    holder = {
        "lock": lambda: client.lock("l"),
        "fair-lock": lambda: client.lock("l", fair=True),
        "write": lambda: client.rwmutex("rw").read(),
        "fair-semaphore": lambda: client.semaphore("s", 1, fair=True),
    }[kind]()
    assert holder.acquire()
    c = child("sigint", kind)
    assert c.said() == {"waiting": True}
    wait_for(lambda: waiting_in_redis(raw, prefix, kind) == 1, 10, f"the child waiting ({kind})")
    os.kill(c.p.pid, signal.SIGINT)
    said = c.said()
    assert said["outcome"] == "interrupted"
    assert waiting_in_redis(raw, prefix, kind) == 0, "still in Redis when KeyboardInterrupt was raised"
    assert said["gap"] < MAX_GAP
    holder.release()


@pytest.mark.parametrize("call", ["release", "inspect", "killed-release"])
def test_calls_whose_reply_is_late_let_the_hub_run(child, redis_url, call):
    """Not only waits for a lock: a release or an operator's read whose reply
    is held back (a slow network) keeps the hub running too. A release killed
    meanwhile is not cut short: it completes, then the greenlet ends."""
    proxy = FaultProxy(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    try:
        c = child("slow-reply", call, url=proxy.url)
        assert c.said() == {"held": True}
        proxy.hold("command", "down")
        c.go()
        assert c.said() == {"ticking": True}, "other greenlets ran while the reply was held back"
        proxy.resume("command", "down")
        said = c.said()
        assert said["gap"] < MAX_GAP
        assert said["released"] == (call != "inspect") and said["killed"] == (call == "killed-release")
    finally:
        proxy.close()


APP = textwrap.dedent(
    """
    import os
    import ferrolock

    client = ferrolock.Client(os.environ["FERROLOCK_TEST_URL"], prefix=os.environ["FERROLOCK_TEST_PREFIX"])


    def app(environ, start_response):
        body = b"pong"
        if environ["PATH_INFO"] == "/wait":
            with client.lock("l"):
                body = b"got it"
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [body]
    """
)


def test_a_gunicorn_gevent_worker_answers_while_a_request_waits(client, raw, redis_url, prefix, tmp_path):
    """gunicorn -k gevent, one worker: while one request waits on a held
    lock, /ping keeps answering; the release lets the waiting request in."""
    pytest.importorskip("gunicorn")
    from urllib.request import urlopen

    from ferrolock.testing import free_port

    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    holder = client.lock("l")
    assert holder.acquire()
    env = {**os.environ, "FERROLOCK_TEST_URL": redis_url, "FERROLOCK_TEST_PREFIX": prefix}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-k",
            "gevent",
            "-w",
            "1",
            "-b",
            f"127.0.0.1:{port}",
            "--chdir",
            str(tmp_path),
            "app:app",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def get(path: str, limit: float) -> bytes:
        with urlopen(base + path, timeout=limit) as reply:
            return reply.read()

    def up() -> bool:
        try:
            return get("/ping", 5) == b"pong"
        except OSError:
            return False

    waited: list = []
    try:
        wait_for(up, 30, "gunicorn answering")
        waiter = threading.Thread(target=lambda: waited.append(get("/wait", 60)))
        waiter.start()
        wait_for(lambda: raw("PUBSUB", "NUMSUB", f"{key(prefix, 'l')}:wake")[1] == 1, 10, "the request waiting")
        assert [get("/ping", 5) for _ in range(5)] == [b"pong"] * 5, "the worker answers while a request waits"
        holder.release()
        waiter.join(60)
        assert waited == [b"got it"]
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:  # a worker stuck in a blocked hub ignores SIGTERM
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
