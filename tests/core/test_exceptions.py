"""ferrolock's exceptions are Python classes (ferrolock/exceptions.py) that
the native core raises, in one tree a caller can rely on: a configuration
error is not a connection error, the builtin bases the docs promise hold,
and each docstring says whether retrying can help."""

from __future__ import annotations

import pickle

import pytest

import ferrolock
import ferrolock.exceptions as exceptions
from ferrolock.testing import RedisServer

TREE = {
    "LockError": (Exception,),
    "LockNotAcquired": (ferrolock.LockError,),
    "LockNotOwned": (ferrolock.LockError, RuntimeError),
    "LockLost": (ferrolock.LockError,),
    "LockNotReplicated": (ferrolock.LockError,),
    "LockConnectionError": (ferrolock.LockError, ConnectionError),
    "LockConfigurationError": (ferrolock.LockError,),
}


@pytest.mark.parametrize("name", sorted(TREE))
def test_each_exception_is_defined_in_python_with_its_bases(name):
    cls = getattr(ferrolock, name)
    assert cls is getattr(exceptions, name)
    assert cls.__bases__ == TREE[name]
    assert cls.__module__ == "ferrolock" and f"ferrolock.{name}" in repr(cls)
    assert "retry" in cls.__doc__.lower(), f"{name}'s docstring does not say whether retrying helps"
    assert pickle.loads(pickle.dumps(cls("m"))).args == ("m",)


def test_a_configuration_error_is_not_a_connection_error():
    assert not issubclass(ferrolock.LockConfigurationError, (ferrolock.LockConnectionError, ConnectionError))


def test_the_core_raises_the_python_classes(client):
    lock = client.lock("exc")
    with pytest.raises(ferrolock.LockNotOwned) as info:
        lock.release()
    assert type(info.value) is exceptions.LockNotOwned and isinstance(info.value, RuntimeError)
    with pytest.raises(ferrolock.LockConnectionError) as info:
        ferrolock.Client("redis://127.0.0.1:1/0", connect_timeout=0.5).connect()
    assert type(info.value) is exceptions.LockConnectionError and isinstance(info.value, ConnectionError)


def test_a_retry_on_connection_error_loop_stops_at_a_wrong_password():
    """Such a loop used to spin forever: the wrong password was a ConnectionError."""
    with RedisServer(password="right") as server:
        client = ferrolock.Client(f"redis://:wrong@127.0.0.1:{server.port}/0")
        attempts = 0
        with pytest.raises(ferrolock.LockConfigurationError, match="credentials|password"):
            while attempts < 5:
                attempts += 1
                try:
                    client.connect()
                    break
                except ConnectionError:
                    continue
        assert attempts == 1
