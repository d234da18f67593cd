"""The Celery app of tests/integrations/test_celery.py, imported by the test and by the
worker it starts (`celery -A support.celery_app worker -P solo`, from tests/):
broker, result backend and locks on the test's redis-server
(CELERY_TEST_URL), lock keys under the test's prefix (CELERY_TEST_PREFIX).

Each task records in Redis that it started and that it ran, and waits for
the test to open its gate (a list it pushes to) before it ends. Every task
the worker takes up, Singleton or not, records its start and its end state
under its id (`<prefix>prerun:<id>`, `<prefix>postrun:<id>`), so a test sees
a message that runs no body. A worker started with CELERY_TEST_VISIBILITY
(seconds) has the broker hand out again a message left unacknowledged that
long (kombu's visibility_timeout), looking every 0.2 s."""

from __future__ import annotations

import os
import time

from celery import Celery, signals

from ferrolock.celery import Singleton
from ferrolock.throwaway import Raw

URL = os.environ.get("CELERY_TEST_URL", "redis://127.0.0.1:6379/0")

app = Celery("support.celery_app", broker=URL, backend=URL)
app.conf.ferrolock_prefix = os.environ.get("CELERY_TEST_PREFIX")
app.conf.broker_connection_retry_on_startup = True
app.conf.result_extended = True
if os.environ.get("CELERY_TEST_VISIBILITY"):
    app.conf.broker_transport_options = {
        "visibility_timeout": float(os.environ["CELERY_TEST_VISIBILITY"]),
        "unacked_restore_interval": 0.2,
        "unacked_restore_throttle": 1,
    }

GATE_LIMIT = 60.0


def _work(item: str) -> str:
    """Says it started, waits for the gate of `item`, says it ran."""
    raw = Raw(URL)
    raw("RPUSH", f"started:{item}", "1")
    deadline = time.monotonic() + GATE_LIMIT
    while not raw("BLPOP", f"gate:{item}", "1"):  # a blocking wait, one second at a time
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gate of {item} was never opened")
    raw("RPUSH", f"ran:{item}", "1")
    return item


@app.task(base=Singleton, lock_ttl=600)
def slow(item: str) -> str:
    return _work(item)


@app.task(base=Singleton, lock_ttl=600, raise_on_duplicate=True)
def strict(item: str, note: str = "") -> str:
    return _work(item)


@app.task(base=Singleton, lock_ttl=600, unique_on=["item"])
def by_item(item: str, note: str = "") -> str:
    return _work(item)


@app.task(base=Singleton, lock_ttl=2)
def short(item: str) -> str:
    return _work(item)


@app.task(base=Singleton, lock_ttl=2, bind=True)
def told(self, item: str) -> str:
    """Waits for its gate, then until it sees its hold lost; says it saw it."""
    _work(item)
    hold = self.request.singleton
    deadline = time.monotonic() + GATE_LIMIT
    while not hold.lost and time.monotonic() < deadline:
        time.sleep(0.01)  # `lost` is a property with no blocking wait in a sync task: polled
    Raw(URL)("RPUSH", f"lost:{item}", "1" if hold.lost else "0")
    return item


@app.task(base=Singleton, lock_ttl=600, bind=True)
def flaky(self, item: str) -> str:
    """Fails its first attempt (after its first gate) and retries."""
    attempt = self.request.retries
    _work(f"{item}:{attempt}")
    if attempt == 0:
        raise self.retry(countdown=0)
    return item


@app.task(base=Singleton, lock_ttl=2, acks_late=True)
def late(item: str) -> str:
    """Acknowledged when it ends: the broker hands its message out again
    while it runs past the visibility timeout, or after its worker died."""
    return _work(item)


@app.task(base=Singleton, lock_ttl=600)
def fails(item: str) -> str:
    _work(item)
    raise ValueError(f"{item} failed")


@app.task(base=Singleton, lock_ttl=600, ignore_result=True)
def quiet(item: str) -> str:
    return _work(item)


@app.task
def echo(value):
    return value


@app.task
def exclaim(value: str) -> str:
    return f"{value}!"


def _record(what: str, task_id: str, value: str) -> None:
    Raw(URL)("RPUSH", f"{app.conf.ferrolock_prefix or ''}{what}:{task_id}", value)


@signals.task_prerun.connect
def _started(task_id=None, **_):
    _record("prerun", task_id, "1")


@signals.task_postrun.connect
def _ended(task_id=None, state=None, **_):
    _record("postrun", task_id, state or "")
