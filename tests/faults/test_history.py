"""The history checker: its checks on small synthetic histories (fast), and a
short seeded run of each scenario under faults (chaos), which must show no
anomaly. `make chaos DURATION=600` runs the long version."""

from __future__ import annotations

import json
import random
import signal
import threading
import time

from pathlib import Path

import pytest

from history import checker, clock, summary
from history.nemesis import CLUSTER_KINDS, KINDS, MASTER_ONLY, SENTINEL_KINDS, WINDOW, allowed_kinds, schedule
from history.run import RunConfig, default_faults, fault_plan, run
from history.scenarios import ALL_SCENARIOS, SCENARIOS, SKEWS
from history.workers import SigintGate
from support.redis_sentinel import SentinelDeployment

MS = 1_000_000
SLACK = 100 * MS


def granted(w, seq, t_ms, names=("a",), kind="lock", fence=None, ttl=1.0, pid=1, token=None):
    return {
        "w": w,
        "seq": seq,
        "pid": pid,
        "ev": "granted",
        "t": t_ms * MS,
        "kind": kind,
        "names": list(names),
        "ttl": ttl,
        "fence": fence,
        "token": token or f"{w}-{seq}",
    }


def event(w, seq, ev, t_ms, pid=1, **fields):
    return {"w": w, "seq": seq, "pid": pid, "ev": ev, "t": t_ms * MS, **fields}


def hold(w, seq, start_ms, end_ms, names=("a",), kind="lock", fence=None, **kw):
    """A hold granted at start_ms and last confirmed valid at end_ms, then released."""
    return [
        granted(w, seq, start_ms, names, kind, fence, **kw),
        event(w, seq, "valid", end_ms, pid=kw.get("pid", 1), t_rel=(end_ms + 0.01) * MS),
        event(w, seq, "released", end_ms + 0.5, pid=kw.get("pid", 1)),
    ]


def history(*parts):
    return sorted((e for p in parts for e in p), key=lambda e: e["t"])


def anomalies(events, faults=(), keys=(), samples=()):
    return checker.check(history(events), list(faults), list(keys), list(samples), SLACK, 1000 * MS)


def types(found: dict) -> dict:
    return {t: len(a) for t, a in found.items()}


# --------------------------------------------------------------------------
# 1. exclusion


def test_holds_one_after_another_pass():
    events = hold("s0", 1, 0, 10, fence=1) + hold("s1", 1, 10, 20, fence=2) + hold("s0", 2, 25, 30, fence=3)
    assert anomalies(events) == {}


def test_overlapping_exclusive_holds_are_found():
    found = anomalies(hold("s0", 1, 0, 10, fence=1) + hold("s1", 1, 5, 15, fence=2))
    assert types(found) == {"overlap": 1}
    (a,) = found["overlap"]
    assert a["name"] == "a" and a["overlap_ms"] == pytest.approx(5)
    assert [h["w"] for h in a["holds"]] == ["s0", "s1"]


def test_holds_on_different_names_do_not_conflict():
    assert anomalies(hold("s0", 1, 0, 10, names=("a",), fence=1) + hold("s1", 1, 5, 15, names=("b",), fence=2)) == {}


def test_readers_share_but_a_writer_excludes_them():
    readers = hold("s0", 1, 0, 10, kind="read") + hold("s1", 1, 5, 15, kind="read")
    assert anomalies(readers) == {}
    found = anomalies(readers + hold("s2", 1, 8, 12, kind="write", fence=5))
    assert types(found) == {"overlap": 2}


def test_a_writer_inside_a_writer_is_found():
    found = anomalies(hold("s0", 1, 0, 30, kind="write", fence=1) + hold("s1", 1, 10, 12, kind="write", fence=2))
    assert types(found) == {"overlap": 1}


def test_a_multi_lock_hold_counts_on_each_of_its_names():
    multi = hold("s0", 1, 0, 10, names=("a", "b"), fence=1)
    assert anomalies(multi + hold("s1", 1, 12, 20, names=("b",), fence=2)) == {}
    found = anomalies(multi + hold("s1", 1, 5, 8, names=("b",), fence=2))
    assert types(found) == {"overlap": 1} and found["overlap"][0]["name"] == "b"
    found = anomalies(multi + hold("s1", 1, 5, 8, names=("b", "a"), fence=2))
    assert sorted(a["name"] for a in found["overlap"]) == ["a", "b"]


def test_a_grant_never_confirmed_valid_does_not_count():
    """A holder frozen right after acquire returned sees `lost` at once when it
    resumes: it never held as far as the history knows."""
    frozen = [
        granted("s0", 1, 5, fence=1),
        event("s0", 1, "lost", 6, src="property"),
        event("s0", 1, "lost", 6.5, src="on_lost"),
    ]
    assert anomalies(hold("s1", 1, 0, 10, fence=2) + frozen) == {}


