"""Start and stop a throwaway Redis Cluster (primaries only) on free loopback ports."""

from __future__ import annotations

import time
from typing import List, Optional, Tuple

from redis_server import RedisServer, free_port

SLOTS = 16384


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
            raw = raw[start + 1:end]
    return crc16(raw) % SLOTS


def _parse(buf: bytes, pos: int = 0) -> Tuple[object, int]:
    """Parse one RESP2 value from buf at pos; returns (value, next pos). Raises ValueError if truncated."""
    end = buf.index(b"\r\n", pos)
    kind, line = buf[pos:pos + 1], buf[pos + 1:end]
    pos = end + 2
    if kind in (b"+", b"-"):
        return line, pos
    if kind == b":":
        return int(line), pos
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, pos
        if len(buf) < pos + n + 2:
            raise ValueError("truncated bulk string")
        return buf[pos:pos + n], pos + n + 2
    if kind == b"*":
        items = []
        for _ in range(max(int(line), 0)):
            item, pos = _parse(buf, pos)
            items.append(item)
        return items, pos
    raise ValueError(f"unexpected RESP type {kind!r}")


class ClusterNode(RedisServer):
    """A redis-server with cluster mode on, its nodes.conf in its own temp dir and an explicit bus port."""

    def __init__(self) -> None:
        super().__init__()
        # The default bus port (port + 10000) can exceed 65535 for ephemeral ports, so pick one.
        self.bus_port = free_port()

    def _args(self) -> list:
        return super()._args() + [
            "--cluster-enabled", "yes",
            "--cluster-config-file", f"{self.dir}/nodes.conf",
            "--cluster-node-timeout", "2000",
            "--cluster-port", str(self.bus_port),
        ]


class RedisCluster:
    """A Redis Cluster of `nodes` primaries (no replicas), slots split evenly, formed without redis-cli."""

    def __init__(self, nodes: int = 3):
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.nodes: List[ClusterNode] = []
        self.count = nodes
        # ranges[i] = (first slot, last slot) owned by self.nodes[i]
        self.ranges: List[Tuple[int, int]] = [
            (i * SLOTS // nodes, (i + 1) * SLOTS // nodes - 1) for i in range(nodes)
        ]

    @property
    def ports(self) -> List[int]:
        return [n.port for n in self.nodes]

    @property
    def url(self) -> str:
        """Seed list of every node, e.g. redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def _node(self, port: int) -> ClusterNode:
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(f"no cluster node on port {port}")

    def command(self, port: int, *args: str) -> bytes:
        """Send one command to the node on `port` over a fresh connection; returns the raw reply."""
        return self._node(port).command(*args)

    def node_port_for(self, key: str) -> int:
        """The port of the primary that owns the key's slot."""
        slot = key_slot(key)
        for node, (first, last) in zip(self.nodes, self.ranges):
            if first <= slot <= last:
                return node.port
        raise RuntimeError(f"slot {slot} is not assigned")

    def start(self) -> "RedisCluster":
        try:
            for _ in range(self.count):
                node = ClusterNode()
                self.nodes.append(node)  # appended first so close() removes its dir even if start fails
                node.start()
            for node, (first, last) in zip(self.nodes, self.ranges):
                self._expect_ok(node, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
            # Every pair meets directly (not just first -> others) so nobody waits on gossip to learn a peer.
            for i, node in enumerate(self.nodes):
                for peer in self.nodes[i + 1:]:
                    self._expect_ok(node, "CLUSTER", "MEET", "127.0.0.1", str(peer.port), str(peer.bus_port))
            self._await_formed()
        except BaseException:
            self.close()
            raise
        return self

    @staticmethod
    def _expect_ok(node: ClusterNode, *args: str) -> None:
        reply = node.command(*args)
        if not reply.startswith(b"+OK"):
            raise RuntimeError(f"{' '.join(args)} on port {node.port} failed: {reply!r}")

    def _formed(self, node: ClusterNode) -> Tuple[bool, str]:
        """Whether the node sees the whole cluster: state ok, all nodes known, all slots covered."""
        info = node.command("CLUSTER", "INFO").decode(errors="replace")
        fields = dict(
            line.split(":", 1) for line in info.splitlines() if ":" in line and not line.startswith("$")
        )
        if fields.get("cluster_state") != "ok" or fields.get("cluster_known_nodes") != str(self.count):
            return False, info
        try:
            slots, _ = _parse(node.command("CLUSTER", "SLOTS"))
        except (ValueError, IndexError):
            return False, info  # a partial reply: ask again
        if not isinstance(slots, list):
            return False, info
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
