"""ferrolock.fencing: the guards that make the store refuse a stale holder's
late write, against a real redis-server (redis-py, sync and asyncio, and a
Redis Cluster), SQLite files and a throwaway PostgreSQL (SQLAlchemy 2, Core
and ORM, sync and asyncio). Then Kleppmann's scenario end to end, in real
processes: holder A is SIGSTOPped past its ttl, B takes the lock and writes,
A resumes and writes with its old fence, and is refused; B's data stands."""

from __future__ import annotations

import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from typing import Optional

import pytest
import redis
import redis.asyncio
import sqlalchemy as sa
from sqlalchemy.exc import NoResultFound
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import ferrolock
from ferrolock.fencing import StaleFence, fence_of
from ferrolock.fencing.redis import AsyncRedisGuard, RedisGuard, fence_key
from ferrolock.fencing.sqlalchemy import afenced_update, fenced_update
from support.helpers import key, wait_for
from support.postgresql import PostgresServer, missing
from support.redis_cluster import key_slot


# -- the fence and the error ---------------------------------------------------


def test_stale_fence_is_a_lock_error_naming_both_fences_and_the_resource():
    err = StaleFence(17, 42, "Redis key 'orders:42'")
    assert ferrolock.StaleFence is StaleFence and "StaleFence" in ferrolock.__all__
    assert isinstance(err, ferrolock.LockError)
    assert (err.fence, err.recorded, err.resource) == (17, 42, "Redis key 'orders:42'")
    assert "fence 17" in str(err) and "fence 42" in str(err) and "'orders:42'" in str(err)
    again = pickle.loads(pickle.dumps(err))  # crosses process boundaries (multiprocessing, Celery)
    assert type(again) is StaleFence and (again.fence, again.recorded, str(again)) == (17, 42, str(err))


def test_a_fence_is_an_int_or_a_held_handle(client):
    assert fence_of(5) == 5
    lock = client.lock("f")
    with pytest.raises(ValueError, match="holds nothing"):
        fence_of(lock)
    with lock:
        assert fence_of(lock) == lock.fence
    with client.semaphore("s", 2) as permit:
        assert fence_of(permit) == permit.fence
    with client.rwmutex("rw").read() as reader, pytest.raises(ValueError, match="reader has no fence"):
        fence_of(reader)
    with client.election("e").campaign("me", timeout=5) as term:
        assert fence_of(term.number) == term.number
    with pytest.raises(TypeError, match="not bool"):
        fence_of(True)
    with pytest.raises(TypeError, match="not str"):
        fence_of("5")  # type: ignore[arg-type]
    for wrong in (0, -1, 2**53):
        with pytest.raises(ValueError, match="out of range"):
            fence_of(wrong)


# -- Redis ---------------------------------------------------------------------


@pytest.fixture
def r(redis_url, prefix):
    """A redis-py client; the test's keys (data and fence records) deleted at its end."""
    client = redis.Redis.from_url(redis_url)
    yield client
    for pattern in (f"{prefix}*", f"{{{prefix}*"):
        for k in client.scan_iter(match=pattern):
            client.delete(k)
    client.close()


def test_a_fenced_set_writes_and_records_its_fence(r, client, prefix):
    guard = RedisGuard(r)
    data = prefix + "order"
    assert guard.recorded(data) is None
    with client.lock("order") as lock:
        guard.set(data, "shipped", fence=lock)
        assert r.get(data) == b"shipped"
        assert guard.recorded(data) == lock.fence
        assert r.get(fence_key(data)) == str(lock.fence).encode()
        guard.set(data, "shipped twice", fence=lock)  # the same hold again: an equal fence
    assert r.get(data) == b"shipped twice"


def test_a_lower_fence_is_refused_and_the_data_stands(r, prefix):
    guard = RedisGuard(r)
    data = prefix + "order"
    guard.set(data, "by 100", fence=100)
    with pytest.raises(StaleFence) as refused:
        guard.set(data, "by 99", fence=99)
    assert (refused.value.fence, refused.value.recorded) == (99, 100)
    assert repr(data) in refused.value.resource and repr(data) in str(refused.value)
    assert r.get(data) == b"by 100" and guard.recorded(data) == 100
    guard.set(data, "by 101", fence=101)  # a higher fence is taken, and recorded
    assert r.get(data) == b"by 101" and guard.recorded(data) == 101
    with pytest.raises(StaleFence):
        guard.set(data, "by 100 again", fence=100)
    assert r.get(data) == b"by 101"


