"""@client.synchronized on generator and async-generator functions: the lock
is held across the iteration, taken at the first next() and released when
the generator finishes, raises or is closed."""

from __future__ import annotations

import gc

import pytest

from ferrolock import LockNotAcquired


def held(client, name: str) -> bool:
    return client.inspect(name) is not None


# -- generators ----------------------------------------------------------------


def test_generator_holds_the_lock_across_the_iteration(client):
    seen = []

    @client.synchronized("gen")
    def numbers(n):
        """Counts to n under the lock."""
        for i in range(n):
            seen.append(held(client, "gen"))
            yield i

    it = numbers(3)
    assert not held(client, "gen")  # making the generator takes nothing
    assert list(it) == [0, 1, 2]
    assert seen == [True, True, True]
    assert not held(client, "gen")
    assert numbers.__name__ == "numbers" and numbers.__doc__ == "Counts to n under the lock."


def test_generator_excludes_another_holder_between_items(client):
    @client.synchronized("gen-busy", blocking_timeout=0)
    def pair():
        yield 1
        yield 2

    first = pair()
    assert next(first) == 1
    with pytest.raises(LockNotAcquired):
        next(pair())  # the first generator still holds it between its items
    assert list(first) == [2]
    assert list(pair()) == [1, 2]


def test_generator_closed_early_releases(client):
    finished = []

    @client.synchronized("gen-close")
    def forever():
        try:
            while True:
                yield held(client, "gen-close")
        finally:
            finished.append(True)

    it = forever()
    assert next(it) is True
    it.close()
    assert finished == [True]
    assert not held(client, "gen-close")


def test_generator_dropped_unfinished_releases(client):
    @client.synchronized("gen-drop")
    def forever():
        while True:
            yield 1

    it = forever()
    next(it)
    assert held(client, "gen-drop")
    del it
    gc.collect()
    assert not held(client, "gen-drop")


def test_generator_that_raises_releases_and_propagates(client):
    @client.synchronized("gen-raise")
    def boom():
        yield 1
        raise KeyError("x")

    it = boom()
    assert next(it) == 1
    with pytest.raises(KeyError):
        next(it)
    assert not held(client, "gen-raise")


def test_generator_send_throw_and_return_value_reach_the_body(client):
    @client.synchronized("gen-send")
    def echo():
        got = []
        try:
            while True:
                got.append((yield len(got)))
        except ValueError:
            return got

    it = echo()
    assert next(it) == 0
    assert it.send("a") == 1
    with pytest.raises(StopIteration) as stop:
        it.throw(ValueError("done"))
    assert stop.value.value == ["a"]
    assert not held(client, "gen-send")


# -- async generators --------------------------------------------------------------


async def test_async_generator_holds_the_lock_across_the_iteration(client):
    seen = []

    @client.synchronized("agen")
    async def numbers(n):
        for i in range(n):
            seen.append(await client.lock("agen").alocked())
            yield i

    it = numbers(3)
    assert not held(client, "agen")
    assert [i async for i in it] == [0, 1, 2]
    assert seen == [True, True, True]
    assert not held(client, "agen")


async def test_async_generator_closed_early_releases(client):
    finished = []

    @client.synchronized("agen-close")
    async def forever():
        try:
            while True:
                yield 1
        finally:
            finished.append(True)

    it = forever()
    assert await it.__anext__() == 1
    assert held(client, "agen-close")
    await it.aclose()
    assert finished == [True]
    assert not held(client, "agen-close")


async def test_async_generator_that_raises_releases_and_propagates(client):
    @client.synchronized("agen-raise")
    async def boom():
        yield 1
        raise KeyError("x")

    it = boom()
    assert await it.__anext__() == 1
    with pytest.raises(KeyError):
        await it.__anext__()
    assert not held(client, "agen-raise")


async def test_async_generator_asend_and_athrow_reach_the_body(client):
    caught = []

    @client.synchronized("agen-send")
    async def echo():
        got = None
        while True:
            try:
                got = yield got
            except ValueError as e:
                caught.append(str(e))
                got = "recovered"

    it = echo()
    assert await it.__anext__() is None
    assert await it.asend("a") == "a"
    assert await it.athrow(ValueError("v")) == "recovered"
    assert caught == ["v"]
    assert held(client, "agen-send")
    await it.aclose()
    assert not held(client, "agen-send")
