"""ferrolock.celery's Singleton with a real Celery worker (`celery worker -P
solo`, a subprocess) on the test's redis-server as broker and result
backend: a duplicate gets the first's id and the body runs once; other
arguments run; a SIGKILLed worker's hold ends within lock_ttl; a revoked
queued task frees it; a task that outlives lock_ttl keeps it; a retry keeps
it; a task whose hold is lost is told; under the prefork pool, a terminated
task frees it."""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

celery = pytest.importorskip("celery", reason="celery comes with tests/requirements.txt")

from ferrolock.celery import DuplicateTask, Singleton  # noqa: E402
from support import TESTS  # noqa: E402
from support.helpers import wait_for  # noqa: E402

LIMIT = 60.0  # the most any step waits for the worker (a busy machine)


@pytest.fixture(scope="module")
def tasks(redis_url):
    """tests/support/celery_app.py, on the session's redis-server."""
    os.environ["CELERY_TEST_URL"] = redis_url
    try:
        sys.modules.pop("support.celery_app", None)
        yield importlib.import_module("support.celery_app")
    finally:
        del os.environ["CELERY_TEST_URL"]
        gc.collect()  # the AsyncResults' __del__ talk to the server: now, while it runs


UNACKED = ("unacked", "unacked_index")
"""The Redis transport's messages handed out and not yet acknowledged
(acks_late), which a worker hands out again after the visibility timeout."""


@pytest.fixture
def app(tasks, prefix, raw):
    """The app, its locks under this test's prefix; this test's keys deleted at its end."""
    tasks.app.conf.ferrolock_prefix = prefix
    tasks.app.control.purge()  # nothing left queued by an earlier test
    raw("DEL", *UNACKED)  # nor unacknowledged, to be handed out again
    yield tasks.app
    tasks.app.control.purge()
    raw("DEL", *UNACKED)
    # The test's AsyncResults go now, not when the collector next runs: in
    # the middle of a later result.get(), Celery 5.5's Redis backend
    # deadlocks on the unsubscribe their __del__ sends.
    gc.collect()
    for k in raw.keys(f"*{prefix}*"):
        raw("DEL", k)


