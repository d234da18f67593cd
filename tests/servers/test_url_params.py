"""redis-py's URL habits: every query parameter redis-py documents for
``redis://``, ``rediss://`` and ``unix://`` URLs is honoured (mapped onto
ferrolock's own settings), accepted and not used, with the reason logged
(it shapes only redis-py's connections or replies, so a REDIS_URL shared
with redis-py works as it is), or refused with an error naming it (ignoring
it would change what the connection trusts). A parameter nobody knows is
refused. An unsupported scheme is named as such."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading

import pytest

import ferrolock
from ferrolock import LockConnectionError
from ferrolock.testing import RedisServer
from support.helpers import wait_for


def base(url: str) -> str:
    """``redis://host:port`` of a ``redis://host:port/db`` URL."""
    return url.rsplit("/", 1)[0]


def test_db_in_the_query_is_the_database_used(redis_url, prefix):
    """redis-py uses database 3 for ``redis://host:port?db=3``; so does ferrolock."""
    by_query = ferrolock.Client(base(redis_url) + "?db=3", prefix=prefix)
    assert repr(by_query).startswith(f'Client("{base(redis_url)}/3"')
    with by_query.lock("db3", ttl=5) as lock:
        assert ferrolock.Client(base(redis_url) + "/3", prefix=prefix).inspect("db3").token == lock.token
        assert ferrolock.Client(base(redis_url) + "/0", prefix=prefix).inspect("db3") is None


def test_db_in_the_query_and_the_path_must_agree(redis_url):
    assert "/2" in repr(ferrolock.Client(base(redis_url) + "/2?db=2"))
    with pytest.raises(ValueError, match=r"two databases, 0 in its path and 3 in \?db="):
        ferrolock.Client(base(redis_url) + "/0?db=3")
    with pytest.raises(ValueError, match="db="):
        ferrolock.Client(base(redis_url) + "?db=three")


def test_username_and_password_in_the_query(prefix):
    with RedisServer(password="s3cret") as server:
        client = ferrolock.Client(f"redis://127.0.0.1:{server.port}/0?password=s3cret", prefix=prefix)
        with client.lock("pw", ttl=5):
            assert client.inspect("pw") is not None
        client = ferrolock.Client(f"redis://127.0.0.1:{server.port}/0?username=default&password=s3cret", prefix=prefix)
        client.connect()
    with pytest.raises(ValueError, match="two passwords"):
        ferrolock.Client("redis://:a@127.0.0.1:1/0?password=b")


def test_socket_connect_timeout_is_the_connect_timeout():
    """A port that accepts and never answers: the URL's 0.3 s ends the wait, not the default 5 s."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        client = ferrolock.Client(f"redis://127.0.0.1:{port}/0?socket_connect_timeout=0.3")
        failed = []

        def connect() -> None:
            with pytest.raises(LockConnectionError, match=r"within 0\.300 s|did not answer in time") as info:
                client.connect()
            failed.append(info.value)

        waiting = threading.Thread(target=connect, daemon=True)
        waiting.start()
        waiting.join(4)  # well under the default connect_timeout of 5 s
        assert failed, "the connect was still waiting: the URL's socket_connect_timeout was not used"


def test_socket_timeout_is_the_command_timeout():
    """The command timeout bounds replica_timeout: a URL's socket_timeout below it is refused so."""
    ferrolock.Client("redis://127.0.0.1:1/0?socket_timeout=0.5", replicas=1)
    with pytest.raises(ValueError, match="command_timeout"):
        ferrolock.Client("redis://127.0.0.1:1/0?socket_timeout=0.05", replicas=1)


def test_a_keyword_that_disagrees_with_the_url_is_refused():
    with pytest.raises(ValueError, match=r"command_timeout= and the Redis URL's \?socket_timeout= disagree"):
        ferrolock.Client("redis://127.0.0.1:1/0?socket_timeout=2", command_timeout=3)
    with pytest.raises(ValueError, match=r"connect_timeout= and the Redis URL's \?socket_connect_timeout="):
        ferrolock.Client("redis://127.0.0.1:1/0?socket_connect_timeout=2", connect_timeout=3)
    ferrolock.Client("redis://127.0.0.1:1/0?socket_timeout=2", command_timeout=2)  # the same: fine


@pytest.mark.parametrize(
    "param",
    [
        "max_connections=10",
        "retry_on_timeout=true",
        "health_check_interval=30",
        "decode_responses=True",
        "encoding=utf-8",
        "protocol=3",
        "socket_read_size=65536",
        "single_connection_client=true",
        "socket_keepalive_options=x",
        "lib_name=app",
    ],
)
def test_parameters_that_shape_only_redis_pys_connections_are_used_as_redis_py_does(redis_url, prefix, param, caplog):
    """Accepted, and the reason it is not used logged, so a shared REDIS_URL needs no ferrolock copy."""
    name = param.split("=")[0]
    caplog.set_level(logging.INFO, logger="ferrolock")
    client = ferrolock.Client(f"{base(redis_url)}/0?{param}", prefix=prefix)
    with client.lock("shared-url", ttl=5):
        pass

    def said() -> list:  # the core's records reach `logging` from a thread of their own
        return [r.getMessage() for r in caplog.records if f"?{name}= is not used: " in r.getMessage()]

    wait_for(said, 10, f"the log record about ?{name}=")
    lines = said()
    assert lines and len(lines[0]) > len(f"the Redis URL's ?{name}= is not used: ") + 10, caplog.text


