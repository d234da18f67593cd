"""The test network of tests/support/netns.py: cuts one way and both, healing,
latency with jitter through the relay, and nothing left behind (namespaces,
links, processes), even by a run that was killed. The relay's own bounds
are checked without a network."""

from __future__ import annotations

import os
import random
import socket
import statistics
import subprocess
import sys

import pytest

from support import netns
from support.netns import Agent, HostedServer
from support.netns_relay import MAX_DELAY_S, MAX_QUEUED, Delays, Relay

PROBE = r"""
import socket, time
def rtt(ip, port, timeout=2.0):
    '''Seconds for a PING on a new connection (a handshake and a command:
    two round trips), or None when nothing answers in time.'''
    t = time.monotonic()
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            if not s.recv(64).startswith(b"+PONG"):
                return None
    except OSError:
        return None
    return time.monotonic() - t
"""


@pytest.fixture
def pair(net):
    """A redis-server in one host and an agent in another."""
    server = HostedServer(net.host("server")).start()
    agent = Agent(net.host("client"))
    agent(PROBE)
    try:
        yield net, server, agent
    finally:
        agent.close()
        server.close()


def rtt(agent, server, timeout=2.0):
    return agent(f"rtt({server.host!r}, {server.port}, {timeout})")


def test_hosts_reach_each_other_through_the_router_and_cuts_drop_packets_one_way_or_both(pair):
    net, server, agent = pair
    client = net.by_role("client")
    assert rtt(agent, server) is not None
    assert server.command("PING") == "PONG", "the test's own commands go through the unix socket"
    net.cut(client, net.by_role("server"))
    assert rtt(agent, server, 0.5) is None
    assert server.command("PING") == "PONG", "no cut reaches the unix socket"
    net.heal()
    assert rtt(agent, server) is not None
    for one_way in ((client, net.by_role("server")), (net.by_role("server"), client)):
        net.cut(*one_way, both=False)
        assert rtt(agent, server, 0.5) is None, f"{one_way[0].role} -> {one_way[1].role} dropped"
        net.heal(*one_way)
        assert rtt(agent, server) is not None
    net.partition([client])
    assert rtt(agent, server, 0.5) is None
    net.heal(client)
    assert rtt(agent, server) is not None and not net.cuts


@pytest.mark.latency
def test_latency_is_added_per_direction_with_jitter_and_removed(pair):
    net, server, agent = pair
    client = net.by_role("client")
    quick = min(rtt(agent, server) for _ in range(3))
    net.delay(client, out=(0.1, 0.0))
    one_way = [rtt(agent, server) for _ in range(3)]
    # Two round trips, each crossing the delayed direction once.
    assert all(0.2 <= t < 0.2 + 0.3 for t in one_way), one_way
    net.delay(client, out=(0.1, 0.05), into=(0.1, 0.05))
    both = [rtt(agent, server) for _ in range(8)]
    # Each round trip 0.1-0.3 s: two of them, never less; a loaded machine
    # has delivered one of eight a further 0.4 s late, so the bound above
    # is on the median.
    assert all(t >= 0.2 for t in both), both
    assert statistics.median(both) < 0.6 + 0.3, both
    assert statistics.pstdev(both) > 0.005, f"no jitter: {both}"
    net.delay(client)
    assert min(rtt(agent, server) for _ in range(3)) < quick + 0.1
    assert not net.delays


def test_a_net_leaves_nothing_behind_and_a_killed_runs_namespaces_are_removed(tmp_path):
    netns.skip_unless_available()
    with netns.Net() as n:
        h = n.host("lonely")
        sleeper = h.popen(["sleep", "600"])
        names = [n.router, h.ns]
        assert set(names) <= set(netns._namespaces())
    assert not set(names) & set(netns._namespaces())
    assert sleeper.poll() is not None, "a process started in a host is killed with its net"
    # A run killed with its namespaces still there: a child process that makes one and dies.
    code = (
        f"import sys; sys.path[:0] = {sys.path!r}; from support import netns; import os; "
        "n = netns.Net(); n.host('left'); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    left = [ns for ns in netns._namespaces() if ns.endswith("-left")]
    assert left, "the killed run's namespace is there"
    removed = netns.remove_stale()
    assert set(left) <= set(removed) and not set(left) & set(netns._namespaces())
    mine = netns.Net()
    try:
        assert mine.router in netns._namespaces(), "a live run's namespaces are never taken for stale"
        netns.remove_stale()
        assert mine.router in netns._namespaces()
    finally:
        mine.close()


def test_every_name_is_unique_to_the_process_and_the_net():
    netns.skip_unless_available()
    with netns.Net() as a, netns.Net() as b:
        assert a.tag != b.tag and str(os.getpid()) in a.tag
        assert a.host("x").ns != b.host("x").ns
        with pytest.raises(ValueError, match="unique short name"):
            a.host("x")


# -- the relay's bounds, without a network ---------------------------------------


class Device:
    """What the relay writes to, recorded."""

    def __init__(self):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)

    def packets(self) -> list:
        out = b""
        while True:
            try:
                out += os.read(self.r, 65536)
            except BlockingIOError:
                return out


def ipv4(src: str, dst: str, n: int) -> bytes:
    header = bytes([0x45]) + bytes(11) + socket.inet_aton(src) + socket.inet_aton(dst)
    return header + n.to_bytes(4, "big")


def test_the_relay_holds_each_packet_for_its_path_s_delay_in_order_and_within_its_bounds():
    dev = Device()
    delays = Delays(seed=3)
    delays.update({"10.0.0.1": [0.1, 0.05, 0, 0], "10.0.0.2": [0, 0, 0.2, 0]})
    relay = Relay(dev.w, delays)
    rng = random.Random(1)
    sent = [(rng.random(), n) for n in range(50)]  # arrival times within a second
    for t, n in sorted(sent):
        relay.take(ipv4("10.0.0.1", "10.0.0.2", n), t)
    assert dev.packets() == b"", "nothing leaves before its delay"
    first_due = relay.release(0.0)
    assert 0.25 <= first_due <= 0.35 + 1.0, first_due
    relay.release(100.0)
    out = dev.packets()
    order = [int.from_bytes(out[i + 20 : i + 24], "big") for i in range(0, len(out), 24)]
    assert order == [n for _, n in sorted(sent)], "one path's packets keep their order"
    # Not IPv4, or no delay on its path: at once.
    relay.take(b"\x60" + bytes(39), 0.0)
    relay.take(ipv4("10.0.0.9", "10.0.0.8", 7), 0.0)
    assert len(dev.packets()) == 40 + 24
    # Bounded: a delay past MAX_DELAY_S, and more than MAX_QUEUED held, are dropped.
    delays.update({"10.0.0.3": [MAX_DELAY_S + 1, 0, 0, 0]})
    relay.take(ipv4("10.0.0.3", "10.0.0.2", 1), 0.0)
    assert relay.dropped == 1 and not relay.held
    for n in range(MAX_QUEUED + 5):
        relay.take(ipv4("10.0.0.1", "10.0.0.2", n), 0.0)
    assert len(relay.held) == MAX_QUEUED and relay.dropped == 6
    delays.update({"10.0.0.1": [0, 0, 0, 0]})
    assert delays.of(socket.inet_aton("10.0.0.1"), socket.inet_aton("10.0.0.9")) == 0
