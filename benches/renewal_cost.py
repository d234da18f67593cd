"""What one renewal of a held lock costs the server, by design: `make
bench-renewal-cost`, or `.venv/bin/python benches/renewal_cost.py [--holds N]
[--rounds R] [--server PATH]`.

benches/watchdog.py measures a whole process holding 100,000 locks; this
prices one renewal alone, each design side by side in one run on one
throwaway server holding N string holds (100,000) of ferrolock's layout:

- redis-py's `Lock.extend` script (`LUA_EXTEND_SCRIPT`), one call a hold
  (100 calls a round trip): the anchor, and close to what ferrolock's
  renewals cost when each hold sent its own;
- ferrolock's `refresh_batch.lua` (a GET and a parse a hold), in calls of
  100, as it ran for every hold before `refresh_compared.lua` (read from
  `target/lua-assembled/`, written by `cargo test`; skipped without it);
- ferrolock's `refresh_compared.lua` (one MGET a call, one PEXPIRE a hold),
  in calls of 100: what the watchdog sends for one-name Locks;
- a pipeline of `SET ... IFEQ ... PX`, 100 a round trip (servers with the
  command: Valkey 8.1+);
- the floor: a pipeline of bare `PEXPIRE`, 100 a round trip, which checks
  no owner.

Each figure is redis-server's CPU time (user + system, from /proc) over R
rounds of every hold renewed once, divided by the renewals; the designs
take turns, and the median of 3 turns is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import psutil
import redis

from ferrolock.throwaway import RedisServer

ROOT = Path(__file__).resolve().parent.parent
BATCH = 100
TTL_MS = 3_000_000
TURNS = 3
TOKEN = "0123456789abcdef0123456789abcdef"  # as long as ferrolock's


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--holds", type=int, default=100_000, help="holds on the server, each renewed once a round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds a turn")
    ap.add_argument("--server", help="the redis-server (or valkey-server) binary")
    args = ap.parse_args()
    server = RedisServer()
    if args.server:
        server.binary = args.server
    with server:
        r = redis.Redis.from_url(server.url)
        info = r.info("server")
        name = f"valkey {info['valkey_version']}" if "valkey_version" in info else f"redis {info['redis_version']}"
        keys = [f"lock:{{w{i}}}" for i in range(args.holds)]
        values = [f"{TOKEN[:26]}{i:06d} 1796545532075392 " for i in range(args.holds)]
        fill = r.pipeline(transaction=False)
        for i, (k, v) in enumerate(zip(keys, values)):
            fill.set(k, v, px=TTL_MS)
            if i % 1000 == 999:
                fill.execute()
        fill.execute()
        tokens = [v.split(" ")[0] for v in values]
        designs = designs_for(r, keys, values, tokens)
        proc = psutil.Process(server.proc.pid)
        figures: dict[str, list[float]] = {d: [] for d in designs}
        for _ in range(TURNS):
            for design, renew_all in designs.items():
                before = proc.cpu_times()
                for _ in range(args.rounds):
                    renew_all()
                after = proc.cpu_times()
                spent = (after.user - before.user) + (after.system - before.system)
                figures[design].append(1e6 * spent / (args.rounds * args.holds))
        assert r.dbsize() == args.holds, "a hold was lost"
    anchor = statistics.median(figures["redis-py Lock.extend, one call a hold"])
    print(f"== server CPU per renewal, {name}, {args.holds:,} holds, median of {TURNS} turns")
    print(f"{'design':<48} {'us':>6} {'vs anchor':>10}")
    for design, each in figures.items():
        us = statistics.median(each)
        print(f"{design:<48} {us:6.2f} {us / anchor:9.2f}x")
    return 0


def designs_for(r: redis.Redis, keys: list[str], values: list[str], tokens: list[str]) -> dict:
    """Each design: a function renewing every hold once."""
    from redis.lock import Lock

    extend = r.register_script(Lock.LUA_EXTEND_SCRIPT)
    compared = r.register_script((ROOT / "lua" / "refresh_compared.lua").read_text())
    assembled = ROOT / "target" / "lua-assembled" / "refresh_batch.lua"
    batch_script = r.register_script(assembled.read_text()) if assembled.exists() else None
    batches = [range(i, min(i + BATCH, len(keys))) for i in range(0, len(keys), BATCH)]

    def one_call_a_hold() -> None:
        # redis-py's extend compares the whole value to its token: given the
        # value, it renews (GET, PTTL, PEXPIRE), as it would its own hold.
        pipe = r.pipeline(transaction=False)
        for n, i in enumerate(range(len(keys))):
            extend(keys=[keys[i]], args=[values[i], TTL_MS, "1"], client=pipe)
            if n % BATCH == BATCH - 1:
                pipe.execute()
        pipe.execute()

    def batch_script_calls() -> None:
        for batch in batches:
            holds = []
            for i in batch:
                holds += [1, tokens[i], TTL_MS, 1796545532075392]
            assert batch_script is not None
            renewed = batch_script(keys=[keys[i] for i in batch], args=holds)
            assert all(renewed)

    def compared_calls() -> None:
        for batch in batches:
            holds = []
            for i in batch:
                holds += [TTL_MS, values[i], ""]
            assert all(compared(keys=[keys[i] for i in batch], args=holds))

    def pipelined(command) -> None:
        for batch in batches:
            pipe = r.pipeline(transaction=False)
            for i in batch:
                pipe.execute_command(*command(i))
            assert all(pipe.execute())

    designs = {"redis-py Lock.extend, one call a hold": one_call_a_hold}
    if batch_script is not None:
        designs["refresh_batch.lua, 100 a call"] = batch_script_calls
    designs["refresh_compared.lua, 100 a call"] = compared_calls
    if has_ifeq(r):
        designs["SET ... IFEQ ... PX, 100 a pipeline"] = lambda: pipelined(
            lambda i: ("SET", keys[i], values[i], "IFEQ", values[i], "PX", TTL_MS)
        )
    floor = "floor: PEXPIRE, no owner check, 100 a pipeline"
    designs[floor] = lambda: pipelined(lambda i: ("PEXPIRE", keys[i], TTL_MS))
    return designs


def has_ifeq(r: redis.Redis) -> bool:
    """Whether the server takes SET ... IFEQ."""
    try:
        r.execute_command("SET", "renewal-cost:probe", "a", "IFEQ", "a")
    except redis.ResponseError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
