"""Every ```python example in README.md and docs/ (subfolders too) runs, as written, against
a throwaway redis-server (its URL put in place of redis://127.0.0.1:6379/0)
and leaves no key behind. A block that shows signatures rather than a program
says so on the line before its fence (<!-- not run: why -->); there are few."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import wait_for

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLE_URL = "redis://127.0.0.1:6379/0"
NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")
RUNNABLE = {"python", "py", "python3"}
MOST_NOT_RUN = 2


def blocks():
    """(file, line, info string, code, marked not-run) for every fenced block."""
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^(```+|~~~+)\s*(\S*)", lines[i])
            if not m:
                i += 1
                continue
            fence, info = m.groups()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence))
            before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            yield path.relative_to(ROOT).as_posix(), i + 1, info, "\n".join(lines[i + 1:end]), bool(
                NOT_RUN.match(before))
            i = end + 1


EXAMPLES = [b for b in blocks() if b[2] in RUNNABLE and not b[4]]


def test_examples_were_found():
    assert len(EXAMPLES) >= 2, EXAMPLES
    not_run = [(f, n) for f, n, info, _, skip in blocks() if info in RUNNABLE and skip]
    assert len(not_run) <= MOST_NOT_RUN, f"keep the not-run blocks few: {not_run}"


@pytest.mark.parametrize("path, line, info, code, _", EXAMPLES, ids=[f"{b[0]}:{b[1]}" for b in EXAMPLES])
def test_example_runs(path, line, info, code, _, redis_url, raw, tmp_path):
    assert EXAMPLE_URL in code, f"{path}:{line}: an example should connect to {EXAMPLE_URL}"
    before = raw.keys("ferrolock:*")  # the examples use the default prefix; no test does
    run = subprocess.run([sys.executable, "-c", code.replace(EXAMPLE_URL, redis_url)], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, f"{path}:{line} failed:\n{run.stdout}\n{run.stderr}"
    # A released quorum hold's fence stays until the server clock passes it
    # (about 100 ms, docs/design.md): wait that out, then nothing may be left.
    wait_for(lambda: raw.keys("ferrolock:*") == before, 1.0, f"{path}:{line} to leave no key behind")
