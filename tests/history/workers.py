"""The worker processes (spawned: module-level entry points).

A sync worker takes one hold at a time with ``acquire(timeout=...)`` or
``with``; Ctrl-C interrupts it only while it waits in acquire. An async
worker runs a few tasks, each wrapping a whole attempt (acquire, hold,
release) in ``asyncio.wait_for`` with a random limit, so cancellations land
anywhere. Inside a hold the worker works in 1 ms steps and checks ``lost``
around each; once it sees the loss it stops holding at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import traceback
from dataclasses import dataclass

import ferrolock

from support.netns_agent import enter

from . import resp, scenarios
from .attempt import Attempt
from .clock import measured_skew_ms, sleep
from .events import EventLog, StallProbe, now_ns
from .storage import AsyncStorage, Storage

STEP_S = 0.001
ACQUIRE_TIMEOUTS = (0.02, 0.1, 0.5, 2.0)
LEFT_WAIT_S = 1.0
ERROR_PAUSE_S = 0.01  # after a connection error: pace the retries while the server is down


@dataclass(frozen=True)
class WorkerSpec:
    index: int
    label: str
    mode: str  # "sync" or "async"
    scenario: str
    url: str | list  # a list: the masters of a quorum
    prefix: str
    seed: int
    log_path: str
    ttl: tuple = (0.5, 1.0)
    hold_ms: tuple = (0.0, 5.0)
    # Seconds between holds of 1-2 ttls, which must be renewed through the faults
    # (None: short holds only). One worker is enough: a long hold blocks its name.
    long_every_s: tuple | None = None
    tasks: int = 2
    replicas: int = 0  # Client(replicas=..., replica_policy="fail") when positive
    skew: str | None = None  # the wall clock's offset under libfaketime ("+5s"), None: the real clock
    time_port: int = 0  # a server to compare the wall clock with (TIME) before starting
    netns: str | None = None  # the test host it runs in (tests/support/netns.py), None: the machine's own network
    routes: dict | None = None  # port -> unix socket of the servers in test hosts (history.resp.route)
    storage: str | None = None  # the unix socket of the storage its fenced writes go to


class HoldTimes:
    def __init__(self, spec: WorkerSpec, rng: random.Random):
        self.spec, self.rng = spec, rng
        self.next_long = self._later()

    def _later(self) -> int | None:
        every = self.spec.long_every_s
        return None if every is None else now_ns() + int(self.rng.uniform(*every) * 1e9)

    def seconds(self, ttl: float) -> float:
        if self.next_long is not None and now_ns() >= self.next_long:
            self.next_long = self._later()
            return ttl * self.rng.uniform(1.0, 2.0)
        return self.rng.uniform(*self.spec.hold_ms) / 1000


def new_attempt(spec, rng, client, log, board, w, seq, how, blocking_timeout=None):
    kind, names = scenarios.pick(spec.scenario, rng)
    ttl = round(rng.uniform(*spec.ttl), 3)
    att = Attempt(log, w, seq, kind, names, ttl, how, (board, spec.index))
    handle = scenarios.handle(
        client,
        spec.scenario,
        kind,
        names,
        ttl=ttl,
        retry=scenarios.retry(rng),
        on_lost=att.on_lost,
        blocking_timeout=blocking_timeout,
    )
    return att, handle


def connect(spec: WorkerSpec, log: EventLog) -> ferrolock.Client:
    """The worker's client (in its test host, if it has one), once its
    clock's offset from the server's is logged."""
    if spec.netns:
        enter(spec.netns)  # before the client's threads start: they all live in the host
    if spec.routes:
        resp.route(spec.routes)
    if spec.time_port:
        log.write(spec.label, 0, "clock", skew=spec.skew, skew_ms=round(measured_skew_ms(spec.time_port), 1))
    extra = {"replicas": spec.replicas, "replica_policy": "fail"} if spec.replicas else {}
    return ferrolock.Client(spec.url, prefix=spec.prefix, connect_timeout=2, command_timeout=2, **extra)


async def _settle(h) -> tuple | None:
    """After Ctrl-C or a cancellation the handle may still show a token while its
    clean-up goes through; a handle still holding after LEFT_WAIT_S was left
    holding. Returns that wait's (start, end), or None when the hold ended."""
    t = now_ns()
    try:
        await asyncio.wait_for(h.wait_lost(), LEFT_WAIT_S)
        return None
    except asyncio.TimeoutError:
        return t, now_ns()