def test_hset_and_any_single_key_command_are_fenced(r, prefix):
    guard = RedisGuard(r)
    h, items = prefix + "h", prefix + "list"
    guard.hset(h, {"status": "paid", "n": 1}, fence=10)
    guard.hset(h, {"status": "shipped"}, fence=11)
    with pytest.raises(StaleFence):
        guard.hset(h, {"status": "stale", "extra": "x"}, fence=10)
    assert r.hgetall(h) == {b"status": b"shipped", b"n": b"1"}
    guard.execute("RPUSH", items, "a", "b", fence=5)
    guard.execute("SET", prefix + "tmp", "v", "PX", 60000, fence=5)
    assert 0 < r.pttl(prefix + "tmp") <= 60000
    with pytest.raises(StaleFence):
        guard.execute("DEL", items, fence=4)
    assert r.lrange(items, 0, -1) == [b"a", b"b"]
    with pytest.raises(ValueError, match="at least one field"):
        guard.hset(h, {}, fence=12)


def test_a_write_redis_refuses_records_nothing(r, prefix):
    guard = RedisGuard(r)
    data = prefix + "s"
    guard.set(data, "a string", fence=1)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        guard.hset(data, {"f": "v"}, fence=2)
    assert guard.recorded(data) == 1 and r.get(data) == b"a string"


def test_bad_input_writes_nothing(r, client, prefix):
    guard = RedisGuard(r)
    data = prefix + "x"
    with pytest.raises(ValueError, match="holds nothing"):
        guard.set(data, "v", fence=client.lock("x"))
    with pytest.raises(TypeError, match="a fenced key is a str"):
        guard.set(b"bytes", "v", fence=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Redis command's name"):
        guard.execute("", data, fence=1)
    assert r.exists(data, fence_key(data)) == 0


def test_the_fence_record_shares_the_keys_cluster_slot():
    assert fence_key("orders:42") == "{orders:42}:fence"
    assert fence_key("{user:7}:profile") == "{user:7}:profile:fence"
    for k in ("orders:42", "{user:7}:profile", "a{b", "{", "é:ü"):
        assert key_slot(fence_key(k)) == key_slot(k), k
    for k in ("a}b", "x{}", "a{}b}"):  # no hash tag, and a "}" that a record's tag cannot hold
        with pytest.raises(ValueError, match="give it a hash tag"):
            fence_key(k)


def test_the_guard_works_on_a_redis_cluster(cluster):
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    try:
        guard = RedisGuard(rc)
        for data in ("fencing:order", "{fencing}:profile"):
            guard.set(data, "new", fence=20)
            with pytest.raises(StaleFence):
                guard.set(data, "old", fence=19)
            assert rc.get(data) == b"new" and guard.recorded(data) == 20
            rc.delete(data, fence_key(data))
    finally:
        rc.close()


async def test_the_asyncio_guard_refuses_a_lower_fence(redis_url, prefix):
    r = redis.asyncio.Redis.from_url(redis_url)
    guard = AsyncRedisGuard(r)
    data = prefix + "async"
    try:
        await guard.set(data, "by 7", fence=7)
        await guard.hset(data + ":h", {"f": "v"}, fence=7)
        with pytest.raises(StaleFence) as refused:
            await guard.execute("SET", data, "by 6", fence=6)
        assert refused.value.recorded == 7
        assert await r.get(data) == b"by 7" and await guard.recorded(data) == 7
    finally:
        await r.delete(data, fence_key(data), data + ":h", fence_key(data + ":h"))
        await r.aclose()


# -- SQL -----------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str]
    fence: Mapped[Optional[int]] = mapped_column(sa.BigInteger)


ORDERS = Order.__table__
ITEMS = sa.Table(  # a composite key and a fence column of another name
    "items",
    Base.metadata,
    sa.Column("order_id", sa.Integer, primary_key=True),
    sa.Column("line", sa.Integer, primary_key=True),
    sa.Column("qty", sa.Integer),
    sa.Column("version", sa.BigInteger),
)


@pytest.fixture
def engine(tmp_path):
    e = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    Base.metadata.create_all(e)
    with e.begin() as conn:
        conn.execute(sa.insert(ORDERS), [{"id": 1, "status": "new"}])
    yield e
    e.dispose()


def row(engine, table=ORDERS, **where):
    with engine.connect() as conn:
        return tuple(conn.execute(sa.select(table).filter_by(**where)).one())


def test_a_fenced_update_writes_and_records_its_fence(engine):
    with engine.begin() as conn:
        fenced_update(conn, ORDERS, 1, {"status": "paid"}, fence=100)
    assert row(engine, id=1) == (1, "paid", 100)
    with engine.begin() as conn:
        fenced_update(conn, ORDERS, 1, {"status": "paid again"}, fence=100)  # equal: the same hold
        fenced_update(conn, ORDERS, 1, {"status": "shipped"}, fence=101)
    assert row(engine, id=1) == (1, "shipped", 101)


def test_a_lower_fence_is_refused_and_the_row_stands(engine):
    with engine.begin() as conn:
        fenced_update(conn, ORDERS, 1, {"status": "paid"}, fence=100)
    with engine.begin() as conn, pytest.raises(StaleFence) as refused:
        fenced_update(conn, ORDERS, 1, {"status": "stale"}, fence=99)
    assert (refused.value.fence, refused.value.recorded) == (99, 100)
    assert refused.value.resource == "row 1 of table 'orders'" and "row 1 of table 'orders'" in str(refused.value)
    assert row(engine, id=1) == (1, "paid", 100)


def test_a_missing_row_is_told_from_a_stale_fence(engine):
    with engine.begin() as conn, pytest.raises(NoResultFound, match="no row 2 of table 'orders'"):
        fenced_update(conn, ORDERS, 2, {"status": "paid"}, fence=100)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(ORDERS)).scalar() == 1


