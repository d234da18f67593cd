"""Every public name is documented where people read it: ``help()`` (the built
module's docstrings, written once as doc comments in ``src/py/``), the type
stubs (where IDEs read them; ``scripts/gen_stubs.py`` copies them there) and
the API reference (``docs/api.md``, which mkdocstrings renders from the
stubs and the package's sources, as griffe reads them)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
import types

import pytest

import ferrolock
import ferrolock.celery
import ferrolock.compat
import ferrolock.compat.redis_py
import ferrolock.compat.redis_py.asyncio
import ferrolock.django
import ferrolock.exceptions
import ferrolock.fencing
import ferrolock.fencing.redis
import ferrolock.fencing.sqlalchemy
import ferrolock.otel
import ferrolock.testing
from ferrolock import _ferrolock
from support import ROOT

STUB = ROOT / "python" / "ferrolock" / "_ferrolock.pyi"
API = ROOT / "docs" / "api.md"


# The package's public modules besides ``ferrolock`` itself.
MODULES = (
    ferrolock.celery,
    ferrolock.compat,
    ferrolock.compat.redis_py,
    ferrolock.compat.redis_py.asyncio,
    ferrolock.django,
    ferrolock.exceptions,
    ferrolock.fencing,
    ferrolock.fencing.redis,
    ferrolock.fencing.sqlalchemy,
    ferrolock.otel,
    ferrolock.testing,
)


def _public() -> list[tuple[str, object]]:
    names = [(f"ferrolock.{n}", getattr(ferrolock, n)) for n in ferrolock.__all__ if n != "__version__"]
    for module in MODULES:
        names.append((module.__name__, module))
        names += [(f"{module.__name__}.{n}", getattr(module, n)) for n in module.__all__]
    return names


PUBLIC = _public()


def public_members(cls: type) -> list[tuple[type, str]]:
    """The public methods and properties of ``cls`` (with the class that
    defines each), those inherited from Python's own classes and other
    packages' (Celery's ``Task`` documents its own) left out."""
    out = []
    for name in sorted(dir(cls)):
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if not name.startswith("_") and owner is not None and owner.__module__.split(".")[0] == "ferrolock":
            out.append((owner, name))
    return out


def doc_of(owner: object, name: str) -> str:
    member = inspect.getattr_static(owner, name)
    member = getattr(member, "__func__", member)
    return (getattr(member, "__doc__", None) or "").strip()


def is_data(owner: object, name: str) -> bool:
    return isinstance(inspect.getattr_static(owner, name), (type(None), bool, int, float, str, tuple, list))


def test_the_stubs_carry_the_built_modules_docstrings():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_stubs.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def _generator():
    spec = importlib.util.spec_from_file_location("gen_stubs", ROOT / "scripts" / "gen_stubs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _without_docstrings(text: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Expr(ast.Constant(...))]
    return ast.dump(tree)


def test_the_generator_fills_docstrings_and_keeps_the_signatures_as_written():
    gen = _generator()
    stub = STUB.read_text()
    # Someone changes a signature and adds a method, with no docstrings.
    edited = stub.replace(
        "    def extend(self, ttl: _Seconds | None = None) -> None:",
        "    def extend(self, ttl: float | None = None, /) -> None:",
        1,
    )
    edited = re.sub(
        r"\nclass Lock\b[^\n]*:\n", lambda m: m.group(0) + "    def spare(self) -> int: ...\n", edited, count=1
    )
    edited = re.sub(r'\n(\s*)"""Give the lock up and stop renewing it\..*?"""', r"\n\1...", edited, count=1, flags=re.S)
    assert edited.count("def spare") == 1 and "ttl: float | None = None, /" in edited
    filled = gen.with_docstrings(edited)
    assert _without_docstrings(filled) == _without_docstrings(edited), "only docstrings change"
    assert "Give the lock up and stop renewing it." in filled, "the missing docstring is written again"
    assert "def spare(self) -> int: ..." in filled, "a name the module lacks is left alone"
    assert gen.with_docstrings(filled) == filled


@pytest.mark.parametrize("name,obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_every_public_name_is_documented_in_help(name, obj):
    assert (obj.__doc__ or "").strip(), f"{name} has no docstring"
    if isinstance(obj, type):
        # A class attribute holding data (Singleton.unique_on = None) has no
        # docstring of its own at run time: the API reference's check below
        # reads the one written after it.
        undocumented = [
            f"{name}.{m}" for owner, m in public_members(obj) if not doc_of(owner, m) and not is_data(owner, m)
        ]
        assert not undocumented, f"no docstring: {undocumented}"


def _stub_docs() -> dict[str, str]:
    """{name or Class.member: docstring} of the stub."""
    out = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = ast.get_docstring(node) or ""
            body = getattr(node, "body", []) if isinstance(node, ast.ClassDef) else []
            for member, nxt in zip(body, body[1:] + [None]):
                if isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                        out[f"{node.name}.{member.target.id}"] = str(nxt.value.value)
                if isinstance(member, ast.FunctionDef):
                    out[f"{node.name}.{member.name}"] = out.get(f"{node.name}.{member.name}") or (
                        ast.get_docstring(member) or ""
                    )
    return out


NATIVE = [
    (n, o)
    for n, o in PUBLIC
    if isinstance(o, (type, types.BuiltinFunctionType))
    and any(getattr(_ferrolock, o.__name__, None) is k for k in getattr(o, "__mro__", [o]))
]


def test_the_native_names_are_all_checked_against_the_stub():
    assert {n for n, _ in NATIVE} >= {
        "ferrolock.Client",
        "ferrolock.Lock",
        "ferrolock.RWMutex",
        "ferrolock.Retry",
        "ferrolock.LockInfo",
        "ferrolock.LockState",
        "ferrolock.LockEvent",
        "ferrolock.Leader",
        "ferrolock.add_listener",
    }
    # The exceptions are Python's (ferrolock/exceptions.py), documented where they are defined.
    assert not {n for n, _ in NATIVE} & {"ferrolock.LockError", "ferrolock.LockNotOwned"}


@pytest.mark.parametrize("name,obj", NATIVE, ids=[n for n, _ in NATIVE])
def test_every_native_name_is_documented_in_the_stub(name, obj):
    stub = _stub_docs()
    native = next(k for k in getattr(obj, "__mro__", [obj]) if getattr(_ferrolock, k.__name__, None) is k)
    assert stub.get(native.__name__), f"{native.__name__} has no docstring in {STUB.name}"
    if isinstance(obj, type):
        members = [m for owner, m in public_members(obj) if owner is native]
        undocumented = [m for m in members if not stub.get(f"{native.__name__}.{m}")]
        assert not undocumented, f"{native.__name__}: no docstring in {STUB.name} for {undocumented}"


def test_every_public_name_is_in_the_api_reference():
    griffe = pytest.importorskip("griffe", reason="griffe comes with docs/requirements.txt (make docs)")
    directives = set(re.findall(r"^::: (\S+)", API.read_text(), re.M))
    package = griffe.load(
        "ferrolock", search_paths=[str(ROOT / "python")], allow_inspection=False, docstring_parser="google"
    )
    loader_modules = {"ferrolock": package}
    loader_modules.update({m.__name__: package[m.__name__.removeprefix("ferrolock.")] for m in MODULES})
    missing, undocumented = [], []
    for name, obj in PUBLIC:
        module, _, short = name.rpartition(".")
        if name not in directives and not (module in directives and module != "ferrolock"):
            missing.append(name)
        node = loader_modules.get(name) or loader_modules[module][short]
        if not node.docstring:
            undocumented.append(name)
        if isinstance(obj, type):
            members = node.all_members
            undocumented += [
                f"{name}.{m}" for _, m in public_members(obj) if m not in members or not members[m].docstring
            ]
    assert not missing, f"no `::: name` in docs/api.md for {missing}"
    assert not undocumented, f"the API reference shows no docstring for {undocumented}"