def permit(w, seq, start_ms, end_ms, permits=2, fence=None, name="a"):
    """A semaphore permit held from start_ms to end_ms (fenced, as permits are)."""
    events = hold(w, seq, start_ms, end_ms, names=(name,), kind="permit", fence=fence or seq + 100)
    events[0]["permits"] = permits
    return events


def test_no_more_permits_than_the_semaphore_has_at_once():
    two = permit("s0", 1, 0, 10) + permit("s1", 2, 5, 15)
    assert anomalies(two) == {}, "two permits of two: fine, and a permit's fence is no reader's"
    found = anomalies(two + permit("s2", 3, 8, 12))
    assert types(found) == {"over-permits": 1}
    assert found["over-permits"][0]["at_ms"] == 8 and len(found["over-permits"][0]["holds"]) == 3
    assert anomalies(two + permit("s2", 3, 10, 12)) == {}, "the first ended as the third began"
    assert anomalies(two + permit("s2", 3, 8, 12, name="b")) == {}


def test_an_election_term_excludes_like_a_lock():
    found = anomalies(hold("s0", 1, 0, 10, kind="term", fence=1) + hold("s1", 1, 5, 15, kind="term", fence=2))
    assert types(found) == {"overlap": 1}
    assert types(anomalies(hold("s0", 1, 0, 10, kind="term"))) == {"fence-missing": 1}


def test_a_stale_write_the_storage_took_is_found():
    assert checker.check([], [], [], [], SLACK, 1000 * MS, records={"a": [1, 1, 3, 7]}) == {}
    found = checker.check([], [], [], [], SLACK, 1000 * MS, records={"a": [1, 5, 3], "b": [2]})
    assert types(found) == {"stale-write-accepted": 1}
    assert found["stale-write-accepted"][0] | {} == {
        "type": "stale-write-accepted",
        "name": "a",
        "at": 2,
        "fence": 3,
        "after": 5,
    }


def test_the_loss_signal_delay_counts_the_holders_a_cut_reached():
    """How long after a cut its holders were told: a hold of a worker the cut
    named, held when it began, told within a ttl of its end; a quorum's
    minority cut and a split's own side (which keeps the old master) do not count."""
    events = history(
        lost_hold(100, [1500], pid=1),  # s0, granted at 0, told at 1500
        [granted("a3.1", 1, 0, fence=2, pid=3), event("a3.1", 1, "lost", 1800, pid=3, src="on_lost")],
        [event("s0", 1, "write", 1600, result="refused", late=True), event("a3.1", 1, "write", 50, result="written")],
    )
    holds = checker.build_holds(events)
    cut = {"fault": "partition", "t": 500 * MS, "t_end": 1000 * MS, "workers": ["s0"]}
    assert summary.loss_after_cut(holds, [cut]) == [1000 * MS]
    assert summary.loss_after_cut(holds, [{**cut, "cuts_off": False}]) == []
    split = {"fault": "split-brain", "t": 600 * MS, "t_end": 2000 * MS, "workers": ["a3"]}
    assert summary.loss_after_cut(holds, [split]) == [900 * MS], "s0 was cut from the old master; a3 kept it"
    assert summary.writes(events) == {"in_hold": {"written": 1}, "late": {"refused": 1}}


# --------------------------------------------------------------------------
# 2. fences


def test_fences_must_strictly_increase_in_grant_order():
    assert types(anomalies(hold("s0", 1, 0, 10, fence=5) + hold("s1", 1, 10, 20, fence=3))) == {"fence-order": 1}
    assert types(anomalies(hold("s0", 1, 0, 10, fence=5) + hold("s1", 1, 10, 20, fence=5))) == {"fence-order": 1}


def test_fence_order_is_per_name_and_a_multi_lock_joins_each_name():
    a_then_b = hold("s0", 1, 0, 10, names=("a",), fence=7) + hold("s1", 1, 0, 10, names=("b",), fence=3)
    assert anomalies(a_then_b) == {}
    multi = hold("s2", 1, 20, 30, names=("a", "b"), fence=5)  # above b's 3, below a's 7
    found = anomalies(a_then_b + multi)
    assert types(found) == {"fence-order": 1} and found["fence-order"][0]["name"] == "a"


def test_a_grant_logged_late_is_left_out_of_the_fence_order():
    """Frozen between its grant and the log line, the holder logs after its successor."""
    late = [
        granted("s0", 1, 15, fence=1),
        event("s0", 1, "lost", 16, src="property"),
        event("s0", 1, "lost", 16.5, src="on_lost"),
    ]
    assert anomalies(hold("s1", 1, 10, 20, fence=2) + late + hold("s2", 1, 20, 30, fence=3)) == {}


def test_exclusive_holds_need_a_fence_and_readers_have_none():
    found = anomalies(hold("s0", 1, 0, 10, fence=None) + hold("s1", 1, 20, 30, kind="read", fence=4))
    assert types(found) == {"fence-missing": 1, "reader-fence": 1}


# --------------------------------------------------------------------------
# 3. loss reports