def test_an_orm_session_and_a_composite_key(engine):
    with Session(engine) as session, session.begin():
        order = session.get(Order, 1)
        fenced_update(session, Order, 1, {"status": "paid"}, fence=50)
        assert (order.status, order.fence) == ("paid", 50)  # the session's object follows the update
        with pytest.raises(StaleFence):
            fenced_update(session, Order, 1, {"status": "stale"}, fence=49)
        assert order.status == "paid"
    with engine.begin() as conn:
        conn.execute(sa.insert(ITEMS), [{"order_id": 1, "line": 1, "qty": 1}])
        fenced_update(conn, ITEMS, (1, 1), {"qty": 3}, fence=60, fence_column="version")
        with pytest.raises(StaleFence, match="row \\(1, 1\\) of table 'items'"):
            fenced_update(conn, ITEMS, (1, 1), {"qty": 9}, fence=59, fence_column="version")
    assert row(engine, ITEMS, order_id=1) == (1, 1, 3, 60)


def test_bad_arguments_are_named(engine, client):
    with engine.begin() as conn:
        with pytest.raises(ValueError, match="no column 'fence'.*fence_column="):
            fenced_update(conn, ITEMS, (1, 1), {"qty": 1}, fence=1)
        with pytest.raises(ValueError, match="primary key has 2 column\\(s\\) \\(order_id, line\\)"):
            fenced_update(conn, ITEMS, 1, {"qty": 1}, fence=1, fence_column="version")
        with pytest.raises(ValueError, match="sets the fence column"):
            fenced_update(conn, ORDERS, 1, {"fence": 5}, fence=1)
        with pytest.raises(ValueError, match="holds nothing"):
            fenced_update(conn, ORDERS, 1, {"status": "x"}, fence=client.lock("x"))
        with pytest.raises(TypeError, match="a Table or an ORM class mapped to one"):
            fenced_update(conn, "orders", 1, {"status": "x"}, fence=1)
    assert row(engine, id=1) == (1, "new", None)


