"""Writes the docstrings of the built extension (``ferrolock._ferrolock``,
written once as doc comments in ``src/py/``) into its type stubs,
``python/ferrolock/_ferrolock.pyi``, where IDEs and the documentation site
(mkdocstrings reads the stubs) find them.

Only docstrings are written: every class, function, method, property and
annotated attribute (after it, as mkdocstrings reads it) of
the stub gets the ``__doc__`` the built module has for it (none when it has
none), and the rest of the stub (signatures, types, comments) is kept as it
is, so it is edited by hand. ``--check`` writes nothing and fails when the
stub's docstrings differ (``tests/docs/test_stubs.py`` runs it). Run ``make stubs``
after changing a doc comment or adding a name to the stub.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import sys
from typing import Iterator, Optional

import ferrolock._ferrolock as native

ROOT = pathlib.Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "ferrolock" / "_ferrolock.pyi"
INDENT = "    "


def runtime_doc(owner: object, name: str) -> Optional[str]:
    """The docstring of ``owner.name`` in the built module, cleaned; ``None``
    when it has none of its own."""
    obj = inspect.getattr_static(owner, name, None)
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    # a slot nobody documented has the docstring Python gives it (``__eq__``: "Return self==value.")
    inherited = {getattr(getattr(base, name, None), "__doc__", None) for base in (object, type, BaseException)}
    if isinstance(owner, type) and doc in inherited:
        return None
    if isinstance(obj, type) and doc == getattr(obj.__base__, "__doc__", None):
        return None  # an exception class without a docstring of its own shows its base's
    return inspect.cleandoc(doc)


def docstring(doc: str, indent: str) -> list[str]:
    """``doc`` as the lines of a docstring indented by ``indent``."""
    if '"""' in doc:
        raise SystemExit(f'a docstring holds """, which a stub cannot: {doc[:60]!r}')
    quote = 'r"""' if "\\" in doc else '"""'
    lines = doc.split("\n")
    if len(lines) == 1 and len(indent) + len(quote) + len(doc) + 3 <= 110:
        return [f'{indent}{quote}{doc}"""']
    out = [f"{indent}{quote}{lines[0]}"]
    out += [f"{indent}{line}".rstrip() for line in lines[1:]]
    out.append(f'{indent}"""')
    return out


Def = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def documented(tree: ast.Module) -> Iterator[tuple[ast.AST, object, str]]:
    """Each class, function, method and property of the stub, with what it is
    found on in the built module and its name there."""
    for node in tree.body:
        if isinstance(node, Def) and hasattr(native, node.name):
            yield node, native, node.name
            if isinstance(node, ast.ClassDef):
                cls = getattr(native, node.name)
                for member in node.body:
                    if isinstance(member, Def) and not _is_setter(member):
                        yield member, cls, member.name
                    elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                        # an attribute whose type the stub spells with a descriptor
                        yield member, cls, member.target.id


def _is_setter(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in decorators)


def with_docstrings(text: str) -> str:
    """The stub ``text`` with each docstring replaced by the built module's."""
    lines = text.split("\n")
    edits: list[tuple[int, int, list[str]]] = []  # (first line, end line, replacement), 0-based, end exclusive
    tree = ast.parse(text)
    after = {id(m): nxt for n in ast.walk(tree) for m, nxt in zip(getattr(n, "body", []), getattr(n, "body", [])[1:])}
    for node, owner, name in documented(tree):
        doc = runtime_doc(owner, name)
        if isinstance(node, ast.AnnAssign):
            # its docstring is the string on the lines after it (read so by mkdocstrings and IDEs)
            nxt = after.get(id(node))
            new = docstring(doc, " " * node.col_offset) if doc is not None else []
            has_doc = (
                isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)
            )
            if has_doc:
                edits.append((nxt.lineno - 1, nxt.end_lineno, new))  # type: ignore[union-attr,arg-type]
            elif new:
                edits.append((node.end_lineno, node.end_lineno, new))  # type: ignore[arg-type]
            continue
        body = node.body  # type: ignore[attr-defined]
        indent = " " * node.col_offset + INDENT  # type: ignore[attr-defined]
        first = body[0]
        has_doc = (
            isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
        )
        is_ellipsis = (
            isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and (first.value.value is Ellipsis)
        )
        new = docstring(doc, indent) if doc is not None else []
        if new and isinstance(node, ast.ClassDef) and len(body) > 1 and body[1].lineno == first.end_lineno + 1:
            new.append("")  # a blank line between a class's docstring and its first member
        start, end = first.lineno - 1, first.end_lineno  # type: ignore[operator]
        same_line = first.col_offset != node.col_offset + len(INDENT)  # `def f(self) -> int: ...`
        if has_doc or (is_ellipsis and not same_line):
            if not new and len(body) == 1:
                new = [f"{indent}..."]
            if not new and not has_doc:
                continue  # a lone `...` among other members, nothing to write
            edits.append((start, end, new))
        elif is_ellipsis and same_line and new:
            # `def f(self) -> int: ...` -> the header, then the docstring
            header = lines[start][: first.col_offset].rstrip()
            edits.append((start, end, [header, *new]))
        elif new:
            edits.append((start, start, new))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    old = STUB.read_text()
    new = with_docstrings(old)
    if new == old:
        return 0
    if "--check" in argv:
        print(
            f"the docstrings of {STUB.relative_to(ROOT)} differ from the built module's (run `make stubs`)",
            file=sys.stderr,
        )
        return 1
    STUB.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