def lost_hold(valid_ms, on_lost_ms, ttl=1.0, pid=1, noticed=None, t_rel_ms=None):
    events = [granted("s0", 1, 0, fence=1, ttl=ttl, pid=pid)]
    events.append(event("s0", 1, "valid", valid_ms, pid=pid, t_rel=(t_rel_ms or valid_ms + 0.01) * MS))
    if noticed:
        events.append(event("s0", 1, "lost", noticed[1], pid=pid, src=noticed[0]))
    for t in on_lost_ms:
        events.append(event("s0", 1, "lost", t, pid=pid, src="on_lost"))
    return events


def test_loss_reported_within_ttl_and_slack_passes():
    assert anomalies(lost_hold(100, [100 + 1000 + 90])) == {}


def test_loss_reported_late_is_found():
    found = anomalies(lost_hold(100, [100 + 1000 + 150]))
    assert types(found) == {"late-loss-report": 1}
    assert found["late-loss-report"][0]["late_ms"] == pytest.approx(150)


def test_time_spent_stopped_is_not_counted_against_the_report():
    stop = {"fault": "sigstop", "pid": 7, "t": 300 * MS, "t_end": 800 * MS}
    assert anomalies(lost_hold(100, [1600], pid=7), faults=[stop]) == {}
    assert types(anomalies(lost_hold(100, [1600], pid=8), faults=[stop])) == {"late-loss-report": 1}


def test_a_release_in_flight_reports_the_loss_when_it_answers():
    """Renewal stops when release is sent: a release held up by a restart learns of
    the loss only from its answer."""
    in_flight = lost_hold(100, [2001], noticed=("release", 2000), t_rel_ms=101)
    assert anomalies(in_flight) == {}
    assert types(anomalies(lost_hold(100, [2300], noticed=("release", 2000), t_rel_ms=101))) == {"late-loss-report": 1}


def test_time_the_workers_threads_waited_to_run_is_not_counted_after_the_deadline():
    """The multi-lock run of the first long run: a release's answer found the
    loss at 2000 ms and on_lost, queued before release returned, ran 120 ms
    later on a machine at load 13, its thread waiting for a core and the GIL.
    The worker's stall probe saw its threads wait that long: not counted. A
    stall of another process, or one before the deadline, excuses nothing."""
    late = lost_hold(100, [2120], noticed=("release", 2000), t_rel_ms=101, pid=7)
    assert types(anomalies(late)) == {"late-loss-report": 1}
    stall = event("s0", 0, "stall", 2010, pid=7, t_end=2090 * MS)
    assert anomalies(late + [stall]) == {}
    assert types(anomalies(late + [{**stall, "pid": 8}])) == {"late-loss-report": 1}
    before = event("s0", 0, "stall", 1900, pid=7, t_end=1990 * MS)
    assert types(anomalies(late + [before])) == {"late-loss-report": 1}


def test_stalled_time_is_clipped_and_not_counted_twice_with_a_stop():
    stalls, stops = {1: [(0, 10), (20, 30)]}, {1: [(25, 40)]}
    assert checker.stalled_ns(stalls, stops, 1, 5, 50) == 5 + 5  # (5, 10) and (20, 25): the stop is apart
    assert checker.stalled_ns(stalls, {}, 1, 5, 25) == 10
    assert checker.stalled_ns(stalls, stops, 2, 0, 100) == 0


def test_a_release_cut_short_reports_the_loss_by_the_command_timeout():
    """An attempt cancelled while its release is in flight: the release still
    runs, and its answer (never logged) reports the loss within a send, a
    reconnect and a resend (6 s with the workers' timeouts) of its sending."""
    cut = lost_hold(100, [1900], t_rel_ms=101) + [event("s0", 1, "timeout", 150, phase="release")]
    assert anomalies(cut) == {}
    too_late = lost_hold(100, [6300], t_rel_ms=101) + [event("s0", 1, "timeout", 150, phase="release")]
    assert types(anomalies(too_late)) == {"late-loss-report": 1}
    assert types(anomalies(lost_hold(100, [1900], t_rel_ms=101))) == {"late-loss-report": 1}


def test_a_loss_the_holder_saw_must_reach_on_lost_once():
    assert types(anomalies(lost_hold(100, [], noticed=("property", 150)))) == {"loss-unreported": 1}
    assert types(anomalies(lost_hold(100, [150, 160]))) == {"on-lost-repeated": 1}


def test_lost_read_false_after_on_lost_fired_is_found():
    found = anomalies(lost_hold(200, [150]))
    assert types(found) == {"valid-after-loss": 1}
    assert found["valid-after-loss"][0]["after_ms"] == pytest.approx(50)


def test_stopped_time_is_clipped_to_the_window():
    stops = {1: [(0, 10), (20, 30)]}
    assert checker.stopped_ns(stops, 1, 5, 25) == 10
    assert checker.stopped_ns(stops, 1, 10, 20) == 0
    assert checker.stopped_ns(stops, 2, 0, 100) == 0


# --------------------------------------------------------------------------
# 4-5. what is left behind