async def test_the_asyncio_update_on_an_async_session(tmp_path):
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'shop.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
            await conn.execute(sa.insert(ORDERS), [{"id": 1, "status": "new"}])
            await afenced_update(conn, ORDERS, 1, {"status": "paid"}, fence=10)
        async with AsyncSession(engine) as session, session.begin():
            with pytest.raises(StaleFence):
                await afenced_update(session, Order, 1, {"status": "stale"}, fence=9)
            with pytest.raises(NoResultFound):
                await afenced_update(session, Order, 2, {"status": "x"}, fence=10)
            await afenced_update(session, Order, 1, {"status": "shipped"}, fence=11)
        async with engine.connect() as conn:
            assert tuple((await conn.execute(sa.select(ORDERS))).one()) == (1, "shipped", 11)
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
def postgres():
    why = missing()
    if why:
        pytest.skip(why)
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_engine(postgres):
    e = sa.create_engine(postgres.url)
    Base.metadata.drop_all(e)
    Base.metadata.create_all(e)
    with e.begin() as conn:
        conn.execute(sa.insert(ORDERS), [{"id": 1, "status": "new"}])
    yield e
    e.dispose()


def test_postgresql_refuses_a_lower_fence(pg_engine, client):
    with client.lock("order") as lock, pg_engine.begin() as conn:  # a real fence: 64 bits (BIGINT)
        fenced_update(conn, ORDERS, 1, {"status": "paid"}, fence=lock)
        fence = lock.fence
    with pg_engine.begin() as conn, pytest.raises(StaleFence) as refused:
        fenced_update(conn, ORDERS, 1, {"status": "stale"}, fence=fence - 1)
    assert refused.value.recorded == fence
    with pg_engine.begin() as conn, pytest.raises(NoResultFound):
        fenced_update(conn, ORDERS, 2, {"status": "x"}, fence=fence)
    assert row(pg_engine, id=1) == (1, "paid", fence)


@pytest.mark.parametrize(
    "isolation, refusal", [("READ COMMITTED", StaleFence), ("REPEATABLE READ", sa.exc.OperationalError)]
)
def test_postgresql_orders_two_racing_writers_by_fence(pg_engine, isolation, refusal):
    """The later fence's UPDATE holds the row; the earlier one waits for it,
    then re-checks its WHERE on the committed row (READ COMMITTED: refused,
    StaleFence) or fails to serialize (REPEATABLE READ: retry)."""
    engine = pg_engine.execution_options(isolation_level=isolation)
    outcome: list = []

    def earlier() -> None:
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("SET application_name = 'fence-99'"))
                fenced_update(conn, ORDERS, 1, {"status": "by 99"}, fence=99)
            outcome.append("written")
        except Exception as e:  # what the test looks at
            outcome.append(e)

    with engine.begin() as later:
        fenced_update(later, ORDERS, 1, {"status": "by 100"}, fence=100)
        racer = threading.Thread(target=earlier)
        racer.start()
        # AUTOCOMMIT: pg_stat_activity is a snapshot taken once per transaction
        with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as watch:
            wait_for(
                lambda: (
                    outcome
                    or watch.execute(
                        sa.text("SELECT wait_event_type FROM pg_stat_activity WHERE application_name = 'fence-99'")
                    ).scalar()
                    == "Lock"
                ),
                30,
                "the earlier fence's UPDATE to wait for the row",
            )
    racer.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], refusal), outcome
    assert row(pg_engine, id=1) == (1, "by 100", 100)


def test_the_package_imports_without_the_extras_and_each_guard_names_its_extra():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["redis"] = sys.modules["sqlalchemy"] = None  # neither installed
        import ferrolock, ferrolock.fencing
        assert ferrolock.StaleFence is ferrolock.fencing.StaleFence
        for module, package in (("redis", "redis"), ("sqlalchemy", "SQLAlchemy")):
            try:
                __import__("ferrolock.fencing." + module)
            except ImportError as e:
                assert f"pip install {package}, or install ferrolock with its [{module}] extra" in str(e), e
            else:
                raise AssertionError(module + " imported")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert run.returncode == 0, run.stderr


# -- Kleppmann's scenario, end to end --------------------------------------------