@pytest.mark.parametrize("param", ["ssl_ciphers=HIGH", "ssl_password=pw", "ssl_ca_path=/etc/ssl", "frobnicate=1"])
def test_parameters_ferrolock_cannot_honour_are_refused_by_name(redis_url, param):
    name = param.split("=")[0]
    url = base(redis_url).replace("redis://", "rediss://" if name.startswith("ssl") else "redis://")
    with pytest.raises(ValueError, match=name) as info:
        ferrolock.Client(f"{url}/0?{param}")
    assert "remove it" in str(info.value)


def connections_named(server, name: str) -> list:
    return [line for line in server.command("CLIENT", "LIST").decode().splitlines() if f" name={name} " in line]


def test_client_name_names_every_command_connection(prefix):
    with RedisServer() as server:
        client = ferrolock.Client(f"redis://127.0.0.1:{server.port}/0?client_name=orders-worker-7", prefix=prefix)
        with client.lock("named", ttl=5):  # the inline connection of a sync call
            pass

        async def use() -> None:
            async with client.lock("named", ttl=5):  # the multiplexed one
                pass

        asyncio.run(use())
        assert len(connections_named(server, "orders-worker-7")) >= 2
        server.command("CLIENT", "KILL", "USER", "default")  # every connection but the one asking
        wait_for(lambda: not connections_named(server, "orders-worker-7"), 10, "the kill")
        asyncio.run(use())  # reconnects: named again
        wait_for(lambda: connections_named(server, "orders-worker-7"), 10, "the new connection to be named")
    with pytest.raises(ValueError, match="client_name"):
        ferrolock.Client("redis://127.0.0.1:1/0?client_name=two%20words")


def keepalive_of_connections_to(port: int) -> list:
    """SO_KEEPALIVE of this process's TCP sockets connected to 127.0.0.1:port."""
    inodes = {}
    with open("/proc/net/tcp") as table:
        lines = table.read().splitlines()[1:]
    for line in lines:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == port and fields[3] == "01":  # remote port, ESTABLISHED
            inodes[fields[9]] = True
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            with socket.socket(fileno=os.dup(int(fd))) as s:
                found.append(s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0)
    return found


def test_socket_keepalive_turns_tcp_keepalive_on(prefix):
    with RedisServer() as server:
        plain = ferrolock.Client(f"redis://127.0.0.1:{server.port}/0", prefix=prefix)
        plain.connect()
        assert keepalive_of_connections_to(server.port) == [False]
        plain.close()
        kept = ferrolock.Client(f"redis://127.0.0.1:{server.port}/0?socket_keepalive=true", prefix=prefix)
        with kept.lock("alive", ttl=5):
            pass
        assert keepalive_of_connections_to(server.port) and all(keepalive_of_connections_to(server.port))


def test_tls_parameters_need_a_tls_url(redis_url):
    with pytest.raises(ValueError, match=r"ssl_\* query parameters need a rediss:// URL"):
        ferrolock.Client(base(redis_url) + "/0?ssl_cert_reqs=none")


def test_protocol_2_is_what_ferrolock_speaks(redis_url):
    ferrolock.Client(base(redis_url) + "/0?protocol=2").connect()


def test_unix_socket_query(prefix):
    with RedisServer(unix_socket=True) as server:
        client = ferrolock.Client(f"unix://{server.socket}?db=4", prefix=prefix)
        assert repr(client).startswith(f'Client("unix://{server.socket}?db=4"')
        with client.lock("u", ttl=5):
            pass
        ferrolock.Client(f"unix://{server.socket}?db=0&max_connections=2").connect()  # redis-py's pool size: not used


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379/0", "memcached://h:1", "redis-sentinel://h:1/m"])
def test_an_unsupported_scheme_is_named(url):
    scheme = url.split("://")[0]
    with pytest.raises(ValueError, match=f"unsupported scheme {scheme}://"):
        ferrolock.Client(url)


def test_sentinel_and_cluster_urls_refuse_unknown_parameters():
    with pytest.raises(ValueError, match="max_connections"):
        ferrolock.Client("redis+sentinel://127.0.0.1:26379/mymaster/0?max_connections=3")
    ferrolock.Client("redis+cluster://127.0.0.1:7000?max_connections=3")  # as in a redis:// URL: not used
    with pytest.raises(ValueError, match="query of a Redis Cluster URL"):
        ferrolock.Client("redis+cluster://127.0.0.1:7000?client_name=web")
    with pytest.raises(ValueError, match="query of a Redis Cluster URL takes socket_timeout"):
        ferrolock.Client("rediss+cluster://127.0.0.1:7000?ssl_cert_reqs=none")
    with pytest.raises(ValueError, match="query of a Redis Cluster URL"):
        ferrolock.Client("redis+cluster://127.0.0.1:7000?db=2")
    with pytest.raises(ValueError, match="frobnicate"):
        ferrolock.Client("redis+cluster://127.0.0.1:7000?frobnicate=1")
    with pytest.raises(ValueError, match=r"command_timeout= and the Redis URL's \?socket_timeout="):
        ferrolock.Client("redis+cluster://127.0.0.1:7000?socket_timeout=2", command_timeout=3)
    ferrolock.Client("redis+cluster://127.0.0.1:7000?socket_timeout=2&db=0")
