"""The figures of one run: holds, outcomes, faults and anomalies (with a few examples)."""

from __future__ import annotations

from collections import Counter

from .checker import (
    EXAMPLES,
    FAILOVERS,
    PARTITIONS,
    SPLITS,
    build_holds,
    report_lateness,
    stalls_from,
    stopped_ns,
    stops_from,
    stray_tokens,
)

# The faults that cut holders off from their master: the workers they name
# (all of them, for a split that isolates the master itself).
CUTS = tuple(k for k in PARTITIONS if k != "latency") + SPLITS


def hold_kind(e: dict) -> str:
    return "multi" if len(e["names"]) > 1 else e["kind"]


def percentiles_ms(values_ns: list) -> dict:
    if not values_ns:
        return {}
    v = sorted(values_ns)
    at = lambda f: round(v[min(len(v) - 1, int(f * len(v)))] / 1e6, 1)  # noqa: E731
    return {"p50": at(0.5), "p99": at(0.99), "max": at(1.0)}


def writes(events: list) -> dict:
    """The fenced writes (tests/history/storage.py): as the holder, and late
    (after the holder saw its hold lost), each written or refused."""
    out: dict = {"in_hold": Counter(), "late": Counter()}
    for e in events:
        if e["ev"] == "write":
            out["late" if e.get("late") else "in_hold"][e["result"]] += 1
    return {k: dict(v) for k, v in out.items()}


def loss_after_cut(holds: list, faults: list) -> list:
    """For each hold lost to a cut: how long after the cut began its holder was
    told (ns), not counting time its process spent SIGSTOPped. A hold counts
    for a cut that began while it was held, named its worker (or isolated its
    master), and ended less than a ttl before on_lost fired."""
    stops = stops_from(faults)
    delays = []
    for h in holds:
        if not h.on_lost:
            continue
        told = h.on_lost[0]
        for f in faults:
            if f["fault"] not in CUTS or "skipped" in f or not h.granted < f["t"] <= told:
                continue
            if f.get("cuts_off") is False:
                continue  # a quorum's minority: the hold stands
            named = f.get("workers")
            if f["fault"] not in FAILOVERS and h.w.split(".")[0] not in named:
                continue
            if f["fault"] in FAILOVERS and named and h.w.split(".")[0] in named:
                continue  # on the old master's side: not cut from it
            if told <= f["t_end"] + h.ttl_ns:
                delays.append(told - f["t"] - stopped_ns(stops, h.pid, f["t"], told))
                break
    return delays


def summarize(*, scenario, seed, duration, wall_s, events, torn, faults, anomalies, keys, exits, samples, t0) -> dict:
    holds = build_holds(events)
    attempts = {(e["w"], e["seq"]) for e in events if e["ev"] not in ("exit", "clock", "stall")}
    by_ev = Counter(e["ev"] for e in events)
    lost_by = Counter(e["src"] for e in events if e["ev"] == "lost")
    timeouts = Counter(
        ("cancelled-in-" if e.get("cancelled") else "in-") + e["phase"] for e in events if e["ev"] == "timeout"
    )
    errors = Counter(f"{e['phase']}: {e['error'].split(':')[0]}" for e in events if e["ev"] == "error")
    injected = Counter(f["fault"] for f in faults if "skipped" not in f)
    skipped = Counter(f["fault"] for f in faults if "skipped" in f)
    valid = [h for h in holds if h.valid is not None]
    waits = [e["t"] - e["t_ask"] for e in events if e["ev"] == "granted" and "t_ask" in e]
    strays = stray_tokens(events, samples)
    stops = stops_from(faults)
    # How close on_lost came to its deadline: the most negative is the earliest.
    stalls = stalls_from(events)
    lateness = [report_lateness(h, stops, stalls) for h in holds if h.on_lost]
    # Less the time SIGSTOPped: what the machine's load alone held up.
    stall_ns = [n for pid, spans in stalls.items() for a, b in spans if (n := b - a - stopped_ns(stops, pid, a, b)) > 0]
    told = loss_after_cut(holds, faults)
    return {
        "scenario": scenario,
        "seed": seed,
        "duration_s": duration,
        "wall_s": round(wall_s, 2),
        "t0_ns": t0,  # the run's start on CLOCK_MONOTONIC: the "_ms" figures count from it
        "workers": len(exits),
        "worker_exit_codes": exits,
        "histories": len({e["w"] for e in events if e["ev"] not in ("clock", "stall")}),
        # Each worker's wall clock minus the server's, measured as it started (libfaketime skews some).
        "clock_skew_ms": {e["w"]: e["skew_ms"] for e in events if e["ev"] == "clock"},
        "attempts": len(attempts),
        "holds": len(holds),
        "holds_valid": len(valid),
        "holds_per_s": round(len(holds) / duration, 1),
        "holds_by_kind": dict(Counter(hold_kind({"kind": h.kind, "names": h.names}) for h in holds)),
        "long_holds": sum(1 for h in valid if h.valid - h.granted > h.ttl_ns),
        "wait_ms": percentiles_ms(waits),
        # Held in Redis by a token no worker was given (a grant its acquire gave up):
        # how many, and the longest seen; over the longest ttl is an anomaly.
        "holder_samples": len(samples),
        "stray_tokens": len(strays),
        "stray_max_ms": round(max((s["alive_ns"] for s in strays), default=0) / 1e6, 1),
        "stray_longest": [
            {
                "name": s["name"],
                "token": s["token"],
                "first_seen_ms": round((s["first_seen"] - t0) / 1e6, 1),
                "alive_ms": round(s["alive_ns"] / 1e6, 1),
            }
            for s in sorted(strays, key=lambda s: -s["alive_ns"])[:EXAMPLES]
        ],
        "released": by_ev["released"],
        "on_lost_vs_deadline_ms": {
            "n": len(lateness),
            "latest": round(max(lateness) / 1e6, 1) if lateness else None,
        },
        "lost_by_source": dict(lost_by),
        # How long after a cut began its holders were told (percentiles, ms).
        "told_after_cut_ms": {"n": len(told), **percentiles_ms(told)},
        "writes": writes(events),
        "timeouts": dict(timeouts),
        "interrupted": by_ev["interrupted"],
        "sigint_ignored": sum(e.get("sigint_ignored", 0) for e in events if e["ev"] == "exit"),
        "errors": dict(errors),
        "torn_lines": torn,
        # How long the workers' ready threads waited for a core or the GIL
        # (their stall probes, over STALL_LOG_NS, not SIGSTOPped): how busy the machine was.
        "stalls": {"n": len(stall_ns), **percentiles_ms(stall_ns)},
        "faults": dict(injected),
        "faults_skipped": dict(skipped),
        "faults_injected": sum(injected.values()),
        "keys_left": [{"key": k, "pttl_ms": p} for k, p in keys],
        "anomalies": {t: len(a) for t, a in sorted(anomalies.items())},
        "anomaly_examples": {t: a[:EXAMPLES] for t, a in sorted(anomalies.items())},
    }
