"""A hold's metadata reads back as it was given: "" as "", none as None, for
every kind that stores it, through every reader (Lock.inspect,
Client.inspect / describe / scan, the command line's JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support.helpers import wait_for

FERROLOCK = str(Path(sys.executable).parent / "ferrolock")


def taken(client, kind: str, name: str, **options):
    if kind == "lock":
        handle = client.lock(name, **options)
    elif kind == "fair":
        handle = client.lock(name, fair=True, **options)
    elif kind == "multi":
        handle = client.multi_lock([name, name + "-b"], **options)
    elif kind == "writer":
        handle = client.rwmutex(name).write(**options)
    elif kind == "fair-writer":
        handle = client.rwmutex(name, fair=True).write(**options)
    else:
        handle = client.semaphore(name, 2, **options)
    assert handle.acquire(blocking=False)
    return handle


KINDS = ["lock", "fair", "multi", "writer", "fair-writer", "permit"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("given", ["", None, "w-7"])
def test_metadata_reads_back_as_given(client, kind, given):
    options = {} if given is None else {"metadata": given}
    handle = taken(client, kind, f"m-{kind}", **options)
    assert [info.metadata for info in handle.inspect() if info is not None][0] == given
    (state,) = client.describe(f"m-{kind}")
    assert [h.metadata for h in state.holders] == [given]
    assert [h.metadata for s in client.scan(f"m-{kind}") for h in s.holders] == [given]
    if kind in ("lock", "fair", "multi"):
        assert client.inspect(f"m-{kind}").metadata == given
    handle.release()


FAIR_KINDS = ["fair", "fair-writer", "fair-permit"]


def fair_handle(client, kind: str, name: str, **options):
    if kind == "fair":
        return client.lock(name, fair=True, **options)
    if kind == "fair-writer":
        return client.rwmutex(name, fair=True).write(**options)
    return client.semaphore(name, 1, fair=True, **options)


@pytest.mark.parametrize("kind", FAIR_KINDS)
@pytest.mark.parametrize("given", ["", None, "w-7"])
def test_a_hold_handed_over_reads_back_the_metadata_its_waiter_gave(client, kind, given):
    """A fair release hands the hold to the next waiter in its own script:
    the new holder's metadata is what that waiter gave (none as None), never
    the last holder's, nor a placeholder of the hand-over."""
    name = f"handed-{kind}"
    first = fair_handle(client, kind, name, metadata="first")
    assert first.acquire(blocking=False)
    second = fair_handle(client, kind, name, **({} if given is None else {"metadata": given}))
    got = []
    thread = threading.Thread(target=lambda: got.append(second.acquire(timeout=30)))
    thread.start()
    wait_for(lambda: client.describe(name)[0].waiters == 1, 30, "the second to queue")
    first.release()
    thread.join(30)
    assert got == [True]
    (state,) = client.describe(name)
    assert [(h.token, h.metadata) for h in state.holders] == [(second.token, given)]
    assert [info.metadata for info in second.inspect() if info is not None] == [given]
    second.release()


def test_the_command_line_shows_empty_and_missing_metadata_apart(client, redis_url, prefix):
    empty, none = taken(client, "lock", "cli-empty", metadata=""), taken(client, "lock", "cli-none")
    out = subprocess.run(
        [FERROLOCK, "--url", redis_url, "--prefix", prefix, "ls", "--json"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    shown = {s["name"]: s["holder"]["metadata"] for s in json.loads(out.stdout)}
    assert shown == {"cli-empty": "", "cli-none": None}
    empty.release()
    none.release()