class Worker:
    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc, self.log = proc, log

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def worker(app, redis_url, prefix, tmp_path, queue=None, pool="solo", name="worker", env=None):
    """A `celery -A support.celery_app worker -P solo` (on `queue`, else the default
    one; `env` added to its environment), killed at the end."""
    log = tmp_path / f"{name}.log"
    args = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "support.celery_app",
        "worker",
        "-P",
        pool,
        "-c",
        "1",
        "-l",
        "info",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-n",
        f"{name}.{prefix.strip(':')}@%h",
    ]
    if queue:
        args += ["-Q", queue]
    env = {**os.environ, "CELERY_TEST_URL": redis_url, "CELERY_TEST_PREFIX": prefix, **(env or {})}
    with open(log, "w") as out:
        proc = subprocess.Popen(args, cwd=TESTS, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    w = Worker(proc, log)
    try:
        wait_for(lambda: "ready." in w.text() or proc.poll() is not None, LIMIT, "the worker to start")
        assert proc.poll() is None, w.text()
        yield w
    finally:
        with contextlib.suppress(ProcessLookupError):  # gone already (a test killed it)
            os.killpg(proc.pid, signal.SIGKILL)  # the worker, and a prefork worker's child
        proc.wait(timeout=30)


def llen(raw, key: str) -> int:
    return raw("LLEN", key)


def started(raw, item: str) -> bool:
    return llen(raw, f"started:{item}") > 0


def open_gate(raw, item: str) -> None:
    raw("RPUSH", f"gate:{item}", "1")


def test_a_duplicate_gets_the_first_tasks_id_and_the_body_runs_once(
    app, tasks, client, raw, redis_url, prefix, tmp_path
):
    a, b = f"{prefix}a", f"{prefix}b"
    first = tasks.slow.delay(a)
    assert tasks.slow.delay(a).id == first.id
    assert tasks.slow.apply_async(kwargs={"item": a}).id == first.id, "bound to the signature: the same task"
    other = tasks.slow.delay(b)
    assert other.id != first.id, "other arguments: a task of its own"
    name = tasks.slow.lock_name(a)
    assert name.startswith("celery:support.celery_app.slow:") and len(name.rsplit(":", 1)[1]) == 32
    assert client.inspect(name).metadata == first.id
    with worker(app, redis_url, prefix, tmp_path):
        wait_for(lambda: started(raw, a), LIMIT, "the first task to start")
        assert tasks.slow.delay(a).id == first.id, "running: still the same task"
        open_gate(raw, a)
        open_gate(raw, b)
        assert first.get(timeout=LIMIT) == a
        assert other.get(timeout=LIMIT) == b
        # Released before the result was stored: the next one is a new task.
        assert client.inspect(name) is None
        assert llen(raw, f"ran:{a}") == 1 and llen(raw, f"started:{a}") == 1
        again = tasks.slow.delay(a)
        assert again.id != first.id
        open_gate(raw, a)
        assert again.get(timeout=LIMIT) == a
    assert llen(raw, f"ran:{a}") == 2
    assert client.inspect(name) is None and client.inspect(tasks.slow.lock_name(b)) is None


def test_raise_on_duplicate_and_unique_on(app, tasks, client, prefix):
    a = f"{prefix}a"
    first = tasks.strict.delay(a)
    with pytest.raises(DuplicateTask) as caught:
        tasks.strict.delay(a, note="")
    assert caught.value.task_id == first.id and caught.value.name == tasks.strict.lock_name(a)
    assert first.id in str(caught.value)
    by_item = tasks.by_item.delay(a, note="x")
    assert tasks.by_item.delay(a, note="y").id == by_item.id, "only `item` counts"
    assert tasks.by_item.lock_name(a, "x") == tasks.by_item.lock_name(a, "y") != tasks.strict.lock_name(a)
    # Held outside Celery (no task id in its metadata): refused, whatever raise_on_duplicate says.
    b = f"{prefix}b"
    other = client.lock(tasks.slow.lock_name(b))
    assert other.acquire()
    with pytest.raises(DuplicateTask) as caught:
        tasks.slow.delay(b)
    assert caught.value.task_id is None
    other.release()
    # No worker will run them: an operator takes the holds back.
    assert tasks.strict.unlock(a) and tasks.by_item.unlock(a, note="z")
    assert client.inspect(tasks.strict.lock_name(a)) is None
    assert client.inspect(tasks.by_item.lock_name(a)) is None


def test_a_sigkilled_workers_hold_ends_within_lock_ttl(app, tasks, client, raw, redis_url, prefix, tmp_path):
    a = f"{prefix}a"
    result = tasks.short.delay(a)
    name = tasks.short.lock_name(a)
    token = client.inspect(name).token
    with worker(app, redis_url, prefix, tmp_path) as w:
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        info = client.inspect(name)
        assert info.metadata == result.id and info.token != token, "the worker holds it under a token of its own"
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait(timeout=30)
        info = client.inspect(name)
        assert info is None or info.ttl <= tasks.short.lock_ttl, "nobody renews it past lock_ttl"
        wait_for(lambda: client.inspect(name) is None, LIMIT, "the killed worker's hold to end")
    assert llen(raw, f"ran:{a}") == 0


def test_a_revoked_queued_task_frees_its_hold(app, tasks, client, raw, redis_url, prefix, tmp_path):
    a = f"{prefix}a"
    result = tasks.slow.delay(a)
    name = tasks.slow.lock_name(a)
    assert client.inspect(name) is not None
    # The worker listens on another queue until it knows of the revoke, so
    # the task is still queued then; it discards it when it receives it.
    with worker(app, redis_url, prefix, tmp_path, queue=f"{prefix}idle"):

        def revoked() -> bool:
            return bool(app.control.revoke(result.id, reply=True, timeout=1.0, limit=1))

        wait_for(revoked, LIMIT, "the worker to confirm the revoke")
        assert app.control.add_consumer(app.conf.task_default_queue, reply=True, timeout=LIMIT, limit=1)
        wait_for(lambda: client.inspect(name) is None, LIMIT, "the revoked task's hold to go")
    assert tasks.slow.lock_ttl > 5 * LIMIT, "freed by the revoke, not by its ttl"
    assert result.state == "REVOKED"
    assert not started(raw, a)


def test_a_task_that_outlives_lock_ttl_keeps_its_hold(app, tasks, client, raw, redis_url, prefix, tmp_path):
    a = f"{prefix}a"
    result = tasks.short.delay(a)
    name = tasks.short.lock_name(a)
    with worker(app, redis_url, prefix, tmp_path):
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        token = client.inspect(name).token
        until = time.monotonic() + 3 * tasks.short.lock_ttl
        while time.monotonic() < until:  # three ttls: held by the same token throughout
            info = client.inspect(name)
            assert info is not None and info.token == token
            time.sleep(0.05)  # sampling over three ttls
        assert tasks.short.delay(a).id == result.id
        open_gate(raw, a)
        assert result.get(timeout=LIMIT) == a
    assert client.inspect(name) is None


def test_a_retry_keeps_the_hold(app, tasks, client, raw, redis_url, prefix, tmp_path):
    a = f"{prefix}a"
    result = tasks.flaky.delay(a)
    name = tasks.flaky.lock_name(a)
    enqueued = client.inspect(name)
    with worker(app, redis_url, prefix, tmp_path):
        wait_for(lambda: started(raw, f"{a}:0"), LIMIT, "the first attempt to start")
        first = client.inspect(name)
        assert first.token != enqueued.token, "the worker took the hold over under a token of its own"
        open_gate(raw, f"{a}:0")
        wait_for(lambda: started(raw, f"{a}:1"), LIMIT, "the retry to start")
        info = client.inspect(name)
        # The worker's take-over recorded a fence (the enqueued hold's, taken
        # by a transaction, was not yet): the retry keeps it.
        assert first.fence > enqueued.fence
        assert info.fence == first.fence and info.metadata == result.id, "the retry holds the same hold"
        assert info.token not in (enqueued.token, first.token), "taken over from the retry's message in turn"
        assert tasks.flaky.delay(a).id == result.id
        open_gate(raw, f"{a}:1")
        assert result.get(timeout=LIMIT) == a
    assert client.inspect(name) is None


def test_a_task_whose_hold_is_lost_is_told(app, tasks, client, raw, redis_url, prefix, tmp_path):
    a = f"{prefix}a"
    result = tasks.told.delay(a)
    name = tasks.told.lock_name(a)
    with worker(app, redis_url, prefix, tmp_path):
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        assert client.force_release(name)
        open_gate(raw, a)
        with pytest.raises(Exception) as caught:
            result.get(timeout=LIMIT)
    assert type(caught.value).__name__ == "LockLost" and name in str(caught.value)
    assert raw("LRANGE", f"lost:{a}", 0, -1) == [b"1"], "the body saw it lost"
    assert client.inspect(name) is None


def _body(item):
    return item


def test_bad_options_and_arguments_are_refused_with_the_fix(tasks):
    app = celery.Celery("bad", broker="redis://127.0.0.1:1/0")
    app.finalize()  # the task classes are made at once, not at their first use
    with pytest.raises(ValueError, match="unique_on names \\['nope'\\]"):
        app.task(base=Singleton, unique_on=["nope"], name="bad.a", shared=False)(_body)
    with pytest.raises(ValueError, match="lock_ttl"):
        app.task(base=Singleton, lock_ttl=0, name="bad.b", shared=False)(_body)
    with pytest.raises(TypeError, match="raise_on_duplicate"):
        app.task(base=Singleton, raise_on_duplicate=1, name="bad.c", shared=False)(_body)
    with pytest.raises(TypeError, match="unique_on must be a list"):
        app.task(base=Singleton, unique_on="item", name="bad.e", shared=False)(_body)
    with pytest.raises(TypeError, match="JSON-serializable.*unique_on"):
        tasks.slow.lock_name(object())
    with pytest.raises(TypeError):
        tasks.slow.lock_name("a", "b", "c")
    other = celery.Celery("amqp-app", broker="amqp://127.0.0.1:1//")
    other.finalize()
    task = other.task(base=Singleton, name="bad.d", shared=False)(_body)
    with pytest.raises(ValueError, match="ferrolock_url"):
        task.delay(1)


def test_a_task_sent_by_name_takes_the_lock_in_the_worker(app, tasks, client, raw, redis_url, prefix, tmp_path):
    """A message without a hold (send_task: no enqueue side) takes the lock
    when it starts, and releases it at its end."""
    a = f"{prefix}a"
    name = tasks.slow.lock_name(a)
    sent = app.send_task("support.celery_app.slow", args=[a])
    assert client.inspect(name) is None
    with worker(app, redis_url, prefix, tmp_path):
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        assert client.inspect(name).metadata == sent.id
        assert tasks.slow.delay(a).id == sent.id
        open_gate(raw, a)
        assert sent.get(timeout=LIMIT) == a
    assert client.inspect(name) is None
    assert llen(raw, f"ran:{a}") == 1


def test_a_task_queued_past_lock_ttl(app, tasks, client, raw, redis_url, prefix, tmp_path):
    """Its hold runs out in the queue: a duplicate enqueued then is a task of
    its own and holds the name, so the older one fails unrun when it starts
    and the newer one runs; a task whose hold ran out and nobody took takes
    the free name and runs."""
    a, b = f"{prefix}a", f"{prefix}b"
    older = tasks.short.delay(a)
    alone = tasks.short.delay(b)
    for item in (a, b):
        wait_for(lambda: client.inspect(tasks.short.lock_name(item)) is None, LIMIT, "the queued hold to run out")
    newer = tasks.short.delay(a)
    assert newer.id != older.id
    # The newer's queued hold is kept past the worker's start, however long a busy machine takes.
    client.lock(tasks.short.lock_name(a), token=client.inspect(tasks.short.lock_name(a)).token).extend(LIMIT)
    open_gate(raw, a)
    with worker(app, redis_url, prefix, tmp_path):
        with pytest.raises(DuplicateTask) as caught:
            older.get(timeout=LIMIT)
        assert caught.value.task_id == newer.id
        wait_for(lambda: started(raw, b), LIMIT, "the task whose hold ran out to start")
        assert client.inspect(tasks.short.lock_name(b)).metadata == alone.id
        open_gate(raw, b)
        assert alone.get(timeout=LIMIT) == b
        assert newer.get(timeout=LIMIT) == a
    assert llen(raw, f"ran:{a}") == 1


def test_under_the_prefork_pool_a_terminated_task_frees_its_hold(app, tasks, client, raw, redis_url, prefix, tmp_path):
    """The task runs in a forked child (with a Client of its own); revoked
    with terminate=True, the child is killed and the worker releases the hold."""
    a, b = f"{prefix}a", f"{prefix}b"
    done = tasks.slow.delay(b)
    result = tasks.slow.delay(a)
    name = tasks.slow.lock_name(a)
    open_gate(raw, b)
    with worker(app, redis_url, prefix, tmp_path, pool="prefork"):
        assert done.get(timeout=LIMIT) == b
        assert client.inspect(tasks.slow.lock_name(b)) is None
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        assert client.inspect(name).metadata == result.id
        app.control.revoke(result.id, terminate=True, signal="SIGKILL")
        wait_for(lambda: client.inspect(name) is None, LIMIT, "the terminated task's hold to go")
        assert tasks.slow.lock_ttl > 5 * LIMIT, "freed by the revoke, not by its ttl"
        wait_for(lambda: result.state == "REVOKED", LIMIT, "the task to be marked revoked")
    assert llen(raw, f"ran:{a}") == 0


def ran_up(raw, prefix, task_id: str) -> bool:
    """Whether a worker took up the message of `task_id` (its body runs or not)."""
    return llen(raw, f"{prefix}prerun:{task_id}") > 0


def end_states(raw, prefix, task_id: str) -> list:
    """How each delivery of `task_id` ended in a worker (SUCCESS, IGNORED...)."""
    return [s.decode() for s in raw("LRANGE", f"{prefix}postrun:{task_id}", 0, -1)]


def test_a_group_a_chord_and_a_chain_holding_a_duplicate_complete_with_the_first_tasks_result(
    app, tasks, client, raw, redis_url, prefix, tmp_path
):
    """Each canvas member is sent with its own id: a duplicate is sent too,
    waits in its worker for the first task's result and returns it, so the
    canvas completes (the chord's body runs, the chain goes on) and the body
    runs once. One worker runs the first task, the other the duplicate."""

    def while_the_first_runs(item, send, duplicate_of):
        first = tasks.slow.delay(item)
        wait_for(lambda: started(raw, item), LIMIT, f"the first slow({item}) to start")
        sent = send()
        duplicate = duplicate_of(sent)
        assert duplicate.id != first.id, "the member keeps the id the canvas gave it"
        wait_for(lambda: ran_up(raw, prefix, duplicate.id), LIMIT, "the duplicate to be taken up")
        assert tasks.slow.delay(item).id == first.id, "a plain duplicate is still the first task"
        open_gate(raw, item)
        assert first.get(timeout=LIMIT) == item
        return sent, duplicate

    a, b, c, d, e = (f"{prefix}{x}" for x in "abcde")
    with worker(app, redis_url, prefix, tmp_path, name="w0"), worker(app, redis_url, prefix, tmp_path, name="w1"):
        group, duplicate = while_the_first_runs(
            a, lambda: celery.group(tasks.slow.s(a), tasks.slow.s(b)).apply_async(), lambda g: g.results[0]
        )
        open_gate(raw, b)
        assert group.get(timeout=LIMIT) == [a, b]
        assert duplicate.state == "SUCCESS" and duplicate.result == a
        chord, _ = while_the_first_runs(
            c,
            lambda: celery.chord([tasks.slow.s(c), tasks.slow.s(d)], tasks.echo.s()).apply_async(),
            lambda ch: ch.parent.results[0],
        )
        open_gate(raw, d)
        assert chord.get(timeout=LIMIT) == [c, d], "the chord's body ran, with the first's result for the duplicate"
        chain, _ = while_the_first_runs(
            e,
            lambda: celery.chain(tasks.echo.s(e), tasks.slow.s(), tasks.exclaim.s()).apply_async(),
            lambda ch: ch.parent,
        )
        assert chain.get(timeout=LIMIT) == f"{e}!", "the chain went on from the first's result"
    for item in (a, c, e):
        assert llen(raw, f"ran:{item}") == 1 and llen(raw, f"started:{item}") == 1, f"slow({item}) ran once"
        assert client.inspect(tasks.slow.lock_name(item)) is None


def test_a_duplicate_in_a_canvas_gets_the_first_tasks_failure(app, tasks, raw, redis_url, prefix, tmp_path):
    a = f"{prefix}a"
    first = tasks.fails.delay(a)
    grouped = celery.group(tasks.fails.s(a)).apply_async()  # while the first is queued
    open_gate(raw, a)
    with worker(app, redis_url, prefix, tmp_path):
        with pytest.raises(ValueError, match=f"{a} failed"):
            grouped.get(timeout=LIMIT)
        duplicate = grouped.results[0]
        assert duplicate.id != first.id and duplicate.state == "FAILURE"
        assert first.state == "FAILURE"
    assert llen(raw, f"ran:{a}") == 1


def test_a_duplicate_in_a_canvas_runs_itself_when_the_first_tasks_worker_died(
    app, tasks, client, raw, redis_url, prefix, tmp_path
):
    """No result will come: once the dead worker's hold has run out, and no
    result came for lock_ttl more, the member takes the name and runs the
    body itself, so the canvas still completes."""
    a = f"{prefix}a"
    first = tasks.short.delay(a)
    name = tasks.short.lock_name(a)
    with worker(app, redis_url, prefix, tmp_path, name="w0") as doomed:
        wait_for(lambda: started(raw, a), LIMIT, "the first task to start")
        with worker(app, redis_url, prefix, tmp_path, name="w1"):
            grouped = celery.group(tasks.short.s(a)).apply_async()
            duplicate = grouped.results[0]
            wait_for(lambda: ran_up(raw, prefix, duplicate.id), LIMIT, "the duplicate to be taken up")
            doomed.proc.send_signal(signal.SIGKILL)
            doomed.proc.wait(timeout=30)
            wait_for(lambda: llen(raw, f"started:{a}") == 2, LIMIT, "the duplicate to run the body itself")
            assert client.inspect(name).metadata == duplicate.id
            open_gate(raw, a)
            assert grouped.get(timeout=LIMIT) == [a]
    assert first.state == "PENDING", "the first task, killed, has no result"
    assert llen(raw, f"ran:{a}") == 1
    assert client.inspect(name) is None


def test_a_duplicate_in_a_canvas_whose_result_is_not_stored_is_refused_at_once(app, tasks, client, prefix):
    """The member would wait for a result that never comes: sending the
    canvas raises DuplicateTask instead, and nothing is sent."""
    a = f"{prefix}a"
    first = tasks.quiet.delay(a)
    with pytest.raises(DuplicateTask, match="ignore_result") as caught:
        celery.group(tasks.quiet.s(a)).apply_async()
    assert caught.value.task_id == first.id
    assert tasks.quiet.delay(a).id == first.id, "a plain duplicate is still the first task"
    assert tasks.quiet.unlock(a)


REDELIVERING = {"CELERY_TEST_VISIBILITY": "1"}


def test_a_message_redelivered_while_its_task_runs_is_skipped(app, tasks, client, raw, redis_url, prefix, tmp_path):
    """acks_late, and the task runs past the broker's visibility timeout:
    the broker hands its message to the other worker, whose copy finds the
    hold under the running worker's token and skips (acknowledged, nothing
    stored) instead of running the body beside the first."""
    a = f"{prefix}a"
    result = tasks.late.delay(a)
    name = tasks.late.lock_name(a)
    enqueued = client.inspect(name)
    with worker(app, redis_url, prefix, tmp_path, name="w0", env=REDELIVERING):
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        running = client.inspect(name)  # (its queued hold may have run out first: then it took the free name)
        with worker(app, redis_url, prefix, tmp_path, name="w1", env=REDELIVERING):
            wait_for(
                lambda: end_states(raw, prefix, result.id) or llen(raw, f"started:{a}") > 1,
                LIMIT,
                "the redelivered message to be handled",
            )
            assert llen(raw, f"started:{a}") == 1, "the redelivered message ran the body beside the first"
            assert end_states(raw, prefix, result.id) == ["IGNORED"]
            assert running.token != enqueued.token and running.metadata == result.id, "the worker's own token"
            assert client.inspect(name).token == running.token, "the running worker still holds it"
            assert result.state == "PENDING", "the skipped copy stored nothing"
            open_gate(raw, a)
            assert result.get(timeout=LIMIT) == a
    assert llen(raw, f"ran:{a}") == 1
    assert client.inspect(name) is None


def test_a_message_redelivered_after_its_worker_died_runs_once_the_hold_ran_out(
    app, tasks, client, raw, redis_url, prefix, tmp_path
):
    """acks_late, and the worker is killed while the task runs: the broker
    hands the message out again, and the copy takes the name as the dead
    worker's hold runs out (within lock_ttl) and runs the body."""
    a = f"{prefix}a"
    result = tasks.late.delay(a)
    name = tasks.late.lock_name(a)
    with worker(app, redis_url, prefix, tmp_path, name="w0", env=REDELIVERING) as doomed:
        wait_for(lambda: started(raw, a), LIMIT, "the task to start")
        doomed.proc.send_signal(signal.SIGKILL)
        doomed.proc.wait(timeout=30)
    with worker(app, redis_url, prefix, tmp_path, name="w1", env=REDELIVERING):
        wait_for(lambda: llen(raw, f"started:{a}") == 2, LIMIT, "the redelivered message to run the body")
        assert client.inspect(name).metadata == result.id
        open_gate(raw, a)
        assert result.get(timeout=LIMIT) == a
    assert llen(raw, f"ran:{a}") == 1
    assert client.inspect(name) is None
