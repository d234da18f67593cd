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
- the other designs the server offers for the same renewals, each doing
  what `refresh_compared.lua` does: the same code as a function (`FCALL`,
  servers with functions: Redis 7.0+, Valkey), in calls of 100; an
  optimistic transaction (`WATCH` and `MGET` of 100 holds, the client
  compares, then `MULTI`, a `PEXPIRE` a hold, `EXEC`); the script in calls
  of 1,000 (longer calls, which hold up the server's other clients longer);
  a pipeline of `SET ... IFEQ ... PX`, 100 a round trip (servers with the
  command: Valkey 8.1+);
- what no owner check costs: a bare `PEXPIRE` a hold in a script, 100 a
  call (a script's entry and its `redis.call`s alone), and the floor, a
  pipeline of bare `PEXPIRE`, 100 a round trip.

Each figure is redis-server's CPU time (user + system, from /proc) over R
rounds of every hold renewed once, divided by the renewals; the designs
take turns, and the median of 3 turns is printed. Beside it, what the
server would spend at 10,000 renewals a second (100,000 holds renewed
every ttl/3 of 30 s, benches/watchdog.py's scenario) with that design:
the per-renewal figure at that rate, plus what the server spends idle
with the holds on it (measured after the turns, the server's expiry and
cron).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
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
        idle = idle_share(proc)
    anchor = statistics.median(figures["redis-py Lock.extend, one call a hold"])
    print(f"== server CPU per renewal, {name}, {args.holds:,} holds, median of {TURNS} turns")
    print(f"idle, the holds on it: {idle:.2f} % of a core")
    print(f"{'design':<56} {'us':>6} {'vs anchor':>10} {'at 10,000/s':>12}")
    for design, each in figures.items():
        us = statistics.median(each)
        # 10,000 renewals a second at `us` each: us % of a core.
        print(f"{design:<56} {us:6.2f} {us / anchor:9.2f}x {idle + us:10.2f} %")
    return 0


def idle_share(proc: psutil.Process, seconds: float = 5.0) -> float:
    """The server's CPU, in % of a core, over `seconds` with no client
    sending: its cron and the expiry of the holds on it."""
    before, start = proc.cpu_times(), time.monotonic()
    time.sleep(seconds)
    after, spent = proc.cpu_times(), time.monotonic() - start
    return 100 * ((after.user - before.user) + (after.system - before.system)) / spent


def designs_for(r: redis.Redis, keys: list[str], values: list[str], tokens: list[str]) -> dict:
    """Each design: a function renewing every hold once."""
    from redis.lock import Lock

    extend = r.register_script(Lock.LUA_EXTEND_SCRIPT)
    compared_lua = (ROOT / "lua" / "refresh_compared.lua").read_text()
    compared = r.register_script(compared_lua)
    no_check = r.register_script("for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end return #KEYS")
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

    def compared_args(batch: range) -> list:
        holds = []
        for i in batch:
            holds += [TTL_MS, values[i], ""]
        return holds

    def compared_calls(size: int = BATCH):
        def renew_all() -> None:
            for start in range(0, len(keys), size):
                batch = range(start, min(start + size, len(keys)))
                assert all(compared(keys=[keys[i] for i in batch], args=compared_args(batch)))

        return renew_all

    def function_calls() -> None:
        for batch in batches:
            ks = [keys[i] for i in batch]
            assert all(r.fcall("refresh_compared", len(ks), *ks, *compared_args(batch)))

    def transactions() -> None:
        # WATCH makes EXEC fail if any hold changed after the MGET: the
        # client compares in between, as the script does on the server.
        for batch in batches:
            ks = [keys[i] for i in batch]
            with r.pipeline(transaction=True) as pipe:
                pipe.watch(*ks)
                now = pipe.mget(ks)
                pipe.multi()
                for k, v, i in zip(ks, now, batch):
                    if v is not None and v.decode() == values[i]:
                        pipe.pexpire(k, TTL_MS)
                assert all(pipe.execute())

    def no_check_calls() -> None:
        for batch in batches:
            assert no_check(keys=[keys[i] for i in batch], args=[TTL_MS]) == len(batch)

    def pipelined(command) -> None:
        for batch in batches:
            pipe = r.pipeline(transaction=False)
            for i in batch:
                pipe.execute_command(*command(i))
            assert all(pipe.execute())

    designs = {"redis-py Lock.extend, one call a hold": one_call_a_hold}
    if batch_script is not None:
        designs["refresh_batch.lua, 100 a call"] = batch_script_calls
    designs["refresh_compared.lua, 100 a call"] = compared_calls()
    if load_function(r, compared_lua):
        designs["the same as a function (FCALL), 100 a call"] = function_calls
    designs["WATCH+MGET, MULTI/PEXPIRE.../EXEC, 100 a transaction"] = transactions
    designs["refresh_compared.lua, 1,000 a call"] = compared_calls(1000)
    if has_ifeq(r):
        designs["SET ... IFEQ ... PX, 100 a pipeline"] = lambda: pipelined(
            lambda i: ("SET", keys[i], values[i], "IFEQ", values[i], "PX", TTL_MS)
        )
    designs["PEXPIRE in a script, no owner check, 100 a call"] = no_check_calls
    floor = "floor: PEXPIRE, no owner check, 100 a pipeline"
    designs[floor] = lambda: pipelined(lambda i: ("PEXPIRE", keys[i], TTL_MS))
    return designs


def load_function(r: redis.Redis, script: str) -> bool:
    """Loads `script` as the function `refresh_compared`; False where the
    server has no functions (before Redis 7.0)."""
    body = f"redis.register_function('refresh_compared', function(KEYS, ARGV)\n{script}\nend)"
    try:
        r.function_load(f"#!lua name=renewal_cost\n{body}", replace=True)
    except redis.ResponseError:
        return False
    return True


def has_ifeq(r: redis.Redis) -> bool:
    """Whether the server takes SET ... IFEQ."""
    try:
        r.execute_command("SET", "renewal-cost:probe", "a", "IFEQ", "a")
    except redis.ResponseError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
