"""The runnable examples in examples/ (each starts its own redis-server,
or uses REDIS_URL) run to the end and report success."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support import ROOT

EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize("script", ["limit_api_calls.py", "leader_cron.py"])
def test_example_runs(script, redis_url):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "REDIS_URL": redis_url},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("OK"), done.stdout
