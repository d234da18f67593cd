"""Added latency for the test networks of tests/support/netns.py: a TUN device in a
router namespace through which the router's policy rules send the packets
to delay, read here, held for their delay, and written back into the same
device, from which the router forwards them as usual.

This kernel has no netem qdisc, so latency is made here, in user space.
Each IPv4 packet is held for the sum of two delays: its source host's
outgoing one and its destination host's incoming one, each a base plus a
jitter drawn uniformly in [-jitter, +jitter] (never below zero). Packets
between one source and one destination leave in the order they came (a
packet is never released before the one ahead of it on its path), so
jitter spreads the delays without reordering a TCP stream.

Bounded: at most MAX_QUEUED packets are held at once and no packet is held
longer than MAX_DELAY_S; a packet beyond either bound is dropped, as a full
queue drops it. Anything that is not IPv4 passes at once.

Run inside the router namespace (``ip netns exec ROUTER python
netns_relay.py DEVICE SEED``). It prints ``ready`` once the device exists.
Each line on stdin is a JSON object ``{"ADDR": [out_s, out_jitter_s, in_s,
in_jitter_s], ...}`` replacing the delays of the addresses it names (all
zeros: none), answered by ``ok``; it exits at the end of stdin.
"""

from __future__ import annotations

import fcntl
import heapq
import json
import os
import random
import selectors
import socket
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_QUEUED = 20_000
MAX_DELAY_S = 5.0
MAX_PACKET = 65_536


def open_tun(name: str) -> int:
    """A TUN device `name` in this process's network namespace (no packet information header)."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Delays:
    """The delays of each address, and the draw of one packet's."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.by_addr: dict[bytes, tuple] = {}

    def update(self, table: dict) -> None:
        for addr, (out_s, out_j, in_s, in_j) in table.items():
            key = socket.inet_aton(addr)
            if out_s or out_j or in_s or in_j:
                self.by_addr[key] = (float(out_s), float(out_j), float(in_s), float(in_j))
            else:
                self.by_addr.pop(key, None)

    def draw(self, base: float, jitter: float) -> float:
        return max(0.0, base + self.rng.uniform(-jitter, jitter)) if jitter else base

    def of(self, src: bytes, dst: bytes) -> float:
        out_s, out_j = self.by_addr.get(src, (0.0, 0.0, 0.0, 0.0))[:2]
        in_s, in_j = self.by_addr.get(dst, (0.0, 0.0, 0.0, 0.0))[2:]
        return self.draw(out_s, out_j) + self.draw(in_s, in_j)


class Relay:
    def __init__(self, fd: int, delays: Delays):
        self.fd, self.delays = fd, delays
        self.held: list = []  # (due, seq, packet): a heap
        self.last_due: dict = {}  # (src, dst) -> due of the last packet held on that path
        self.seq = 0
        self.dropped = 0

    def take(self, packet: bytes, now: float) -> None:
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self._send(packet)
            return
        path = (packet[12:16], packet[16:20])
        due = max(now + self.delays.of(*path), self.last_due.get(path, 0.0))
        if due <= now:
            self._send(packet)
            return
        if len(self.held) >= MAX_QUEUED or due - now > MAX_DELAY_S:
            self.dropped += 1
            return
        self.last_due[path] = due
        self.seq += 1
        heapq.heappush(self.held, (due, self.seq, packet))

    def release(self, now: float) -> float | None:
        """Sends every packet due by `now`; returns when the next one is due."""
        while self.held and self.held[0][0] <= now:
            self._send(heapq.heappop(self.held)[2])
        if not self.held:
            self.last_due.clear()
            return None
        return self.held[0][0]

    def _send(self, packet: bytes) -> None:
        try:
            os.write(self.fd, packet)
        except OSError:
            self.dropped += 1  # the device's queue is full, or it went down: a lost packet


def main(argv: list) -> int:
    device, seed = argv[1], int(argv[2])
    fd = open_tun(device)
    relay = Relay(fd, Delays(seed))
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ, "tun")
    stdin = sys.stdin.buffer.raw  # type: ignore[attr-defined]
    os.set_blocking(stdin.fileno(), False)
    sel.register(stdin.fileno(), selectors.EVENT_READ, "control")
    print("ready", flush=True)
    pending = b""
    next_due: float | None = None
    while True:
        timeout = None if next_due is None else max(0.0, next_due - time.monotonic())
        for key, _ in sel.select(timeout):
            if key.data == "tun":
                now = time.monotonic()
                for _ in range(256):  # a burst, then the due packets again
                    try:
                        packet = os.read(fd, MAX_PACKET)
                    except BlockingIOError:
                        break
                    relay.take(packet, now)
            else:
                chunk = os.read(stdin.fileno(), 65536)
                if not chunk:
                    return 0
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    relay.delays.update(json.loads(line))
                    print("ok", flush=True)
        next_due = relay.release(time.monotonic())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
