"""The checks: pure functions over the merged, time-sorted history.

1. ``overlap``: no two valid holds of one name intersect, where ``lock``,
   ``write`` and ``term`` exclude every hold and ``read`` excludes only
   ``write``; a multi-lock hold counts on each of its names.
   ``over-permits``: more valid ``permit`` holds of a name at once than its
   semaphore's permits.
2. ``fence-order``: among the exclusive holds of a name that were ever
   confirmed valid, fences strictly increase in grant order. Holds never
   confirmed valid are left out: a holder frozen between the grant and its
   log line logs the grant after its successor's, so its place in the
   order is unknown. ``fence-missing``: an exclusive hold without a fence;
   ``reader-fence``: a reader with one.
3. Loss reports. ``late-loss-report``: on_lost fired more than ttl + slack
   after the last confirmed validity, not counting time the process spent
   SIGSTOPped, nor a release already in flight (renewal stops when release
   is sent; the release's answer reports the loss), nor, past that deadline,
   time the process's stall probe saw its ready threads wait for a core or
   the GIL (on_lost runs on a thread of its own). ``loss-unreported``:
   the holder saw the loss (``lost``, LockNotOwned, LockLost) but on_lost
   never fired. ``on-lost-repeated``: it fired more than once.
   ``valid-after-loss``: ``lost`` read False after on_lost had fired.
4. ``keys-left``: keys of the run's prefix still in Redis after every worker
   exited and the longest ttl passed.
5. ``interrupt-left-hold`` / ``cancel-left-hold`` / ``error-left-hold``:
   the handle still held half a second (not counting SIGSTOP) after Ctrl-C,
   a cancellation or an unexpected error ended its attempt: its clean-up, if
   any, had long had time to finish. ``unexpected-error``: an exception
   that is not a LockError (e.g. SystemError from the bindings).
6. Holds in Redis (sampled every 10 ms) of tokens no worker was given: an
   acquire that gave up left them. Each life of such a token counts apart: it
   may go and come back (a request a cut held up landing after the heal),
   and nothing renewed it while a complete read of the name found it gone.
   ``orphan-hold``: one life seen for longer than the
   longest ttl (something keeps renewing it); in a fair queue, for longer
   than twice the longest patience (a hand-over to a waiter that can no
   longer claim it stands for its patience, and may come a patience after
   the waiter last showed itself alive). ``stray-hold``: seen for
   300 ms while no worker was frozen and the server was not stalled
   (+200 ms), and not first seen while connections were cut (a kill -9 or
   CLIENT KILL can lose the reply of a grant: its client cannot know it
   holds) or within as long again as a cut link stayed cut after it healed
   (TCP retransmits a request the cut held up, and it may land after its
   client gave up and cleaned up on another connection): the name stays
   blocked until the hold expires.
7. ``clock-not-skewed``: a worker started with a skewed wall clock whose
   clock is not off the server's by what was asked (or one that should run
   on the real clock and does not): the run would not test what it says.
8. ``stale-write-accepted``: the storage's record of a name (the fenced
   writes ``ferrolock.fencing``'s guard let through, in the order the
   storage applied them) holds a write whose fence is below an earlier
   one's: the guard let a stale holder's write in.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field

from .clock import TOLERANCE_MS, offset_s

EXCLUSIVE = ("lock", "write", "term")
FENCED = EXCLUSIVE + ("permit",)  # a semaphore's permits are fenced, but not exclusive
RELEASE_SOURCES = ("release", "exit", "aexit")
# A release's answer comes within a send, a reconnect and a resend: the
# workers' command timeout twice and their connect timeout (2 s each). On a
# quorum it waits for a majority, which a stopped master can delay; through a
# Sentinel failover it reconnects to the new master and sends again.
RELEASE_ANSWER_NS = 6_000_000_000
EXAMPLES = 3
LEFT_MIN_NS = 500_000_000  # still holding this long after the attempt ended: left behind
STRAY_MIN_NS = 300_000_000  # a failed acquire's hold should go within a round trip
# The failovers a partition makes: the master, and maybe some clients, cut off from the rest.
SPLITS = ("split-brain", "master-isolated")
# Sentinel's, then Redis Cluster's: a replica promoted while clients still hold on the old master.
FAILOVERS = ("failover", "master-kill", "cluster-failover", "cluster-master-kill") + SPLITS
# A frozen owner cannot clean up; a stalled server cannot answer; in a failover nobody answers for a while.
STALLING = ("sigstop", "debug-sleep") + FAILOVERS
# Links cut or slowed between workers and servers (tests/support/netns.py).
PARTITIONS = ("partition", "cut-requests", "cut-replies", "latency")
# A reply lost with its connection, or on a cut link: the client cannot know it was granted.
CUTTING = ("server-restart", "client-kill") + FAILOVERS + PARTITIONS
IN_FLIGHT_NS = 50_000_000
STALL_GRACE_NS = 200_000_000
LEFT_BY_CAUSE = {"interrupted": "interrupt-left-hold", "cancelled": "cancel-left-hold", "unexpected": "error-left-hold"}


@dataclass
class Hold:
    w: str
    seq: int
    pid: int
    kind: str
    names: tuple
    ttl_ns: int
    granted: int
    fence: int | None
    token: str | None
    valid: int | None = None  # the last time the holder saw lost == False
    t_rel: int | None = None  # when it began to release
    on_lost: list = field(default_factory=list)  # times on_lost fired
    noticed: list = field(default_factory=list)  # (src, t): the holder saw the loss itself
    cut_in_release: bool = False  # its attempt was cancelled while the release was in flight
    released: int | None = None
    permits: int | None = None  # a semaphore permit's: how many the name has

    def brief(self, t0: int = 0) -> dict:
        def ms(t):
            return None if t is None else round((t - t0) / 1e6, 3)

        return {
            "w": self.w,
            "seq": self.seq,
            "pid": self.pid,
            "kind": self.kind,
            "names": list(self.names),
            "ttl_s": self.ttl_ns / 1e9,
            "fence": self.fence,
            "token": self.token,
            "granted_ms": ms(self.granted),
            "valid_ms": ms(self.valid),
            "t_rel_ms": ms(self.t_rel),
            "on_lost_ms": [ms(t) for t in self.on_lost],
            "noticed": [(s, ms(t)) for s, t in self.noticed],
        }


def build_holds(events: list) -> list:
    """One Hold per granted attempt (attempts are keyed by worker label and seq)."""
    holds: dict = {}
    for e in events:
        key = (e["w"], e["seq"])
        if e["ev"] == "granted":
            holds[key] = Hold(
                e["w"],
                e["seq"],
                e["pid"],
                e["kind"],
                tuple(e["names"]),
                int(e["ttl"] * 1e9),
                e["t"],
                e.get("fence"),
                e.get("token"),
                permits=e.get("permits"),
            )
    for e in events:
        h = holds.get((e["w"], e["seq"]))
        if h is None:
            continue
        if e["ev"] == "valid":
            h.valid, h.t_rel = e["t"], e.get("t_rel")
        elif e["ev"] == "lost" and e.get("src") == "on_lost":
            h.on_lost.append(e["t"])
        elif e["ev"] == "lost":
            h.noticed.append((e["src"], e["t"]))
        elif e["ev"] == "released":
            h.released = e["t"]
        elif e["ev"] == "timeout" and e.get("phase") == "release":
            h.cut_in_release = True
    return sorted(holds.values(), key=lambda h: h.granted)


def per_name(holds: list) -> dict:
    by = defaultdict(list)
    for h in holds:
        for n in h.names:
            by[n].append(h)
    return by


def conflict(a: Hold, b: Hold) -> bool:
    return a.kind in EXCLUSIVE or b.kind in EXCLUSIVE


def over_permits(holds: list, t0: int = 0) -> list:
    """Moments a name had more valid permit holds than its semaphore's permits."""
    found = []
    for name, hs in sorted(per_name(holds).items()):
        spans = sorted(
            (h for h in hs if h.kind == "permit" and h.valid is not None and h.valid > h.granted),
            key=lambda h: h.granted,
        )
        active: list = []  # the spans still valid at the last grant, by when each ends
        for h in spans:
            active = [a for a in active if a.valid > h.granted] + [h]
            if h.permits is not None and len(active) > h.permits:
                found.append(
                    {
                        "type": "over-permits",
                        "name": name,
                        "permits": h.permits,
                        "at_ms": round((h.granted - t0) / 1e6, 3),
                        "holds": [a.brief(t0) for a in active],
                    }
                )
    return found


