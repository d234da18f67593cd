"""Every ```python example in README.md, CONTRIBUTING.md and every page under
docs/ (subfolders included, so a new page is covered the day it is written)
runs, as written, against a throwaway redis-server (its URL put in place of
redis://127.0.0.1:6379/0) and leaves no key behind. A block indented under a
list item, an admonition or a content tab counts too. A block that shows a
signature or a user's test module rather than a program says so on the line
before its fence (<!-- not run: why -->); there are few.

Blocks of other languages (console sessions, text, output) are not run; the
commands they show are checked where they are documented (tests/integrations/test_cli.py
for the `ferrolock` command)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.helpers import wait_for
from support import ROOT

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLE_URL = "redis://127.0.0.1:6379/0"
NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s{]*)")
RUNNABLE = {"python", "py", "python3"}
MOST_NOT_RUN = 2
# Keys a Celery example's broker keeps by design (kombu's queue bindings): not locks.
BROKER_KEYS = re.compile(r"^_kombu\.")


def blocks(path: Path):
    """(line, info string, code, marked not-run) for every fenced block of `path`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        end = next(
            j
            for j in range(i + 1, len(lines))
            if lines[j].strip().startswith(fence) and not lines[j].strip()[len(fence) :].strip()
        )
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        code = textwrap.dedent("\n".join(lines[i + 1 : end]))
        yield i + 1, info, code, bool(NOT_RUN.match(before))
        i = end + 1


ALL = [(p.relative_to(ROOT).as_posix(), *b) for p in DOCS if p.exists() for b in blocks(p)]
EXAMPLES = [b for b in ALL if b[2] in RUNNABLE and not b[4]]


def test_every_page_was_read():
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS if p.exists()}
    assert {"README.md", "CONTRIBUTING.md", "docs/index.md", "docs/guide/lock.md"} <= pages, sorted(pages)
    assert {b[0] for b in EXAMPLES} >= {"README.md", "docs/guide/lock.md", "docs/integrations/fastapi.md"}
    assert len(EXAMPLES) >= 20, len(EXAMPLES)
    not_run = [(f, n) for f, n, info, _, skip in ALL if info in RUNNABLE and skip]
    assert len(not_run) <= MOST_NOT_RUN, f"keep the not-run blocks few: {not_run}"


def test_indented_blocks_are_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('=== "tab"\n\n    ```python\n    x = 1\n    if x:\n        pass\n    ```\n')
    assert list(blocks(page)) == [(3, "python", "x = 1\nif x:\n    pass", False)]


@pytest.mark.parametrize("path, line, info, code, _", EXAMPLES, ids=[f"{b[0]}:{b[1]}" for b in EXAMPLES])
def test_example_runs(path, line, info, code, _, redis_url, raw, tmp_path):
    assert EXAMPLE_URL in code, f"{path}:{line}: an example should connect to {EXAMPLE_URL}"
    before = set(raw.keys("*"))
    run = subprocess.run(
        [sys.executable, "-c", code.replace(EXAMPLE_URL, redis_url)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, f"{path}:{line} failed:\n{run.stdout}\n{run.stderr}"

    def left() -> list:
        return sorted(k for k in set(raw.keys("*")) - before if not BROKER_KEYS.match(k))

    # Some keys outlive a release by design and expire on their own: a released
    # quorum hold's fence record (about 100 ms, docs/design.md), python-redis-lock's
    # signal list (its signal_expire, 1 s by default). Wait those out, then
    # nothing may be left.
    wait_for(lambda: not left(), 3.0, f"{path}:{line} to leave no key behind")