def left(cause, t_from_ms, t_ms, pid=1):
    return [event("a3.0", 9, "left", t_ms, pid=pid, t_from=t_from_ms * MS, cause=cause, phase="acquire")]


def test_a_handle_still_holding_after_a_cancellation_or_ctrl_c_is_found():
    assert types(anomalies(left("cancelled", 0, 1000))) == {"cancel-left-hold": 1}
    assert types(anomalies(left("interrupted", 0, 1000))) == {"interrupt-left-hold": 1}
    assert types(anomalies(left("unexpected", 0, 1000))) == {"error-left-hold": 1}
    assert anomalies(left("cancelled", 0, 300)) == {}
    stop = {"fault": "sigstop", "pid": 1, "t": 100 * MS, "t_end": 700 * MS}
    assert anomalies(left("cancelled", 0, 1000), faults=[stop]) == {}


def test_an_exception_that_is_not_a_lock_error_is_found():
    odd = event(
        "s0",
        4,
        "error",
        5,
        phase="acquire",
        error="SystemError: returned a result with an exception set",
        unexpected=True,
        names=["a"],
    )
    usual = event("s0", 5, "error", 9, phase="acquire", error="LockConnectionError: refused", names=["a"])
    found = anomalies([odd, usual])
    assert types(found) == {"unexpected-error": 1} and found["unexpected-error"][0]["event"]["seq"] == 4


def samples(token, until_ms, name="a"):
    return [{"t0": t * MS, "t": (t + 1) * MS, "name": name, "token": token} for t in range(0, until_ms, 10)]


def test_a_token_no_worker_was_given_must_go_within_a_round_trip():
    known = [granted("s0", 1, 0, fence=1, token="mine")]
    assert anomalies(known, samples=samples("mine", 3000)) == {}
    assert anomalies(known, samples=samples("stray", 200)) == {}  # a clean-up under way
    found = anomalies(known, samples=samples("stray", 600))
    assert types(found) == {"stray-hold": 1} and found["stray-hold"][0]["token"] == "stray"
    assert types(anomalies(known, samples=samples("stray", 3000))) == {"orphan-hold": 1}  # renewed


def test_a_stray_hold_landing_after_a_cut_healed_is_excused_for_as_long_again_as_the_cut():
    """TCP retransmits a request a cut held up, on a doubling timer: it may
    land after the heal, when its client gave up and cleaned up elsewhere."""
    known = [granted("s0", 1, 0, fence=1, token="mine")]

    def stray_from(t_ms):
        return [{**x, "t0": x["t0"] + t_ms * MS, "t": x["t"] + t_ms * MS} for x in samples("late", 500)]

    cut = {"fault": "cut-requests", "t": 0, "t_end": 1500 * MS, "workers": ["s1"]}
    assert anomalies(known, faults=[cut], samples=stray_from(2600)) == {}, "within 1.5 s after the heal"
    assert types(anomalies(known, faults=[cut], samples=stray_from(3400))) == {"stray-hold": 1}


def test_a_fair_hand_over_nobody_claims_may_stand_for_twice_the_patience():
    """A fair release hands the lock to a waiter that can no longer claim or
    withdraw it (cut off): it stands for the waiter's patience, and may come
    a patience after the waiter last re-asserted its place."""
    known = [granted("s0", 1, 0, fence=1, token="mine")]
    cut = [{"fault": "partition", "t": 0, "t_end": 500 * MS}]
    found = checker.check(history(known), cut, [], samples("handed", 1800), SLACK, 1000 * MS)
    assert types(found) == {"orphan-hold": 1}
    assert (
        checker.check(history(known), cut, [], samples("handed", 1800), SLACK, 1000 * MS, handover_ns=2000 * MS) == {}
    )
    found = checker.check(history(known), cut, [], samples("handed", 2300), SLACK, 1000 * MS, handover_ns=2000 * MS)
    assert types(found) == {"orphan-hold": 1}


def test_a_stray_token_that_went_and_came_back_is_two_holds_each_with_its_own_bound():
    """A hand-over to a cut-off waiter lapses; after the heal a request the
    cut held up lands and takes the name again under the same token. The
    monitor read the name in between and found it gone: nothing renewed it,
    and each life is held to its own bound. Without such a read (the monitor
    stalled) the sightings stay one life."""
    known = [granted("s0", 1, 0, fence=1, token="mine")]
    cut = [{"fault": "partition", "t": 0, "t_end": 2000 * MS}]

    def read(name, t_ms):
        return {"t0": t_ms * MS, "t": (t_ms + 1) * MS, "name": name}

    first = samples("late", 900)
    again = [{**x, "t0": x["t0"] + 2000 * MS, "t": x["t"] + 2000 * MS} for x in samples("late", 300)]
    gone = [read("a", t) for t in range(900, 2000, 10)]

    def check(rounds):
        seen = first + again
        return checker.check(history(known), cut, [], seen, SLACK, 1000 * MS, handover_ns=2000 * MS, rounds=rounds)

    assert check(gone) == {}
    assert types(check([])) == {"orphan-hold": 1}, "seen 2.3 s with no read that missed it: one life"
    assert types(check([read("b", t) for t in range(900, 2000, 10)])) == {"orphan-hold": 1}, "another name's reads"
    lives = checker.stray_tokens(history(known), first + again, gone)
    assert [(x["first_seen"], x["alive_ns"]) for x in lives] == [(1 * MS, 889 * MS), (2001 * MS, 289 * MS)]