def _left_holding(att: Attempt, cause: str, waited: tuple | None) -> bool:
    if waited is not None:
        att.write("left", waited[1], t_from=waited[0], cause=cause, phase=att.phase)
    return waited is not None


@contextlib.contextmanager
def _crash_logged(log: EventLog, w: str, seq):
    """An exception that ends the worker goes to its history too, then on."""
    try:
        yield
    except BaseException:
        log.write(w, seq(), "crash", error=traceback.format_exc())
        raise


# --------------------------------------------------------------------------
# sync


class SigintGate:
    """Ctrl-C raises KeyboardInterrupt only while the worker waits in acquire with
    nothing granted yet; otherwise it is counted and ignored. The token test
    matters: Python runs the handler at the first bytecode after acquire
    returns, which would otherwise turn a granted acquire into an interrupt."""

    def __init__(self):
        self.waiting: ferrolock.Lock | None = None
        self.ignored = 0

    def handler(self, signum, frame) -> None:
        handle = self.waiting
        if handle is not None and handle.token is None:
            self.waiting = None
            raise KeyboardInterrupt
        self.ignored += 1


def sync_worker(spec: WorkerSpec, barrier, go, deadline, board) -> None:
    rng = random.Random(spec.seed)
    log = EventLog(spec.log_path)
    client = connect(spec, log)
    storage = Storage(spec.storage, spec.prefix) if spec.storage else None
    gate = SigintGate()
    signal.signal(signal.SIGINT, gate.handler)
    barrier.wait(120)  # connected: the parent then sets the deadline
    go.wait(120)
    seq = 0
    times = HoldTimes(spec, rng)
    probe = StallProbe(log, spec.label).start()
    with _crash_logged(log, spec.label, lambda: seq):
        while now_ns() < deadline.value:  # read each time: the parent moves it once the nemesis is done
            seq += 1
            _sync_attempt(spec, rng, client, log, gate, board, seq, times, storage)
            sleep(rng.uniform(0, 0.002))  # think time between attempts
    probe.stop()
    log.write(spec.label, seq, "exit", sigint_ignored=gate.ignored)
    log.close()


def _sync_attempt(spec, rng, client, log, gate, board, seq, times, storage) -> None:
    use_with = rng.random() < 0.3
    timeout = rng.choice(ACQUIRE_TIMEOUTS)
    how, blocking_timeout = ("with", timeout) if use_with else ("acquire", None)
    att, h = new_attempt(spec, rng, client, log, board, spec.label, seq, how, blocking_timeout)
    hold_s = times.seconds(att.ttl)

    def stop_waiting():
        gate.waiting = None
        board.waiting[spec.index] = 0

    board.waiting[spec.index] = now_ns()
    gate.waiting = h
    try:
        _sync_try(h, att, use_with, timeout, hold_s, stop_waiting, storage)
    except KeyboardInterrupt:
        # Also when Python ran the handler just after acquire gave up, which can
        # be inside one of _sync_try's except clauses.
        stop_waiting()
        att.write("interrupted", phase=att.phase, token=h.token)
        if h.token is not None and _left_holding(att, "interrupted", asyncio.run(_settle(h))):
            _release_quietly(h, att)
    except Exception as e:  # not a LockError: the library broke its own contract
        stop_waiting()
        att.unexpected(e)
        if h.token is not None and _left_holding(att, "unexpected", asyncio.run(_settle(h))):
            _release_quietly(h, att)
    if att.lost_seen:
        if storage:
            storage.write(att, late=True)
        att.reported.wait(att.report_wait_s())


def _sync_try(h, att, use_with, timeout, hold_s, stop_waiting, storage) -> None:
    try:
        if use_with:
            with h:
                stop_waiting()
                att.granted(h)
                _hold(h, att, hold_s, storage)
                att.end_hold()
            att.released()
        elif h.acquire(timeout=timeout):
            stop_waiting()
            att.granted(h)
            _hold(h, att, hold_s, storage)
            att.end_hold()
            h.release()
            att.released()
        else:
            stop_waiting()
            att.timeout()
    except ferrolock.LockNotAcquired:
        stop_waiting()
        att.timeout()
    except ferrolock.LockLost as e:
        att.lost("exit", error=type(e).__name__)
    except ferrolock.LockNotOwned as e:
        att.lost("release", error=type(e).__name__)
    except ferrolock.LockError as e:
        stop_waiting()
        att.end_hold()
        att.error(e)
        sleep(ERROR_PAUSE_S)


