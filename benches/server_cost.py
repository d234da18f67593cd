"""What a lock cycle costs the server: `make bench-cost`, or
`.venv/bin/python benches/server_cost.py [--cycles N] [--server PATH] [--json FILE]
[--baseline DIR]`.

Redis runs every command and script on one thread, so the server time of an
acquire + release cycle caps how many cycles one master serves. This starts
a throwaway redis-server (loopback, no persistence) and runs, one primitive
after another on one name, N uncontended cycles each (4,000 by default, 200
warm-up cycles first), in 8 rounds taken in turns (CONFIG RESETSTAT before
each, `INFO commandstats` after), each case's figure its median round:

- server time per cycle: the usec of the commands the client sent (a
  script's, function's or EXEC's usec includes every command it runs, which
  commandstats also counts on their own lines: those are left out);
- commands run per cycle: every command the server ran, inside scripts too;
- the ratio to redis-py's `Lock` in the same run, and the cycles per second
  one master core could serve at that cost (1e6 / server usec: an upper
  bound, the server's network and event-loop time is not in commandstats).

The cases: the floor (SET NX PX + DEL, no owner check), redis-py `Lock`,
ferrolock's Lock, fair Lock, RWMutex read, semaphore(4), fair RWMutex read,
and an election's campaign + resign. Beside them, the floors of what a
ferrolock cycle must do, measured in the same run:

- two bare scripts (`return 1`, called with a key and a token): what the
  entries of any cycle whose acquire and release are both scripts cost;
- the least cycle that keeps a fence: a script reads the server's clock
  (`TIME`) and takes the name with `SET NX PX` in the same step, the
  value carrying the fence; redis-py's own release script ends it (owner
  check kept; no metadata, waiter's mark, re-entry or loss report);
- the same take as a transaction (`MULTI`, `SET NX PX`, `TIME`, `EXEC`):
  as atomic as the script, the fence the clock read in the step that takes
  the name, but the value cannot carry it (EXEC's usec includes the
  commands it ran, which are left out);
- on a server with `DELIFEQ` (Valkey 9+) or `DELEX ... IFEQ` (Redis 8.4+),
  both takes released by the plain command instead.

With `--baseline DIR` (a directory holding another build's `ferrolock`
package), both builds are measured in turns, each run on a fresh server, three runs
each, and the table shows before (DIR) and after (this build): each case's
run of median ratio to redis-py's Lock.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import redis
from redis.lock import Lock as RedisPyLock

import ferrolock
from ferrolock.throwaway import RedisServer

WARMUP = 200
# What wraps other commands: a script's or a transaction's usec includes
# every command it ran, which commandstats also counts on their own lines.
WRAPPERS = frozenset({"evalsha", "eval", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "multi", "exec"})
# What a case's own helpers run, not part of its cycle.
IGNORED = {
    "info",
    "config|resetstat",
    "config",
    "script|load",
    "script",
    "ping",
    "client|setname",
    "client",
    "hello",
    "subscribe",
    "ssubscribe",
    "unsubscribe",
    "sunsubscribe",
    "function|load",
}
REFERENCE = "redis-py Lock"

# The least a step that issues a fence does: read the server's clock and take
# the name in one script (a fence must come from the server, in the step that
# takes the hold). Returns the clock's {seconds, microseconds}, or false.
FENCED_TAKE = """
local t = redis.call('TIME')
if redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. t[1] .. ' ' .. t[2], 'NX', 'PX', ARGV[2]) then
  return t
