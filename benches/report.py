"""The benchmark report: targets, markdown tables and the chart."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
from pathlib import Path

from scenarios.common import FERRO, FERRO_FAIR, FERRO_WAKEUPS, FLOOR, POTTERY, PRL, REDISPY, REDISPY_ASYNC, fmt, version
from scenarios.uncontended import round_ratio


def machine_note() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count()
    return f"{cores} cores" + (f" ({model})" if model else "") + f", {platform.system()} {platform.release()}"


def redis_server_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        return next(w.split("=", 1)[1] for w in out.split() if w.startswith("v="))
    except Exception:
        return "?"


def mark(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


ASYNC_FERRO = f"{FERRO} (asyncio)"
ASYNC_FLOOR = "floor: 2 x PING (redis.asyncio)"


def targets(res: dict, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    rows = []
    un = res.get("uncontended")
    if un:
        r = un["rows"]
        ratio = (
            (lambda a, b: round_ratio(un["per_round"], a, b))
            if "per_round" in un
            else (lambda a, b: r[a]["median_us"] / r[b]["median_us"])
        )
        f, floor, rp = r[FERRO]["median_us"], r[FLOOR]["median_us"], r[REDISPY]["median_us"]
        xf, xr = ratio(FERRO, FLOOR), ratio(FERRO, REDISPY)
        rows.append(
            (
                "sync uncontended: ferrolock <= 1.05x two bare round trips",
                f"{xf:.3f}x (median {fmt(f)} us vs floor {fmt(floor)} us)",
                mark(xf <= 1.05),
            )
        )
        rows.append(
            (
                "sync uncontended: ferrolock never slower than redis-py Lock",
                f"{xr:.2f}x its time (median {fmt(f)} us vs {fmt(rp)} us)",
                mark(xr <= 1.0),
            )
        )
        fa, ra, af = r[ASYNC_FERRO]["median_us"], r[REDISPY_ASYNC]["median_us"], r[ASYNC_FLOOR]["median_us"]
        xa = ratio(ASYNC_FERRO, REDISPY_ASYNC)
        rows.append(
            (
                "asyncio uncontended: ferrolock <= 1.1x redis.asyncio Lock",
                f"{xa:.2f}x (median {fmt(fa)} us vs {fmt(ra)} us; its floor, two awaited PINGs: {fmt(af)} us, "
                f"{ratio(ASYNC_FERRO, ASYNC_FLOOR):.2f}x)",
                mark(xa <= 1.1),
            )
        )
    co = res.get("contended", {})
    if FERRO_FAIR in co and co[FERRO_FAIR].get("cycles"):
        c = co[FERRO_FAIR]
        ok = c["utilisation"] >= 0.9 and c["wait_max_ms"] <= 20
        rows.append(
            (
                "contended, fair=True (4 processes x 1 ms holds): utilisation >= 0.9, max wait <= 20 ms",
                f"utilisation {c['utilisation']:.2f}, max wait {c['wait_max_ms']:.1f} ms",
                mark(ok),
            )
        )
    asy = res.get("asyncio", {})
    if "cycles_per_s" in (asy.get(FERRO) or {}) and "cycles_per_s" in (asy.get(REDISPY_ASYNC) or {}):
        a, b = asy[FERRO]["cycles_per_s"], asy[REDISPY_ASYNC]["cycles_per_s"]
        rows.append(
            (
                "asyncio, 200 tasks on one key: ferrolock >= 15x redis-py asyncio Lock (cycles/s)",
                f"{a / b:.1f}x ({fmt(a)} vs {fmt(b)} cycles/s)",
                mark(a / b >= 15),
            )
        )
    wd = res.get("watchdog", {}).get(FERRO)
    if wd and wd.get("taken") is not None:
        ok = wd["taken"] == wd["n"] and wd["lost"] == 0 and wd["keys_at_end"] == wd["n"]
        note = "" if wd["n"] >= 100_000 else f" (--quick: {wd['n']:,} locks; the target is for 100,000)"
        rows.append(
            (
                "watchdog: 100,000 locks held, zero lost; CPU and memory per held lock",
                f"{wd['taken']:,} held {wd['window_s']:.0f} s, {wd['lost']} lost, {wd['keys_at_end']:,} keys "
                f"at the end; {wd['cpu_pct']:.1f} % of one core ({wd['cpu_pct'] / 100 * 1e6 / wd['n']:.2f} us "
                f"of CPU per lock per second), {wd['bytes_per_lock']:,.0f} bytes per lock{note}",
                mark(ok),
            )
        )
    return rows


def distances(res: dict) -> list[str]:
    """For each target missed, what stands between the figure and it, from this run's own figures."""
    out: list[str] = []
    missed = {t[0].split(":")[0] for t in res.get("targets", []) if t[2] == mark(False)}
    sc = (res.get("syscalls") or {}).get("rows", {})
    floor_sc, block_sc = sc.get("floor: 2 x PING"), sc.get("ferrolock acquire() + release()")
    try_sc = sc.get("ferrolock acquire(blocking=False) + release()")
    load = (
        f"load average {res.get('load_before')} before the run and {res.get('load_after')} after; "
        "the floor's median was "
        + fmt((res.get("uncontended") or {}).get("rows", {}).get(FLOOR, {}).get("median_us"))
        + " us"
    )
    if "sync uncontended" in missed and floor_sc and block_sc and try_sc:
        out.append(
            f"- Sync: a ferrolock cycle runs two Lua scripts, which cost the server {block_sc['server_us']:.0f} us "
            f"a cycle against {floor_sc['server_us']:.1f} us for two PINGs; and a blocking `acquire()` still "
            "goes through the runtime (a runtime thread reads the reply and wakes the caller) so that Ctrl-C is "
            f"seen every 50 ms: {block_sc['total']:.0f} system calls a cycle against the floor's "
            f"{floor_sc['total']:.0f}, where `acquire(blocking=False)` and `release()`, which send on the "
            f"calling thread, make {try_sc['total']:.0f}. Each hand-over to a runtime thread also costs a "
            f"wake-up, which on this virtual machine is dear when the other core is idle or busy ({load}; the "
            "floor itself is about three times slower in some runs than in others, as a waking core is)."
        )
    if "asyncio uncontended" in missed:
        out.append(
            "- asyncio: each call's reply is read by a runtime thread, which hands it to the event loop through "
            "the loop's socket: two threads where redis.asyncio uses one, and that hand-over costs a wake-up, "
            f"dear on this virtual machine when a core sleeps or is taken ({load})."
        )
    co = (res.get("contended") or {}).get(FERRO_FAIR)
    un = res.get("uncontended")
    if "contended, fair=True (4 processes x 1 ms holds)" in missed and co and co.get("cycles") and un:
        hold, rtt = co["hold_mean_ms"], un["rows"][FLOOR]["median_us"] / 2000
        out.append(
            f"- Fair, contended: utilisation {co['utilisation']:.2f} (max wait {co['wait_max_ms']:.1f} ms) against "
            f"the bound derived under scenario 2, {hold / (hold + rtt):.2f} here (a {hold:.2f} ms hold, then one "
            f"round trip, {rtt * 1000:.0f} us, for the release to reach Redis and its wake-up to reach the next "
            "holder). The rest is waiting for a core: 4 processes, their runtime threads and redis-server share "
            "2 cores with whatever else runs, so a woken waiter often waits to be scheduled (load average "
            f"{res.get('load_before')} before the run)."
        )
    asy = res.get("asyncio") or {}
    a, w = asy.get(FERRO) or {}, asy.get(FERRO_WAKEUPS) or {}
    if "asyncio, 200 tasks on one key" in missed and "scripts_per_cycle" in a:
        line = (
            f"- 200 tasks: each cycle ran {a['scripts_per_cycle']:.1f} scripts ({a['server_us_per_cycle']:.0f} us "
            "of server time) where two would do: a waiter rides the wake-ups (its own look every 0.5 to 1 s is "
            "only a safety net), and a new acquire lets a waiter of its process that a release woke try first, "
            "but a wake-up can still reach a waiter after the releaser is back, which then fails once more and "
            "waits again (the default lock is not fair)."
        )
        if "cycles_per_s" in w:
            line += (
                f" Waiting on the wake-ups alone (`retry=Retry.fixed(1.0)`) the same run made "
                f"{fmt(w['cycles_per_s'])} cycles/s with {w['scripts_per_cycle']:.1f} scripts a cycle."
            )
        line += " redis-py's own figure moves with where its 0.1 s polls fall; the ratio with it moves as much."
        out.append(line)
    return (["Where a target is missed:", ""] + out + [""]) if out else []


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def write_report(res: dict, args: argparse.Namespace, out: Path, png: Path) -> str:
    p = res["params"]
    md = [
        "# Benchmarks",
        "",
        f"ferrolock {version('ferrolock')} beside redis-py `Lock` (sync and `redis.asyncio`), "
        "python-redis-lock and pottery `Redlock` (one master), all measured in one run against one "
        "throwaway loopback redis-server. Generated by [`benches/bench.py`](../benches/bench.py); "
        "numbers vary from run to run on a shared machine, so compare within a run.",
        "",
        f"- date: {res['date']}",
        f"- machine: {res['machine']}; load average {res['load_before']} before, {res['load_after']} after",
        f"- command: `{res['command']}` ({res['elapsed_s']:.0f} s"
        f"{', --quick' if res.get('quick', args.quick) else ''})",
        f"- software: Python {platform.python_version()}, redis-server {redis_server_version()}, "
        f"redis-py {version('redis')} with hiredis {version('hiredis')}, python-redis-lock "
        f"{version('python-redis-lock')}, pottery {version('pottery')}",
        "- fair mode: "
        + (
            "measured (`fair=True`)"
            if res["fair"]
            else "not in this build (`client.lock(name, fair=True)` raised TypeError), so no fair rows"
        ),
        "",
        "## Targets",
        "",
        table(["target", "measured", "result"], [list(t) for t in res["targets"]]),
        "",
        *distances(res),
        f"![benchmarks]({png.name})",
        "",
    ]
    cmp = res.get("compare")
    if cmp:
        from scenarios.compare import METRICS, RATIOS

        rows = []
        for key, label, _, _ in RATIOS:
            if key in cmp["before"]:
                b, a = cmp["before"][key], cmp["after"][key]
                rows.append([label + " (per turn)", f"{b:.2f}x", f"{a:.2f}x", f"{a / b:.2f}x"])
        for key, label, unit in METRICS:
            b, a = cmp["before"][key], cmp["after"][key]
            digits = 2 if key.startswith("fair_") else 0
            change = f"{a / b:.2f}x" if b else ""
            rows.append([label, f"{fmt(b, digits)} {unit}".strip(), f"{fmt(a, digits)} {unit}".strip(), change])
        md += [
            "## Before and after",
            "",
            f"The ferrolock figures of scenarios 1-3 for the build in `{cmp['baseline']}` (before) and this one "
            f"(after), measured in {cmp['rounds']} turns each, alternating which goes first, against the same "
            f"redis-server; medians of the turns ({cmp['cycles']:,} cycles per turn for the uncontended rows, "
            "200 cycles per process for the fair row). The floors and the redis-py rows are measured in the same "
            "turns, beside each build. The ratios first are taken within each turn, then their median: they "
            "are the comparison, since a turn's absolute figures move with the machine's state (a round trip "
            "here takes three times longer in some stretches than in others, floor included), and the turns of "
            "one build may fall in one stretch and the other's in another.",
            "",
            table(["figure", "before", "after", "after / before"], rows),
            "",
        ]
    sc = res.get("syscalls")
    if sc and sc.get("rows"):
        rows = []
        for case, row in sc["rows"].items():
            rows.append(
                [case]
                + [f"{row['groups'][g]:.1f}" for g in sc["groups"]]
                + [f"{row['total']:.1f}", f"{row['server_us']:.1f}"]
            )
        md += [
            "## Where the microseconds go",
            "",
            f"System calls per uncontended cycle, every thread of the process counted (`strace -f -c`, "
            f"{sc['cycles']:,} cycles less a run without them), and the server's own time per cycle "
            "(`INFO commandstats`, from a run without strace). A round trip costs at least a send and a "
            "receive on the client; each wake-up (`futex`) or poll beyond those is a thread handing work to "
            "another. The server's time is what a Lua script costs beside a PING: it is part of every "
            "ferrolock cycle and of no floor.",
            "",
            table(["cycle"] + sc["groups"] + ["all", "server (us)"], rows),
            "",
        ]
    elif sc:
        md += ["## Where the microseconds go", "", f"Not measured: {sc.get('error')}", ""]
    un = res.get("uncontended")
    if un:
        rows = []
        for name in un["order_sync"] + un["order_async"]:
            r = un["rows"][name]
            rows.append(
                [
                    name,
                    fmt(r["median_us"]),
                    fmt(r["p99_us"]),
                    f"{r['x_floor']:.2f}x",
                    f"{r['x_floor_rounds']:.2f}x" if "x_floor_rounds" in r else "",
                    f"{r['n']:,}",
                ]
            )
        md += [
            "## 1. Uncontended acquire + release, one thread",
            "",
            f"One handle per library, `acquire()` then `release()` per cycle (`aacquire()`/`arelease()`, "
            f"and `acquire()`/`release()` awaited, for the asyncio rows), {un['warmup']} warm-up cycles, then "
            f"{un['rounds']} rounds of {un['cycles']:,} cycles with the order rotated between rounds. "
            "The floor is two bare round trips from the same client library: two redis-py + hiredis "
            "`PING`s per cycle (one round trip to take, one to release). The targets use the per-round "
            "ratio: in each round, one library's median over the other's, then the median of those over the "
            "rounds, so that a burst of load on the shared machine slows both sides of a ratio.",
            "",
            table(
                ["library", "median (us)", "p99 (us)", "median / floor", "per-round ratio to the floor", "cycles"], rows
            ),
            "",
        ]
    co = res.get("contended")
    if co:
        rows = []
        for lib, c in co.items():
            if not c.get("cycles"):
                rows.append([lib] + ["failed: " + c.get("error", "?")] + [""] * 8)
                continue
            rows.append(
                [
                    lib,
                    fmt(c["cycles_per_s"]),
                    f"{c['utilisation']:.2f}",
                    f"{c['wait_p50_ms']:.2f}",
                    f"{c['wait_p99_ms']:.1f}",
                    f"{c['wait_max_ms']:.1f}",
                    f"{c['counter']:,} / {c['expected']:,} " + ("ok" if c["counter_ok"] else "**WRONG**"),
                    str(c["overlaps"]),
                    f"{c['handoffs']:,}",
                    f"{c['wall_s']:.2f}",
                ]
            )
        md += [
            "## 2. Contended: processes on one lock",
            "",
            f"{p['procs']} processes (multiprocessing spawn, each with its own client) x {p['cycles']} cycles "
            f"on one lock name. Inside each hold: read a counter in shared memory (no lock of its own), "
            f"`time.sleep(0.001)` as the work, write it back +1. Each library waits its default way: "
            "ferrolock pub/sub wake-up with retry as safety net, redis-py `sleep=0.1` polling (what its users get), "
            "python-redis-lock BLPOP on a signal list, pottery a random 0-0.2 s retry. "
            "Utilisation = sum of time held (from `acquire()` returning to `release()` being called) / wall time "
            "(first `acquire()` called to last hold ended). Wait = time inside `acquire()`. "
            "Handoffs = holds taken by a different process than the previous one. "
            "Overlaps = holds that began before the previous one ended (must be 0).",
            "",
            table(
                [
                    "library",
                    "cycles/s",
                    "utilisation",
                    "wait p50 (ms)",
                    "wait p99 (ms)",
                    "wait max (ms)",
                    "counter",
                    "overlaps",
                    "handoffs",
                    "wall (s)",
                ],
                rows,
            ),
            "",
        ]
        done = [c for c in co.values() if c.get("cycles")]
        if done and un:
            hold = sum(c["hold_mean_ms"] for c in done) / len(done)
            floor_ms = un["rows"][FLOOR]["median_us"] / 1000
            one_way = floor_ms / 4  # half a round trip: the release reaching Redis
            md += [
                f"A hold lasted {hold:.2f} ms on average (`time.sleep(0.001)` plus the counter). For a "
                "library that takes the lock with its own request after a release, two holds are at least "
                f"about the two-round-trip floor apart ({floor_ms * 1000:.0f} us in scenario 1), so its "
                f"utilisation cannot exceed about {hold:.2f} / ({hold:.2f} + {floor_ms:.2f}) = "
                f"{hold / (hold + floor_ms):.2f} on this machine. With `fair=True` the release itself hands "
                "the lock over and the wake-up is the new holder's grant, so the gap is the release reaching "
                "Redis plus the message reaching the waiter, about one round trip: a bound near "
                f"{hold:.2f} / ({hold:.2f} + {2 * one_way:.2f}) = {hold / (hold + 2 * one_way):.2f}. What "
                "separates the measured figure from it is scheduling: 4 processes, their runtime threads and "
                "redis-server share 2 cores, so a woken waiter often waits for a core.",
                "",
            ]
    asy = res.get("asyncio")
    if asy:
        rows = []
        for lib, a in asy.items():
            if a is None:
                rows.append([lib, "n/a (no asyncio API)", "", "", "", "", ""])
                continue
            if "error" in a:
                rows.append([lib, "failed: " + a["error"], "", "", "", "", ""])
                continue
            cyc = f"{a['cycles']:,} / {a['expected']:,}" + ("" if a["complete"] else " (stopped at the time limit)")
            rows.append(
                [
                    lib,
                    fmt(a["cycles_per_s"]),
                    cyc,
                    f"{a['wall_s']:.2f}",
                    f"{a['scripts_per_cycle']:.1f}" if "scripts_per_cycle" in a else "",
                    f"{a['server_us_per_cycle']:.0f}" if "server_us_per_cycle" in a else "",
                    ("ok" if a["counter_ok"] and a["most_inside"] == 1 else "**WRONG**"),
                ]
            )
        md += [
            "## 3. asyncio: tasks on one key in one event loop",
            "",
            f"{p['tasks']} tasks x {p['task_cycles']} cycles on one key, one event loop, a separate handle per "
            "task (`async with client.lock(name)` / `async with redis.asyncio.lock.Lock(...)`, blocking, "
            "default `sleep=0.1`; its `redis.asyncio` client gets `max_connections=tasks + 16`, because redis-py "
            "8's default pool of 100 raises `MaxConnectionsError` with 200 tasks waiting). Inside each hold a shared "
            "counter is read, the task yields "
            "(`await asyncio.sleep(0)`), and writes it back +1; the counter must come out exact with one "
            f"task inside at a time. Time limit {p['async_limit']:.0f} s per library. Scripts per cycle counts "
            "the server's EVALSHA calls (redis-py's acquire is a SET, not a script), server time every "
            "command's (`INFO commandstats`).",
            "",
            table(
                [
                    "library",
                    "cycles/s",
                    "cycles",
                    "wall (s)",
                    "scripts per cycle",
                    "server us per cycle",
                    "counter, one inside",
                ],
                rows,
            ),
            "",
        ]
    wd = res.get("watchdog")
    if wd:
        rows = []
        for lib, w in wd.items():
            if w is None:
                continue
            if not w.get("ok") and w.get("taken") is None:
                rows.append([lib, "failed: " + w.get("error", "?")] + [""] * 13)
                continue
            renew_expected = w["n"] / (w["ttl_s"] / 3 if lib == FERRO else w["ttl_s"] * 2 / 3)
            renewed = w.get("renewals_per_s", w["evalsha_per_s"])
            if w["lost"] is None:  # python-redis-lock: what the harness saw, the holder was not told
                lost = (
                    f"{w['n'] - w['keys_at_end']:,} expired, untold"
                    if w["keys_at_end"] < w["n"]
                    else "0 (the library cannot tell)"
                )
            else:
                lost = f"{w['lost']:,}"
            rows.append(
                [
                    lib,
                    f"{w['taken']:,} / {w['n']:,}",
                    f"{w['window_s']:.0f}",
                    f"{w['cpu_pct']:.1f}",
                    f"{w['redis_cpu_pct']:.1f}",
                    f"{renewed:,.0f} / {renew_expected:,.0f}",
                    f"{w['evalsha_per_s']:,.0f}",
                    f"{w['cpu_pct'] / 100 * 1e6 / renewed:,.0f}" if renewed else "?",
                    lost,
                    f"{w['keys_at_end']:,}",
                    f"{w['monitor_min_pttl_ms'] / 1000:.2f} s" if w.get("monitor_min_pttl_ms") is not None else "?",
                    str(w["threads"]),
                    f"{w['redis_clients']:,}",
                    f"{w['rss_mb']:.0f}",
                    f"{w['bytes_per_lock']:,.0f}" if "bytes_per_lock" in w else "?",
                ]
            )
        md += [
            "## 4. Watchdog at scale",
            "",
            f"Locks on distinct names, acquired in one process and held for {p['wd_hold']:.0f} s with "
            f"ttl={p['wd_ttl']:.0f} s (ferrolock's default) ({p['wd_hold_prl']:.0f} s with ttl="
            f"{p['wd_prl_ttl']:.0f} s for python-redis-lock, whose thread per lock cannot hold many), "
            "each library renewing by itself "
            "(ferrolock: one tokio task per hold, renewing every ttl/3, the renewals that fall due together sent "
            "as one script call of at most 100; python-redis-lock: `auto_renewal=True`, "
            "one thread per lock, renewing every 2/3 ttl). CPU is the holding process's user+system time over "
            "the hold, as % of one core; redis-server's beside it. Memory per lock is the growth of the holding "
            "process's resident set from before the handles were made to the end of the hold, over the locks "
            "held (the Python handle, the core's lock, its lease and its watchdog task). Renewals are the holds "
            "renewed per second over the hold (ferrolock's own count; python-redis-lock's, its EVALSHA calls), "
            "against the rate a renewal schedule that is on time gives; script calls are the server's EVALSHA "
            "calls per second. The lowest ttl "
            "left is the minimum of PTTL over every lock, swept every second (every n/20,000 s for n locks) from "
            "another process during the "
            "hold. python-redis-lock's client gets `max_connections=locks + 16`: its renewal threads wake "
            "together and each takes a connection, and with redis-py 8's default pool of 100 they die of "
            "`MaxConnectionsError` and their locks expire. redis-py `Lock` and pottery have no watchdog: n/a.",
            "",
            table(
                [
                    "library",
                    "locks held",
                    "hold (s)",
                    "CPU % of one core",
                    "redis-server CPU %",
                    "renewals/s (measured / on time)",
                    "script calls/s",
                    "CPU per renewal (us)",
                    "lost",
                    "keys at the end",
                    "lowest ttl left",
                    "threads",
                    "Redis connections",
                    "RSS (MB)",
                    "memory per lock (bytes)",
                ],
                rows,
            ),
            "",
        ]
        pw = wd.get(PRL)
        if pw and pw.get("taken") is not None and (pw.get("thread_errors") or pw["keys_at_end"] < pw["n"]):
            errs = ", ".join(f"{v:,} x {k}" for k, v in pw.get("thread_errors", {}).items()) or "none"
            md += [
                f"python-redis-lock: {pw['n'] - pw['keys_at_end']:,} of {pw['n']:,} locks expired while "
                f"held: their renewal threads ran late, found the key gone and died ({errs}; "
                f"{pw.get('renewers_dead', 0):,} renewal threads dead at the end). The holders were not told; "
                f"`release()` then raised for {pw['release_errors']:,} of them.",
                "",
            ]
        fw = wd.get(FERRO)
        if fw and fw.get("taken") is not None:
            md += [
                f"ferrolock: {fw['watchdogs']:,} live watchdog tasks after acquiring, `on_lost` called "
                f"{fw['on_lost_calls']} times, every `lock.lost` checked at the end; acquiring "
                f"{fw['n']:,} locks took {fw['acquire_s']:.1f} s; {fw['keys_after_release']} keys left "
                "after releasing them all.",
                "",
            ]
    rw = res.get("rwmutex")
    if rw:
        if rw.get("reads") is None:
            rows = [[FERRO, "failed: " + rw.get("error", "?")] + [""] * 7]
        else:
            rows = [
                [
                    FERRO,
                    fmt(rw["reads_per_s"]),
                    fmt(rw["writes_per_s"]),
                    f"{rw['writer_wait_p50_ms']:.1f}",
                    f"{rw['writer_wait_p99_ms']:.1f}",
                    f"{rw['writer_wait_max_ms']:.1f}",
                    f"{rw['reader_wait_p99_ms']:.1f}",
                    f"{rw['reader_wait_max_ms']:.1f}",
                    str(rw["overlaps"]),
                ]
            ]
        rows += [[lib, "n/a (no RW lock)"] + [""] * 7 for lib in (REDISPY, PRL, POTTERY)]
        md += [
            "## 5. RWMutex: readers and a writer",
            "",
            f"{p['rw_readers']} reader processes + 1 writer process on one ferrolock `RWMutex` (writer "
            f"preference, the default) for {p['rw_duration']:.0f} s. Each hold lasts 1 ms (`time.sleep(0.001)`); "
            "the writer pauses 10 ms between writes. Overlaps = reader holds that overlapped a writer's hold "
            "(must be 0).",
            "",
            table(
                [
                    "library",
                    "reads/s",
                    "writes/s",
                    "writer wait p50 (ms)",
                    "writer wait p99 (ms)",
                    "writer wait max (ms)",
                    "reader wait p99 (ms)",
                    "reader wait max (ms)",
                    "overlaps",
                ],
                rows,
            ),
            "",
        ]
    if res.get("errors"):
        md += ["## Errors", ""] + [f"- {e}" for e in res["errors"]] + [""]
    text = "\n".join(md)
    # The sections of other benches (primitives.py, scale.py), written from
    # their own runs, follow a marker in the report: keep them.
    if out.exists():
        previous = out.read_text()
        at = previous.find(KEPT)
        if at != -1:
            text = text.rstrip("\n") + "\n\n" + previous[at:]
    out.write_text(text)
    return text


