"""Start and stop a throwaway Redis Cluster on free loopback ports: primaries
only (the default, quick to form), or each primary with replicas
(`replicas=1`, a `cluster-replicas 1` layout) that take over when a master
fails or is told to fail over."""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Tuple

from ferrolock.testing import Raw, RedisServer, free_port

SLOTS = 16384
# How long a node is left to finish its handshakes before it is sent
# CLUSTER MEET again for a peer it does not know: past the 1 s after which
# a node drops a handshake not answered.
MEET_AGAIN_S = 1.5


def crc16(data: bytes) -> int:
    """CRC16/XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses for key slots."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key: str) -> int:
    """The cluster slot of a key, honouring a non-empty {hash tag} as the Redis Cluster spec does."""
    raw = key.encode()
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc16(raw) % SLOTS


class ClusterNode(RedisServer):
    """A redis-server with cluster mode on, its nodes.conf in its own temp dir and an explicit bus port.
    It listens on `host` (a subclass may place it elsewhere than loopback)."""

    host = "127.0.0.1"

    def __init__(self, node_timeout_ms: int = 2000, extra: tuple = ()) -> None:
        super().__init__(extra=extra)
        # The default bus port (port + 10000) can exceed 65535 for ephemeral ports, so pick one.
        self.bus_port = free_port()
        self.node_timeout_ms = node_timeout_ms

    def _args(self) -> list:
        # The node's config (nodes.conf: its id, its peers, its role) stays in its
        # directory, so a node killed and started again rejoins as the same node.
        return super()._args() + [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            f"{self.dir}/nodes.conf",
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            "--cluster-port",
            str(self.bus_port),
        ]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def control(self) -> Raw:
        """A client for the harness's own commands (its unix socket when it has one)."""
        return Raw(self.unix_url if self.socket else self.url)