def test_a_stray_hold_while_a_worker_was_frozen_or_the_server_stalled_is_excused():
    known = [granted("s0", 1, 0, fence=1, token="mine")]
    stop = {"fault": "sigstop", "pid": 9, "t": 0, "t_end": 400 * MS}
    assert anomalies(known, samples=samples("stray", 600), faults=[stop]) == {}
    sleep = {"fault": "debug-sleep", "t": 0, "t_end": 200 * MS}
    assert anomalies(known, samples=samples("stray", 600), faults=[sleep]) == {}  # 200 ms + 200 ms grace
    restart = {"fault": "server-restart", "t": 20 * MS, "t_end": 40 * MS}  # the grant's reply may be lost
    assert anomalies(known, samples=samples("stray", 900), faults=[restart]) == {}
    late = {"fault": "server-restart", "t": 100 * MS, "t_end": 140 * MS}  # the stray was there before
    assert types(anomalies(known, samples=samples("stray", 900), faults=[late])) == {"stray-hold": 1}
    kill = {"fault": "pubsub-kill", "t": 0, "t_end": 1 * MS}  # wake-ups lost: no excuse for a stray
    assert types(anomalies(known, samples=samples("stray", 600), faults=[kill])) == {"stray-hold": 1}


def test_fault_windows_merge_and_skip_what_was_not_injected():
    faults = [
        {"fault": "sigstop", "t": 0, "t_end": 10},
        {"fault": "debug-sleep", "t": 5, "t_end": 20},
        {"fault": "client-kill", "t": 40, "t_end": 41},
        {"fault": "sigint", "t": 100, "t_end": 100},
        {"fault": "server-restart", "t": 60, "t_end": 70, "skipped": "boom"},
    ]
    assert checker.fault_windows(faults, ("sigstop", "debug-sleep", "client-kill"), 0, 5) == [(0, 25), (40, 46)]
    assert checker.fault_windows(faults, ("client-kill", "server-restart"), 2, 0) == [(38, 41)]


def clock_event(w, skew, skew_ms):
    return event(w, 0, "clock", 0, skew=skew, skew_ms=skew_ms)


def test_a_worker_whose_clock_is_not_skewed_as_asked_is_found():
    fine = [clock_event("s1", "+5s", 4990.0), clock_event("a3", "-3s", -3012.0), clock_event("s0", None, -8.0)]
    assert anomalies(fine) == {}
    found = anomalies([clock_event("s1", "+5s", 3.0), clock_event("s0", None, 4990.0)])
    assert types(found) == {"clock-not-skewed": 2}
    assert {(a["w"], a["asked"]) for a in found["clock-not-skewed"]} == {("s1", "+5s"), ("s0", None)}


def test_clock_offsets_are_read_and_bad_ones_refused():
    assert clock.offset_s("+5s") == 5.0 and clock.offset_s("-3s") == -3.0
    for bad in ("5s", "+5", "+5m", ""):
        with pytest.raises(ValueError, match="like '\\+5s'"):
            clock.offset_s(bad)


def test_a_skewed_environment_is_for_the_child_only():
    """The parent's environment is as it was after the child started, and its clock untouched."""
    import os
    import subprocess
    import sys
    import time

    before = dict(os.environ)
    with clock.skewed_env("+5s"):
        child = subprocess.run(
            [sys.executable, "-c", "import time; print(time.time())"], capture_output=True, text=True, check=True
        )
    assert dict(os.environ) == before
    assert float(child.stdout) - time.time() == pytest.approx(5.0, abs=clock.TOLERANCE_MS / 1000)


def test_keys_left_are_reported_with_their_ttl():
    found = anomalies([], keys=[("history:x:{a}", 29_000)])
    assert found == {"keys-left": [{"type": "keys-left", "key": "history:x:{a}", "pttl_ms": 29_000}]}


def test_build_holds_joins_interleaved_workers_and_late_on_lost():
    events = history(
        [
            granted("s0", 1, 0, fence=1),
            event("s0", 1, "valid", 5, t_rel=6 * MS),
            event("s0", 1, "lost", 7, src="release"),
            event("s0", 2, "timeout", 9, phase="acquire"),
            event("s0", 1, "lost", 12, src="on_lost"),
        ],
        [granted("s1", 1, 8, fence=2), event("s1", 1, "valid", 11, t_rel=11 * MS)],
    )
    h1, h2 = checker.build_holds(events)
    assert (h1.w, h1.valid, h1.on_lost, h1.noticed) == ("s0", 5 * MS, [12 * MS], [("release", 7 * MS)])
    assert (h2.w, h2.granted, h2.fence) == ("s1", 8 * MS, 2)