def overlaps(holds: list, t0: int = 0) -> list:
    found = []
    for name, hs in sorted(per_name(holds).items()):
        spans = sorted((h for h in hs if h.valid is not None and h.valid > h.granted), key=lambda h: h.granted)
        for i, a in enumerate(spans):
            for b in spans[i + 1 :]:
                if b.granted >= a.valid:
                    break  # sorted by start: nothing later starts inside `a`
                if conflict(a, b):
                    found.append(
                        {
                            "type": "overlap",
                            "name": name,
                            "overlap_ms": (min(a.valid, b.valid) - b.granted) / 1e6,
                            "holds": [a.brief(t0), b.brief(t0)],
                        }
                    )
    return found


def fences(holds: list, t0: int = 0) -> list:
    found = []
    for h in holds:
        if h.kind in FENCED and h.fence is None:
            found.append({"type": "fence-missing", "holds": [h.brief(t0)]})
        elif h.kind not in FENCED and h.fence is not None:
            found.append({"type": "reader-fence", "holds": [h.brief(t0)]})
    for name, hs in sorted(per_name(holds).items()):
        ordered = [h for h in hs if h.kind in EXCLUSIVE and h.valid is not None and h.fence is not None]
        for a, b in zip(ordered, ordered[1:]):  # already in grant order
            if not b.fence > a.fence:
                found.append({"type": "fence-order", "name": name, "holds": [a.brief(t0), b.brief(t0)]})
    return found


