"""Type checkers over tests/typing/sample.py: what must pass passes (a
``return`` inside ``with campaign(...)``, ``client.lock("x").name.upper()``,
``acquire(blocking=0)``, a hashable ``Retry``), and every line marked with an
ignore comment is an error they report (a misspelt or mistyped option of
every factory, a tuple name used as a str): with ``--warn-unused-ignores``,
an ignore the checker does not need fails the run."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from support import TESTS

SAMPLE = TESTS / "typing" / "sample.py"


def test_mypy_strict_agrees_with_the_sample(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--strict", "--warn-unused-ignores", str(SAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found in 1 source file" in out.stdout


def test_pyright_agrees_with_the_sample(tmp_path):
    """basedpyright (pyright's engine, shipped with its own Node.js on PyPI)
    in pyright's standard mode, honouring the same ignore comments and
    reporting those it does not need."""
    (tmp_path / "pyrightconfig.json").write_text(
        json.dumps(
            {
                "typeCheckingMode": "standard",
                "enableTypeIgnoreComments": True,
                "reportUnnecessaryTypeIgnoreComment": "error",
                "pythonVersion": "3.9",
            }
        )
    )
    checker = pathlib.Path(sys.executable).parent / "basedpyright"
    assert checker.exists(), "basedpyright comes with tests/requirements.txt"
    out = subprocess.run(
        [str(checker), "--project", str(tmp_path), "--pythonpath", sys.executable, str(SAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 errors, 0 warnings" in out.stdout
