"""Where the microseconds go: the system calls one uncontended cycle makes
(counted with `strace -f -c`, every thread of the process), and the time the
server itself spends on the cycle's commands (INFO commandstats), for
ferrolock and for the floor of two bare PINGs.

Each case runs in processes of its own: under strace once with no cycles
(start-up, imports, connecting, warm-up) and once with them, the difference
over the cycles being what one cycle costs; and once more without strace
(which slows the traced process several times over), for the server's time.

    python benches/scenarios/syscalls.py CASE URL CYCLES   # one run, prints JSON
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {
    "floor: 2 x PING": "two redis-py + hiredis PINGs",
    "ferrolock acquire() + release()": "a blocking acquire (through the runtime) and a release",
    "ferrolock acquire(blocking=False) + release()": "one attempt and a release, both on the calling thread",
    "redis-py Lock": "redis-py's Lock, acquire() and release()",
}
WARMUP = 200
# system calls grouped as the table shows them
GROUPS = {
    "wake-ups (futex)": ("futex",),
    "polls (epoll_wait, poll)": ("epoll_wait", "poll", "ppoll", "epoll_pwait"),
    "sends (write, sendto, writev)": ("write", "sendto", "writev", "sendmsg"),
    "receives (read, recvfrom)": ("read", "recvfrom", "readv", "recvmsg"),
    "getpid": ("getpid",),
}


def run_case(case: str, url: str, cycles: int) -> dict:
    """One run inside this process: the cycles, then the server's figures."""
    import redis

    r = redis.Redis.from_url(url)
    if case.startswith("ferrolock"):
        import ferrolock

        lock = ferrolock.Client(url, prefix="bench:sys:").lock("cycle", ttl=10.0)
        blocking = "blocking=False" not in case

        def cycle() -> None:
            lock.acquire(blocking=blocking)
            lock.release()
    elif case == "redis-py Lock":
        rl = r.lock("bench:sys:redis-py", timeout=10)

        def cycle() -> None:
            rl.acquire()
            rl.release()
    else:

        def cycle() -> None:
            r.ping()
            r.ping()

    for _ in range(WARMUP):
        cycle()
    r.config_resetstat()
    for _ in range(cycles):
        cycle()
    stats = r.info("commandstats")
    server_us = sum(v.get("usec", 0) for k, v in stats.items() if k != "cmdstat_info")
    return {"server_us_per_cycle": server_us / cycles if cycles else 0.0}


def _counts(strace_out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in strace_out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            calls = parts[3]
            if calls.isdigit():
                counts[parts[-1]] = int(calls)
    return counts


def syscalls(url: str, cycles: int) -> dict:
    """Per cycle, for each case: system calls by group, in all, and server time."""
    if shutil.which("strace") is None:
        return {"error": "strace is not installed (apt-get install strace)"}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            runs = []
            for n in (0, cycles):
                out = Path(tmp) / f"strace-{n}.txt"
                proc = subprocess.run(
                    ["strace", "-f", "-c", "-o", str(out), sys.executable, __file__, case, url, str(n)],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if proc.returncode != 0:
                    return {"error": f"{case}: {proc.stderr[-500:]}"}
                runs.append((_counts(out), json.loads(proc.stdout.strip().splitlines()[-1])))
            plain = subprocess.run(
                [sys.executable, __file__, case, url, str(cycles)], capture_output=True, text=True, timeout=600
            )
            if plain.returncode != 0:
                return {"error": f"{case}: {plain.stderr[-500:]}"}
            server = json.loads(plain.stdout.strip().splitlines()[-1])
            (base, _), (full, _) = runs
            per = {k: (full.get(k, 0) - base.get(k, 0)) / cycles for k in set(full) | set(base)}
            grouped = {g: sum(per.get(s, 0.0) for s in names) for g, names in GROUPS.items()}
            rows[case] = {
                "groups": grouped,
                "total": sum(v for v in per.values() if v > 0),
                "server_us": server["server_us_per_cycle"],
            }
    return {"cycles": cycles, "rows": rows, "groups": list(GROUPS)}


if __name__ == "__main__":
    print(json.dumps(run_case(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
