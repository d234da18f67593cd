"""What a script's own pieces cost the server: `make bench-script-cost`, or
`.venv/bin/python benches/script_cost.py [--calls N] [--server PATH]`.

`server_cost.py` prices whole cycles; this prices what a step's Lua does
beside its commands, each piece alone in a script of its own, against a
bare `return 1` called with the same key and arguments (the difference is
the piece's cost): a number made text (`'%.0f'`, `'%d'`, `tostring`, joined
to a string; the first such format in a run costs more than the next), a
table built and unpacked, a reply with a table, and one command given a
number where it could be given its argument's text. Then the Lock's acquire
step alone, on a free name (its fast path), beside the same commands in a
bare script. Each figure is the median of 5 rounds of N calls (CONFIG
RESETSTAT before each, the EVALSHA line of `INFO commandstats` after), on a
throwaway server (loopback, no persistence), the rounds taken in turns.
docs/design.md ("What a cycle costs the server") says what the steps make
of it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import redis

import ferrolock
from ferrolock.throwaway import RedisServer

ROUNDS = 5
TOKEN = "0123456789abcdef0123456789abcdef"  # as long as ferrolock's

PIECES = {
    "bare: return 1": "return 1",
    "'%.0f' of a fence": "local x = string.format('%.0f', 1795836744848231) return 1",
    "'%.0f' twice": "local x = string.format('%.0f', 1795836744848231) "
    "local y = string.format('%.0f', 1795836744848232) return 1",
    "'%d' of a fence": "local x = string.format('%d', 1795836744848231) return 1",
    "tostring of seconds": "local x = tostring(1795836744) return 1",
    "seconds joined to text": "local x = 1795836744 .. '' return 1",
    "TIME's parts joined as text": "local t = {'1795836744', '5123'} "
    "local x = t[1] .. string.sub('00000' .. t[2], -6) return 1",
    "a table of 4, unpacked": "local t = {'a', ARGV[1], 'b', 'c'} local a, b, c, d = unpack(t) return 1",
    "tonumber of an argument": "local x = tonumber(ARGV[2]) return 1",
    "reply {1, 2}": "return {1, 2}",
    "PEXPIRE, ttl as text": "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1",
    "PEXPIRE, ttl as a number": "redis.call('PEXPIRE', KEYS[1], 10000) return 1",
}

# The commands of the Lock's fast path (GET, TIME, SET PX), in a script with
# nothing else: what the step costs beyond them is its own.
LOCK_COMMANDS = """
local free = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. t[1] .. t[2] .. ' ', 'PX', ARGV[2])
return 1
"""


def evalsha_us(r: redis.Redis, run, calls: int) -> float:
    r.config_resetstat()
    run()
    return r.info("commandstats")["cmdstat_evalsha"]["usec"] / calls


def pieces(r: redis.Redis, calls: int) -> dict[str, list[float]]:
    scripts = {name: r.register_script(code) for name, code in PIECES.items()}
    got: dict[str, list[float]] = {name: [] for name in PIECES}
    for _ in range(ROUNDS):
        for name, script in scripts.items():

            def run(script=script) -> None:
                for _ in range(calls):
                    script(keys=["cost:piece"], args=[TOKEN, "10000"])

            got[name].append(evalsha_us(r, run, calls))
    return got


def lock_step(r: redis.Redis, url: str, calls: int) -> dict[str, list[float]]:
    """The Lock's acquire alone: `calls` free names taken, then given back
    outside the measured span; beside its commands in a bare script."""
    client = ferrolock.Client(url, prefix="cost:")
    commands = r.register_script(LOCK_COMMANDS)
    got: dict[str, list[float]] = {"Lock acquire (fast path)": [], "its commands in a bare script": []}
    for _ in range(ROUNDS):
        locks = [client.lock(f"n{i}", ttl=10.0, auto_renew=False) for i in range(calls)]

        def take() -> None:
            for lock in locks:
                assert lock.acquire(blocking=False)

        got["Lock acquire (fast path)"].append(evalsha_us(r, take, calls))
        for lock in locks:
            lock.release()

        def bare() -> None:
            for i in range(calls):
                commands(keys=[f"cost:bare{i}"], args=[TOKEN, "10000"])

        got["its commands in a bare script"].append(evalsha_us(r, bare, calls))
        r.delete(*(f"cost:bare{i}" for i in range(calls)))
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=4000, help="calls a round")
    ap.add_argument("--server", help="the redis-server binary (default: redis-server on PATH)")
    args = ap.parse_args()
    if args.server:
        os.environ["FERROLOCK_TEST_SERVER"] = os.path.abspath(args.server)
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        info = r.info("server")
        version = (
            f"valkey-server {info['valkey_version']}"
            if "valkey_version" in info
            else f"redis-server {info['redis_version']}"
        )
        got = pieces(r, args.calls) | lock_step(r, server.url, args.calls)
    bare = statistics.median(got["bare: return 1"])
    print(f"{version}, {args.calls:,} calls a round, median of {ROUNDS} rounds:\n")
    print("| script | server time per call | beyond a bare script |")
    print("|---|---|---|")
    for name, runs in got.items():
        us = statistics.median(runs)
        print(f"| {name} | {us:.2f} us | {us - bare:+.2f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