def stopped_ns(stops: dict, pid: int, start: int, end: int) -> int:
    """How much of [start, end] the process `pid` spent stopped; `stops` maps pid to (from, to) pairs."""
    return sum(max(0, min(end, b) - max(start, a)) for a, b in stops.get(pid, ()))


def stalls_from(events: list) -> dict:
    """pid -> (from, to) stretches its stall probe saw no ready thread of it run."""
    stalls = defaultdict(list)
    for e in events:
        if e["ev"] == "stall":
            stalls[e["pid"]].append((e["t"], e["t_end"]))
    return stalls


def stalled_ns(stalls: dict, stops: dict, pid: int, start: int, end: int) -> int:
    """How much of [start, end] the process `pid` spent stalled (its threads
    ready but not running) and not stopped: the union of both, less the stops."""
    spans = sorted(
        (max(start, a), min(end, b))
        for a, b in [*stalls.get(pid, ()), *stops.get(pid, ())]
        if min(end, b) > max(start, a)
    )
    covered, reach = 0, start
    for a, b in spans:
        covered += max(0, b - max(a, reach))
        reach = max(reach, b)
    return covered - stopped_ns(stops, pid, start, end)


def report_lateness(h: Hold, stops: dict, stalls: dict | None = None) -> int:
    """How long after its deadline `h`'s on_lost fired (negative: before), not
    counting time its process spent stopped, nor, past the deadline, time its
    threads spent ready but not running (`stalls`: on_lost runs on a thread of
    its own, queued when the loss is found, which must then get a core and
    the GIL; on a loaded machine that can take longer than the slack, and the
    stall probe measures it). The deadline is ttl after the last
    confirmed validity (or the grant), or a release's answer if the release was
    sent before the report (renewal stops when release is sent); an answer
    never seen (the attempt cancelled meanwhile) came by RELEASE_ANSWER_NS."""
    reported = h.on_lost[0]
    ref = h.valid if h.valid is not None else h.granted
    deadline = ref + h.ttl_ns
    if h.t_rel is not None and h.t_rel < reported:
        answers = [t for src, t in h.noticed if src in RELEASE_SOURCES] + [h.released or 0]
        if h.cut_in_release and not any(answers):
            # Its attempt was cancelled while the release was in flight (a
            # cancelled release still runs): its answer, unseen, reports the loss.
            answers.append(h.t_rel + RELEASE_ANSWER_NS)
        deadline = max(deadline, max(answers))
    waited = stalled_ns(stalls or {}, stops, h.pid, deadline, reported)
    return reported - deadline - stopped_ns(stops, h.pid, ref, reported) - waited


