"""A program whose last step awaits ferrolock and then exits, exits cleanly.

The result of an awaited call is handed to asyncio from one of ferrolock's
threads; interpreter exit must wait for that thread to leave Python, or
Python tears it down mid-call and the process aborts (this failed about one
run in ten before `_at_exit` waited)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys
    import ferrolock

    async def main():
        client = ferrolock.Client(sys.argv[1], prefix=sys.argv[2])
        lock = client.lock("exit", ttl=5)
        await lock.aacquire()
        await lock.arelease()
        async with client.lock("exit-with", ttl=5):
            pass

    asyncio.run(main())
    """
)
RUNS = 30


@pytest.mark.slow
def test_exit_right_after_asyncio_is_clean(redis_url, prefix, raw):
    for run in range(RUNS):
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM, redis_url, prefix], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0 and done.stderr == "", f"run {run + 1}: exit code {done.returncode}\n{done.stderr}"
    assert raw.keys(prefix + "*") == []
