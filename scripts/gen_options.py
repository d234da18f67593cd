"""Writes what the handle options' table (``src/py/options.rs``, read through
the built extension's ``_handle_options()``) gives the Python side: the
``TypedDict`` section of ``python/ferrolock/_ferrolock.pyi`` and the table in
``docs/api.md``. ``--check`` writes nothing and fails when either differs
(``tests/docs/test_options.py`` runs it). Run ``make options`` after changing the table.
"""

from __future__ import annotations

import pathlib
import re
import sys

from ferrolock._ferrolock import _handle_options

ROOT = pathlib.Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "ferrolock" / "_ferrolock.pyi"
DOCS = ROOT / "docs" / "api.md"

# kind in the table -> (TypedDict in the stub, what takes it, its column in the docs)
KINDS = {
    "lock": ("_LockOptions", "`Lock(...)`, `Client.lock`, `multi_lock`, `semaphore`, `synchronized`", "Lock"),
    "rwmutex": ("_RWMutexOptions", "`RWMutex(...)`, `Client.rwmutex`", "RWMutex"),
    "handle": ("_HandleOptions", "`RWMutex.read`, `write`, `try_read`, `try_write`", "read / write"),
}
BEGIN = "handle options: generated from src/py/options.rs by `make options`; do not edit"
END = "end of the generated handle options"


def stub_section() -> str:
    table = _handle_options()
    common = [(name, ty) for name, ty, _default, kinds, _doc in table if set(KINDS) <= set(kinds)]
    out = [
        f"# {BEGIN}",
        "",
        "class _CommonOptions(TypedDict, total=False):",
        '    """The keyword arguments every handle takes."""',
        "",
    ]
    out += [f"    {name}: {ty}" for name, ty in common]
    out.append("")
    for kind, (typed_dict, takers, _column) in KINDS.items():
        out.append(f"class {typed_dict}(_CommonOptions, total=False):")
        out.append(f'    """The keyword arguments of {takers.replace("`", "``")}."""')
        out.append("")
        out += [
            f"    {name}: {ty}"
            for name, ty, _default, kinds, _doc in table
            if kind in kinds and (name, ty) not in common
        ]
        out.append("")
    out.append(f"# {END}")
    return "\n".join(out)


def markdown(rest: str) -> str:
    """A docstring's reStructuredText markup, as Markdown: ``x`` and :meth:`x` become `x`."""
    return re.sub(r"(?::\w+:)?``?([^`]+)``?", r"`\1`", " ".join(rest.split()))


def docs_section() -> str:
    columns = [column for _typed_dict, _takers, column in KINDS.values()]
    head = [
        f"<!-- {BEGIN} -->",
        "",
        f"| option | type | default | {' | '.join(columns)} | what it does |",
        "|---|---|---|" + ":-:|" * len(columns) + "---|",
    ]
    rows = []
    for name, ty, default, kinds, doc in _handle_options():
        taken = " | ".join("✓" if kind in kinds else "" for kind in KINDS)
        rows.append(f"| `{name}` | `{ty.replace('_Seconds', 'float')}` | `{default}` | {taken} | {markdown(doc)} |")
    return "\n".join(head + rows + ["", f"<!-- {END} -->"])


def replaced(text: str, section: str, begin: str, end: str) -> str:
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"no generated section ({begin!r} ... {end!r}) found")
    return pattern.sub(lambda _: section, text, count=1)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, section, begin, end in (
        (STUB, stub_section(), f"# {BEGIN}", f"# {END}"),
        (DOCS, docs_section(), f"<!-- {BEGIN} -->", f"<!-- {END} -->"),
    ):
        old = path.read_text()
        new = replaced(old, section, begin, end)
        if new != old:
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.write_text(new)
    if check and stale:
        print(f"out of date with src/py/options.rs: {', '.join(stale)} (run `make options`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
