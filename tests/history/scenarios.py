"""What a worker takes in each scenario: names, the kind of hold, the handle.

A choice is ``(kind, names)``: kind ``lock`` (exclusive; several names make
a multi-lock), ``read`` or ``write`` (an RWMutex), ``permit`` (one of a
semaphore's PERMITS) or ``term`` (an election's term). Exclusion the
checker expects: ``lock``, ``write`` and ``term`` exclude every hold on a
shared name, ``read`` excludes only ``write``, and at most PERMITS
``permit`` holds of a name at once. ``quorum`` takes locks and multi-locks
on three independent masters (Redlock), whose faults hit one master at a time.
``sentinel-lock`` and ``cluster-lock`` take locks through Sentinel and
through a Redis Cluster with a replica per master, under failovers.

In ``quorum``, ``sentinel-lock`` and ``cluster-lock`` two workers run with a
skewed wall clock (SKEWS: worker index -> libfaketime offset), one fast and
one slow: fences, validity and expiry must not follow a client's clock.
"""

from __future__ import annotations

import random

import ferrolock

SCENARIOS = ("lock", "fair-lock", "rwmutex", "fair-rwmutex", "multi-lock", "semaphore", "election", "quorum")
# How many independent masters a scenario runs on (one unless named here).
MASTERS = {"quorum": 3}
# Through redis+sentinel:// to a master, a replica and a Sentinel, under failovers.
SENTINEL_SCENARIOS = ("sentinel-lock",)
# Through redis+cluster:// to 3 masters with a replica each, under failovers.
CLUSTER_SCENARIOS = ("cluster-lock",)
ALL_SCENARIOS = SCENARIOS + SENTINEL_SCENARIOS + CLUSTER_SCENARIOS
# A sync worker 5 s fast and an async one 3 s slow (workers 0-2 are sync, 3-4 async).
SKEWS = {1: "+5s", 3: "-3s"}
SKEWED_SCENARIOS = ("quorum", "sentinel-lock", "cluster-lock")
NAMES = {
    "cluster-lock": ("a", "b", "c"),  # one on each master's slots
    "quorum": ("a", "b"),
    "sentinel-lock": ("a", "b"),
    "lock": ("a", "b"),
    "fair-lock": ("a", "b"),
    "rwmutex": ("a", "b"),
    "fair-rwmutex": ("a", "b"),
    "multi-lock": ("a", "b"),
    "semaphore": ("a", "b"),
    "election": ("a", "b"),
}
PERMITS = 2  # the semaphore scenario's permits per name
P_WRITE = 1 / 3
MULTI_SUBSETS = (("a",), ("b",), ("a", "b"))


def pick(scenario: str, rng: random.Random) -> tuple:
    names = NAMES[scenario]
    if scenario in ("lock", "fair-lock", "sentinel-lock", "cluster-lock"):
        return "lock", (rng.choice(names),)
    if scenario in ("rwmutex", "fair-rwmutex"):
        return ("write" if rng.random() < P_WRITE else "read"), (rng.choice(names),)
    if scenario in ("multi-lock", "quorum"):
        return "lock", rng.choice(MULTI_SUBSETS)
    if scenario == "semaphore":
        return "permit", (rng.choice(names),)
    if scenario == "election":
        return "term", (rng.choice(names),)
    raise ValueError(f"unknown scenario {scenario!r}")


def fair(scenario: str) -> bool:
    """Whether its holds pass through a fair queue (an election's terms do)."""
    return scenario.startswith("fair-") or scenario == "election"


def layout(scenario: str) -> str:
    """How the holders of a name are kept (tests/history/monitor.py reads them):
    "lock", "rw", "semaphore" or "election"."""
    if scenario in ("rwmutex", "fair-rwmutex"):
        return "rw"
    return scenario if scenario in ("semaphore", "election") else "lock"


def topology(scenario: str) -> str:
    """ "sentinel", "cluster", or "servers" (one redis-server, or a quorum's masters)."""
    if scenario in SENTINEL_SCENARIOS:
        return "sentinel"
    return "cluster" if scenario in CLUSTER_SCENARIOS else "servers"


def handle(client: ferrolock.Client, scenario: str, kind: str, names: tuple, **opts) -> ferrolock.Lock:
    """A fresh handle (one per attempt, so on_lost and `lost` belong to that attempt).
    An election's is its campaigner: acquiring it campaigns, its fence is the term."""
    if kind == "permit":
        return client.semaphore(names[0], PERMITS, **opts)
    if kind == "term":
        return client.election(names[0])._core.candidate("campaigner", **opts)
    if kind == "lock":
        if len(names) > 1:
            return client.multi_lock(list(names), **opts)
        return client.lock(names[0], fair=fair(scenario), **opts)
    rw = client.rwmutex(names[0], fair=fair(scenario))
    return rw.write(**opts) if kind == "write" else rw.read(**opts)


def retry(rng: random.Random):
    """Waiting strategies vary between attempts, the default included (None)."""
    return rng.choice(
        [
            None,
            ferrolock.Retry.fixed(0.005),
            ferrolock.Retry.exponential(0.001, 0.05),
        ]
    )
