"""The `ferrolock` command line, run as its console script in a subprocess
against a real redis-server."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ferrolock
from ferrolock import cli
from ferrolock.testing import free_port
from support.helpers import wait_for

FERROLOCK = str(Path(sys.executable).parent / "ferrolock")


def run(redis_url, prefix, *args, **kw):
    """The console script with this test's server and prefix; returns the finished process."""
    kw.setdefault("timeout", 60)
    return subprocess.run(
        [FERROLOCK, "--url", redis_url, "--prefix", prefix, *args], capture_output=True, text=True, **kw
    )


def start(redis_url, prefix, *args, **kw):
    """The console script, left running; its stdout (and CMD's) is a pipe."""
    env = {**os.environ, "REDIS_URL": redis_url, "FERROLOCK_PREFIX": prefix}
    return subprocess.Popen(
        [FERROLOCK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw
    )


def py(code: str) -> list:
    """A command running a Python snippet."""
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_version_and_help_with_examples_and_exit_codes():
    version = subprocess.run([FERROLOCK, "--version"], capture_output=True, text=True)
    assert version.returncode == 0
    assert version.stdout.strip() == f"ferrolock {ferrolock.__version__}"
    helped = subprocess.run([FERROLOCK, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0
    for text in ("examples:", "ferrolock run reports:nightly", "exit codes:", "76", "75", "69", "  3    release:"):
        assert text in helped.stdout
    as_module = subprocess.run([sys.executable, "-m", "ferrolock", "run", "--help"], capture_output=True, text=True)
    assert as_module.returncode == 0 and "--grace" in as_module.stdout


def test_ls_shows_holders_readers_and_waiters(redis_url, prefix, client, ferrolock_helpers):
    held = client.lock("jobs:nightly", metadata="host-a")
    assert held.acquire(blocking=False)
    held.extend()  # records its fence, as its first renewal would
    reader = client.rwmutex("doc").read()
    assert reader.acquire(blocking=False)
    with ferrolock_helpers.hold_elsewhere("jobs:fair", fair=True):
        waiter = client.lock("jobs:fair", fair=True, ttl=5)
        assert not waiter.acquire(timeout=0.05)  # leaves the queue when it gives up
        table = run(redis_url, prefix, "ls")
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split() == ["NAME", "KIND", "HOLDER", "TTL", "FENCE", "WAITERS", "METADATA"]
        rows = {line.split()[0]: line for line in lines[1:]}
        assert set(rows) == {"doc", "jobs:fair", "jobs:nightly"}
        assert held.token in rows["jobs:nightly"] and "host-a" in rows["jobs:nightly"]
        assert str(held.fence) in rows["jobs:nightly"]
        assert "1 reader" in rows["doc"] and "rwmutex" in rows["doc"]

        listed = run(redis_url, prefix, "ls", "jobs:*", "--json")
        assert listed.returncode == 0
        states = json.loads(listed.stdout)
        assert [s["name"] for s in states] == ["jobs:fair", "jobs:nightly"]
        nightly = states[1]
        assert nightly["holder"]["token"] == held.token
        assert nightly["holder"]["metadata"] == "host-a"
        assert 0 < nightly["holder"]["ttl"] <= 30
    other = run(redis_url, prefix + "x:", "ls")
    assert other.returncode == 0 and "no lock matches" in other.stdout


def test_ls_counts_fair_waiters(redis_url, prefix, client, ferrolock_helpers):
    with ferrolock_helpers.hold_elsewhere("q", fair=True):
        waiting = start(redis_url, prefix, "run", "q", "--fair", "--", "true")
        try:
            # The waiting `run` is in the queue once Redis says so.
            wait_for(lambda: client.describe("q")[0].waiters == 1, 10, "the fair waiter in the queue")
            listed = json.loads(run(redis_url, prefix, "ls", "q", "--json").stdout)
            assert listed[0]["waiters"] == 1 and listed[0]["queued_writers"] == 1
        finally:
            waiting.send_signal(signal.SIGTERM)
            waiting.communicate(timeout=30)
            assert waiting.returncode == 128 + signal.SIGTERM
    assert client.describe("q") == [], "the interrupted waiter left nothing behind"


NON_FAIR = {
    # kind: (a handle that holds the name, one that waits for it)
    "lock": (lambda c: c.lock("busy"), lambda c: c.lock("busy", retry=ferrolock.Retry.fixed(10.0))),
    "rwmutex": (
        lambda c: c.rwmutex("busy").write(),
        lambda c: c.rwmutex("busy").read(retry=ferrolock.Retry.fixed(10.0)),
    ),
    "semaphore": (
        lambda c: c.semaphore("busy", 1),
        lambda c: c.semaphore("busy", 1, retry=ferrolock.Retry.fixed(10.0)),
    ),
}

WAITING_ELSEWHERE = """
    import sys, ferrolock
    url, prefix, kind = sys.argv[1:4]
    client = ferrolock.Client(url, prefix=prefix)
    slow = ferrolock.Retry.fixed(10.0)
    handle = {"lock": lambda: client.lock("busy", retry=slow),
              "rwmutex": lambda: client.rwmutex("busy").read(retry=slow),
              "semaphore": lambda: client.semaphore("busy", 1, retry=slow)}[kind]()
    handle.acquire(timeout=60)
"""


@pytest.mark.parametrize("kind", sorted(NON_FAIR))
def test_waiters_of_a_non_fair_primitive_count_by_process(redis_url, prefix, client, kind):
    """No queue is kept for a non-fair primitive: its waiters are what Redis
    can tell, the processes subscribed to its wake-ups. Three threads here
    and one other process wait: 2, in describe(), scan(), ls and inspect."""
    import threading

    held_by, waiting = NON_FAIR[kind]
    holder = held_by(client)
    assert holder.acquire(blocking=False)
    assert client.describe("busy")[0].waiters == 0
    here = [waiting(client) for _ in range(3)]
    got: list = []

    def take_and_give_back(h) -> None:
        got.append(h.acquire(timeout=60))
        h.release()

    threads = [threading.Thread(target=take_and_give_back, args=(h,)) for h in here]
    for t in threads:
        t.start()
    elsewhere = subprocess.Popen(py(WAITING_ELSEWHERE) + [redis_url, prefix, kind])
    try:
        wait_for(lambda: client.describe("busy")[0].waiters == 2, 20, "two waiting processes")
        (state,) = client.describe("busy")
        assert (state.kind, state.subscribed, state.queued_writers, state.queued_readers) == (kind, 2, 0, 0)
        assert [s.waiters for s in client.scan("busy")] == [2]
        listed = json.loads(run(redis_url, prefix, "ls", "busy", "--json").stdout)
        assert (listed[0]["waiters"], listed[0]["subscribed"]) == (2, 2)
        table = run(redis_url, prefix, "ls", "busy").stdout.splitlines()
        assert table[0].split()[-2:] == ["WAITERS", "METADATA"] and table[1].split()[-1] == "2", table  # no metadata
        shown = run(redis_url, prefix, "inspect", "busy").stdout
        assert "waiters:  2 (processes subscribed to its wake-ups" in shown, shown
    finally:
        elsewhere.kill()
        elsewhere.wait(30)
    holder.release()
    for t in threads:
        t.join(60)
    assert got == [True] * 3


def test_inspect_shows_a_fence_not_recorded_yet_as_such(redis_url, prefix, client):
    """A Lock's take by a transaction leaves its fence out of Redis until
    its first renewal: `inspect` says so rather than show 0."""
    lock = client.lock("fresh", ttl=30)
    assert lock.acquire(blocking=False)
    shown = run(redis_url, prefix, "inspect", "fresh").stdout
    assert "fence:    - (not recorded yet: its first renewal records it)" in shown, shown
    lock.extend()
    shown = run(redis_url, prefix, "inspect", "fresh").stdout
    assert f"fence:    {lock.fence}\n" in shown, shown
    lock.release()


def test_ls_all_prefixes_lists_every_prefix(redis_url, prefix, raw):
    """`ls` lists the --prefix only; --all-prefixes (Client.scan(all_prefixes=True))
    every prefix, each name shown with its prefix; a key of another
    application shaped as ours but of another type is left out."""
    one, two = ferrolock.Client(redis_url, prefix=f"{prefix}one:"), ferrolock.Client(redis_url, prefix=f"{prefix}two:")
    a, b = one.lock("job", metadata="a"), two.semaphore("job", 2)
    assert a.acquire(blocking=False) and b.acquire(blocking=False)
    raw("SET", f"{prefix}foreign:{{job}}", "not a lock")  # shaped as a Lock's key, but a string
    ours = lambda states: [(s.prefix, s.name, s.kind) for s in states if s.prefix.startswith(prefix)]  # noqa: E731
    assert ours(one.scan("job")) == [(f"{prefix}one:", "job", "lock")]
    expected = [(f"{prefix}one:", "job", "lock"), (f"{prefix}two:", "job", "semaphore")]
    assert ours(one.scan("job", all_prefixes=True)) == expected
    listed = run(redis_url, f"{prefix}one:", "ls", "job", "--all-prefixes", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [
        (s["prefix"], s["name"], s["kind"]) for s in json.loads(listed.stdout) if s["prefix"].startswith(prefix)
    ] == expected
    table = run(redis_url, f"{prefix}one:", "ls", "job", "-A")
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["PREFIX", "NAME"]
    assert [line.split()[0] for line in lines[1:] if prefix in line] == [repr(f"{prefix}one:"), repr(f"{prefix}two:")]
    a.release()
    b.release()
    raw("DEL", f"{prefix}foreign:{{job}}")


def test_inspect_tells_everything_and_exits_1_when_free(redis_url, prefix, client):
    writer = client.rwmutex("doc").write(metadata="migration 7")
    assert writer.acquire(blocking=False)
    shown = run(redis_url, prefix, "inspect", "doc")
    assert shown.returncode == 0
    assert "doc (rwmutex)" in shown.stdout and writer.token in shown.stdout and "migration 7" in shown.stdout
    as_json = json.loads(run(redis_url, prefix, "inspect", "doc", "--json").stdout)
    assert as_json[0]["holder"]["fence"] == writer.fence
    free = run(redis_url, prefix, "inspect", "nothing")
    assert free.returncode == cli.NOT_FOUND and "is free" in free.stdout
    assert json.loads(run(redis_url, prefix, "inspect", "nothing", "--json").stdout) == []


def test_release_force_removes_and_logs_what_it_removed(redis_url, prefix, client):
    held = client.lock("stuck", metadata="dead host")
    assert held.acquire(blocking=False)
    refused = run(redis_url, prefix, "release", "stuck")
    assert refused.returncode == cli.USAGE and "--force" in refused.stderr
    assert client.inspect("stuck") is not None
    forced = run(redis_url, prefix, "release", "stuck", "--force")
    assert forced.returncode == 0, forced.stderr
    assert held.token in forced.stderr and "dead host" in forced.stderr
    assert client.inspect("stuck") is None
    again = run(redis_url, prefix, "release", "stuck", "--force")
    assert again.returncode == cli.NOT_FOUND and "not held" in again.stdout

    readers = [client.rwmutex("doc").read() for _ in range(2)]
    for r in readers:
        assert r.acquire(blocking=False)
    out = run(redis_url, prefix, "release", "doc", "--force", "--json")
    assert out.returncode == 0
    assert len(json.loads(out.stdout)["released"][0]["readers"]) == 2
    assert client.rwmutex("doc").readers() == 0


@pytest.mark.parametrize("answer, removed", [("n", False), ("y", True)])
def test_release_asks_on_a_terminal(redis_url, prefix, client, answer, removed):
    held = client.lock("stuck")
    assert held.acquire(blocking=False)
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [FERROLOCK, "release", "stuck", "--force", "--url", redis_url, "--prefix", prefix],  # options last
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(controller, f"{answer}\n".encode())
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert "[y/N]" in out and held.token in out
    assert proc.returncode == (0 if removed else cli.NOT_FOUND)
    assert (client.inspect("stuck") is None) == removed


def read_until(fd: int, text: str, limit: float = 30) -> str:
    """What a process wrote to the pipe `fd` up to `text` (a prompt: no newline to read up to)."""
    seen = b""
    deadline = time.monotonic() + limit
    while text.encode() not in seen:
        assert time.monotonic() < deadline, f"no {text!r} in {seen!r}"
        if select.select([fd], [], [], 1)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"closed before {text!r}: {seen!r}"
            seen += chunk
    return seen.decode()


@pytest.mark.parametrize("kind", ["lock", "fair", "writer", "reader", "permit"])
def test_release_removes_only_the_hold_it_showed(redis_url, prefix, client, kind):
    """The holder shown at the prompt releases and another takes the name
    before the operator answers yes: the new hold stays, exit 3 says so."""

    def take():
        if kind in ("lock", "fair"):
            handle = client.lock("stuck", fair=kind == "fair", metadata="shown")
        elif kind == "permit":
            handle = client.semaphore("stuck", 2, metadata="shown")
        else:
            rw = client.rwmutex("stuck")
            handle = rw.write(metadata="shown") if kind == "writer" else rw.read()
        assert handle.acquire(blocking=False)
        return handle

    shown = take()
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [FERROLOCK, "release", "stuck", "--force", "--url", redis_url, "--prefix", prefix],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        prompt = read_until(proc.stdout.fileno(), "[y/N]")
        token = shown.token
        assert token in prompt
        shown.release()
        now = take()
        os.write(controller, b"y\n")
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == cli.CHANGED, err
    assert "changed after it was shown" in err and token in err
    assert "force-released" not in err  # no WARNING of a removal
    assert now.owned(), "the hold taken after the prompt was removed"
    now.release()


def test_release_with_yes_removes_what_it_read_and_reports_a_change_as_json(redis_url, prefix, client):
    readers = [client.rwmutex("doc").read() for _ in range(2)]
    for r in readers:
        assert r.acquire(blocking=False)
    out = run(redis_url, prefix, "release", "doc", "--force", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["changed"] == []
    assert all(r.token in out.stderr for r in readers)


def test_run_holds_while_cmd_runs_and_passes_its_exit_code(redis_url, prefix, client):
    cmd = py(
        f"""
        import sys, ferrolock
        info = ferrolock.Client({redis_url!r}, prefix={prefix!r}).inspect("job")
        print(info.metadata, flush=True)
        sys.exit(7)
        """
    )
    done = run(redis_url, prefix, "run", "job", "--", *cmd)
    assert done.returncode == 7, done.stderr
    assert done.stdout.startswith("ferrolock run on ") and "sys.exit(7)" in done.stdout
    assert client.inspect("job") is None, "released when CMD exited"
    ok = run(redis_url, prefix, "run", "job", "--metadata", "mine", "--", *py("print(1)"))
    assert ok.returncode == 0 and ok.stdout == "1\n"
    killed = run(redis_url, prefix, "run", "job", "--", "sh", "-c", "kill -USR1 $$")
    assert killed.returncode == 128 + signal.SIGUSR1


def test_run_gives_up_at_its_timeout_without_running_cmd(redis_url, prefix, client, tmp_path):
    held = client.lock("job")
    assert held.acquire(blocking=False)
    marker = tmp_path / "ran"
    out = run(redis_url, prefix, "run", "job", "--timeout", "0.2", "--", "touch", str(marker))
    assert out.returncode == cli.TIMED_OUT and "not acquired" in out.stderr
    assert not marker.exists()
    once = run(redis_url, prefix, "run", "job", "--timeout", "0", "--", "touch", str(marker))
    assert once.returncode == cli.TIMED_OUT and not marker.exists()
    assert client.inspect("job").token == held.token


def test_run_stops_cmd_with_sigterm_when_the_lock_is_lost(redis_url, prefix, client):
    cmd = py(
        """
        import signal, sys, time
        def term(*_):
            print("got SIGTERM", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, term)
        print("started", flush=True)
        time.sleep(120)  # idles until signalled
        """
    )
    proc = start(redis_url, prefix, "run", "job", "--ttl", "0.6", "--", *cmd)
    assert proc.stdout.readline() == "started\n"
    assert client.force_release("job")  # the watchdog finds it gone within ttl/3
    out, err = proc.communicate(timeout=60)
    assert out == "got SIGTERM\n"
    assert proc.returncode == cli.LOST, err
    assert "lost" in err


def test_run_kills_cmd_that_ignores_sigterm_after_the_grace(redis_url, prefix, client):
    cmd = py(
        """
        import signal, time
        signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
        print("started", flush=True)
        while True:
            time.sleep(1)  # idles until killed
        """
    )
    proc = start(redis_url, prefix, "run", "job", "--ttl", "0.6", "--grace", "0.3", "--", *cmd)
    assert proc.stdout.readline() == "started\n"
    assert client.force_release("job")
    out, _ = proc.communicate(timeout=60)
    assert out == "ignoring SIGTERM\n"
    assert proc.returncode == cli.LOST


def test_run_passes_signals_to_cmd(redis_url, prefix, client):
    cmd = py(
        """
        import signal, sys, time
        signal.signal(signal.SIGUSR1, lambda *_: print("usr1", flush=True))
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(5))
        print("started", flush=True)
        time.sleep(120)  # idles until signalled
        """
    )
    proc = start(redis_url, prefix, "run", "job", "--", *cmd)
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout.readline() == "usr1\n"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 5
    assert client.inspect("job") is None


def test_run_reports_a_missing_command(redis_url, prefix, client):
    out = run(redis_url, prefix, "run", "job", "--", "/nonexistent/command")
    assert out.returncode == cli.NOT_FOUND_CMD and "not found" in out.stderr
    assert client.inspect("job") is None
    assert run(redis_url, prefix, "run", "job").returncode == cli.USAGE


def test_run_reports_a_command_the_kernel_cannot_execute(redis_url, prefix, client, tmp_path):
    """ENOEXEC (an executable text file without a shebang), EACCES (a
    directory): 126 and one line naming the command, no traceback."""
    script = tmp_path / "no-shebang"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    for cmd in (script, tmp_path):
        out = run(redis_url, prefix, "run", "job", "--", str(cmd))
        assert out.returncode == cli.NOT_EXECUTABLE, out.stderr
        assert out.stderr.startswith(f"ferrolock: command cannot be executed: {cmd} (")
        assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
        assert client.inspect("job") is None


def test_run_releases_at_once_on_a_sigterm_right_after_the_lock_is_taken(redis_url, prefix, client, tmp_path):
    """SIGTERM lands after the acquire returned and before CMD starts (sent
    from a hook at the start of `supervise`): the lock is released at once
    (not left for its 30 s ttl), CMD is not run, the exit is 128 + SIGTERM."""
    marker = tmp_path / "ran"
    code = f"""
        import os, signal, sys
        from ferrolock import cli
        real = cli.supervise
        def supervise(*args):
            os.kill(os.getpid(), signal.SIGTERM)
            return real(*args)
        cli.supervise = supervise
        sys.exit(cli.main(["--url", {redis_url!r}, "--prefix", {prefix!r}, "run", "job", "--ttl", "30",
                           "--", "touch", {str(marker)!r}]))
        """
    out = subprocess.run(py(code), capture_output=True, text=True, timeout=60)
    assert out.returncode == 128 + signal.SIGTERM, out.stderr
    assert client.inspect("job") is None, "the lock was left for its ttl"
    assert not marker.exists()


def test_wait_blocks_until_free(redis_url, prefix, client):
    held = client.lock("job")
    assert held.acquire(blocking=False)
    timed_out = run(redis_url, prefix, "wait", "job", "--timeout", "0.1")
    assert timed_out.returncode == cli.TIMED_OUT
    waiting = start(redis_url, prefix, "wait", "job", "--timeout", "60", "--json")
    held.release()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert json.loads(out) == {"name": "job", "free": True}
    assert run(redis_url, prefix, "wait", "never-held").returncode == 0


def hold_semaphore_and_election(client):
    """Two permits of `partner-api` and the election `leader-x`, held."""
    permits = [client.semaphore("partner-api", 3, metadata=f"worker-{i}") for i in range(2)]
    for p in permits:
        assert p.acquire(blocking=False)
    term = client.election("leader-x", ttl=30).campaign("host-a")
    return permits, term


def test_ls_and_inspect_show_semaphores_and_elections(redis_url, prefix, client):
    permits, term = hold_semaphore_and_election(client)
    table = run(redis_url, prefix, "ls")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert set(rows) == {"partner-api", "leader-x"}
    assert "semaphore" in rows["partner-api"] and "2 holders of 3" in rows["partner-api"]
    assert "election" in rows["leader-x"] and term.token in rows["leader-x"] and "host-a" in rows["leader-x"]
    listed = {s["name"]: s for s in json.loads(run(redis_url, prefix, "ls", "--json").stdout)}
    assert {h["token"] for h in listed["partner-api"]["holders"]} == {p.token for p in permits}
    assert listed["partner-api"]["limit"] == 3
    assert listed["leader-x"]["holder"]["fence"] == term.number

    shown = run(redis_url, prefix, "inspect", "partner-api")
    assert shown.returncode == 0, shown.stdout
    assert "partner-api (semaphore)" in shown.stdout and "holders:  2 of 3" in shown.stdout
    assert all(p.token in shown.stdout for p in permits) and "worker-1" in shown.stdout
    leader = run(redis_url, prefix, "inspect", "leader-x")
    assert leader.returncode == 0 and "leader-x (election)" in leader.stdout
    assert f"leader:   {term.token}" in leader.stdout and f"term:    {term.number}" in leader.stdout
    as_json = json.loads(run(redis_url, prefix, "inspect", "leader-x", "--json").stdout)
    assert as_json[0]["kind"] == "election" and as_json[0]["holder"]["metadata"] == "host-a"
    term.resign()


def test_release_force_removes_permits_and_deposes_a_leader(redis_url, prefix, client):
    permits, term = hold_semaphore_and_election(client)
    out = run(redis_url, prefix, "release", "partner-api", "--force", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    released = json.loads(out.stdout)["released"]
    assert {h["token"] for h in released[0]["holders"]} == {p.token for p in permits}
    assert all(p.token in out.stderr for p in permits) and "worker-0" in out.stderr
    assert client.describe("partner-api") == []
    deposed = run(redis_url, prefix, "release", "leader-x", "--force", "--yes")
    assert deposed.returncode == 0, deposed.stderr
    assert f"leader {term.token}" in deposed.stderr
    assert client.election("leader-x").leader() is None
    again = run(redis_url, prefix, "release", "leader-x", "--force", "--yes")
    assert again.returncode == cli.NOT_FOUND and "not held" in again.stdout


def test_wait_blocks_while_a_permit_or_a_leader_holds(redis_url, prefix, client):
    permits, term = hold_semaphore_and_election(client)
    for name in ("partner-api", "leader-x"):
        assert run(redis_url, prefix, "wait", name, "--timeout", "0.1").returncode == cli.TIMED_OUT
    waiting = start(redis_url, prefix, "wait", "partner-api", "--timeout", "60", "--json")
    for p in permits:
        p.release()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert json.loads(out) == {"name": "partner-api", "free": True}
    term.resign()
    assert run(redis_url, prefix, "wait", "leader-x", "--timeout", "0").returncode == 0


def test_bad_patterns_and_names_say_what_to_do(client):
    with pytest.raises(ValueError, match='use "\\*"'):
        client.scan("")
    with pytest.raises(TypeError, match="pattern must be str"):
        client.scan(42)
    with pytest.raises(ValueError, match="empty"):
        client.describe("")
    assert client.scan() == client.scan("*") == []


def test_connection_and_usage_errors_have_their_own_codes(prefix):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    unreachable = run(dead, prefix, "ls")
    assert unreachable.returncode == cli.UNAVAILABLE and "cannot reach Redis" in unreachable.stderr
    assert unreachable.stderr.count("cannot reach") == 1
    bad_url = run("redis://h:notaport", prefix, "ls")
    assert bad_url.returncode == cli.USAGE and "URL" in bad_url.stderr
    bad_ttl = run(dead, prefix, "run", "x", "--ttl", "-1", "--", "true")
    assert bad_ttl.returncode == cli.USAGE and "--ttl" in bad_ttl.stderr


def test_a_server_the_url_does_not_fit_is_a_usage_error(redis_url, prefix):
    """A database the server lacks is a bad URL (2, as documented), not an
    unreachable Redis (69)."""
    base = redis_url.rsplit("/", 1)[0]
    no_such_db = run(f"{base}/999", prefix, "ls")
    assert no_such_db.returncode == cli.USAGE, no_such_db.stderr
    assert "999" in no_such_db.stderr and "Traceback" not in no_such_db.stderr


def test_run_usage_shows_the_command_after_the_double_dash(redis_url, prefix):
    helped = subprocess.run([FERROLOCK, "run", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0
    usage = " ".join(helped.stdout.split("\n\n")[0].split())
    assert usage.startswith("usage: ferrolock run ") and usage.endswith("NAME -- CMD [ARGS ...]"), usage
    missing = run(redis_url, prefix, "run", "job")
    assert missing.returncode == cli.USAGE and "-- CMD" in missing.stderr