KEPT = "<!-- Sections from other benches (benches/primitives.py, benches/scale.py): bench.py keeps them. -->"


def chart(res: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        FERRO: "#d9480f",
        FERRO_FAIR: "#f08c00",
        REDISPY: "#1971c2",
        REDISPY_ASYNC: "#1971c2",
        PRL: "#2f9e44",
        POTTERY: "#7048e8",
        FLOOR: "#868e96",
    }

    def color(name: str) -> str:
        for k, v in colors.items():
            if name.startswith(k):
                return v
        return "#868e96"

    def bars(ax, names, values, title, unit, log=False, labels=None):
        y = range(len(names))
        ax.barh(list(y), values, color=[color(n) for n in names])
        ax.set_yticks(
            list(y), [n.replace(" (asyncio)", "\n(asyncio)").replace("floor: ", "floor:\n") for n in names], fontsize=8
        )
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        if log:
            ax.set_xscale("log")
        hi = max(values) if values else 1
        for i, v in enumerate(values):
            text = labels[i] if labels else f"{v:,.0f}"
            ax.text(v * (1.05 if log else 1) + (0 if log else hi * 0.01), i, text, va="center", fontsize=8)
        if not log:
            ax.set_xlim(0, hi * 1.3)
        else:
            ax.set_xlim(min(values) / 2, hi * 8)

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    fig.suptitle(
        f"ferrolock beside redis-py, python-redis-lock, pottery: one run, {res['date']}, "
        f"{res['machine'].split(',')[0]}",
        fontsize=12,
    )
    un = res.get("uncontended")
    ax = axes[0][0]
    if un:
        names = un["order_sync"] + un["order_async"]
        med = [un["rows"][n]["median_us"] for n in names]
        p99 = [un["rows"][n]["p99_us"] for n in names]
        bars(
            ax,
            names,
            med,
            "1. uncontended acquire+release: median (p99 in label)",
            "microseconds",
            labels=[f"{m:,.0f} (p99 {q:,.0f})" for m, q in zip(med, p99)],
        )
    co = {k: v for k, v in res.get("contended", {}).items() if v.get("cycles")}
    if co:
        names = list(co)
        bars(
            axes[0][1],
            names,
            [co[n]["cycles_per_s"] for n in names],
            f"2. contended, {res['params']['procs']} processes, 1 ms held: cycles/s (utilisation)",
            "cycles per second",
            labels=[f"{co[n]['cycles_per_s']:,.0f} ({co[n]['utilisation']:.2f})" for n in names],
        )
        bars(
            axes[0][2],
            names,
            [co[n]["wait_max_ms"] for n in names],
            "2. contended: max wait (p99 in label), log scale",
            "milliseconds",
            log=True,
            labels=[f"{co[n]['wait_max_ms']:,.1f} (p99 {co[n]['wait_p99_ms']:,.1f})" for n in names],
        )
    asy = {k: v for k, v in res.get("asyncio", {}).items() if v and "cycles_per_s" in v}
    if asy:
        names = list(asy)
        bars(
            axes[1][0],
            names,
            [asy[n]["cycles_per_s"] for n in names],
            f"3. asyncio, {res['params']['tasks']} tasks on one key: cycles/s, log scale",
            "cycles per second",
            log=True,
        )
    wd = {k: v for k, v in res.get("watchdog", {}).items() if v and v.get("taken") is not None}
    if wd:
        names = list(wd)
        bars(
            axes[1][1],
            [f"{n}\n{wd[n]['n']:,} locks" for n in names],
            [wd[n]["cpu_pct"] for n in names],
            "4. watchdog: CPU of the holding process (% of one core)",
            "% of one core",
            labels=[
                f"{wd[n]['cpu_pct']:.1f} %, lost: "
                + (f"{wd[n]['lost']}" if wd[n]["lost"] is not None else f"{wd[n]['n'] - wd[n]['keys_at_end']} (untold)")
                for n in names
            ],
        )
        for lbl in axes[1][1].get_yticklabels():
            lbl.set_color(color(lbl.get_text()))
    rw = res.get("rwmutex")
    ax = axes[1][2]
    if rw and rw.get("reads"):
        names = ["reads/s", "writes/s"]
        ax.bar(names, [rw["reads_per_s"], rw["writes_per_s"]], color=[colors[FERRO], colors[FERRO_FAIR]])
        for i, v in enumerate([rw["reads_per_s"], rw["writes_per_s"]]):
            ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(
            f"5. ferrolock RWMutex, {res['params']['rw_readers']} readers + 1 writer\n(the anchors have no RW lock)",
            fontsize=10,
        )
        ax.text(
            0.5,
            0.6,
            f"writer wait p50 {rw['writer_wait_p50_ms']:.1f} ms\n"
            f"writer wait max {rw['writer_wait_max_ms']:.1f} ms\noverlaps {rw['overlaps']}",
            transform=ax.transAxes,
            ha="center",
            fontsize=10,
            bbox={"facecolor": "white", "edgecolor": "#adb5bd"},
        )
        ax.tick_params(labelsize=8)
    for a in axes.flat:
        a.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
