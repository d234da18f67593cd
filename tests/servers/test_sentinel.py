"""Sentinel: locks through `redis+sentinel://` (a master name, asked of the
Sentinels), the same Client follows a failover to the promoted replica, and
a hold the promoted replica never received is reported lost."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

import ferrolock
from ferrolock.testing import RedisServer, free_port
from support.helpers import hold_field, wait_for

pytestmark = pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel not installed")


class Sentinel:
    def __init__(self, master_port: int):
        self.port = free_port()
        self.dir = RedisServer().dir
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(
                f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor mymaster 127.0.0.1 {master_port} 1\n"
                "sentinel down-after-milliseconds mymaster 400\n"
                "sentinel failover-timeout mymaster 4000\n"
            )
        self.proc = subprocess.Popen(["redis-sentinel", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.probe = RedisServer(port=self.port)

    def master_port(self) -> int:
        reply = self.probe.command("SENTINEL", "get-master-addr-by-name", "mymaster")
        return int(reply[1])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def topology():
    master = RedisServer().start()
    replica = RedisServer(extra=("--replicaof", "127.0.0.1", str(master.port))).start()
    wait_for(
        lambda: b"master_link_status:up" in replica.command("INFO", "replication"),
        10,
        "replication",
        ignoring=(OSError,),
    )
    sentinel = Sentinel(master.port)
    wait_for(lambda: sentinel.master_port() == master.port, 10, "sentinel to answer", ignoring=(OSError,))
    yield master, replica, sentinel
    sentinel.close()
    replica.close()
    master.close()


def test_lock_through_sentinel_follows_failover(topology, prefix):
    master, replica, sentinel = topology
    client = ferrolock.Client(
        f"redis+sentinel://127.0.0.1:{sentinel.port}/mymaster/0", prefix=prefix, connect_timeout=2
    )
    assert "sentinel" in repr(client)
    lock = client.lock("job", ttl=5)
    with lock:
        key = f"{prefix}{{job}}"
        assert hold_field(master.command("GET", key), "token").decode() == lock.token
        first = lock.fence
    master.kill()
    wait_for(lambda: sentinel.master_port() == replica.port, 30, "sentinel to promote the replica", ignoring=(OSError,))
    after = client.lock("job", ttl=5)
    assert after.acquire(timeout=15), "the same Client did not follow the failover"
    assert replica.command("EXISTS", f"{prefix}{{job}}") == 1
    assert after.fence > first
    after.release()


def test_a_hold_lost_in_an_asynchronous_failover_is_reported(topology, prefix):
    """Replication is asynchronous: the master grants a hold, then dies before
    its replica copies it (the replica's link is cut: the master now wants a
    password the replica lacks, while connections already open stay
    authenticated). After the failover the promoted replica has no such lock:
    the holder's next renewal finds that out and reports the hold lost, and
    the next holder's fence is higher."""
    master, replica, sentinel = topology
    client = ferrolock.Client(
        f"redis+sentinel://127.0.0.1:{sentinel.port}/mymaster/0", prefix=prefix, connect_timeout=2
    )
    client.connect()  # before the password: the connection open stays authenticated
    lost = []
    master.command("CONFIG", "SET", "requirepass", "cut-the-replica")
    master.password = "cut-the-replica"
    master.command("CLIENT", "KILL", "TYPE", "replica")
    wait_for(
        lambda: b"master_link_status:down" in replica.command("INFO", "replication"),
        10,
        "the link cut",
        ignoring=(OSError,),
    )
    lock = client.lock("gone", ttl=3.0, on_lost=lambda: lost.append(time.monotonic()))
    assert lock.acquire()
    master.kill()
    failed_at = time.monotonic()
    wait_for(lambda: sentinel.master_port() == replica.port, 30, "sentinel to promote the replica", ignoring=(OSError,))
    assert replica.command("EXISTS", f"{prefix}{{gone}}") == 0  # the hold did not survive
    # `lost` turns True first; on_lost then runs on a thread of its own.
    wait_for(lambda: lock.lost and lost, 10, "the holder told, and on_lost called")
    assert lost[0] - failed_at < 3.0 + 2.0  # within the ttl of the failure, plus the failover itself
    after = client.lock("gone", ttl=3.0)
    assert after.acquire(timeout=5)
    assert after.fence > lock.fence
    after.release()


def test_bad_sentinel_urls_are_refused():
    for url in ("redis+sentinel://127.0.0.1:1", "redis+sentinel:///mymaster", "redis+sentinel://h:1/m/x"):
        with pytest.raises(ValueError, match="Sentinel"):
            ferrolock.Client(url)