class RedisCluster:
    """A Redis Cluster of `nodes` primaries, slots split evenly, formed without
    redis-cli; with `replicas`, each primary gets that many replicas (CLUSTER
    REPLICATE), and `start` returns once every replica's link is up and every
    node agrees on who serves what.

    With replicas the cluster is set up to fail over fast: `node_timeout_ms`
    (default 500 ms with replicas) is how long a silent master may stay
    unanswered before it is flagged failing; a replica then waits 0.5-1 s and
    is elected, so a killed master is replaced in about 1.5-2.5 s. A replica
    takes over however long its link has been down
    (`cluster-replica-validity-factor 0`), and the other masters keep serving
    their slots meanwhile (`cluster-require-full-coverage no`)."""

    def __init__(self, nodes: int = 3, replicas: int = 0, node_timeout_ms: Optional[int] = None):
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.nodes: List[ClusterNode] = []
        self.count = nodes
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms or (500 if replicas else 2000)
        # the node id of each node, by port (known once started)
        self.ids: Dict[int, str] = {}
        # ranges[i] = (first slot, last slot) owned by self.nodes[i]
        self.ranges: List[Tuple[int, int]] = [(i * SLOTS // nodes, (i + 1) * SLOTS // nodes - 1) for i in range(nodes)]

    @property
    def ports(self) -> List[int]:
        """The ports of the primaries it was started with (in slot order)."""
        return [n.port for n in self.nodes[: self.count]]

    @property
    def all_ports(self) -> List[int]:
        """The ports of every node, replicas included."""
        return [n.port for n in self.nodes]

    @property
    def url(self) -> str:
        """Seed list of every node, e.g. redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3."""
        return "redis+cluster://" + ",".join(f"{n.host}:{n.port}" for n in self.nodes)

    def _node(self, port: int) -> ClusterNode:
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(f"no cluster node on port {port}")

    def command(self, port: int, *args: str) -> object:
        """Send one command to the node on `port` over a fresh connection; returns the parsed reply."""
        return self._node(port).command(*args)

    def node_port_for(self, key: str) -> int:
        """The port of the primary that owned the key's slot when the cluster
        was formed (see `owner` for who serves it now)."""
        slot = key_slot(key)
        for node, (first, last) in zip(self.nodes, self.ranges):
            if first <= slot <= last:
                return node.port
        raise RuntimeError(f"slot {slot} is not assigned")

    def start(self) -> "RedisCluster":
        try:
            extra: tuple = ()
            if self.replicas:
                extra = (
                    "--cluster-replica-validity-factor",
                    "0",
                    "--cluster-require-full-coverage",
                    "no",
                    "--repl-diskless-sync-delay",
                    "0",
                )
            for i in range(self.count * (1 + self.replicas)):
                node = self.new_node(i, extra)
                self.nodes.append(node)  # appended first so close() removes its dir even if start fails
                node.start()
            self.ids = {n.port: n.control("CLUSTER", "MYID").decode() for n in self.nodes}
            for node, (first, last) in zip(self.nodes, self.ranges):
                self._expect_ok(node, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
            # Every pair meets directly (not just first -> others) so nobody waits on gossip to learn a peer.
            for i, node in enumerate(self.nodes):
                for peer in self.nodes[i + 1 :]:
                    self._expect_ok(node, "CLUSTER", "MEET", peer.host, str(peer.port), str(peer.bus_port))
            self._await_known()
            if self.replicas:
                for i, replica in enumerate(self.nodes[self.count :]):
                    master = self.nodes[i % self.count]
                    self._expect_ok(replica, "CLUSTER", "REPLICATE", self.ids[master.port])
                self.await_topology()
            else:
                self._await_formed()
        except BaseException:
            self.close()
            raise
        return self

    def new_node(self, index: int, extra: tuple) -> ClusterNode:
        """Node `index` (the masters first; a subclass may place it elsewhere)."""
        return ClusterNode(self.node_timeout_ms, extra)

    # -- with replicas: who serves what, faults, and waiting for agreement --

    def raw(self, port: int) -> Raw:
        return self._node(port).control

    def read_replica(self, port: int, *args: object) -> object:
        """One read-only command on the replica on `port` (READONLY first,
        on the same connection, so it answers instead of redirecting)."""
        with self._node(port).connect() as conn:
            conn("READONLY")
            return conn(*args)

    def topology(self, port: int) -> Dict[int, List[int]]:
        """What the node on `port` says (CLUSTER NODES): each master's port
        and its replicas' ports, for the nodes it does not flag failing."""
        text = self.raw(port)("CLUSTER", "NODES").decode()
        masters: Dict[str, int] = {}
        replicas: List[Tuple[str, int]] = []
        for line in text.splitlines():
            fields = line.split()
            node_id, addr, flags, master_id = fields[0], fields[1], fields[2].split(","), fields[3]
            node_port = int(addr.split("@", 1)[0].rsplit(":", 1)[1])
            if "fail" in flags or "fail?" in flags or "handshake" in flags or "noaddr" in flags:
                continue
            if "master" in flags:
                masters[node_id] = node_port
            elif "slave" in flags:
                replicas.append((master_id, node_port))
        out: Dict[int, List[int]] = {p: [] for p in masters.values()}
        for master_id, node_port in replicas:
            if master_id in masters:
                out[masters[master_id]].append(node_port)
        return {m: sorted(r) for m, r in out.items()}

    def masters(self) -> List[int]:
        """The ports of the masters now serving slots (as a live node sees it)."""
        return sorted(set(self._slot_owners().values()))

    def _slot_owners(self) -> Dict[Tuple[int, int], int]:
        """(first, last) slot range -> port of the master serving it, as a live node says."""
        for node in self.nodes:
            if not node.alive:
                continue
            slots = self.raw(node.port)("CLUSTER", "SLOTS")
            return {(int(r[0]), int(r[1])): int(r[2][1]) for r in slots}
        raise RuntimeError("no cluster node is alive")

    def owner(self, key: str) -> int:
        """The port of the master serving `key`'s slot now."""
        return self.serving(key_slot(key))

    def serving(self, slot: int) -> int:
        """The port of the master serving `slot` now."""
        for (first, last), port in self._slot_owners().items():
            if first <= slot <= last:
                return port
        raise RuntimeError(f"slot {slot} is not served")

    def replica_of(self, master_port: int) -> int:
        """The port of (the first) replica of the master on `master_port`."""
        return self.topology(master_port)[master_port][0]

    def _peers(self, node: ClusterNode) -> Tuple[set, set]:
        """(ports of the nodes `node` knows, ports of those it is still
        shaking hands with), from its CLUSTER NODES."""
        known, shaking = set(), set()
        for line in self.raw(node.port)("CLUSTER", "NODES").decode().splitlines():
            fields = line.split()
            port = int(fields[1].split("@", 1)[0].rsplit(":", 1)[1])
            (shaking if "handshake" in fields[2].split(",") else known).add(port)
        return known, shaking

    def _meet_again(self, missing: Dict[int, List[int]]) -> None:
        """CLUSTER MEET again, from each node to the peers it neither knows
        nor is shaking hands with (`missing`: node port -> peer ports). A node
        drops a handshake its peer has not answered within the node timeout
        (1 s at least), and gossip starts it again only from a node that knows
        the peer: a node kept off the CPU for a second right after the first
        MEETs (a loaded machine) would otherwise stay alone for good."""
        for port, peers in missing.items():
            for peer in map(self._node, peers):
                self._expect_ok(self._node(port), "CLUSTER", "MEET", peer.host, str(peer.port), str(peer.bus_port))

    def _await_known(self, limit: float = 20.0) -> None:
        """Until every node knows every other (the MEETs' handshakes done),
        meeting again whoever a dropped handshake left out."""
        missing: Dict[int, List[int]] = {}
        met = time.monotonic()

        def known() -> bool:
            nonlocal met
            missing.clear()
            shaking = False
            for node in self.nodes:
                knows, shakes = self._peers(node)
                shaking = shaking or bool(shakes)
                lost = [n.port for n in self.nodes if n.port not in knows | shakes]
                if lost:
                    missing[node.port] = lost
            if missing and time.monotonic() - met >= MEET_AGAIN_S:
                self._meet_again(missing)
                met = time.monotonic()
            return not missing and not shaking

        self._await(known, limit, "every node to know every other", lambda: f" (still unknown, by node: {missing})")

    def await_topology(self, limit: float = 30.0) -> Dict[int, List[int]]:
        """Until every live node agrees on one layout in which each master
        serving slots has `replicas` live replicas with their replication
        link up, every slot is served, and no node is flagged failing;
        returns that layout ({master port: [replica ports]})."""
        last: Dict[str, object] = {}

        def agreed() -> bool:
            live = [n for n in self.nodes if n.alive]
            views = [self.topology(n.port) for n in live]
            last["views"] = views
            first = views[0]
            if any(v != first for v in views) or len(first) != self.count:
                return False
            if any(len(r) != self.replicas for r in first.values()):
                return False
            for n in live:
                info = self.raw(n.port)("CLUSTER", "INFO").decode()
                if "cluster_state:ok" not in info:
                    return False
                slots = self.raw(n.port)("CLUSTER", "SLOTS")
                if sum(int(r[1]) - int(r[0]) + 1 for r in slots) != SLOTS:
                    return False
                if any(int(r[2][1]) not in first for r in slots):
                    return False
            for replicas in first.values():
                for port in replicas:
                    if b"master_link_status:up" not in self.raw(port)("INFO", "replication"):
                        return False
            last["layout"] = first
            return True

        self._await(agreed, limit, f"the nodes to agree on the topology (last views: {last})")
        return last["layout"]  # type: ignore[return-value]

    @staticmethod
    def _await(predicate, limit: float, what: str, detail=lambda: "") -> None:
        deadline = time.monotonic() + limit
        while True:
            try:
                if predicate():
                    return
            except (OSError, ValueError, IndexError, RuntimeError):
                pass  # a node restarting, or a reply in flux: ask again
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {limit} s waiting for {what}{detail()}")
            time.sleep(0.02)  # the nodes gossip: nothing to await but their reported state

    def kill(self, port: int) -> None:
        """SIGKILL the node on `port` (its config stays for `restart`)."""
        self._node(port).kill()

    def restart(self, port: int) -> None:
        """Start the node on `port` again, as the same node (it rejoins, a
        former master as a replica of whoever took its slots)."""
        self._node(port).start()

    @staticmethod
    def _expect_ok(node: ClusterNode, *args: str) -> None:
        reply = node.command(*args)
        if reply != "OK":
            raise RuntimeError(f"{' '.join(args)} on port {node.port} failed: {reply!r}")

    def _formed(self, node: ClusterNode) -> Tuple[bool, str]:
        """Whether the node sees the whole cluster: state ok, all nodes known, all slots covered."""
        info = node.command("CLUSTER", "INFO").decode(errors="replace")
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line and not line.startswith("$"))
        if fields.get("cluster_state") != "ok" or fields.get("cluster_known_nodes") != str(self.count):
            return False, info
        slots = node.command("CLUSTER", "SLOTS")
        covered = sum(entry[1] - entry[0] + 1 for entry in slots)
        return covered == SLOTS, info

    def _await_formed(self) -> None:
        deadline = time.monotonic() + 20
        last: Optional[str] = None
        while time.monotonic() < deadline:
            ok = True
            for node in self.nodes:
                formed, last = self._formed(node)
                if not formed:
                    ok = False
                    break
            if ok:
                return
            time.sleep(0.05)  # gossip is converging: nothing to await but the reported state
        raise RuntimeError(f"redis cluster did not form within 20 s; last CLUSTER INFO:\n{last}")

    def close(self) -> None:
        """Kill every node (even if another fails to stop) and remove their dirs."""
        error: Optional[BaseException] = None
        for node in self.nodes:
            try:
                node.kill()
            except BaseException as e:  # keep going: the other nodes must still die
                error = error or e
            node.close()
        self.nodes = []
        if error is not None:
            raise error