def loss_reports(holds: list, stops: dict, slack_ns: int, t0: int = 0, stalls: dict | None = None) -> list:
    found = []
    for h in holds:
        if len(h.on_lost) > 1:
            found.append({"type": "on-lost-repeated", "holds": [h.brief(t0)]})
        if h.noticed and not h.on_lost:
            found.append({"type": "loss-unreported", "holds": [h.brief(t0)]})
        if not h.on_lost:
            continue
        if h.valid is not None and h.valid > h.on_lost[0]:
            found.append(
                {
                    "type": "valid-after-loss",
                    "after_ms": (h.valid - h.on_lost[0]) / 1e6,
                    "holds": [h.brief(t0)],
                }
            )
        late = report_lateness(h, stops, stalls)
        if late > slack_ns:
            found.append({"type": "late-loss-report", "late_ms": late / 1e6, "holds": [h.brief(t0)]})
    return found


def left_holds(events: list, stops: dict, min_ns: int, t0: int = 0) -> list:
    """`left` events: the handle still held a while after Ctrl-C or a cancellation
    ended its attempt (time its process spent stopped does not count)."""
    found = []
    for e in events:
        if e["ev"] != "left":
            continue
        held = e["t"] - e["t_from"] - stopped_ns(stops, e["pid"], e["t_from"], e["t"])
        if held >= min_ns:
            kind = LEFT_BY_CAUSE[e["cause"]]
            found.append({"type": kind, "held_ms": held / 1e6, "event": {**e, "t_ms": round((e["t"] - t0) / 1e6, 3)}})
    return found


def stray_tokens(events: list, samples: list, rounds: list = ()) -> list:
    """Tokens seen in Redis that no worker was given, with how long each was seen
    (at least): {"name", "token", "alive_ns", "first_seen"}, one per life
    (see lives) when the monitor's `rounds` are given, else one per token."""
    given = {e.get("token") for e in events if e.get("token")}
    seen = defaultdict(list)
    for s in samples:
        if s["token"] not in given:
            seen[(s["name"], s["token"])].append(s)
    read = defaultdict(list)  # name -> when each of the monitor's reads of it began
    for r in sorted(rounds, key=lambda r: r["t0"]):
        read[r["name"]].append(r)
    return [
        {"name": name, "token": token, "alive_ns": life[-1]["t0"] - life[0]["t"], "first_seen": life[0]["t"]}
        for (name, token), ss in sorted(seen.items())
        for life in lives(sorted(ss, key=lambda s: s["t0"]), read[name])
    ]


def lives(samples: list, rounds: list) -> list:
    """A stray token's samples (in time order), split where the monitor read
    the name in between (`rounds`: its complete reads of the name, in time
    order) and did not find the token: it was gone then, and came back. A
    token can come back: a request a cut held up lands after the heal and
    takes the name again under the token of an acquire that gave up (see
    retransmissions), after a hand-over to it lapsed. Each life is one hold
    and has its own bound; nothing renewed the token across the gap."""
    starts = [r["t0"] for r in rounds]
    found: list = []
    for s in samples:
        if found:
            prev = found[-1][-1]
            i = bisect_left(starts, prev["t"])  # the first read begun after the last sighting
            if i < len(rounds) and rounds[i]["t"] <= s["t0"]:  # ... and done before this one
                found.append([s])
                continue
            found[-1].append(s)
        else:
            found.append([s])
    return found


