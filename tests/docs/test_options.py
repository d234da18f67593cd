"""The handle options come from one table (src/py/options.rs): the runtime
signatures, the check of the keywords, the type stubs and the docs' table
all follow it, and a type checker rejects a misspelt or mistyped option."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import ferrolock
from ferrolock import _ferrolock
from support import ROOT

TABLE = _ferrolock._handle_options()


def keywords(kind: str) -> list[str]:
    return [name for name, _ty, _default, kinds, _doc in TABLE if kind in kinds]


def keyword_only(obj) -> dict[str, object]:
    return {
        p.name: p.default
        for p in inspect.signature(obj).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


@pytest.mark.parametrize(
    "obj,kind",
    [
        (ferrolock.Lock, "lock"),
        (ferrolock.Client.lock, "lock"),
        (ferrolock.Client.multi_lock, "lock"),
        (ferrolock.Client.semaphore, "lock"),
        (ferrolock.Client.synchronized, "lock"),
        (_ferrolock._semaphore, "lock"),
        (_ferrolock.Election.candidate, "lock"),
        (ferrolock.RWMutex, "rwmutex"),
        (ferrolock.Client.rwmutex, "rwmutex"),
        (ferrolock.RWMutex.read, "handle"),
        (ferrolock.RWMutex.write, "handle"),
        (ferrolock.RWMutex.try_read, "handle"),
        (ferrolock.RWMutex.try_write, "handle"),
    ],
)
def test_signatures_show_the_table(obj, kind):
    shown = keyword_only(obj)
    assert list(shown) == keywords(kind)
    defaults = {name: default for name, _ty, default, _kinds, _doc in TABLE}
    assert {k: repr(v) for k, v in shown.items()} == {k: defaults[k] for k in shown}


def test_docstrings_document_every_option():
    for cls, kind in ((ferrolock.Lock, "lock"), (ferrolock.RWMutex, "rwmutex")):
        for name in keywords(kind):
            assert f"\n    {name}: " in cls.__doc__, (cls, name)


@pytest.mark.parametrize(
    "call,callee,typo,meant",
    [
        (lambda c: c.rwmutex("x", writer_preferece=True), "RWMutex()", "writer_preferece", "writer_preference"),
        (lambda c: c.lock("x", blocking_timout=1), "Lock()", "blocking_timout", "blocking_timeout"),
        (lambda c: c.rwmutex("x").read(tll=3), "RWMutex.read()", "tll", "ttl"),
        (lambda c: c.semaphore("x", 2, auto_renw=False), "Client.semaphore()", "auto_renw", "auto_renew"),
        (lambda c: c.election("x")._core.candidate("v", metdata="m"), "Election.candidate()", "metdata", "metadata"),
    ],
)
def test_an_unknown_keyword_names_the_closest_one(client, call, callee, typo, meant):
    with pytest.raises(TypeError) as caught:
        call(client)
    assert str(caught.value) == f'{callee} got an unexpected keyword argument "{typo}"; did you mean "{meant}"?'


@pytest.mark.parametrize(
    "word,meant,library",
    [
        ("timeout", "ttl", "redis-py"),
        ("expire", "ttl", "python-redis-lock"),
        ("auto_renewal", "auto_renew", "python-redis-lock"),
        ("sleep", "retry", "redis-py"),
    ],
)
def test_another_librarys_word_names_what_it_is_here(client, word, meant, library):
    """redis-py's timeout= is the ttl: the hint says so, not blocking_timeout (the closest spelling)."""
    with pytest.raises(TypeError) as caught:
        client.lock("x", **{word: 10})
    message = str(caught.value)
    assert message.startswith(f'Lock() got an unexpected keyword argument "{word}"; did you mean "{meant}"? ')
    assert library in message and 'blocking_timeout"?' not in message


def test_an_unknown_keyword_with_no_close_match_is_named_alone(client):
    with pytest.raises(TypeError, match=r'^Lock\(\) got an unexpected keyword argument "zzz"$'):
        client.lock("x", zzz=1)


def test_a_keyword_of_another_handle_is_refused(client):
    with pytest.raises(TypeError, match='unexpected keyword argument "writer_preference"'):
        client.lock("x", writer_preference=True)


def test_the_stub_and_the_docs_follow_the_table():
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_options.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


MISTAKES = """
import ferrolock
client = ferrolock.Client()
client.rwmutex("x", writer_preferece=True)
client.lock("x", ttl="5")
"""

CORRECT = """
import ferrolock
client = ferrolock.Client()
rw = client.rwmutex("x", writer_preference=True, fair=False, ttl=5)
rw.read(ttl=1.5, token=None).release()
client.lock("x", ttl=5, retry=ferrolock.Retry.fixed(0.1), on_lost=lambda: None, fair=True)
client.multi_lock(["a", "b"], blocking_timeout=2.0)
client.semaphore("s", 3, metadata="w")
ferrolock.Lock(client, "y", auto_renew=False)
"""


def mypy(tmp_path, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "check.py"
    path.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--strict", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_mypy_rejects_a_misspelt_or_mistyped_option(tmp_path):
    out = mypy(tmp_path, MISTAKES)
    assert out.returncode == 1, out.stdout
    assert 'Unexpected keyword argument "writer_preferece"' in out.stdout
    assert 'Argument "ttl" to "lock" of "Client" has incompatible type "str"' in out.stdout
    assert "Found 2 errors" in out.stdout


def test_mypy_accepts_the_options_as_documented(tmp_path):
    out = mypy(tmp_path, CORRECT)
    assert out.returncode == 0, out.stdout
