"""Client.from_redis: a ferrolock Client for the deployment a redis-py client
connects to (server or unix socket, database, credentials, timeouts, TLS
files and checks, client name, Sentinel service, Cluster nodes), against
real servers; what it cannot carry over is refused by name."""

from __future__ import annotations

import contextlib
import ssl

import pytest
import redis
import redis.asyncio
from redis.sentinel import Sentinel

import ferrolock
from ferrolock.testing import RedisServer
from support.helpers import key
from support.redis_sentinel import APP, SERVICE, WATCHER, SentinelDeployment
from support.tls_certs import TlsRedisServer, make_certs


def held_in(r, prefix: str, name: str) -> bool:
    """Whether the redis-py client `r` sees ferrolock's hold of `name` (its database, its server)."""
    return bool(r.exists(key(prefix, name)))


def test_host_port_database_and_password(prefix):
    with RedisServer(password="s3cret/pw") as server:
        r = redis.Redis(
            host="127.0.0.1",
            port=server.port,
            db=3,
            password="s3cret/pw",
            socket_timeout=2.5,
            socket_connect_timeout=1.5,
            decode_responses=True,
            health_check_interval=30,
        )
        client = ferrolock.Client.from_redis(r, prefix=prefix)
        assert repr(client).startswith(f'Client("redis://127.0.0.1:{server.port}/3"') and "s3cret" not in repr(client)
        with client.lock("db3", ttl=5):
            assert held_in(r, prefix, "db3")
            assert not held_in(redis.Redis(port=server.port, db=0, password="s3cret/pw"), prefix, "db3")
        r.close()


def test_an_acl_user(prefix):
    with RedisServer(user="app", password="app:pw@") as server:
        r = redis.Redis(port=server.port, username="app", password="app:pw@")
        with ferrolock.Client.from_redis(r, prefix=prefix).lock("acl", ttl=5):
            assert held_in(r, prefix, "acl")
        with pytest.raises(ferrolock.LockConfigurationError):
            ferrolock.Client.from_redis(redis.Redis(port=server.port, username="app", password="no")).connect()


def test_a_connection_pool_and_an_asyncio_client(redis_url, prefix):
    pool = redis.ConnectionPool.from_url(redis_url)
    with ferrolock.Client.from_redis(pool, prefix=prefix).lock("pool", ttl=5):
        assert held_in(redis.Redis(connection_pool=pool), prefix, "pool")
    async_client = redis.asyncio.Redis.from_url(redis_url + "?client_name=async-app")
    client = ferrolock.Client.from_redis(async_client, prefix=prefix)
    with client.lock("async", ttl=5):
        assert held_in(redis.Redis(connection_pool=pool), prefix, "async")


def test_a_unix_socket(prefix):
    with RedisServer(unix_socket=True, password="pw") as server:
        r = redis.Redis(unix_socket_path=server.socket, db=2, password="pw")
        client = ferrolock.Client.from_redis(r, prefix=prefix)
        assert repr(client).startswith(f'Client("unix://{server.socket}?db=2"')
        with client.lock("unix", ttl=5):
            assert held_in(r, prefix, "unix")


def test_client_name_is_carried_over(prefix):
    with RedisServer() as server:
        r = redis.Redis(port=server.port, client_name="billing-worker")
        with ferrolock.Client.from_redis(r, prefix=prefix).lock("named", ttl=5):
            names = [
                line
                for line in server.command("CLIENT", "LIST").decode().splitlines()
                if " name=billing-worker " in line
            ]
            assert names, "ferrolock's connection is named as redis-py's"


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    certs = make_certs(tmp_path_factory.mktemp("from-redis-tls"))
    with TlsRedisServer(certs, password="tls-pw") as server:
        yield certs, server


def test_tls_with_a_ca_file(tls, prefix):
    certs, server = tls
    r = redis.Redis(host="127.0.0.1", port=server.port, ssl=True, ssl_ca_certs=str(certs.ca), password="tls-pw")
    client = ferrolock.Client.from_redis(r, prefix=prefix)
    assert repr(client).startswith(f'Client("rediss://127.0.0.1:{server.port}/0"')
    with client.lock("tls", ttl=5):
        assert held_in(r, prefix, "tls")
    wrong = redis.Redis(port=server.port, ssl=True, ssl_ca_certs=str(certs.other_ca), password="tls-pw")
    with pytest.raises(ferrolock.LockConfigurationError, match="ca_file"):
        ferrolock.Client.from_redis(wrong).connect()


def test_tls_without_checking_the_certificate(tls, prefix):
    certs, server = tls
    r = redis.Redis(port=server.port, ssl=True, ssl_cert_reqs=ssl.CERT_NONE, password="tls-pw")
    with ferrolock.Client.from_redis(r, prefix=prefix).lock("insecure", ttl=5):
        pass
    r = redis.Redis(
        host="localhost",
        port=server.port,
        ssl=True,
        ssl_ca_certs=str(certs.ca),
        ssl_check_hostname=False,
        password="tls-pw",
    )
    with ferrolock.Client.from_redis(r, prefix=prefix).lock("no-hostname-check", ttl=5):
        pass


@pytest.mark.parametrize(
    "setting, value",
    [
        ("credential_provider", object()),
        ("ssl_password", "pw"),
        ("ssl_ca_data", "-----BEGIN CERTIFICATE-----"),
        ("redis_connect_func", print),
    ],
)
def test_what_cannot_be_carried_over_is_refused_by_name(setting, value):
    kwargs = {setting: value}
    if setting.startswith("ssl_"):
        kwargs["ssl"] = True
    with pytest.raises(ValueError, match=setting):
        ferrolock.Client.from_redis(redis.Redis(port=1, **kwargs))


def test_something_else_is_refused():
    with pytest.raises(TypeError, match="redis-py client"):
        ferrolock.Client.from_redis("redis://127.0.0.1:6379/0")


@pytest.fixture(scope="module")
def sentinel_deployment():
    d = SentinelDeployment(acl=True).start()
    yield d
    d.close()


def test_a_sentinel_master_for_client(sentinel_deployment, prefix):
    d = sentinel_deployment
    sentinel = Sentinel(
        [("127.0.0.1", s.port) for s in d.sentinels],
        username=APP[0],
        password=APP[1],
        sentinel_kwargs={"username": WATCHER[0], "password": WATCHER[1]},
    )
    r = sentinel.master_for(SERVICE, db=0)
    client = ferrolock.Client.from_redis(r, prefix=prefix)
    assert "redis+sentinel://" in repr(client) and WATCHER[1] not in repr(client)
    with client.lock("sentinel", ttl=5):
        assert held_in(r, prefix, "sentinel")
        admin = d.master
        assert admin("EXISTS", key(prefix, "sentinel")) == 1
    with pytest.raises(ValueError, match="master_for"):
        ferrolock.Client.from_redis(sentinel.slave_for(SERVICE))
    with contextlib.suppress(Exception):
        r.close()


def test_a_redis_cluster(cluster, prefix):
    from redis.cluster import ClusterNode, RedisCluster

    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in cluster.ports[:1]])
    client = ferrolock.Client.from_redis(rc, prefix=prefix)
    assert "redis+cluster://" in repr(client)
    with client.lock("clustered", ttl=5):
        assert rc.exists(key(prefix, "clustered"))
    rc.close()