# --------------------------------------------------------------------------
# nemesis and workers


def test_the_schedule_is_seeded_bounded_and_complete():
    counts = default_faults(10, "quorum")
    assert set(counts) == set(KINDS) and all(n >= 1 for n in counts.values())
    assert set(default_faults(10)) == set(KINDS) - set(MASTER_ONLY), "one server: no master faults"
    plan = schedule(random.Random(3), 10, counts)
    assert plan == schedule(random.Random(3), 10, counts)
    assert [k for _, k in plan].count("sigint") == counts["sigint"] and len(plan) == sum(counts.values())
    assert all(WINDOW[0] * 10 <= at <= WINDOW[1] * 10 for at, _ in plan)
    assert [at for at, _ in plan] == sorted(at for at, _ in plan)


def test_every_scenario_plans_its_own_faults_from_its_seed():
    """The plan (times and kinds) is a function of the seed alone; each
    deployment gets its own faults, the new ones included."""
    assert {"waiter-master-stop", "restart-empty", "master-stop"} <= set(default_faults(20, "quorum"))
    assert set(default_faults(30, "sentinel-lock")) == allowed_kinds("sentinel") >= set(SENTINEL_KINDS)
    assert set(default_faults(30, "cluster-lock")) == allowed_kinds("cluster") >= set(CLUSTER_KINDS)
    for scenario in ("quorum", "sentinel-lock", "cluster-lock"):
        cfg = RunConfig(scenario=scenario, duration=30, seed=5)
        assert fault_plan(cfg) == fault_plan(RunConfig(scenario=scenario, duration=30, seed=5))
        assert fault_plan(cfg) != fault_plan(RunConfig(scenario=scenario, duration=30, seed=6))
    with pytest.raises(AssertionError, match="unknown fault kinds"):
        fault_plan(RunConfig(scenario="cluster-lock", faults={"restart-empty": 1}))


def test_a_wait_on_the_sentinels_does_not_count_time_a_sentinel_spends_in_tilt():
    """A Sentinel in TILT mode acts on nothing for 30 s: the nemesis's waits
    stop their clock meanwhile (nemesis._sentinel_wait), and still time out
    on their own limit, saying why."""
    start = time.monotonic()
    tilt_ends = start + 1.5
    ready = lambda: time.monotonic() > tilt_ends + 0.2  # noqa: E731
    SentinelDeployment.wait_for(ready, 1.0, "a failover", paused=lambda: time.monotonic() < tilt_ends)
    with pytest.raises(AssertionError, match="timed out after 1.0 s waiting for a failover: why"):
        SentinelDeployment.wait_for(lambda: False, 1.0, "a failover", detail=lambda: ": why")


def test_ctrl_c_interrupts_only_a_wait_with_nothing_granted():
    class Handle:
        def __init__(self, token):
            self.token = token

    gate = SigintGate()
    gate.handler(signal.SIGINT, None)  # not waiting
    gate.waiting = Handle("granted")  # acquire returned True, the handler runs just after
    gate.handler(signal.SIGINT, None)
    assert gate.ignored == 2
    gate.waiting = Handle(None)
    with pytest.raises(KeyboardInterrupt):
        gate.handler(signal.SIGINT, None)
    assert gate.waiting is None and gate.ignored == 2


# --------------------------------------------------------------------------
# short runs under faults

RUN_S = 10
# The quorum has its master faults and the waiter-aimed master stop to fit in besides.
LONGER_S = {"quorum": 20}
RUNS = [pytest.param(s, 101 + i, id=s) for i, s in enumerate(SCENARIOS)]


def nemesis_log(workdir) -> list:
    return [json.loads(line) for line in (workdir / "nemesis.jsonl").read_text().splitlines()]


def assert_skewed(s):
    """The skewed workers' clocks ran off the server's by what was asked; the others did not."""
    labels = {i: f"{'s' if i < 3 else 'a'}{i}" for i in range(s["workers"])}
    for i, w in labels.items():
        asked = clock.offset_s(SKEWS[i]) * 1000 if i in SKEWS else 0
        assert s["clock_skew_ms"][w] == pytest.approx(asked, abs=clock.TOLERANCE_MS), (w, s["clock_skew_ms"])


