"""A throwaway Sentinel deployment on free loopback ports: a master, a
replica and Sentinels, plain or TLS, with or without ACL users.

With ``tls=True`` every process listens for TLS only (``port 0``,
``tls-port``), replication runs over TLS (``tls-replication yes``) and so do
the Sentinels' links to the data nodes. With ``acl=True``:

- the data nodes have no usable default user; ``app`` (the library's user,
  ``~* &* +@all``), ``repl`` (replication: ``masteruser``/``masterauth``),
  ``sentinel`` (the Sentinels' link: the command set Redis's Sentinel
  documentation lists) and ``admin`` (this harness);
- the Sentinels have no usable default user either; ``watcher`` (the
  library's user on the Sentinels: it only asks where the master is) and
  ``admin``; each Sentinel authenticates to the data nodes with
  ``sentinel auth-user``/``auth-pass``.

``url()`` gives the URL the library takes. Every process is stopped by
``close()``; a killed data node can be started again as a replica of the
current master (``restart_as_replica``).
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import time
from pathlib import Path
from typing import Optional
from urllib.parse import quote

from ferrolock.testing import Connection, RedisServer, RespError

SERVICE = "mymaster"
ADMIN = ("admin", "admin-pw")
APP = ("app", "app/pw:@")  # URL-reserved characters: the URL must carry them percent-encoded
REPL = ("repl", "repl-pw")
LINK = ("sentinel", "link-pw")
WATCHER = ("watcher", "watch&pw")
# What a Sentinel needs on the data nodes (Redis's Sentinel documentation).
LINK_RULES = (
    "allchannels +multi +slaveof +ping +exec +subscribe +config|rewrite +role +publish +info "
    "+client|setname +client|kill +script|kill"
)
# What ferrolock needs on a Sentinel: the master's address (and PING);
# SENTINEL MASTERS only names the known services when the one asked for is
# unknown. (A Sentinel of Redis 7.0 has no CLIENT SETINFO to allow.)
WATCHER_RULES = "+ping +sentinel|get-master-addr-by-name +sentinel|masters"
# A Sentinel whose timer ran 2 s late (a stall, a loaded machine) enters
# TILT mode and acts on nothing for its tilt-period: 30 s by default, beside
# a default down-after of 30 s. It marks the master down only once TILT
# ends, and never promotes a replica whose link to the master has been
# down for more than ten times down-after plus the time since: with this
# harness's down-after of 1 to 1.5 s, a Sentinel that tilts as the master
# dies finds no good replica, ever (-failover-abort-no-good-slave, again
# and again). So TILT lasts here 5 times down-after (SENTINEL DEBUG
# TILT-PERIOD), which leaves a stall of as much before a failover cannot be.
TILT_PERIOD_PER_DOWN_AFTER = 5


def _text(reply):
    if isinstance(reply, bytes):
        return reply.decode(errors="replace")
    if isinstance(reply, list):
        return [_text(r) for r in reply]
    return reply


class Node(RedisServer):
    """One redis-server (data node) or redis-sentinel process, started from
    a config file (the plugin's launcher otherwise: stop, kill, pause...).
    It listens on `host` (a subclass may place it elsewhere than loopback)."""

    host = "127.0.0.1"

    def __init__(self, tls_dir: Optional[Path], auth: Optional[tuple]):
        super().__init__()
        self._port_chosen = False  # its config names the port: no other on a clash
        self.tls_dir = tls_dir
        self.auth = auth

    def tls_lines(self) -> list:
        if self.tls_dir is None:
            return [f"port {self.port}"]
        d = self.tls_dir
        return [
            "port 0",
            f"tls-port {self.port}",
            f"tls-cert-file {d / 'server.pem'}",
            f"tls-key-file {d / 'server.key'}",
            f"tls-ca-cert-file {d / 'ca.pem'}",
            "tls-auth-clients no",
            "tls-replication yes",
        ]

    def listen_lines(self) -> list:
        """Where it listens: its host and port (TLS when asked), and its unix socket if it has one."""
        lines = [f"bind {self.host}"] + self.tls_lines()
        if self.socket:
            lines += [f"unixsocket {self.socket}", "unixsocketperm 700"]
        return lines

    def _open(self) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if self.tls_dir is None:
            return raw
        ctx = ssl.create_default_context(cafile=str(self.tls_dir / "ca.pem"))
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def connect(self) -> Connection:
        """A kept connection, as ``admin`` when ACL is on."""
        return Connection(self._open(), self.auth or ())

    def __call__(self, *args):
        """One command on a fresh connection; the parsed reply, bulk strings decoded."""
        return _text(self.command(*args))

    def _args(self) -> list:
        return [self.binary, os.path.join(self.dir, "node.conf")]

    def start(self, conf: list, binary: str) -> "Node":  # type: ignore[override]
        Path(self.dir, "node.conf").write_text("\n".join(conf) + "\n")
        self.binary = binary
        try:
            return super().start()
        except RuntimeError as e:
            raise RuntimeError(f"{binary}: {e}: {conf}") from None


class SentinelDeployment:
    """`quorum`: how many Sentinels must agree that the master is down
    (a failover also needs a majority of them to elect a leader)."""

    def __init__(
        self,
        tls: bool = False,
        acl: bool = False,
        sentinels: int = 1,
        down_after_ms: int = 1000,
        persist: bool = False,
        quorum: int = 1,
    ):
        self.tls, self.acl, self.persist, self.quorum = tls, acl, persist, quorum
        self.tls_dir: Optional[Path] = None
        if tls:
            from support.tls_certs import make_certs

            self.tls_dir = make_certs().dir
        auth = ADMIN if acl else None
        self.nodes = [self.new_node("node-0", auth), self.new_node("node-1", auth)]
        self.sentinels = [self.new_node(f"sentinel-{i}", auth) for i in range(sentinels)]
        self.down_after_ms = down_after_ms
        self._first_master = self.nodes[0]

    def new_node(self, role: str, auth: Optional[tuple]) -> Node:
        """A data node or a Sentinel (`role` names it; a subclass may place it elsewhere)."""
        return Node(self.tls_dir, auth)

    # ------------------------------------------------------------ set-up

    def node_conf(self, node: Node, replica_of: Optional[int]) -> list:
        conf = node.listen_lines() + [
            f"dir {node.dir}",
            'save ""',
            "enable-debug-command local",
            "logfile node.log",
            "repl-diskless-sync-delay 0",
            "appendonly yes" if self.persist else "appendonly no",
            "appendfsync always",
        ]
        if self.acl:
            conf += [
                "user default off",
                f"user {ADMIN[0]} on >{ADMIN[1]} ~* &* +@all",
                f"user {APP[0]} on >{APP[1]} ~* &* +@all",
                f"user {REPL[0]} on >{REPL[1]} +psync +replconf +ping",
                f"user {LINK[0]} on >{LINK[1]} {LINK_RULES}",
                f"masteruser {REPL[0]}",
                f"masterauth {REPL[1]}",
            ]
        if replica_of is not None:
            conf.append(f"replicaof {self.node(replica_of).host} {replica_of}")
        return conf

    def sentinel_conf(self, node: Node) -> list:
        first = self._first_master
        conf = node.listen_lines() + [
            f"dir {node.dir}",
            "logfile sentinel.log",
            f"sentinel monitor {SERVICE} {first.host} {first.port} {self.quorum}",
            f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}",
            f"sentinel failover-timeout {SERVICE} 4000",
        ]
        if self.acl:
            conf += [
                f"sentinel auth-user {SERVICE} {LINK[0]}",
                f"sentinel auth-pass {SERVICE} {LINK[1]}",
                "user default off",
                f"user {ADMIN[0]} on >{ADMIN[1]} +@all",
                f"user {WATCHER[0]} on >{WATCHER[1]} {WATCHER_RULES}",
                # Sentinels talk to each other as this user.
                f"sentinel sentinel-user {ADMIN[0]}",
                f"sentinel sentinel-pass {ADMIN[1]}",
            ]
        return conf

    def start(self) -> "SentinelDeployment":
        try:
            master, replica = self.nodes
            master.start(self.node_conf(master, None), shutil.which("redis-server") or "redis-server")
            replica.start(self.node_conf(replica, master.port), shutil.which("redis-server") or "redis-server")
            self.wait_for(lambda: self.link_up(replica), 10, "replication")
            binary = shutil.which("redis-sentinel") or "redis-sentinel"
            for s in self.sentinels:
                s.start(self.sentinel_conf(s), binary)
                tilt_ms = TILT_PERIOD_PER_DOWN_AFTER * self.down_after_ms
                assert s("SENTINEL", "DEBUG", "TILT-PERIOD", str(tilt_ms)) == "OK"
            self.wait_for(
                lambda: all(self.known_replicas(s) >= 1 for s in self.sentinels),
                15,
                "the Sentinels to find the replica",
            )
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for n in self.sentinels + self.nodes:
            n.close()
        if self.tls_dir is not None:
            shutil.rmtree(self.tls_dir, ignore_errors=True)

    # ------------------------------------------------------------ what the library takes

    def url(
        self,
        app: Optional[tuple] = APP,
        watcher: Optional[tuple] = WATCHER,
        service: str = SERVICE,
        sentinels: Optional[list] = None,
    ) -> str:
        scheme = "rediss+sentinel" if self.tls else "redis+sentinel"
        creds = f"{quote(app[0], safe='')}:{quote(app[1], safe='')}@" if app and self.acl else ""
        # `sentinels`: ports, of this deployment's Sentinels (at their host) or
        # not (a dead port, a Sentinel started apart: on loopback).
        at = {s.port: s.host for s in self.sentinels}
        hosts = ",".join(f"{at.get(p, '127.0.0.1')}:{p}" for p in (sentinels or list(at)))
        query = ""
        if watcher and self.acl:
            query = f"?sentinel_username={quote(watcher[0], safe='')}&sentinel_password={quote(watcher[1], safe='')}"
        return f"{scheme}://{creds}{hosts}/{service}/0{query}"

    @property
    def ca_file(self) -> Optional[str]:
        return str(self.tls_dir / "ca.pem") if self.tls_dir else None

    # ------------------------------------------------------------ looking

    def master_port(self, sentinel: int = 0) -> int:
        host, port = self.sentinels[sentinel]("SENTINEL", "get-master-addr-by-name", SERVICE)
        return int(port)

    def node(self, port: int) -> Node:
        return next(n for n in self.nodes if n.port == port)

    @property
    def master(self) -> Node:
        return self.node(self.master_port())

    @property
    def replica(self) -> Node:
        return next(n for n in self.nodes if n.port != self.master_port())

    def role(self, node: Node) -> str:
        try:
            return node("ROLE")[0]
        except (OSError, RuntimeError):
            return "down"

    def link_up(self, node: Node) -> bool:
        try:
            return "master_link_status:up" in node("INFO", "replication")
        except OSError:
            return False

    def known_replicas(self, sentinel: Node) -> int:
        """Replicas this Sentinel is connected to and does not think down."""
        try:
            replicas = sentinel("SENTINEL", "REPLICAS", SERVICE)
        except OSError:
            return 0
        flags = [dict(zip(r[::2], r[1::2])).get("flags", "") for r in replicas]
        return sum(1 for f in flags if not {"s_down", "o_down", "disconnected"} & set(f.split(",")))

    @staticmethod
    def wait_for(predicate, limit: float, what: str, paused=None, detail=None) -> None:
        """Polls `predicate` for `limit` s; the time `paused()` is true does
        not count, and `detail()` adds to the message of a timeout."""
        deadline = last = time.monotonic()
        deadline += limit
        while True:
            try:
                if predicate():
                    return
            except (OSError, RuntimeError):
                pass
            now = time.monotonic()
            if paused is not None and paused():
                deadline += now - last
            last = now
            assert now < deadline, f"timed out after {limit} s waiting for {what}" + (detail() if detail else "")
            time.sleep(0.02)  # another process's state, seen only by asking it: poll

    # ------------------------------------------------------------ faults

    def failover_done(self, old_port: int) -> bool:
        """Every Sentinel names a new master and has finished its failover, and
        that node says it is a master. (A Sentinel names the promoted replica
        before its failover ends; a killed master restarted before the end may
        be taken for the master again.)"""
        for s in self.sentinels:
            fields = s("SENTINEL", "MASTER", SERVICE)
            fields = dict(zip(fields[::2], fields[1::2]))
            if fields["flags"] != "master" or int(fields["port"]) == old_port:
                return False
        return self.role(self.node(self.master_port())) == "master"

    def failover_named(self, old_port: int) -> bool:
        """A Sentinel names a node other than `old_port`, and that node says it is a master:
        from here clients reach the new master (the Sentinel may still be finishing)."""
        port = self.master_port()
        return port != old_port and self.role(self.node(port)) == "master"

    def failing_over(self, sentinel: int = 0) -> bool:
        """Sentinel `sentinel` runs a failover of the master now."""
        fields = self.sentinels[sentinel]("SENTINEL", "MASTER", SERVICE)
        return "failover_in_progress" in dict(zip(fields[::2], fields[1::2]))["flags"].split(",")

    def in_tilt(self, sentinel: int = 0) -> bool:
        """Sentinel `sentinel` is in TILT mode: its timer ran late by more than
        2 s (a stall, a loaded machine), and for its tilt-period (30 s, 5
        times down-after here: TILT_PERIOD_PER_DOWN_AFTER) it acts on nothing:
        no failover starts, goes on or ends (Redis's Sentinel documentation)."""
        return "sentinel_tilt:1" in self.sentinels[sentinel]("INFO", "sentinel")

    def any_in_tilt(self) -> bool:
        """Some Sentinel is in TILT mode now (one that does not answer is not counted)."""
        for i in range(len(self.sentinels)):
            try:
                if self.in_tilt(i):
                    return True
            except (OSError, RuntimeError):
                pass
        return False

    def await_sentinels(self, predicate, limit: float, what: str) -> None:
        """`wait_for` what the Sentinels bring about (a promotion, the new
        master named, a replica counted), not counting the time a Sentinel
        spends in TILT mode: a stall of 2 s (a loaded machine) puts it there,
        and it acts on nothing until it ends. A timeout shows the Sentinels' logs."""
        self.wait_for(
            predicate,
            limit,
            what,
            paused=self.any_in_tilt,
            detail=lambda: f" (not counting TILT); the Sentinels' logs end:\n{self.log_tails()}",
        )

    def log_tails(self, lines: int = 12) -> str:
        """The last `lines` of each Sentinel's log, for a failure's message."""
        tails = []
        for i, s in enumerate(self.sentinels):
            try:
                text = Path(s.dir, "sentinel.log").read_text(errors="replace").splitlines()[-lines:]
            except OSError as e:
                text = [f"({e})"]
            tails.append(f"-- Sentinel {i} ({s.port}):\n" + "\n".join(text))
        return "\n".join(tails)

    def sentinel_failover(self) -> int:
        """SENTINEL FAILOVER, once the Sentinel accepts it; returns the old master's port."""
        old = self.master_port()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert self.sentinels[0]("SENTINEL", "FAILOVER", SERVICE) == "OK"
                return old
            except RespError as e:
                # NOGOODSLAVE: the Sentinel has not yet seen the replica as fit
                # (its INFO is refreshed every few seconds); INPROG: a failover runs.
                if "NOGOODSLAVE" not in str(e) and "INPROG" not in str(e) or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)  # the Sentinel's view of the replica, which it refreshes on its own timer

    def kill_master(self) -> Node:
        node = self.master
        node.kill()
        return node

    def restart_as_replica(self, node: Node) -> None:
        """A killed data node back, as a replica of the current master, in sync."""
        binary = shutil.which("redis-server") or "redis-server"
        node.start(self.node_conf(node, self.master_port()), binary)
        self.wait_for(lambda: self.link_up(node), 15, "the restarted node to sync")

    def ready_for_failover(self) -> bool:
        """A replica in sync that every Sentinel counts as good: a failover can go ahead."""
        return self.link_up(self.replica) and all(self.known_replicas(s) >= 1 for s in self.sentinels)