end
return false
"""
BARE = "return 1"
TURNS = 3  # runs of each build with --baseline


def cycles_of(url: str) -> dict[str, Callable[[], None]]:
    """Each case's one cycle, on its own name."""
    r = redis.Redis.from_url(url)
    client = ferrolock.Client(url, prefix="cost:")
    rp = r.lock("cost:redis-py", timeout=10)
    lock = client.lock("lock", ttl=10.0)
    fair = client.lock("fair", ttl=10.0, fair=True)
    read = client.rwmutex("rw", ttl=10.0).read()
    fair_read = client.rwmutex("rwfair", ttl=10.0, fair=True).read()
    permit = client.semaphore("sem", 4, ttl=10.0)
    election = client.election("el", ttl=10.0)

    def floor() -> None:
        r.set("cost:floor", "x", nx=True, px=10000)
        r.delete("cost:floor")

    def redis_py() -> None:
        rp.acquire()
        rp.release()

    sends(floor, "set", "del")
    sends(redis_py, "set")  # its release is a script: GET and DEL run inside it

    bare = r.register_script(BARE)
    fenced_take = r.register_script(FENCED_TAKE)
    redis_py_release = r.register_script(RedisPyLock.LUA_RELEASE_SCRIPT)
    token = "0123456789abcdef0123456789abcdef"  # as long as ferrolock's

    def bare_scripts() -> None:
        bare(keys=["cost:bare"], args=[token])
        bare(keys=["cost:bare"], args=[token])

    def fenced_cycle(release: Callable[[str, str], None], name: str) -> Callable[[], None]:
        def cycle() -> None:
            seconds, micros = fenced_take(keys=[name], args=[token, 10000])
            release(name, f"{token} {seconds.decode()} {micros.decode()}")

        return cycle

    def tx_fenced_cycle(release: Callable[[str, str], None], name: str) -> Callable[[], None]:
        """The same cycle, the take a transaction instead of a script: `SET NX
        PX` and `TIME` in one MULTI/EXEC, as atomic as a script (the fence is
        the clock read in the step that takes the name), though the value
        cannot carry the fence: it is read after the `SET` is queued."""

        def cycle() -> None:
            tx = r.pipeline(transaction=True)
            tx.set(name, token, nx=True, px=10000)
            tx.time()
            taken, _clock = tx.execute()
            assert taken
            release(name, token)

        return cycle

    def release_by_script(name: str, value: str) -> None:
        redis_py_release(keys=[name], args=[value])

    def handle(h) -> Callable[[], None]:
        def cycle() -> None:
            h.acquire()
            h.release()

        return cycle

    def elect() -> None:
        election.campaign("me").resign()

    cases = {
        "SET NX PX + DEL (no owner check)": floor,
        REFERENCE: redis_py,
        "floor: two bare scripts": bare_scripts,
        "floor: clock fence in a script + redis-py's release": fenced_cycle(release_by_script, "cost:fenced"),
        "floor: clock fence in MULTI + redis-py's release": tx_fenced_cycle(release_by_script, "cost:tx"),
        # Its release is a plain DELIFEQ where the server has it (Valkey 9+).
        "ferrolock Lock": sends(handle(lock), "delifeq"),
        "ferrolock Lock(fair=True)": handle(fair),
        "ferrolock RWMutex read": handle(read),
        "ferrolock semaphore(4)": handle(permit),
        "ferrolock RWMutex(fair=True) read": handle(fair_read),
        "ferrolock election campaign + resign": elect,
    }
    plain = plain_delete(r)
    if plain:
        name, release, command = plain
        cases[f"floor: clock fence in a script + {name}"] = sends(fenced_cycle(release, "cost:fenced-plain"), command)
        cases[f"floor: clock fence in MULTI + {name}"] = sends(tx_fenced_cycle(release, "cost:tx-plain"), command)
    return cases


def sends(cycle: Callable[[], None], *commands: str) -> Callable[[], None]:
    """Marks `cycle` as sending `commands` itself, outside any script or
    transaction: their time counts. Every other command a cycle runs ran
    inside one of `WRAPPERS`, whose time already includes it."""
    cycle.plain = frozenset(commands)  # type: ignore[attr-defined]
    return cycle


def plain_delete(r) -> tuple[str, Callable[[str, str], None], str] | None:
    """The server's plain compare-and-delete (its name, a release that uses
    it, and the command commandstats counts), or None when it has none."""
    for name, args in (("DELIFEQ", ()), ("DELEX IFEQ", ("IFEQ",))):
        command = name.split()[0]
        try:
            r.execute_command(command, "cost:probe", *args, "x")
        except redis.ResponseError:  # unknown command
            continue
        return (
            name,
            lambda key, value, command=command, args=args: r.execute_command(command, key, *args, value),
            command.lower(),
        )
    return None


def one_round(r, cycle: Callable[[], None], cycles: int) -> dict:
    """`cycles` cycles after CONFIG RESETSTAT: what commandstats says they cost."""
    r.config_resetstat()
    for _ in range(cycles):
        cycle()
    run = {k.removeprefix("cmdstat_"): v for k, v in r.info("commandstats").items()}
    run = {k: v for k, v in run.items() if k not in IGNORED}
    top_level = WRAPPERS | getattr(cycle, "plain", frozenset())
    return {
        "server_us": sum(v["usec"] for k, v in run.items() if k in top_level) / cycles,
        "commands": sum(v["calls"] for v in run.values()) / cycles,
        "mix": {k: round(v["calls"] / cycles, 2) for k, v in sorted(run.items(), key=lambda kv: -kv[1]["calls"])},
    }