# A holder: takes the lock, says so with its fence, waits for "go" on stdin
# (A is SIGSTOPped there), then writes its name through the guard with the
# handle (its fence, as it was when taken) and reports what happened.
HOLDER = textwrap.dedent(
    """
    import json, sys
    role, redis_url, prefix, ttl, store, target = sys.argv[1:7]
    import ferrolock
    from ferrolock.fencing import StaleFence

    client = ferrolock.Client(redis_url, prefix=prefix)
    lock = client.lock("order", ttl=float(ttl), blocking_timeout=30)
    assert lock.acquire(), "the lock was not taken within 30 s"
    print(json.dumps({"holding": lock.fence}), flush=True)
    sys.stdin.readline()
    if store == "redis":
        import redis
        from ferrolock.fencing.redis import RedisGuard
        write = lambda: RedisGuard(redis.Redis.from_url(redis_url)).set(target, role, fence=lock)
    else:
        import sqlalchemy as sa
        from ferrolock.fencing.sqlalchemy import fenced_update
        orders = sa.Table("orders", sa.MetaData(), autoload_with=sa.create_engine(store))
        def write():
            with sa.create_engine(store).begin() as conn:
                fenced_update(conn, orders, 1, {"status": role}, fence=lock)
    try:
        write()
        result = {"written": True}
    except StaleFence as e:
        result = {"written": False, "fence": e.fence, "recorded": e.recorded, "message": str(e)}
    try:
        lock.release()
    except ferrolock.LockNotOwned:
        result["lost"] = True
    print(json.dumps(result), flush=True)
    """
)


class Holder:
    """A holder process, its stdout read line by line on a thread."""

    def __init__(self, role: str, redis_url: str, prefix: str, ttl: float, store: str, target: str):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, role, redis_url, prefix, str(ttl), store, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, limit: float = 60) -> dict:
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            pytest.fail(f"the holder printed nothing within {limit} s")
        if line is None:
            self.proc.wait(10)
            pytest.fail(f"the holder exited with {self.proc.returncode}: {self.proc.stderr.read()}")
        return json.loads(line)

    def go(self) -> dict:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        report = self.next()
        assert self.proc.wait(30) == 0, self.proc.stderr.read()
        return report

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # also ends a stopped process
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


def kleppmann(redis_url, prefix, raw, store: str, target: str) -> tuple[int, int]:
    """A takes the lock (ttl 1 s) and is SIGSTOPped; once its hold expired in
    Redis, B takes the lock and writes; A resumes and writes with its old
    fence: refused. Returns (A's fence, B's fence)."""
    a = Holder("A", redis_url, prefix, 1.0, store, target)
    b = None
    try:
        fence_a = a.next()["holding"]
        os.kill(a.proc.pid, signal.SIGSTOP)  # its watchdog stops with it: the hold runs out
        wait_for(lambda: raw("EXISTS", key(prefix, "order")) == 0, 30, "A's hold to expire in Redis")
        b = Holder("B", redis_url, prefix, 30.0, store, target)
        fence_b = b.next()["holding"]
        assert fence_b > fence_a
        assert b.go() == {"written": True}
        os.kill(a.proc.pid, signal.SIGCONT)
        late = a.go()
        assert late["written"] is False, late
        assert (late["fence"], late["recorded"]) == (fence_a, fence_b)
        assert f"fence {fence_a} is below fence {fence_b}" in late["message"]
        assert late["lost"] is True  # and its release tells it the lock was gone
        return fence_a, fence_b
    finally:
        a.close()
        if b is not None:
            b.close()


def test_kleppmann_a_paused_holders_late_write_to_redis_is_refused(redis_url, prefix, raw, r):
    data = prefix + "order-data"
    _, fence_b = kleppmann(redis_url, prefix, raw, "redis", data)
    assert r.get(data) == b"B"
    assert RedisGuard(r).recorded(data) == fence_b


def test_kleppmann_a_paused_holders_late_update_in_sqlite_is_refused(redis_url, prefix, raw, engine, tmp_path):
    _, fence_b = kleppmann(redis_url, prefix, raw, f"sqlite:///{tmp_path / 'shop.db'}", "orders")
    assert row(engine, id=1) == (1, "B", fence_b)


def test_kleppmann_a_paused_holders_late_update_in_postgresql_is_refused(redis_url, prefix, raw, pg_engine, postgres):
    _, fence_b = kleppmann(redis_url, prefix, raw, postgres.url, "orders")
    assert row(pg_engine, id=1) == (1, "B", fence_b)
