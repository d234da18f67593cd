"""Test hosts in Linux network namespaces, for partitions and latency.

A :class:`Net` is a private network: a router namespace and hosts, each a
namespace of its own joined to the router by a veth pair (host ``i`` is
10.200.i.2, its side of the router 10.200.i.1). Nothing of it is in the
machine's own namespace: its addresses are seen by its hosts alone, so
every test (and every pytest-xdist worker) has its own, named from the pid
and a counter. Servers and clients run inside hosts (``ip netns exec``,
or ``netns_agent.enter`` at the start of a Python process); the test process
controls the servers through their unix sockets, which no cut reaches.

Faults, all in the router, per direction:

- :meth:`Net.cut`: packets from one host to another dropped (``ip rule ...
  blackhole``: dropped silently, as a dead link drops them; this kernel has
  neither netem nor iptables/nft), one way or both; :meth:`Net.partition`
  cuts every pair between two groups; :meth:`Net.heal` undoes cuts.
- :meth:`Net.delay`: a host's outgoing and incoming packets delayed by a
  base and a jitter, by a relay over a TUN device (``netns_relay.py``):
  policy rules send the packets to delay into the device, the relay holds
  each for its delay and writes it back, and the router forwards it.

Everything a Net made (namespaces, links, rules, the relay, every process
started in its hosts) goes at :meth:`Net.close`, which the ``net`` fixture
calls however the test ends, and at exit; namespaces left by a run that was
killed (their creator's pid is gone) are removed when the first Net of a
process starts. :func:`unavailable` says why a machine cannot run these
tests (not root, no ``ip``, namespaces refused, no ``/dev/net/tun``), for
a skip that names it.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterable, Optional

import pytest

from ferrolock.testing import RedisServer
from support.netns_agent import unix_connect
from support.redis_cluster import ClusterNode, RedisCluster
from support.redis_sentinel import Node, SentinelDeployment

PREFIX = "fltest"  # every namespace this module makes is named fltest-PID-N-ROLE
NAME = re.compile(rf"^{PREFIX}-(\d+)-\d+-")
DELAY_TABLE = 100  # the router's routing table that leads into the relay's device
DEVICE = "dly"  # the relay's TUN device, in the router
PREF_CUT = 100  # cuts come first: a cut link drops even a delayed packet on its way out
PREF_FROM_RELAY = 150  # a packet the relay wrote back is forwarded as usual
PREF_DELAY = 200
RELAY = Path(__file__).with_name("netns_relay.py")
AGENT = Path(__file__).with_name("netns_agent.py")
AGENT_CALL_S = 60.0  # the longest one agent call may take before the test fails

_nets: "list[Net]" = []
_counter = itertools.count()
_stale_checked = False


# -- what the machine allows --------------------------------------------------


def _run(argv: list, input: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, input=input, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}\n{input or ''}")
    return done


@lru_cache(maxsize=None)
def unavailable() -> Optional[str]:
    """Why network namespaces cannot be made here, or None when they can."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "no `ip` command: install iproute2 (`make redis` does)"
    probe = f"{PREFIX}-{os.getpid()}-probe-x"
    made = _run(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return f"`ip netns add` is refused here: {made.stderr.strip()}"
    _run(["ip", "netns", "del", probe], check=False)
    return None


@lru_cache(maxsize=None)
def tun_unavailable() -> Optional[str]:
    """Why added latency (a TUN device) cannot be had here, or None."""
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as e:
        return f"no usable /dev/net/tun ({e.strerror}): latency needs a TUN device"
    return None


def skip_unless_available(latency: bool = False) -> None:
    """pytest.skip naming what this machine lacks."""
    reason = unavailable() or (tun_unavailable() if latency else None)
    if reason:
        pytest.skip(reason)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list:
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def _remove_namespace(ns: str) -> None:
    """Kills what still runs inside `ns` (a namespace of this module's), then deletes it."""
    pids = _run(["ip", "netns", "pids", ns], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    _run(["ip", "netns", "del", ns], check=False)


def remove_stale() -> list:
    """Removes the namespaces of runs whose process is gone (a killed run); returns their names."""
    stale = [ns for ns in _namespaces() if (m := NAME.match(ns)) and not _alive(int(m.group(1)))]
    for ns in stale:
        _remove_namespace(ns)
    return stale


# -- hosts and the network ----------------------------------------------------


class Host:
    """One namespace on the net: its address, and how to run a program in it."""

    def __init__(self, net: "Net", index: int, role: str):
        self.net, self.index, self.role = net, index, role
        self.ns = f"{net.tag}-{role}"
        self.ip = f"10.200.{index}.2"
        self.gateway = f"10.200.{index}.1"
        self.link = f"h{index}"  # its veth's end in the router

    def argv(self, argv: list) -> list:
        """`argv` run inside this host."""
        return ["ip", "netns", "exec", self.ns, *map(str, argv)]

    def popen(self, argv: list, **kwargs) -> subprocess.Popen:
        """A process started in this host, killed at the net's close if still running."""
        proc = subprocess.Popen(self.argv(argv), **kwargs)
        self.net.procs.append(proc)
        return proc

    def __repr__(self) -> str:
        return f"<Host {self.role} {self.ip}>"


class Net:
    """A router and its hosts (see the module's doc). A context manager."""

    def __init__(self, seed: int = 0):
        global _stale_checked
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        if not _stale_checked:
            _stale_checked = True
            remove_stale()
        self.tag = f"{PREFIX}-{os.getpid()}-{next(_counter)}"
        self.seed = seed
        self.hosts: list[Host] = []
        self.procs: list = []  # processes started in the hosts: killed at close
        self.cuts: dict = {}  # (from ip, to ip) -> how many faults cut it now
        self.delays: dict = {}  # host ip -> (out_s, out_jitter_s, in_s, in_jitter_s)
        self.relay: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()
        self._ports = itertools.count(7001)  # servers' ports: unique in a net, so a port names a server
        self.router = f"{self.tag}-router"
        self._namespaces = [self.router]
        _nets.append(self)
        try:
            _run(["ip", "netns", "add", self.router])
            self._router(
                "link set lo up",
                f"rule add pref {PREF_FROM_RELAY} iif {DEVICE} lookup main",
            )
            self._sysctl(
                self.router,
                "net.ipv4.ip_forward=1",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
            )
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ building

    def _router(self, *commands: str) -> None:
        _run(["ip", "-n", self.router, "-b", "-"], input="\n".join(commands) + "\n")

    @staticmethod
    def _sysctl(ns: str, *settings: str) -> None:
        _run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", *settings])

    def host(self, role: str) -> Host:
        """A new host named `role` (letters, digits, dashes), linked to the router."""
        if not re.fullmatch(r"[a-z0-9-]{1,24}", role) or any(h.role == role for h in self.hosts):
            raise ValueError(f"a host's role is a unique short name, not {role!r}")
        index = len(self.hosts) + 1
        if index > 250:
            raise ValueError("a Net has at most 250 hosts")
        h = Host(self, index, role)
        _run(["ip", "netns", "add", h.ns])
        self._namespaces.append(h.ns)
        self.hosts.append(h)
        self._router(
            f"link add {h.link} type veth peer name eth0 netns {h.ns}",
            f"addr add {h.gateway}/24 dev {h.link}",
            f"link set {h.link} up",
        )
        _run(
            ["ip", "-n", h.ns, "-b", "-"],
            input="\n".join(
                [
                    "link set lo up",
                    f"addr add {h.ip}/24 dev eth0",
                    "link set eth0 up",
                    f"route add default via {h.gateway}",
                ]
            )
            + "\n",
        )
        return h

    def port(self) -> int:
        """A port no other server of this net has."""
        return next(self._ports)

    def by_role(self, role: str) -> Host:
        return next(h for h in self.hosts if h.role == role)

    # ------------------------------------------------------------ cuts

    def cut(self, a: Host, b: Host, both: bool = True) -> list:
        """Packets from `a` to `b` (and from `b` to `a` unless `both` is False)
        are dropped. Returns the (from, to) pairs cut, for :meth:`restore`."""
        return self._cut([(a.ip, b.ip)] + ([(b.ip, a.ip)] if both else []))

    def partition(self, side: Iterable[Host], rest: Optional[Iterable[Host]] = None, both: bool = True) -> list:
        """Every host of `side` cut from every host of `rest` (default: every
        other host); with `both` False, only what `side` sends is dropped.
        Returns the pairs cut, for :meth:`restore`."""
        side = list(side)
        rest = [h for h in (self.hosts if rest is None else rest) if h not in side]
        pairs = [(a.ip, b.ip) for a in side for b in rest]
        if both:
            pairs += [(b, a) for a, b in pairs]
        return self._cut(pairs)

    def _cut(self, pairs: list) -> list:
        """Counts each pair's cuts (faults may overlap): its rule goes at the last restore."""
        pairs = list(dict.fromkeys(pairs))
        with self._lock:
            new = [p for p in pairs if not self.cuts.get(p)]
            if new:
                self._router(*(f"rule add pref {PREF_CUT} from {s}/32 to {d}/32 blackhole" for s, d in new))
            for p in pairs:
                self.cuts[p] = self.cuts.get(p, 0) + 1
        return pairs

    def restore(self, pairs: list) -> None:
        """Undoes one cut of each pair (what :meth:`cut` or :meth:`partition` returned)."""
        with self._lock:
            gone = []
            for p in pairs:
                left = self.cuts.get(p, 0) - 1
                if left > 0:
                    self.cuts[p] = left
                elif p in self.cuts:
                    del self.cuts[p]
                    gone.append(p)
            if gone:
                self._router(*(f"rule del pref {PREF_CUT} from {s}/32 to {d}/32 blackhole" for s, d in gone))

    def heal(self, a: Optional[Host] = None, b: Optional[Host] = None) -> None:
        """Undoes every cut between `a` and `b` (both ways), every cut of `a`, or every cut."""
        with self._lock:
            if a is None:
                gone = list(self.cuts)
            elif b is None:
                gone = [p for p in self.cuts if a.ip in p]
            else:
                gone = [p for p in self.cuts if set(p) == {a.ip, b.ip}]
            for p in gone:
                del self.cuts[p]
            if gone:
                self._router(*(f"rule del pref {PREF_CUT} from {s}/32 to {d}/32 blackhole" for s, d in gone))

    # ------------------------------------------------------------ latency

    @property
    def can_delay(self) -> bool:
        """Whether latency can be added here (a TUN device for the relay)."""
        return tun_unavailable() is None

    def delay(self, host: Host, out: tuple = (0.0, 0.0), into: tuple = (0.0, 0.0)) -> None:
        """What `host` sends is held `out` = (base s, jitter s) on its way,
        what it is sent `into`; (0, 0) both ways: no delay."""
        reason = tun_unavailable()
        if reason:
            raise RuntimeError(reason)
        with self._lock:
            self._relay()
            before = self.delays.get(host.ip, (0.0, 0.0, 0.0, 0.0))
            after = (float(out[0]), float(out[1]), float(into[0]), float(into[1]))
            rules = []
            if (before[0] or before[1]) != (after[0] or after[1]):
                verb = "add" if after[0] or after[1] else "del"
                rules.append(f"rule {verb} pref {PREF_DELAY} iif {host.link} lookup {DELAY_TABLE}")
            if (before[2] or before[3]) != (after[2] or after[3]):
                verb = "add" if after[2] or after[3] else "del"
                rules.append(f"rule {verb} pref {PREF_DELAY} to {host.ip}/32 lookup {DELAY_TABLE}")
            self.relay.stdin.write(json.dumps({host.ip: after}) + "\n")
            self.relay.stdin.flush()
            if self.relay.stdout.readline().strip() != "ok":
                raise RuntimeError("the latency relay did not take its delays")
            if rules:
                self._router(*rules)
            if any(after):
                self.delays[host.ip] = after
            else:
                self.delays.pop(host.ip, None)

    def _relay(self) -> None:
        """Starts the relay and its device in the router, once."""
        if self.relay is not None:
            return
        self.relay = subprocess.Popen(
            ["ip", "netns", "exec", self.router, sys.executable, str(RELAY), DEVICE, str(self.seed)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs.append(self.relay)
        if self.relay.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the latency relay did not start (exit {self.relay.poll()})")
        self._router(
            f"link set {DEVICE} up",
            f"route add default dev {DEVICE} table {DELAY_TABLE}",
        )
        self._sysctl(self.router, f"net.ipv4.conf.{DEVICE}.rp_filter=0")

    # ------------------------------------------------------------ the end

    def close(self) -> None:
        """Kills every process started in it and removes every namespace (and so every link)."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self.procs = []
        for ns in reversed(self._namespaces):
            _remove_namespace(ns)
        self._namespaces = []
        if self in _nets:
            _nets.remove(self)

    def __enter__(self) -> "Net":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _close_all() -> None:
    for net in list(_nets):
        net.close()


# -- servers in hosts ---------------------------------------------------------


class InHost:
    """What a server in a host changes of a loopback one: it listens on its
    host's address (`host`; `where` is the Host) and on a unix socket for the
    test's own commands, runs inside the host, and the test reaches it
    through the socket."""

    where: Host
    host: str
    socket: Optional[str]
    port: int
    dir: str

    def place(self, where: Host, port: int) -> None:
        self.where, self.host, self.port = where, where.ip, port
        self._port_chosen = False
        self.socket = os.path.join(self.dir, "redis.sock")

    @property
    def url(self) -> str:
        return f"redis://{self._auth()}{self.host}:{self.port}/0"  # type: ignore[attr-defined]

    def _args(self) -> list:
        args = super()._args()  # type: ignore[misc]
        if "--bind" in args:
            args[args.index("--bind") + 1] = self.host
        # Reached by the net's hosts only, without a password.
        return self.where.argv(args + ["--protected-mode", "no"])

    def _open(self) -> socket.socket:
        return unix_connect(self.socket, 10)


class HostedServer(InHost, RedisServer):
    """A redis-server alone in a host `where`, on `port` of its address."""

    def __init__(self, where: Host, port: int = 6379, extra: tuple = ()):
        RedisServer.__init__(self, port=port, extra=extra)
        self.place(where, port)


class HostedNode(InHost, Node):
    """A Sentinel deployment's data node or Sentinel, alone in a host."""


class HostedSentinels(SentinelDeployment):
    """A master, a replica and `sentinels` Sentinels, each in a host of `net`
    of its own (roles node-0, node-1, sentinel-0...)."""

    def __init__(self, net: Net, **options):
        self.net = net
        super().__init__(**options)

    def new_node(self, role: str, auth: Optional[tuple]) -> Node:
        node = HostedNode(self.tls_dir, auth)
        node.place(self.net.host(role), self.net.port())
        return node

    def host_of(self, port: int) -> Host:
        return next(n.where for n in self.nodes + self.sentinels if n.port == port)


class HostedClusterNode(InHost, ClusterNode):
    """A Redis Cluster node alone in a host (it announces its host's address)."""


class HostedCluster(RedisCluster):
    """A Redis Cluster whose every node is in a host of `net` of its own
    (roles cluster-0... in the order of `RedisCluster.nodes`)."""

    def __init__(self, net: Net, **options):
        self.net = net
        super().__init__(**options)

    def new_node(self, index: int, extra: tuple) -> ClusterNode:
        where = self.net.host(f"cluster-{index}")
        node = HostedClusterNode(self.node_timeout_ms, extra + ("--cluster-announce-ip", where.ip))
        node.place(where, self.net.port())
        node.bus_port = node.port + 10000
        return node

    def host_of(self, port: int) -> Host:
        return self._node(port).where  # type: ignore[attr-defined]

    def masters_seen_by(self, port: int) -> set:
        """The masters serving slots as the node on `port` sees them (CLUSTER
        SLOTS): while a master is cut off, ask one on the other side."""
        return {int(r[2][1]) for r in self.raw(port)("CLUSTER", "SLOTS")}


# -- clients in hosts ---------------------------------------------------------


class AgentError(RuntimeError):
    """What an agent's code raised: `kind` is the exception's class name."""

    def __init__(self, kind: str, message: str, trace: str):
        super().__init__(f"{kind}: {message}\n--- in the agent:\n{trace}")
        self.kind, self.message = kind, message


class Agent:
    """A Python process in a host that runs the test's code: ``agent("x =
    1")`` runs statements, ``agent("x + 1")`` returns an expression's value
    (picklable), and what the code raises is raised here as
    :class:`AgentError`. One call at a time; :meth:`later` runs one in the
    background and returns its Future."""

    def __init__(self, host: Host):
        self.host = host
        mine, theirs = socket.socketpair()
        self.proc = host.popen(
            [sys.executable, str(AGENT), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        self._conn = Connection(mine.detach())
        self._pool = ThreadPoolExecutor(1)

    def __call__(self, code: str, timeout: float = AGENT_CALL_S) -> Any:
        return self.later(code, timeout).result()

    def later(self, code: str, timeout: float = AGENT_CALL_S) -> Future:
        return self._pool.submit(self._call, code, timeout)

    def _call(self, code: str, timeout: float) -> Any:
        self._conn.send(code)
        if not self._conn.poll(timeout):
            raise TimeoutError(f"the agent in {self.host.role} took over {timeout} s on: {code}")
        answer = self._conn.recv()
        if answer[0] == "ok":
            return answer[1]
        raise AgentError(*answer[1:])

    def close(self) -> None:
        try:
            self._conn.send(None)
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._pool.shutdown(wait=False)
        self._conn.close()