@pytest.mark.chaos
@pytest.mark.parametrize("scenario, seed", RUNS)
def test_history_under_faults_has_no_anomaly(scenario, seed, tmp_path):
    duration = LONGER_S.get(scenario, RUN_S)
    # Enough holds for the check to mean something, not a speed: the quorum run
    # made 495 holds in 20 s on a machine with a load average of 13, and one
    # whose server took 5 s to restart under load made 95 in 12 s. The run
    # goes on until it has them (at most 30 s longer).
    wanted = 10 * duration
    cfg = RunConfig(scenario=scenario, duration=duration, seed=seed, workdir=str(tmp_path), min_holds=wanted)
    s = run(cfg)
    assert s["plan"] == [[round(at, 3), kind] for at, kind in fault_plan(cfg)[1]]
    assert s["worker_exit_codes"] == [0] * s["workers"]
    assert s["torn_lines"] == 0
    assert s["holds_valid"] >= wanted, f"too few holds: {s['holds_valid']} in {s['ran_s']} s"
    if scenario in ("rwmutex", "fair-rwmutex"):
        assert {"read", "write"} <= set(s["holds_by_kind"])
    if scenario == "multi-lock":
        assert {"lock", "multi"} <= set(s["holds_by_kind"])
    missing = {k for k in s["faults_scheduled"] if not s["faults"].get(k)}
    late = f"the nemesis {s['nemesis_behind_s']} s behind its plan, the workers ran {s['ran_s']} s"
    assert not missing, f"scheduled but never injected: {missing} (skipped: {s['faults_skipped']}; {late})"
    assert s["interrupted"] + s["sigint_ignored"] > 0, "no Ctrl-C reached a worker"
    assert s["timeouts"].get("cancelled-in-acquire", 0) > 0, "no async waiter was cancelled"
    assert s["holder_samples"] > 0, "the monitor never saw a holder in Redis: has the key layout moved?"
    if scenario == "quorum":
        assert_skewed(s)
        aimed = [f for f in nemesis_log(tmp_path) if f["fault"] == "waiter-master-stop"]
        assert aimed and all(f["waiting"] for f in aimed), aimed  # a worker waited in acquire each time
    assert s["anomalies"] == {}, json.dumps(s["anomaly_examples"], indent=1)


@pytest.mark.chaos
def test_a_lock_that_excludes_nothing_is_caught(tmp_path):
    """Every worker under its own key prefix: the same names, but no exclusion at all."""
    s = run(
        RunConfig(
            scenario="lock",
            duration=3,
            seed=7,
            workdir=str(tmp_path),
            isolate=True,
            faults={"client-kill": 1},
            record=False,
        )
    )
    assert s["anomalies"].get("overlap", 0) > 0, s["anomalies"]
    example = s["anomaly_examples"]["overlap"][0]
    assert example["holds"][0]["w"] != example["holds"][1]["w"]
    assert example["overlap_ms"] > 0


@pytest.mark.chaos
def test_history_through_sentinel_failovers(tmp_path):
    """Workers through redis+sentinel:// while the nemesis runs SENTINEL FAILOVER
    and kills the master (restarted as the new master's replica), besides
    connection kills, SIGSTOPs and Ctrl-C. Without replica acknowledgement an
    overlap is allowed only inside a failover's window (counted apart); every
    other check holds as on one server: losses reported in time, fences in
    order outside failovers, nothing left."""
    s = run(RunConfig(scenario="sentinel-lock", duration=30, seed=211, workdir=str(tmp_path), min_holds=30 * 30))
    assert s["worker_exit_codes"] == [0] * s["workers"]
    for kind in ("failover", "master-kill", "sentinel-stop"):
        assert s["faults"].get(kind, 0) >= 1, s["faults"]
    assert s["holds_valid"] >= 30 * 30, f"too few holds: {s['holds_valid']} in {s['ran_s']} s"
    assert all(t < 15 for t in s["failover_s"]), s["failover_s"]
    assert s["holder_samples"] > 0
    assert_skewed(s)
    assert s["anomalies"] == {}, json.dumps(s["anomaly_examples"], indent=1)


@pytest.mark.chaos
def test_history_through_cluster_failovers(tmp_path):
    """Workers through redis+cluster:// to 3 masters with a replica each while
    the nemesis runs CLUSTER FAILOVER and kills masters (their replicas
    promoted, the old ones back as replicas), besides connection kills,
    SIGSTOPs, Ctrl-C and two workers' clocks 5 s fast and 3 s slow. As
    through Sentinel, an overlap is allowed only inside a failover's window
    (no replica acknowledgement asked); every other check holds."""
    s = run(RunConfig(scenario="cluster-lock", duration=30, seed=223, workdir=str(tmp_path), min_holds=30 * 30))
    assert s["worker_exit_codes"] == [0] * s["workers"]
    for kind in ("cluster-failover", "cluster-master-kill", "client-kill", "sigstop"):
        assert s["faults"].get(kind, 0) >= 1, s["faults"]
    assert s["holds_valid"] >= 30 * 30, f"too few holds: {s['holds_valid']} in {s['ran_s']} s"
    assert all(t < 15 for t in s["failover_s"]), s["failover_s"]
    assert s["holder_samples"] > 0, "the monitor never saw a holder: has the key layout moved?"
    assert_skewed(s)
    assert s["anomalies"] == {}, json.dumps(s["anomaly_examples"], indent=1)