def measure(url: str, cycles: int, rounds: int) -> list[dict]:
    """The cases in turns, `rounds` times `cycles` / `rounds` cycles each, so
    that a busy moment of the machine falls on every case alike; each case's
    figure is its median round."""
    r = redis.Redis.from_url(url)
    cases = cycles_of(url)
    for cycle in cases.values():
        for _ in range(WARMUP):
            cycle()
    per_round = max(1, cycles // rounds)
    seen: dict[str, list[dict]] = {case: [] for case in cases}
    for _ in range(rounds):
        for case, cycle in cases.items():
            seen[case].append(one_round(r, cycle, per_round))
    rows = []
    for case, runs in seen.items():
        runs.sort(key=lambda run: run["server_us"])
        rows.append({"case": case, **runs[len(runs) // 2]})
    ref = next(row["server_us"] for row in rows if row["case"] == REFERENCE)
    for row in rows:
        row["vs_redis_py"] = row["server_us"] / ref
        row["per_core_per_s"] = 1e6 / row["server_us"] if row["server_us"] else None
    return rows


def table(rows: list[dict], version: str, cycles: int) -> str:
    lines = [
        f"Server time per uncontended acquire + release cycle, {cycles:,} cycles each, "
        f"redis-server {version} (INFO commandstats):",
        "",
        "| cycle | server time | commands run | vs redis-py Lock | cycles/s per master core |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        mix = ", ".join(f"{n:g} {k.upper()}" for k, n in row["mix"].items())
        lines.append(
            f"| {row['case']} | {row['server_us']:.1f} us | {row['commands']:.1f} ({mix}) | "
            f"{row['vs_redis_py']:.2f}x | {row['per_core_per_s']:,.0f} |"
        )
    return "\n".join(lines)


def in_turns(args, baseline: str) -> str:
    """Both builds' rows, each build run in its own process, in turns."""
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(TURNS):
        for which in ("before", "after"):
            env = dict(os.environ)
            if which == "before":
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [baseline, env.get("PYTHONPATH")]))
            cmd = [sys.executable, __file__, "--cycles", str(args.cycles), "--rounds", str(args.rounds), "--rows"]
            if args.server:
                cmd += ["--server", args.server]
            runs[which].append(
                json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
            )
    median = {
        which: {
            row["case"]: sorted((run["rows"][i] for run in got), key=lambda r: r["vs_redis_py"])[TURNS // 2]
            for i, row in enumerate(got[0]["rows"])
        }
        for which, got in runs.items()
    }
    lines = [
        f"Before ({baseline}) and after (this build), in turns, {TURNS} runs each, each case's median run; "
        f"redis-server {runs['after'][0]['version']}, {args.cycles:,} cycles a case:",
        "",
        "| cycle | server time before | after | commands before | after | vs redis-py Lock before | after "
        "| cycles/s per master core after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, a in median["after"].items():
        b = median["before"][case]
        lines.append(
            f"| {case} | {b['server_us']:.1f} us | {a['server_us']:.1f} us | {b['commands']:.0f} | "
            f"{a['commands']:.0f} | {b['vs_redis_py']:.2f}x | {a['vs_redis_py']:.2f}x | "
            f"{a['per_core_per_s']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=8, help="turns the cycles are split into (median round)")
    ap.add_argument("--server", help="the redis-server binary (default: redis-server on PATH)")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="a directory holding another build's ferrolock package: before/after, in turns",
    )
    ap.add_argument("--rows", action="store_true", help=argparse.SUPPRESS)  # one turn of --baseline
    args = ap.parse_args()
    if args.baseline:
        print(in_turns(args, args.baseline))
        return 0
    server = RedisServer()
    if args.server:
        server.binary = args.server
    with server:
        url = server.url
        info = redis.Redis.from_url(url).info("server")
        version = f"valkey {info['valkey_version']}" if "valkey_version" in info else info["redis_version"]
        rows = measure(url, args.cycles, args.rounds)
    if args.rows:
        print(json.dumps({"version": version, "rows": rows}))
        return 0
    print(table(rows, version, args.cycles))
    if args.json:
        Path(args.json).write_text(json.dumps({"version": version, "cycles": args.cycles, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
