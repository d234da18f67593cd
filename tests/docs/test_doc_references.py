"""Every test the documentation names exists, so a promise cannot keep citing
a test that was renamed or deleted: each `tests/...` path in README.md,
CONTRIBUTING.md and docs/ (subfolders included) is a file, and each
`test_...` name is a test function of the suite (or a test module), checked
against the file it is written beside when the text names one
(`tests/core/test_x.py::test_y`, `test_x.py::test_y` by its file name alone,
or `::test_z` after it). Each `src/...` path the
prose cites (outside fenced blocks) is a file or folder of the source tree,
so a module moved to another layer cannot leave its old path behind."""

from __future__ import annotations

import re

from support import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCE = re.compile(r"(?<![\w/.])src/[\w./-]*\w(?![\w*./-])")
PATH = re.compile(r"(?<![\w/.])tests/[\w./-]*\w(?![\w*./-])")  # not a glob (tests/core/test_*.py)
# `file.py::test_name`, `::test_name` (the file named last), or a bare `test_name`
NAME = re.compile(r"(?:(?P<file>(?:tests/)?[\w/]*test_\w+\.py)?::)?(?P<name>\btest_\w+)")
DEF = re.compile(r"^\s*(?:async\s+)?def\s+(test_\w+)", re.M)
# A fenced block is an example (a user's own tests, say), not a reference.
CODE = re.compile(r"^(\s*)(```+|~~~+).*?^\1\2\s*$", re.M | re.S)


def defined() -> dict:
    """test name -> the test files (relative to tests/) that define it."""
    found: dict = {}
    for f in (ROOT / "tests").rglob("*.py"):
        for name in DEF.findall(f.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(f.relative_to(ROOT / "tests").as_posix())
    return found


def references():
    """(page, path or name, the test file it is written beside or None)."""
    for page in PAGES:
        text = CODE.sub("", page.read_text(encoding="utf-8"))
        rel = page.relative_to(ROOT).as_posix()
        for m in PATH.finditer(text):
            yield rel, m.group(), None
        last_file = None
        for m in NAME.finditer(text):
            name, file = m.group("name"), m.group("file")
            if file:
                last_file = file.removeprefix("tests/")
            elif not m.group().startswith("::"):
                last_file = None
            if name.endswith("_py") or text[m.end("name") : m.end("name") + 3] == ".py":
                continue  # a module named in prose (`test_x.py`), checked as a path below
            yield rel, name, last_file if m.group().startswith("::") or file else None


def test_every_named_test_file_exists():
    missing = sorted(
        {
            (page, path)
            for page, path, _ in references()
            if path.startswith("tests/") and not (ROOT / path).exists() and not (ROOT / (path + ".py")).exists()
        }
    )
    assert not missing, missing


def test_every_named_test_exists_in_its_file():
    tests = defined()
    modules = {p.stem for p in (ROOT / "tests").rglob("test_*.py")}
    wrong = []
    for page, name, file in references():
        if name.startswith("tests/"):
            continue
        if name in modules:
            continue  # a test module named without .py
        where = tests.get(name)
        if not where or (file and not any(w == file or w.endswith("/" + file) for w in where)):
            wrong.append((page, f"{file}::{name}" if file else name, sorted(where or ())))
    assert not wrong, wrong


def test_a_renamed_test_would_be_caught():
    assert any(name == "test_loss_by_takeover" for _, name, _ in references())
    assert "core/test_watchdog.py" in defined()["test_loss_by_takeover"]
    assert "test_no_such_test_anywhere" not in defined()


def test_every_cited_source_path_exists():
    cited = {
        (page.relative_to(ROOT).as_posix(), m.group())
        for page in [*PAGES, ROOT / "lua" / "README.md"]
        for m in SOURCE.finditer(CODE.sub("", page.read_text(encoding="utf-8")))
    }
    assert cited, "no source path found: the pattern is wrong"
    missing = sorted((page, path) for page, path in cited if not (ROOT / path).exists())
    assert not missing, missing
