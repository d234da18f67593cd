"""The ``ferrolock`` command line: look at locks, unstick them, and run a
command under one (``ferrolock --help`` tells it all)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import ferrolock

log = logging.getLogger("ferrolock.cli")

# Exit codes (documented in --help and in docs/operations/cli.md).
OK = 0
NOT_FOUND = 1  # inspect / release: nothing stored under the name; any Redis error
USAGE = 2  # bad arguments, URL or name; a server the URL does not fit (LockConfigurationError)
CHANGED = 3  # release: a hold shown is gone or taken by another since: it was left alone
UNAVAILABLE = 69  # Redis could not be reached in time (sysexits' EX_UNAVAILABLE)
TIMED_OUT = 75  # run / wait: --timeout passed first (sysexits' EX_TEMPFAIL)
LOST = 76  # run: the lock was lost while CMD ran (CMD was stopped)
NOT_EXECUTABLE = 126  # run: starting CMD failed with any OSError but not-found
NOT_FOUND_CMD = 127

EPILOG = """\
examples:
  ferrolock ls                          every lock, RWMutex, semaphore and election under the prefix
  ferrolock ls 'reports:*' --json       those whose name matches, as JSON
  ferrolock ls --all-prefixes           under every key prefix, each shown with its prefix
  ferrolock inspect reports:nightly     who holds it, for how long, who waits
  ferrolock inspect orders:42 --plain   who holds a redis-py or python-redis-lock lock (ls cannot list
                                        those: a plain string key looks like any other data)
  ferrolock release reports:nightly --force
                                        remove the hold it shows (asks first on a terminal)
  ferrolock run reports:nightly --timeout 0 -- ./nightly.sh --full
                                        run the job unless another host runs it now
  ferrolock wait reports:nightly --timeout 600
                                        block until it is free

exit codes:
  0    done (run: CMD exited 0)
  1    inspect / release: nothing is stored under NAME; or Redis answered with an error
  2    bad arguments, URL or name; or a server that does not fit the URL (no such
       database, a wrong password, TLS or not, not Redis, too old)
  3    release: a hold it showed changed before the removal (released, or taken by
       another holder): that one was left alone; the holds still as shown were removed
  69   Redis could not be reached in time
  75   run / wait: --timeout passed before the lock was taken / free
  76   run: the lock was lost while CMD ran; CMD was sent SIGTERM, then SIGKILL after --grace
  126  run: the kernel cannot execute CMD (not executable, no shebang, a directory,
       another architecture);  127: CMD was not found
  128+N  run: CMD was ended by signal N; or ferrolock was, while waiting for the lock
  any other: run exits with CMD's own exit code