def unexpected_errors(events: list, t0: int = 0) -> list:
    """Exceptions other than ferrolock's own (e.g. SystemError from the bindings)."""
    return [
        {"type": "unexpected-error", "event": {**e, "t_ms": round((e["t"] - t0) / 1e6, 3)}}
        for e in events
        if e["ev"] == "error" and e.get("unexpected")
    ]


def fault_windows(faults: list, kinds: tuple, before_ns: int, after_ns: int) -> list:
    """The time spans of the faults of `kinds`, widened by `before_ns` and
    `after_ns`, merged and sorted."""
    spans = sorted(
        (f["t"] - before_ns, f["t_end"] + after_ns) for f in faults if f["fault"] in kinds and "skipped" not in f
    )
    merged: list = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def strays(events, samples, faults, max_ttl_ns, slack_ns, t0=0, handover_ns=0, rounds=()) -> list:
    """Holds in Redis of tokens no worker was given. ``orphan-hold``: alive longer
    than the longest ttl (renewed by something), or in a fair queue than
    `handover_ns` if longer: a fair release hands the lock to the head of
    the queue, which may be a waiter that can no longer claim or withdraw it
    (cut off, frozen), until its patience runs out, up to a patience after
    it last re-asserted its place. ``stray-hold``: alive for
    STRAY_MIN_NS while no worker was frozen and the server did not stall, and
    not born when connections were cut (a grant whose reply was lost is
    ambiguous to its client): an acquire gave up and left its hold to expire."""
    stalls = fault_windows(faults, STALLING, 0, STALL_GRACE_NS)
    cuts = fault_windows(faults, CUTTING, IN_FLIGHT_NS, STALL_GRACE_NS) + retransmissions(faults)
    found = []
    for s in stray_tokens(events, samples, rounds):
        first, last = s["first_seen"], s["first_seen"] + s["alive_ns"]
        stalled = sum(max(0, min(last, b) - max(first, a)) for a, b in stalls)
        base = {
            "name": s["name"],
            "token": s["token"],
            "alive_ms": s["alive_ns"] / 1e6,
            "unexcused_ms": (s["alive_ns"] - stalled) / 1e6,
            "first_seen_ms": round((first - t0) / 1e6, 3),
        }
        if s["alive_ns"] > max(max_ttl_ns, handover_ns) + slack_ns:
            found.append({"type": "orphan-hold", **base})
        elif s["alive_ns"] - stalled > STRAY_MIN_NS and not any(a <= first <= b for a, b in cuts):
            found.append({"type": "stray-hold", **base, "suspects": suspects(events, s, max_ttl_ns, t0)})
    return found


def retransmissions(faults: list) -> list:
    """After a cut link heals, when a request it held up may still land: TCP
    retransmits it on a timer that doubles, so up to as long again as the cut
    lasted (and a grace), maybe after its client gave up and cleaned up on
    another connection (a grant nobody knows of then, until its ttl)."""
    return [
        (f["t"] - IN_FLIGHT_NS, f["t_end"] + (f["t_end"] - f["t"]) + STALL_GRACE_NS)
        for f in faults
        if f["fault"] in PARTITIONS + SPLITS and "skipped" not in f
    ]


def suspects(events: list, stray: dict, max_ttl_ns: int, t0: int, most: int = 5) -> list:
    """The attempts on the stray's name that gave up (timeout, Ctrl-C, error) in the
    ttl before it was seen: one of them owned it."""
    lo, hi = stray["first_seen"] - max_ttl_ns, stray["first_seen"] + IN_FLIGHT_NS
    failed = [
        e
        for e in events
        if e["ev"] in ("timeout", "interrupted", "error") and stray["name"] in e.get("names", ()) and lo <= e["t"] <= hi
    ]
    return [
        {
            "w": e["w"],
            "seq": e["seq"],
            "ev": e["ev"],
            "how": e.get("how"),
            "kind": e.get("kind"),
            "phase": e.get("phase"),
            "cancelled": e.get("cancelled", False),
            "t_ms": round((e["t"] - t0) / 1e6, 1),
        }
        for e in failed[-most:]
    ]