def test_overlaps_are_allowed_only_inside_a_failover_window():
    """The window: the failover, then a client's re-check (1 s) and the longest ttl (1 s here) and slack."""
    faults = [{"fault": "failover", "t": 100 * MS, "t_end": 200 * MS}]
    events = hold("s0", 1, 0, 5000, fence=1) + hold("s1", 1, 150, 160, fence=2) + hold("s3", 1, 4000, 4010, fence=3)
    found = checker.check(history(events), faults, [], [], SLACK, 1000 * MS)
    allowed, rest = checker.failover_overlaps(found["overlap"], faults, 1000 * MS, SLACK)
    assert [a["holds"][1]["w"] for a in allowed] == ["s1"] and allowed[0]["type"] == "failover-overlap"
    assert [o["holds"][1]["w"] for o in rest] == ["s3"]


# --------------------------------------------------------------------------
# short runs with partitions: every worker and server in a test host of its
# own (tests/support/netns.py), links cut one way and both and slowed, besides the
# other faults. `make jepsen DURATION=...` runs the long version and writes
# its report into docs/reliability.md.

PARTITION_RUN_S = 6
# Sentinel and Cluster: a failover by a partition besides the link faults
# (their other failovers run in the loopback runs above); each failover
# waits for the deployment to settle, ~10 s.
PARTITION_S = {"sentinel-lock": 14, "cluster-lock": 14, "quorum": 10}
LINK_FAULTS = {
    "partition": 3,
    "cut-requests": 2,
    "cut-replies": 2,
    "latency": 1,
    "client-kill": 1,
    "sigstop": 1,
    "sigint": 2,
}
PARTITION_FAULTS = {
    "sentinel-lock": {"split-brain": 1, **LINK_FAULTS},
    "cluster-lock": {"master-isolated": 1, **LINK_FAULTS},
}
PARTITION_RUNS = [pytest.param(s, 301 + i, id=s) for i, s in enumerate(ALL_SCENARIOS)]


@pytest.mark.chaos
@pytest.mark.parametrize("scenario, seed", PARTITION_RUNS)
def test_history_under_partitions_has_no_anomaly(scenario, seed, tmp_path):
    """No overlap (but the failovers' own, without replica acknowledgement,
    counted apart), no late or missing loss report, no stale write let in
    by the storage's guard, nothing left, while the nemesis cuts and slows
    the links between workers and servers."""
    from support import netns

    netns.skip_unless_available()
    duration = PARTITION_S.get(scenario, PARTITION_RUN_S)
    faults = dict(PARTITION_FAULTS.get(scenario, {}))
    if faults and netns.tun_unavailable():
        faults.pop("latency")
    cfg = RunConfig(
        scenario=scenario,
        duration=duration,
        seed=seed,
        workdir=str(tmp_path),
        partitions=True,
        faults=faults,
        min_holds=5 * duration,
    )
    s = run(cfg)
    assert s["worker_exit_codes"] == [0] * s["workers"], s["anomaly_examples"]
    assert s["torn_lines"] == 0
    assert s["holds_valid"] >= 5 * duration, f"too few holds: {s['holds_valid']} in {s['ran_s']} s"
    missing = {k for k in s["faults_scheduled"] if not s["faults"].get(k)}
    late = f"the nemesis {s['nemesis_behind_s']} s behind its plan, the workers ran {s['ran_s']} s"
    assert not missing, f"scheduled but never injected: {missing} (skipped: {s['faults_skipped']}; {late})"
    assert {"partition", "cut-requests", "cut-replies"} <= set(s["faults"])
    if scenario != "semaphore":  # a permit has a fence, but its holders are not exclusive: none writes
        assert s["writes"]["in_hold"].get("written", 0) > 0, s["writes"]
    assert s["holder_samples"] > 0
    assert s["anomalies"] == {}, json.dumps(s["anomaly_examples"], indent=1)


@pytest.mark.chaos
def test_a_failover_the_sentinel_aborts_is_asked_again(tmp_path):
    """The nemesis's SENTINEL FAILOVER, its replica frozen as the Sentinel
    promotes it: the promotion is not seen within the 4 s failover-timeout,
    the Sentinel aborts, the master is unchanged. The nemesis asks again once
    the replica is back and ready, and records the failover asked twice."""
    import os

    from history.nemesis import Nemesis

    deployment = SentinelDeployment(sentinels=3, down_after_ms=1500).start()
    try:
        nemesis = Nemesis([], [], None, seed=0, stop_s=1.0, deployment=deployment)
        asked = deployment.sentinel_failover
        replica = deployment.replica

        def failover_then_freeze() -> int:
            old = asked()
            os.kill(replica.proc.pid, signal.SIGSTOP)  # before the Sentinel's next tick sends REPLICAOF NO ONE
            threading.Timer(8.0, os.kill, (replica.proc.pid, signal.SIGCONT)).start()  # past the 4 s timeout
            deployment.sentinel_failover = asked  # the next one goes through
            return old

        deployment.sentinel_failover = failover_then_freeze
        nemesis._failover()
        [record] = nemesis.log
        assert record["asked"] >= 2, record
        assert record["new"] != record["old"] and deployment.master_port() == record["new"]
        assert "-failover-abort" in Path(deployment.sentinels[0].dir, "sentinel.log").read_text()
    finally:
        deployment.close()