The Redis URL comes from --url, else REDIS_URL, else redis://127.0.0.1:6379/0;
the key prefix from --prefix, else FERROLOCK_PREFIX, else "ferrolock:" (the
Client's default): use your application's.
"""

# CMD runs in a process group of its own (made in the child without running
# Python there, which is not safe beside ferrolock's threads).
OWN_GROUP: Dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}

# Signals passed on to CMD while it runs.
FORWARDED = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2]


class Signalled(Exception):
    """A signal arrived while waiting for the lock."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a non-negative, finite number of seconds, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive number of seconds, got 0")
    return value


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=argparse.SUPPRESS, help="Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379/0)"
    )
    common.add_argument(
        "--prefix", default=argparse.SUPPRESS, help='key prefix (default: $FERROLOCK_PREFIX, else "ferrolock:")'
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, for programs")
    common.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log what happens (to stderr)"
    )

    p = argparse.ArgumentParser(
        prog="ferrolock",
        description="Look at, unstick and run commands under ferrolock's distributed locks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    p.add_argument("--version", action="version", version=f"ferrolock {ferrolock.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help,
            description=help,
            parents=[common],
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    ls = command(
        "ls",
        "list every lock, RWMutex, semaphore and election whose name matches PATTERN (found with SCAN "
        "under the prefix; a redis-py or python-redis-lock lock, a plain string key, is not listed: "
        "inspect NAME --plain)",
    )
    ls.add_argument(
        "pattern",
        nargs="?",
        default="*",
        metavar="PATTERN",
        help="a glob over names: *, ?, [a-z]; a backslash escapes (default: *)",
    )
    ls.add_argument(
        "--all-prefixes",
        "-A",
        action="store_true",
        help='list under every key prefix, not only --prefix (a PREFIX column, and "prefix" in --json)',
    )

    inspect = command("inspect", "show everything stored under NAME")
    inspect.add_argument("name", metavar="NAME")
    inspect.add_argument(
        "--plain",
        action="store_true",
        help="read NAME as a plain hold instead: the string key NAME, where redis-py's Lock "
        "(and ferrolock.compat.redis_py) keeps it, and lock:NAME, where python-redis-lock "
        "(and ferrolock.compat.redis_lock) does; no prefix",
    )

    release = command("release", "remove the holds of NAME it shows, and only those (needs --force)")
    release.add_argument("name", metavar="NAME")
    release.add_argument("--force", action="store_true", help="required: the holder is not asked")
    release.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation on a terminal")

    run = command(
        "run",
        "take the lock NAME, run CMD under it, release it when CMD exits: ferrolock run NAME [options] -- CMD ARGS...",
    )
    run.add_argument("name", metavar="NAME")
    run.add_argument(
        "--ttl",
        type=positive_seconds,
        default=30.0,
        help="seconds a hold lasts without renewal (default 30; renewed every ttl/3)",
    )
    run.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        help="most seconds to wait for the lock (default: forever; 0: one attempt)",
    )
    run.add_argument(
        "--fair", action="store_true", help="take the lock in arrival order (every user of NAME must say so)"
    )
    run.add_argument(
        "--grace",
        type=seconds,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when the lock is lost (default 10)",
    )
    run.add_argument(
        "--metadata", default=None, help="stored with the hold, shown by ls and inspect (default: host, pid and CMD)"
    )
    # CMD is cut off at `--` before argparse sees it (main), so the usage line says it.
    run.usage = run.format_usage().replace("usage: ", "", 1).rstrip() + " -- CMD [ARGS ...]"

    wait = command("wait", "block until NAME is free (no holder, reader, permit holder or leader)")
    wait.add_argument("name", metavar="NAME")
    wait.add_argument("--timeout", type=seconds, default=None, help="most seconds to wait (default: forever)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `run`'s command is everything after the first `--`, options included.
    cmd: List[str] = []
    if "--" in argv and "run" in argv[: argv.index("--")]:
        cut = argv.index("--")
        argv, cmd = argv[:cut], argv[cut + 1 :]
    args = parser().parse_args(argv)
    args.cmd = cmd
    # Given before or after the command (argparse keeps either).
    as_json, verbose = getattr(args, "json", False), getattr(args, "verbose", False)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="ferrolock: %(message)s",
        stream=sys.stderr,
    )
    url: str = getattr(args, "url", None) or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    prefix: Optional[str] = getattr(args, "prefix", None)
    if prefix is None:
        prefix = os.environ.get("FERROLOCK_PREFIX", "ferrolock:")
    handlers: Dict[str, Callable[..., int]] = {
        "ls": cmd_ls,
        "inspect": cmd_inspect,
        "release": cmd_release,
        "run": cmd_run,
        "wait": cmd_wait,
    }
    try:
        client = ferrolock.Client(url, prefix=prefix)
        return handlers[args.command](client, args, as_json)
    except ferrolock.LockConfigurationError as e:  # it answered, but the URL does not fit it
        return fail(USAGE, str(e))
    except ferrolock.LockConnectionError as e:
        return fail(UNAVAILABLE, str(e))
    except (ValueError, TypeError) as e:
        return fail(USAGE, str(e))
    except ferrolock.LockError as e:
        return fail(NOT_FOUND, f"Redis answered with an error: {e}")
    except Signalled as e:
        return 128 + e.signum
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def fail(code: int, message: str) -> int:
    print(f"ferrolock: {message}", file=sys.stderr)
    return code


# -- looking ------------------------------------------------------------------

# What the one-token hold of a kind is called (a Lock's is its "holder").
HOLD_NAMES = {"rwmutex": "writer", "election": "leader"}


def hold_dict(h: Any) -> Dict[str, Any]:
    return {"token": h.token, "metadata": h.metadata, "fence": h.fence, "ttl": h.ttl}


def state_dict(s: Any) -> Dict[str, Any]:
    """A `ferrolock.LockState` (or the part of one `Shown` names) as JSON."""
    return {
        "prefix": s.prefix,
        "name": s.name,
        "kind": s.kind,
        "holder": None if s.holder is None else hold_dict(s.holder),
        "readers": [{"token": t, "ttl": ttl} for t, ttl in s.readers],
        "holders": [hold_dict(h) for h in s.holders],
        "limit": s.limit,
        "waiters": s.waiters,
        "subscribed": s.subscribed,
        "queued_readers": s.queued_readers,
        "queued_writers": s.queued_writers,
        "writer_intent_ttl": s.writer_intent,
    }


def ttl_text(ttl: Optional[float]) -> str:
    return "-" if ttl is None else f"{ttl:.1f}s"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def others(s: Any) -> List[Any]:
    """The holds of `s` that are neither its one-token hold nor a reader
    (a semaphore's permit holders)."""
    readers = {t for t, _ in s.readers}
    return [h for h in s.holders if h != s.holder and h.token not in readers]


def holder_text(s: ferrolock.LockState) -> str:
    if s.holder is not None:
        return s.holder.token
    if s.readers:
        return plural(len(s.readers), "reader")
    if s.holders:
        held = plural(len(s.holders), "holder")
        return held if s.limit is None else f"{held} of {s.limit}"
    return "(free)"


def table(rows: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def cmd_ls(client: ferrolock.Client, args: argparse.Namespace, as_json: bool) -> int:
    every = args.all_prefixes
    states = client.scan(args.pattern, all_prefixes=every)
    if as_json:
        print(json.dumps([state_dict(s) for s in states], indent=2))
        return OK
    if not states:
        where = "under any prefix" if every else f"under prefix {client.prefix!r}"
        print(
            f"no lock matches {args.pattern!r} {where} (ls lists ferrolock's own keys; a redis-py or "
            "python-redis-lock lock is a plain string key: inspect NAME --plain)"
        )
        return OK
    rows = [(["PREFIX"] if every else []) + ["NAME", "KIND", "HOLDER", "TTL", "FENCE", "WAITERS", "METADATA"]]
    for s in states:
        h = s.holder if s.holder is not None else (s.holders[0] if len(s.holders) == 1 else None)
        ttls = [x.ttl for x in s.holders if x.ttl is not None]
        rows.append(
            ([repr(s.prefix)] if every else [])
            + [
                s.name,
                s.kind,
                holder_text(s),
                ttl_text(h.ttl if h else min(ttls, default=None)),
                str(h.fence) if h and h.fence else "-",
                str(s.waiters),
                (h.metadata or "") if h else "",
            ]
        )
    print(table(rows))
    return OK


def describe_text(s: ferrolock.LockState) -> str:
    lines = [f"{s.name} ({s.kind})"]
    h = s.holder
    who = HOLD_NAMES.get(s.kind, "holder")
    if h is not None:
        lines.append(f"  {who}:   {h.token}")
        # A Lock taken by the transaction records its fence with its first renewal.
        fence = h.fence or "- (not recorded yet: its first renewal records it)"
        lines.append(f"  {'term' if s.kind == 'election' else 'fence'}:    {fence}")
        lines.append(f"  ttl:      {ttl_text(h.ttl)}")
        lines.append(
            f"  {'value' if s.kind == 'election' else 'metadata'}: {h.metadata if h.metadata is not None else '-'}"
        )
    elif not s.holders or s.kind == "rwmutex":
        lines.append(f"  {who}:   none")
    held = others(s)
    if held:
        limit = "" if s.limit is None else f" of {s.limit}"
        lines.append(f"  holders:  {len(held)}{limit}")
        for x in held:
            lines.append(
                f"    {x.token}  {ttl_text(x.ttl)}  fence {x.fence}  {x.metadata if x.metadata is not None else '-'}"
            )
    if s.kind == "rwmutex":
        lines.append(f"  readers:  {len(s.readers)}")
        for token, ttl in s.readers:
            lines.append(f"    {token}  {ttl_text(ttl)}")
        lines.append(f"  queued:   {s.queued_readers} reader(s), {s.queued_writers} writer(s)")
        if s.writer_intent is not None:
            lines.append(f"  a writer waits for the readers (its intent lasts {ttl_text(s.writer_intent)})")
    lines.append(f"  waiters:  {waiters_text(s)}")
    return "\n".join(lines)


# Where the locks ferrolock.compat stands in for keep a plain hold (a string
# key whose value is the owner's token), by the library that keeps it there.
PLAIN_LAYOUTS = (("redis-py", "{}"), ("python-redis-lock", "lock:{}"))


def cmd_inspect_plain(client: ferrolock.Client, name: str, as_json: bool) -> int:
    """The plain holds of `name`: what a string key holds, read as a lock's
    token (no fence or metadata: a plain hold stores neither)."""
    found: List[Dict[str, Any]] = []
    for library, layout in PLAIN_LAYOUTS:
        key = layout.format(name)
        try:
            info = ferrolock._ferrolock._plain_inspect(client, key)
        except ferrolock.LockError:  # WRONGTYPE: the key is not a string, so no such hold
            info = None
        if info is not None:
            found.append({"library": library, "key": key, "token": info.token, "ttl": info.ttl})
    if as_json:
        print(json.dumps(found, indent=2))
    elif not found:
        print(
            f"{name!r} has no plain hold: neither the key {name!r} (redis-py) nor {'lock:' + name!r} "
            "(python-redis-lock) holds a string"
        )
    else:
        print(
            "\n\n".join(
                f"{f['key']} (a plain hold, as {f['library']} keeps it)\n  holder:   {f['token']}\n"
                f"  ttl:      {ttl_text(f['ttl']) if f['ttl'] is not None else 'none (it never expires)'}\n"
                "  fence:    - (a plain hold stores none)"
                for f in found
            )
        )
    return OK if found else NOT_FOUND


def waiters_text(s: ferrolock.LockState) -> str:
    """How many wait, and how Redis knows: a fair queue lists each waiter;
    otherwise each waiting process is one subscriber of the wake-ups."""
    if s.queued_readers + s.queued_writers:
        return f"{s.waiters} (fair queue)"
    if s.subscribed:
        return f"{s.waiters} (processes subscribed to its wake-ups; no queue is kept)"
    return str(s.waiters)


def cmd_inspect(client: ferrolock.Client, args: argparse.Namespace, as_json: bool) -> int:
    if args.plain:
        return cmd_inspect_plain(client, args.name, as_json)
    states = client.describe(args.name)
    if as_json:
        print(json.dumps([state_dict(s) for s in states], indent=2))
    elif not states:
        print(
            f"{args.name!r} is free: nothing is stored under it (prefix {client.prefix!r}); a lock of "
            f"redis-py or python-redis-lock is shown by: ferrolock inspect {shlex.quote(args.name)} --plain"
        )
    else:
        print("\n\n".join(describe_text(s) for s in states))
    return OK if states else NOT_FOUND


# -- unsticking -----------------------------------------------------------------


def cmd_release(client: ferrolock.Client, args: argparse.Namespace, as_json: bool) -> int:
    if not args.force:
        return fail(
            USAGE,
            "release takes whatever holds the name away from its holder, who is not asked: "
            "pass --force to do so (a holder releases its own lock by leaving its `with` block)",
        )
    held = [s for s in client.describe(args.name) if s.holders]
    if not held:
        if as_json:
            print(json.dumps({"released": []}))
        else:
            print(f"{args.name!r} is not held: nothing to release")
        return NOT_FOUND
    if not args.yes and sys.stdin.isatty():
        print("\n\n".join(describe_text(s) for s in held))
        answer = input(f"Remove every hold of {args.name!r} shown above? The holders are not asked. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return NOT_FOUND
    released, changed = [], []
    for s in held:
        removed, gone = remove_shown(client, args.name, s)
        if removed.holders:
            released.append(removed)
            log.warning("force-released %s %r: removed %s", s.kind, args.name, holds_text(removed))
        if gone.holders:
            changed.append(gone)
    if as_json:
        print(
            json.dumps(
                {"released": [state_dict(s) for s in released], "changed": [state_dict(s) for s in changed]}, indent=2
            )
        )
    if changed:
        return fail(
            CHANGED,
            f"{args.name!r} changed after it was shown: {'; '.join(holds_text(s) for s in changed)}: "
            "no longer held as shown, left alone (a hold taken since it was shown is never removed); "
            f"look again: ferrolock inspect {shlex.quote(args.name)}",
        )
    return OK


class Shown:
    """Part of a state that was shown: those of its holds whose tokens are in `tokens`."""

    def __init__(self, s: ferrolock.LockState, tokens: "set[str]"):
        self.prefix, self.name, self.kind, self.limit = s.prefix, s.name, s.kind, s.limit
        self.holder = s.holder if s.holder is not None and s.holder.token in tokens else None
        self.readers = [r for r in s.readers if r[0] in tokens]
        self.holders = [h for h in s.holders if h.token in tokens]
        self.waiters, self.queued_readers, self.queued_writers = s.waiters, s.queued_readers, s.queued_writers
        self.subscribed = s.subscribed
        self.writer_intent = s.writer_intent


def remove_shown(client: ferrolock.Client, name: str, s: ferrolock.LockState) -> "tuple[Shown, Shown]":
    """Removes each hold of `s` by its token, whatever the kind
    (compare-and-delete in Redis, so a hold taken since by someone else
    stays). Returns what was removed and what had changed."""
    done = {h.token: client.force_release(name, token=h.token) for h in s.holders}
    return (Shown(s, {t for t, ok in done.items() if ok}), Shown(s, {t for t, ok in done.items() if not ok}))


def holds_text(s: Any) -> str:
    readers = {t for t, _ in s.readers}
    holds = []
    for h in s.holders:
        if h.token in readers:
            holds.append(f"reader {h.token}")
        else:
            who = HOLD_NAMES.get(s.kind, "holder") if s.holder is not None and h.token == s.holder.token else "holder"
            holds.append(f"{who} {h.token} (fence {h.fence}, metadata {h.metadata!r})")
    return ", ".join(holds)


def cmd_wait(client: ferrolock.Client, args: argparse.Namespace, as_json: bool) -> int:
    """Polls the name's state (reading only: it never takes the lock)."""
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    pause = 0.01
    with Signals():
        while True:
            busy = [s for s in client.describe(args.name) if s.holders]
            if not busy:
                if as_json:
                    print(json.dumps({"name": args.name, "free": True}))
                return OK
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if as_json:
                    print(json.dumps({"name": args.name, "free": False}))
                return fail(TIMED_OUT, f"{args.name!r} was still held after {args.timeout} s")
            ttls = [h.ttl for s in busy for h in s.holders if h.ttl is not None]
            pause = min(pause * 2, 0.5)
            nap = min([pause] + ttls + ([left] if left is not None else []))
            time.sleep(max(nap, 0.001))  # no notice comes when a hold expires: look again


# -- running a command under the lock -------------------------------------------


def default_metadata(cmd: List[str]) -> str:
    text = f"ferrolock run on {socket.gethostname()} pid {os.getpid()}: {shlex.join(cmd)}"
    return text if len(text) <= 512 else text[:509] + "..."


class Signals:
    """The signals `run` handles, from before it asks for the lock until it
    has released it, so none finds a moment where it would end ferrolock and
    leave the lock held for its ttl. While waiting for the lock (or just
    after taking it) the first one raises `Signalled`: the acquire stops
    cleanly, or the lock just taken is released. From then on they are kept
    until CMD is started, then sent on to it."""

    def __init__(self) -> None:
        self.raising = True
        self.pending: List[int] = []
        self.child: Optional[subprocess.Popen[bytes]] = None

    def __enter__(self) -> "Signals":
        self.previous = {s: signal.signal(s, self.handle) for s in FORWARDED}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)

    def handle(self, signum: int, _frame: Any) -> None:
        if self.child is not None:
            with_group(self.child, signum)
        elif self.raising:
            self.raising = False
            raise Signalled(signum)
        else:
            self.pending.append(signum)

    def started(self, child: subprocess.Popen[bytes]) -> None:
        """CMD runs: what came meanwhile goes to it, and so will what comes next."""
        self.child = child
        for signum in self.pending:
            with_group(child, signum)


def cmd_run(client: ferrolock.Client, args: argparse.Namespace, as_json: bool) -> int:
    cmd = args.cmd
    if not cmd:
        return fail(USAGE, "run needs a command after the lock name: ferrolock run NAME -- CMD ARGS...")
    lost = threading.Event()
    done = threading.Event()

    def on_lost() -> None:
        lost.set()
        done.set()

    metadata = args.metadata if args.metadata is not None else default_metadata(cmd)
    lock = client.lock(args.name, ttl=args.ttl, fair=args.fair, metadata=metadata, on_lost=on_lost)
    timeout = -1 if args.timeout is None else args.timeout
    with Signals() as signals:
        try:
            acquired = lock.acquire(timeout=timeout)
            signals.raising = False  # from here a signal waits for CMD
            if not acquired:
                return fail(TIMED_OUT, f"{args.name!r} was not acquired within {args.timeout} s")
            log.info("holding %r (fence %s); running %s", args.name, lock.fence, shlex.join(cmd))
            code = supervise(cmd, lock, lost, done, args.grace, signals)
        finally:
            release_run_lock(lock, args.name)
    if lock.lost:
        return fail(LOST, f"the lock {args.name!r} was lost while the command ran")
    return code


def release_run_lock(lock: ferrolock.Lock, name: str) -> None:
    """Releases what `run` holds, if it holds anything (a signal may have
    come as the acquire returned)."""
    if lock.token is None:
        return
    try:
        lock.release()
    except ferrolock.LockNotOwned:
        pass  # lost meanwhile: told by the caller
    except ferrolock.LockError as e:
        log.warning("releasing %r failed: %s (it expires after its ttl)", name, e)


def supervise(
    cmd: List[str], lock: ferrolock.Lock, lost: threading.Event, done: threading.Event, grace: float, signals: Signals
) -> int:
    """Runs CMD in a process group of its own, passing on the signals
    ferrolock gets; stops it when the lock is lost. Returns its exit code."""
    if signals.pending:
        signum = signals.pending[0]
        log.info("signal %s came before the command started: not running it", signum)
        return 128 + signum
    try:
        child = subprocess.Popen(cmd, **OWN_GROUP)
    except FileNotFoundError as e:
        return fail(NOT_FOUND_CMD, f"command not found: {cmd[0]} ({e.strerror})")
    except OSError as e:
        return fail(NOT_EXECUTABLE, f"command cannot be executed: {cmd[0]} ({e.strerror or e})")
    signals.started(child)

    def reap() -> None:
        child.wait()
        done.set()

    threading.Thread(target=reap, daemon=True).start()
    done.wait()
    if lost.is_set() and child.poll() is None:
        log.error("lost the lock %r: stopping the command (SIGTERM, SIGKILL in %s s)", lock.name, grace)
        with_group(child, signal.SIGTERM)
        try:
            child.wait(grace)
        except subprocess.TimeoutExpired:
            with_group(child, signal.SIGKILL)
            child.wait()
    code = child.returncode
    return 128 - code if code < 0 else code


def with_group(child: subprocess.Popen[bytes], signum: int) -> None:
    """Sends `signum` to CMD's process group (CMD and what it started)."""
    try:
        os.killpg(child.pid, signum)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main())