def clock_skews(events: list) -> list:
    """`clock` events whose measured offset from the server's clock is not the
    one the worker was started with (None: the real clock, 0 s)."""
    found = []
    for e in events:
        if e["ev"] != "clock":
            continue
        asked_ms = offset_s(e["skew"]) * 1000 if e.get("skew") else 0.0
        if abs(e["skew_ms"] - asked_ms) > TOLERANCE_MS:
            found.append({"type": "clock-not-skewed", "w": e["w"], "asked": e.get("skew"), "skew_ms": e["skew_ms"]})
    return found


def stale_writes(records: dict) -> list:
    """`records`: name -> the fences of the writes the storage took for it, in
    the order it took them. A fence below an earlier one: a stale write let in."""
    found = []
    for name, fences in sorted(records.items()):
        for i, (a, b) in enumerate(zip(fences, fences[1:])):
            if b < a:
                found.append({"type": "stale-write-accepted", "name": name, "at": i + 1, "fence": b, "after": a})
    return found


def keys_left(keys: list) -> list:
    """`keys`: (key, pttl in ms) pairs still present at the end."""
    return [{"type": "keys-left", "key": k, "pttl_ms": pttl} for k, pttl in keys]


def stops_from(faults: list) -> dict:
    stops = defaultdict(list)
    for f in faults:
        if f["fault"] == "sigstop" and "skipped" not in f:
            stops[f["pid"]].append((f["t"], f["t_end"]))
    return stops


RECHECK_NS = 1_000_000_000  # how often a Sentinel client asks whether the master moved


def failover_overlaps(found: list, faults: list, max_ttl_ns: int, slack_ns: int, t0: int = 0) -> tuple:
    """Splits `overlap` and `fence-order` anomalies into those a failover
    without replica acknowledgement allows, and the rest: (allowed, rest).
    Allowed: the later hold was granted between a failover's start and its
    end plus a client's re-check of the Sentinels and the longest ttl. In that
    window two masters serve: a killed master's unreplicated holds are gone
    from the promoted one, and a master demoted by SENTINEL FAILOVER keeps
    serving the connections it has until each client asks the Sentinels
    again (and until the Sentinel reconfigures it). Only replicas=1 with
    replica_policy="fail" closes it; outside such a window the anomaly
    stands."""
    windows = fault_windows(faults, FAILOVERS, 0, RECHECK_NS + max_ttl_ns + slack_ns)
    allowed, rest = [], []
    for o in found:
        start = t0 + int(o["holds"][1]["granted_ms"] * 1e6)
        if any(a <= start <= b for a, b in windows):
            allowed.append({**o, "type": f"failover-{o['type']}"})
        else:
            rest.append(o)
    return allowed, rest


def check(events, faults, keys, samples, slack_ns, max_ttl_ns, t0=0, records=None, handover_ns=0, rounds=()) -> dict:
    """Every anomaly of the history, by type. `records`: the storage's
    fenced writes per name (see stale_writes), when the run made any;
    `handover_ns`: how long a fair hand-over may stand unclaimed (strays);
    `rounds`: the monitor's complete reads of each name (lives)."""
    holds = build_holds(events)
    stops = stops_from(faults)
    found = (
        overlaps(holds, t0)
        + over_permits(holds, t0)
        + stale_writes(records or {})
        + fences(holds, t0)
        + loss_reports(holds, stops, slack_ns, t0, stalls_from(events))
        + left_holds(events, stops, LEFT_MIN_NS, t0)
        + unexpected_errors(events, t0)
        + strays(events, samples, faults, max_ttl_ns, slack_ns, t0, handover_ns, rounds)
        + clock_skews(events)
        + keys_left(keys)
    )
    by = defaultdict(list)
    for a in found:
        by[a["type"]].append(a)
    return dict(by)
