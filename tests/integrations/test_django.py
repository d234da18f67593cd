"""ferrolock.django: the test project in tests/django_project passes Django's
own test runner against the throwaway Redis; `manage.py check` passes with
Redis down; get_client() is one object per process and a fresh one in a
forked child; two runs of a guarded command never overlap (the second stops
with a CommandError naming the holder, or waits for its turn); a killed run's
lock frees within its ttl."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

import ferrolock
from ferrolock.django import get_client
from support.helpers import script_calls, wait_child, wait_for
from support import TESTS

PROJECT = TESTS / "django_project"
NIGHTLY = "django:command:nightly"
TTL = 3.0  # the guarded commands' ttl (tests/django_project/jobs/management/commands/nightly.py)


def project_env(url: str, prefix: str, **extra: str) -> dict:
    """The environment of a manage.py run of the test project against `url`."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "FERROLOCK_DJANGO_URL": url,
        "FERROLOCK_DJANGO_PREFIX": prefix,
        **extra,
    }


def manage(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout
    )


def start(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def dead_url() -> str:
    """A URL on a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def test_the_projects_tests_pass_under_djangos_test_runner(redis_url, prefix, client):
    run = subprocess.run(
        [sys.executable, "-m", "django", "test", "-v", "2"],
        cwd=PROJECT,
        env=project_env(redis_url, prefix),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    ran = re.search(r"^Ran (\d+) tests? in", run.stderr, re.M)
    assert ran and int(ran.group(1)) >= 11, run.stderr
    assert re.search(r"^OK$", run.stderr, re.M), run.stderr
    assert "System check identified no issues" in run.stdout


def test_manage_py_check_passes_while_redis_is_down_and_a_command_says_it_cannot_connect(prefix):
    env = project_env(dead_url(), prefix)
    check = manage("check", env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "System check identified no issues (0 silenced)." in check.stdout
    run = manage("nightly", env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "CommandError: nightly did not start: its lock 'django:command:nightly' could not be taken" in run.stderr
    assert "Traceback" not in run.stderr
    assert "ran in pid" not in run.stdout


def test_a_missing_or_invalid_setting_fails_the_check_naming_it(redis_url, prefix):
    missing = manage("check", env=project_env(redis_url, prefix, FERROLOCK_DJANGO_NO_SETTING="1"))
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert "(ferrolock.E001) the FERROLOCK setting is missing" in missing.stderr
    # Every command stops at the check before it runs.
    command = manage("nightly", env=project_env(redis_url, prefix, FERROLOCK_DJANGO_OPTIONS='{"ttl": 5}'))
    assert command.returncode == 1, command.stdout + command.stderr
    assert "(ferrolock.E001) FERROLOCK['OPTIONS'] has unknown option 'ttl'" in command.stderr
    assert "ran in pid" not in command.stdout


@pytest.fixture
def ferrolock_setting(redis_url, prefix):
    """FERROLOCK in this process's Django settings (configured once, empty), for this test."""
    if not settings.configured:
        settings.configure()
    with override_settings(FERROLOCK={"URL": redis_url, "OPTIONS": {"prefix": prefix}}):
        yield


def test_get_client_is_one_object_per_process_and_a_fresh_one_in_a_forked_child(ferrolock_setting, prefix):
    parent = get_client()
    assert isinstance(parent, ferrolock.Client)
    assert get_client() is parent
    assert parent.prefix == prefix
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a client of its own, kept for the child's later calls, that works
        code = 1
        try:
            child = get_client()
            with child.lock("forked", ttl=5.0):
                pass
            os.write(write, b"fresh" if child is not parent and get_client() is child else b"same")
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    assert wait_child(pid, 30) == 0
    with os.fdopen(read, "rb") as r:
        assert r.read() == b"fresh"
    assert get_client() is parent


def test_two_runs_at_once_one_runs_the_other_stops_naming_the_holder(redis_url, prefix, client, tmp_path):
    env = project_env(redis_url, prefix)
    gate = tmp_path / "gate"
    first = start("nightly", "--gate", str(gate), env=env)
    try:
        wait_for(lambda: Path(f"{gate}.started").exists() or first.poll() is not None, 60, "the first run to start")
        assert first.poll() is None, first.communicate()
        second = manage("nightly", env=env)
    finally:
        gate.touch()
        out, err = first.communicate(timeout=60)
    assert second.returncode == 1, second.stdout + second.stderr
    assert re.search(
        r"CommandError: nightly is already running \(lock 'django:command:nightly' held by "
        rf"manage.py nightly on .+, pid {first.pid}, since \S+\); this run did not start\.",
        second.stderr,
    ), second.stderr
    assert "ran in pid" not in second.stdout
    assert first.returncode == 0, out + err
    assert f"ran in pid {first.pid}" in out
    assert client.inspect(NIGHTLY) is None


def test_a_run_asked_to_wait_starts_when_the_run_in_progress_ends(server, prefix, tmp_path):
    holder = ferrolock.Client(server.url, prefix=prefix).lock(
        NIGHTLY, ttl=120.0, auto_renew=False, metadata="the run in progress"
    )
    assert holder.acquire(blocking=False)
    tried = script_calls(server)  # the holder sends no renewal: any script from now on is the waiter's
    waiting = start("nightly_waits", env=project_env(server.url, prefix))
    try:
        wait_for(lambda: script_calls(server) > tried or waiting.poll() is not None, 60, "the waiter's attempt")
        assert waiting.poll() is None, waiting.communicate()  # it tried, found the lock held, and waits
    finally:
        holder.release()
        out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, out + err
    assert f"ran in pid {waiting.pid}" in out


@pytest.mark.slow
def test_a_killed_run_frees_its_lock_within_its_ttl(redis_url, prefix, client, tmp_path):
    env = project_env(redis_url, prefix)
    gate = tmp_path / "gate"
    run = start("nightly", "--gate", str(gate), env=env)
    try:
        wait_for(lambda: Path(f"{gate}.started").exists() or run.poll() is not None, 60, "the run to start")
        assert run.poll() is None, run.communicate()
    finally:
        run.kill()  # SIGKILL: no clean-up runs
        run.communicate(timeout=60)
    assert run.returncode == -9
    held = client.inspect(NIGHTLY)
    if held is not None:  # still held, by the dead run, for at most its ttl
        assert f"pid {run.pid}," in (held.metadata or "")
        assert held.ttl is not None and 0 < held.ttl <= TTL
    wait_for(lambda: client.inspect(NIGHTLY) is None, TTL + 30, "the dead run's lock to expire")
    after = manage("nightly", env=env)
    assert after.returncode == 0, after.stdout + after.stderr


def test_a_run_interrupted_by_ctrl_c_releases_its_lock_at_once(redis_url, prefix, client, tmp_path):
    gate = tmp_path / "gate"
    run = start("nightly", "--gate", str(gate), env=project_env(redis_url, prefix))
    try:
        wait_for(lambda: Path(f"{gate}.started").exists() or run.poll() is not None, 60, "the run to start")
        assert run.poll() is None, run.communicate()
        assert client.inspect(NIGHTLY) is not None
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        gate.touch()
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0 and "KeyboardInterrupt" in err, err
    assert client.inspect(NIGHTLY) is None  # released on the way out, not left to its ttl


def test_single_instance_refuses_bad_arguments_when_it_decorates():
    from ferrolock.django import single_instance

    with pytest.raises(ValueError, match=r"single_instance\(wait=-1\): give 0"):
        single_instance(wait=-1)
    with pytest.raises(ValueError, match="wait=inf"):
        single_instance(wait=float("inf"))
    with pytest.raises(TypeError, match="wait=.... takes seconds as a number or None, not str"):
        single_instance(wait="5")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"name=...\) takes a str, not int"):
        single_instance(name=3)  # type: ignore[call-overload]
    with pytest.raises(ValueError):
        single_instance(name="")
    with pytest.raises(ValueError, match="ttl"):
        single_instance(ttl=0)
    with pytest.raises(TypeError, match="decorates a command's handle method, not int"):
        single_instance()(5)  # type: ignore[type-var]
