"""What a Python user sees at runtime: docstrings and real signatures on every
public class and callable (written once, in the bindings), and the stub
matching the module."""

from __future__ import annotations

import inspect
import pydoc

import pytest

import ferrolock
from ferrolock import _ferrolock

PUBLIC_CLASSES = [ferrolock.Client, ferrolock.Lock, ferrolock.RWMutex, ferrolock.Retry, ferrolock.LockInfo]
DUNDERS_KEPT = {"__enter__", "__exit__", "__aenter__", "__aexit__"}


def public_callables():
    for cls in PUBLIC_CLASSES:
        yield cls.__name__, cls
        for attr in dir(cls):
            if attr.startswith("_") and attr not in DUNDERS_KEPT:
                continue
            value = getattr(cls, attr)
            if callable(value) and not isinstance(value, type):
                yield f"{cls.__name__}.{attr}", value


@pytest.mark.parametrize("name,obj", list(public_callables()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_callable_has_a_signature_and_a_docstring(name, obj):
    inspect.signature(obj)  # raises ValueError where there is none
    assert inspect.getdoc(obj), f"{name} has no docstring"


def test_help_shows_the_docs_and_real_signatures():
    text = pydoc.render_doc(ferrolock.Lock, renderer=pydoc.plaintext)
    assert "Ownership belongs to the handle" in text
    assert "acquire(self, /, blocking=True, timeout=None)" in text
    assert "Take the lock, with the semantics of" in text
    lock_help = pydoc.render_doc(ferrolock.Client.lock, renderer=pydoc.plaintext)
    assert "**options" not in lock_help
    params = inspect.signature(ferrolock.Client.lock).parameters
    assert list(params) == [
        "self",
        "name",
        "ttl",
        "auto_renew",
        "blocking_timeout",
        "retry",
        "metadata",
        "token",
        "on_lost",
        "max_hold",
        "fair",
    ]
    assert params["ttl"].kind is inspect.Parameter.KEYWORD_ONLY
    rw = inspect.signature(ferrolock.Client.rwmutex).parameters
    assert "writer_preference" in rw and "ttl" in rw and "options" not in rw
    assert "token" in inspect.signature(ferrolock.RWMutex.read).parameters


def test_exceptions_document_themselves():
    for exc in (
        ferrolock.LockError,
        ferrolock.LockNotAcquired,
        ferrolock.LockNotOwned,
        ferrolock.LockLost,
        ferrolock.LockConnectionError,
    ):
        assert exc.__doc__ and len(exc.__doc__) > 40, exc
    assert issubclass(ferrolock.LockNotOwned, RuntimeError)
    assert issubclass(ferrolock.LockConnectionError, ConnectionError)


def test_the_module_documents_its_conventions():
    assert "asyncio.iscoroutine" in _ferrolock.__doc__


def test_client_factories_make_what_the_classes_make(client):
    lock = client.lock("a", ttl=5, fair=True)
    assert isinstance(lock, ferrolock.Lock) and lock.name == "a"
    multi = client.multi_lock(iter(["a", "b"]))
    assert multi.names == ("a", "b")
    with pytest.raises(TypeError, match="not a str"):
        client.multi_lock("ab")
    rw = client.rwmutex("d", writer_preference=False, ttl=3)
    assert isinstance(rw, ferrolock.RWMutex) and rw.writer_preference is False
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        client.lock("a", tll=5)