def _hold(h, att, hold_s, storage) -> None:
    end = now_ns() + int(hold_s * 1e9)
    while att.still_valid(h) and now_ns() < end:
        sleep(STEP_S)
    if storage and not att.lost_seen:
        storage.write(att)  # as the holder: it saw the hold valid last


def _release_quietly(h, att) -> None:
    try:
        h.release()
        att.write("released", cleanup=True)
    except ferrolock.LockError as e:
        att.write("error", phase="cleanup", error=f"{type(e).__name__}: {e}")


# --------------------------------------------------------------------------
# asyncio


def async_worker(spec: WorkerSpec, barrier, go, deadline, board) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is aimed at sync waiters only
    rng = random.Random(spec.seed)
    log = EventLog(spec.log_path)
    client = connect(spec, log)
    barrier.wait(120)  # connected: the parent then sets the deadline
    go.wait(120)
    probe = StallProbe(log, spec.label).start()
    with _crash_logged(log, spec.label, lambda: 0):
        asyncio.run(_async_main(spec, rng, client, log, board, deadline))
    probe.stop()
    log.close()


async def _async_main(spec, rng, client, log, board, deadline) -> None:
    labels = [f"{spec.label}.{i}" for i in range(spec.tasks)]
    storage = AsyncStorage(spec.storage, spec.prefix) if spec.storage else None
    seqs = await asyncio.gather(
        *(_task_loop(spec, random.Random(rng.random()), client, log, board, w, deadline, storage) for w in labels)
    )
    for w, seq in zip(labels, seqs):
        log.write(w, seq, "exit")


async def _task_loop(spec, rng, client, log, board, w, deadline, storage) -> int:
    seq, times = 0, HoldTimes(spec, rng)
    while now_ns() < deadline.value:
        seq += 1
        use_with = rng.random() < 0.5
        att, h = new_attempt(spec, rng, client, log, board, w, seq, "async-with" if use_with else "aacquire")
        hold_s = times.seconds(att.ttl)
        limit = rng.uniform(0.005, 0.4) + hold_s * rng.uniform(0.5, 1.5)
        timeout = rng.choice(ACQUIRE_TIMEOUTS)
        try:
            await asyncio.wait_for(_async_attempt(h, att, hold_s, use_with, timeout, storage), limit)
        except asyncio.TimeoutError:
            att.timeout(cancelled=True, token=h.token)
            if h.token is not None and _left_holding(att, "cancelled", await _settle(h)):
                await _arelease_quietly(h, att)
        except ferrolock.LockLost as e:
            att.lost("aexit", error=type(e).__name__)
        except ferrolock.LockNotOwned as e:
            att.lost("release", error=type(e).__name__)
        except ferrolock.LockError as e:
            att.end_hold()
            att.error(e)
            await asyncio.sleep(ERROR_PAUSE_S)
        except Exception as e:  # not a LockError: the library broke its own contract
            att.end_hold()
            att.unexpected(e)
            if h.token is not None and _left_holding(att, "unexpected", await _settle(h)):
                await _arelease_quietly(h, att)
        if att.lost_seen:
            if storage:
                await storage.write(att, late=True)
            await asyncio.get_running_loop().run_in_executor(None, att.reported.wait, att.report_wait_s())
        await asyncio.sleep(rng.uniform(0, 0.002))
    return seq


async def _async_attempt(h, att, hold_s, use_with, timeout, storage) -> None:
    if use_with:
        async with h:
            att.granted(h)
            await _ahold(h, att, hold_s, storage)
        att.released()
        return
    if not await h.aacquire(timeout=timeout):
        att.timeout()
        return
    att.granted(h)
    try:
        await _ahold(h, att, hold_s, storage)
    finally:
        await h.arelease()
    att.released()


async def _ahold(h, att, hold_s, storage) -> None:
    end = now_ns() + int(hold_s * 1e9)
    try:
        while att.still_valid(h) and now_ns() < end:
            await asyncio.sleep(STEP_S)
        if storage and not att.lost_seen:
            await storage.write(att)  # as the holder: it saw the hold valid last
    finally:
        att.end_hold()  # also when a loss or the time limit cancels the body


async def _arelease_quietly(h, att) -> None:
    try:
        await h.arelease()
        att.write("released", cleanup=True)
    except ferrolock.LockError as e:
        att.write("error", phase="cleanup", error=f"{type(e).__name__}: {e}")
