"""Run worker pools: sessions spread over worker processes, all connected before one common start.

One process per core by default (Python's GIL would otherwise cap throughput); inside each, one
thread steps all of its sessions from an epoll loop, as pgbench's threads do: the compiled loop of
fastloop.py when it is built, else the pure Python `_loop` below (the same state machine). The
parent shares three clock values (start, measure-from, end) and per-session counters through
shared memory, so workers never block on bookkeeping; each worker merges its sessions' statistics
and sends them back once, at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import multiprocessing as mp
import os
import queue as queue_mod
import resource
import select
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import forkserver
from typing import Callable, Protocol

from ..engines.registry import get_engine
from ..errors import RunError
from ..scenario.model import Pool
from . import fastloop
from .cpu_wait import run_queue_ns, waited_s
from .lag import behind
from .session import DONE as SESSION_DONE
from .events import merged
from .schedule import Pace, events
from .session import END, FAR_FUTURE, MEASURE_FROM, REFUSED_FOR_NS, ROLLING_BACK, RUNNING, START, THINKING, Session
from .stats import PoolStats
from .waiting import LOOK_S, PreciseEpoll
from .window_end import END_BOUND_S, end_sessions

CONNECTING, READY, DONE, FAILED = 0, 1, 2, -1
CONNECT_THREADS = 8  # connections a worker opens at once
# After its sessions have ended (END_BOUND_S), a worker closes them, merges their statistics and
# sends them: the parent waits this much longer before it kills a worker that has not reported.
REPORT_GRACE_S = 5.0
# What the fork server imports once, so that a worker starts as a fork of it rather than as a new interpreter
# that imports the load loop, numpy and psycopg again (about half a second a variant run on two cores).
WORKER_MODULES = ["concurbench.workload.pool"]
ORPHANED = 3  # the exit code of a worker whose harness was killed before the window began
WORKER_NAME = "concurbench-w"  # the worker processes' name for ps, top and psutil: concurbench-w0, -w1, ...


class Gate(Protocol):
    """When the window starts once every session has connected (a perf_counter_ns), and whether to end it now;
    a cluster's load host takes both from its coordinator (cluster/share.py)."""

    def start_ns(self) -> int: ...

    def stop_now(self) -> bool: ...


class Alone:
    """The gate of a load generator on its own: the window starts 20 ms after the last session connected."""

    def start_ns(self) -> int:
        return time.perf_counter_ns() + 20_000_000

    def stop_now(self) -> bool:
        return False


class WindowListener(Protocol):
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None: ...

    def measurement_ended(self, end_ns: int) -> None: ...


@dataclass
class PoolRunResult:
    pools: dict[str, PoolStats]
    elapsed_s: float  # length of the measurement window actually used
    interrupted: bool = False
    worker_cpu_s: list[float] = field(default_factory=list)  # user+system per worker process, load loop only
    worker_wall_s: list[float] = field(default_factory=list)  # wall time of each worker's load loop
    # seconds each worker's load loop waited for a CPU (cpu_wait.py); None for a worker whose kernel does not say
    worker_wait_s: list[float | None] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    loop: str = "python"  # the workers' event loop: "compiled" or "python"
    workers: int = 0  # worker processes started
    reported: int = 0  # of those, the ones that sent their results
    stopped: str | None = None  # why the load was stopped before the window's end (the server refused connections)
    # the pools' timeline changes in the window: {"t_s", "source": "pool:<name>", "kind", "detail"}
    events: list[dict] = field(default_factory=list)
    hosts: list[dict] = field(default_factory=list)  # a cluster's load: each host's figures (cluster/breakdown.py)

    @property
    def complete(self) -> bool:
        """Every worker process reported: the figures cover every session."""
        return self.reported == self.workers


WARMUP, MEASURE = "warmup", "measure"  # a LoadProgress's phase


@dataclass(frozen=True)
class LoadProgress:
    """What the load generator tells twice a second: the phase (WARMUP, `elapsed` negative: seconds to the window;
    or MEASURE), the transactions so far, and the rate over the last tick."""

    phase: str
    elapsed: float
    transactions: int
    tps: float


@dataclass(frozen=True)
class _SessionSpec:
    pool: Pool
    index: int
    slot: int


def workers_context():
    """Where worker processes come from: a fork server that imported WORKER_MODULES once (the parent's
    environment as it was when the first pool ran; the workers take what they need as arguments), or
    spawn where there is no fork server."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(WORKER_MODULES)
    return ctx


def start_workers_early() -> None:
    """Start the fork server now, so that it imports the load loop while the caller does other work (a server
    starting, say) rather than while the first pool's workers wait for it."""
    if workers_context().get_start_method() == "forkserver":
        forkserver.ensure_running()


def _leave_fork_server() -> None:
    """A child of the fork server inherits the end of the pipe that keeps the fork server alive while a process
    that may ask it for children holds it. A worker never asks: it closes its copy, so that when the harness
    is killed the fork server ends, and the workers see their parent go and end too (else each keeps the
    other alive, and the workers' sessions stay open on the server)."""
    server = forkserver._forkserver
    if server._forkserver_pid is None and server._forkserver_alive_fd is not None:  # a child of the fork server
        with contextlib.suppress(OSError):
            os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None


def _name_process(name: str) -> None:
    """Name this process (Linux: its comm, at most 15 bytes) so that ps and top tell the workers apart; best
    effort."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


def _worker(conninfo: str, engine_name: str, specs: list[_SessionSpec], seed: int, window, counters, status, finished,
            results, loop: str = "python", wait: str = "") -> None:
    """One worker process: connect its sessions, then step them all from one event loop (`wait`: how the
    compiled loop waits for a due time, fastloop.wait() as the parent found it)."""
    parent = os.getppid()  # the fork server: it ends when the harness is killed
    for sig in (signal.SIGINT, signal.SIGHUP):  # the parent decides when to stop (a closed terminal sends both)
        signal.signal(sig, signal.SIG_IGN)
    if mp.parent_process() is not None:  # a worker process (a test may run this function in its own)
        _leave_fork_server()
        _name_process(WORKER_NAME + mp.current_process().name.rsplit("-", 1)[-1])
    _raise_fd_limit()

    engine = get_engine(engine_name)
    merged: dict[str, PoolStats] = {}  # one per pool, shared by its sessions here
    sessions = [Session(conninfo, s.pool, s.index, seed, counters, s.slot, engine,
                        merged.setdefault(s.pool.name, PoolStats(s.pool.name))) for s in specs]
    poller = None if loop == "compiled" else PreciseEpoll()  # before the sessions' sockets: select() wants a low fd
    live, problems = _connect_all(specs, sessions, status)
    usage0, wall0, queued0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), run_queue_ns()
    stopped = None
    try:
        if poller is None:
            stopped = _compiled_loop(live, window, status, finished, wait, parent)
        else:
            stopped = _loop(live, window, status, finished, poller=poller, parent=parent)
    except Exception as exc:  # noqa: BLE001 - keep what was measured, and stop the run: its figures are cut short
        stopped = f"a worker's load loop failed: {type(exc).__name__}: {exc}"
    finally:
        problems.extend(end_sessions(live))
        ended = time.perf_counter_ns()
        for session in live:
            finished[session.slot] = finished[session.slot] or ended
            status[session.slot] = DONE
    for session in sessions:
        session.settle_stats()
    usage, queued = resource.getrusage(resource.RUSAGE_SELF), run_queue_ns()
    # CPU and wall time of the load loop only (connecting and start-up excluded): their ratio tells
    # whether this worker process was itself the bottleneck
    results.put({"worker": mp.current_process().name, "pools": {n: s.to_dict() for n, s in merged.items()},
                 "problems": problems, "stopped": stopped,
                 "cpu_s": usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime,
                 "wall_s": time.perf_counter() - wall0, "wait_s": waited_s(queued0, queued)})


def _connect_all(specs: list[_SessionSpec], sessions: list[Session], status) -> tuple[list[Session], list[str]]:
    """Connect the sessions, several at a time: a connection waits mostly on the server starting a
    backend, so a few in flight connect hundreds of sessions several times faster than one by one."""
    def connect(spec: _SessionSpec, session: Session) -> str | None:
        try:
            session.connect()
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which aborts the run
            status[spec.slot] = FAILED
            return f"pool {spec.pool.name} session {spec.index}: {exc}"
        status[spec.slot] = READY
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(CONNECT_THREADS, len(sessions)))) as executor:
        outcomes = list(executor.map(connect, specs, sessions))
    live = [session for session, problem in zip(sessions, outcomes) if problem is None]
    return live, [problem for problem in outcomes if problem is not None]


def _raise_fd_limit() -> None:
    """Each session holds a socket: let a worker open as many as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _await_start(window, sessions: list[Session], clock=time.perf_counter_ns, sleep=time.sleep,
                 parent: int | None = None) -> None:
    """Wait for the parent's common start (set 20 ms ahead), then open the sessions' window. A worker whose
    harness was killed before the start (its parent, the fork server, went with it) exits: its sessions close."""
    parent = os.getppid() if parent is None else parent
    while window[START] == 0:
        if os.getppid() != parent:
            os._exit(ORPHANED)
        sleep(0.005)
    delay = window[START] - clock()
    if delay > 0:
        sleep(delay / 1e9)
    for session in sessions:
        session.open_window(window[MEASURE_FROM])
    set_paces(sessions, window[MEASURE_FROM], window[START])


def set_paces(sessions: list[Session], measure_from: int, loop_start: int) -> None:
    """Give the sessions of each timed pool their pool's one Pace in this worker process."""
    by_pool: dict[str, list[Session]] = {}
    for session in sessions:
        if session.pool.timed:
            by_pool.setdefault(session.pool.name, []).append(session)
    for group in by_pool.values():
        first = group[0]
        pace = Pace(first.pool, [s.index for s in group], measure_from, loop_start, first.seed, first.stats)
        for session in group:
            session.pace = pace


def _compiled_loop(sessions: list[Session], window, status, finished, wait: str = "",
                   parent: int | None = None) -> str | None:
    """The same loop in C (fastloop.py); a reconnect the server has refused too long ends the window there."""
    _await_start(window, sessions, parent=parent)
    fastloop.run(sessions, window, status, finished, DONE, wait)
    return _refused(sessions, time.perf_counter_ns())


def _loop(sessions: list[Session], window, status, finished, *, clock=time.perf_counter_ns, sleep=time.sleep,
          poller=None, parent: int | None = None) -> str | None:
    """Step every session until the window ends or all are done; only stepped sessions are looked at.
    Returns why it ended the window for every worker early (the server refused connections), or None."""
    parent = os.getppid() if parent is None else parent
    _await_start(window, sessions, clock, sleep, parent)
    poller = poller or PreciseEpoll()  # waits to the microsecond; a test passes its own, with its own clock
    by_fd: dict[int, Session] = {}
    polled: dict[int, object] = {}  # slot -> the channel whose fd is registered
    sleeping: list[tuple[int, int, Session]] = []  # (wake time, slot, session) for think times
    remaining = len(sessions)

    def settle(session: Session) -> None:
        nonlocal remaining
        state = session.state
        if state == SESSION_DONE:
            finished[session.slot] = clock()
            status[session.slot] = DONE
            session.settle_stats()
            remaining -= 1
        elif state == THINKING:
            heapq.heappush(sleeping, (session.wake_at, session.slot, session))
        elif polled.get(session.slot) is not session.channel:  # first statement, or a new connection
            # keyed by the channel, not the fd: a new connection may get the closed one's fd number,
            # and closing an fd drops it from the epoll set
            polled[session.slot] = session.channel
            by_fd[session.fd] = session
            with contextlib.suppress(OSError):
                poller.unregister(session.fd)
            poller.register(session.fd, select.EPOLLIN)

    for session in sessions:
        session.begin(clock(), window)
        settle(session)
    busy = (RUNNING, ROLLING_BACK)
    next_parent_check = clock()
    try:
        while remaining:
            now = clock()
            if now >= window[END]:
                return None
            if now >= next_parent_check:  # a killed harness must not leave its workers behind
                if os.getppid() != parent:
                    return None
                refused = _refused(sessions, now)
                if refused is not None:
                    window[END] = now  # ends the window for every worker process and the harness
                    return refused
                next_parent_check = now + 200_000_000
            timeout = LOOK_S if not sleeping else max(0.0, min(LOOK_S, (sleeping[0][0] - now) / 1e9))
            for fd, _event in poller.poll(timeout):
                session = by_fd.get(fd)
                if session is not None and session.state in busy:
                    session.readable(clock(), window)
                    if session.state != RUNNING or polled.get(session.slot) is not session.channel:
                        settle(session)
            while sleeping and sleeping[0][0] <= clock():
                session = heapq.heappop(sleeping)[2]
                session.begin(clock(), window)
                settle(session)
    finally:
        poller.close()
    return None


def _refused(sessions: list[Session], now: int) -> str | None:
    """Why to stop the load: sessions whose reconnects the server has refused for REFUSED_FOR_NS."""
    refused = [s for s in sessions if s.refused_since and now - s.refused_since >= REFUSED_FOR_NS]
    if not refused:
        return None
    return (f"stopped early: the server refused new connections ({refused[0].refusal}); {len(refused)} of "
            f"{len(sessions)} sessions of a worker process could not reconnect for "
            f"{REFUSED_FOR_NS / 1e9:g} s")


def _spread(pools: list[Pool], processes: int, share: dict[str, tuple[int, ...]] | None = None
            ) -> list[list[_SessionSpec]]:
    """Sessions dealt round-robin over processes, so every process carries a share of every pool (`share`: only
    these sessions of each pool, a cluster host's)."""
    buckets: list[list[_SessionSpec]] = [[] for _ in range(processes)]
    slot = 0
    for pool in pools:
        for index in (range(pool.clients or 0) if share is None else share.get(pool.name, ())):
            buckets[slot % processes].append(_SessionSpec(pool, index, slot))
            slot += 1
    return [b for b in buckets if b]


class LoadGenerator:
    """Runs a set of pools (clients already resolved) once, for a duration or a transaction count."""

    def __init__(self, conninfo: str, pools: list[Pool], *, warmup: float, duration: float, seed: int = 1,
                 processes: int | None = None, connect_timeout: float = 60.0,
                 progress: Callable[[LoadProgress], None] | None = None,
                 listeners: list[WindowListener] | None = None, tick: float = 0.5, engine: str = "postgres",
                 loop: str = "auto", share: dict[str, tuple[int, ...]] | None = None, gate: Gate | None = None):
        for pool in pools:
            if pool.clients is None:
                raise ValueError(f"pool {pool.name} has no client count")
        self.conninfo = conninfo
        self.engine = engine
        self.pools = pools
        self.warmup = warmup
        self.duration = duration
        self.seed = seed
        self.share = share  # a cluster host's sessions of each pool (every session of every pool: None)
        self.gate = gate or Alone()
        self.total = sum(p.clients or 0 for p in pools) if share is None else sum(len(i) for i in share.values())
        self.processes = max(1, min(processes or os.cpu_count() or 1, self.total))
        self.connect_timeout = connect_timeout
        self.progress = progress or (lambda info: None)
        self.listeners = listeners or []
        self.tick = tick
        self.fixed = all(p.transactions is not None for p in pools if p.measure)
        self.loop = loop  # "auto", "compiled" or "python" (fastloop.LOOPS)

    def run(self) -> PoolRunResult:
        loop = fastloop.resolve(self.loop, self.engine)
        wait = fastloop.wait() if loop == "compiled" else ""
        ctx = workers_context()
        window = ctx.RawArray("q", 3)
        counters = ctx.RawArray("q", self.total)
        status = ctx.RawArray("b", self.total)
        finished = ctx.RawArray("q", self.total)
        results = ctx.Queue()
        buckets = _spread(self.pools, self.processes, self.share)
        procs = [ctx.Process(target=_worker, name=f"concurbench-worker-{i}", daemon=True,
                             args=(self.conninfo, self.engine, b, self.seed, window, counters, status, finished,
                                   results, loop, wait))
                 for i, b in enumerate(buckets)]
        measured_slots = [s.slot for b in buckets for s in b if s.pool.measure]
        interrupted = False
        measure_from = end = 0
        failure: BaseException | None = None
        try:
            for p in procs:
                p.start()
            self._wait_connected(status, procs)
            start = self.gate.start_ns()
            measure_from = start + int(self.warmup * 1e9)
            planned = None if self.fixed else measure_from + int(self.duration * 1e9)
            window[MEASURE_FROM] = measure_from
            window[END] = planned if planned is not None else FAR_FUTURE
            window[START] = start
            for listener in self.listeners:
                listener.window_set(measure_from, planned)
            end = self._watch(window, counters, status, finished, measured_slots, measure_from, procs)
        except KeyboardInterrupt:
            interrupted = True
            end = time.perf_counter_ns()
            self._stop_now(window)
        except BaseException as exc:  # noqa: BLE001 - raised again below, once the workers are collected
            self._stop_now(window)
            failure = exc
        finally:
            if measure_from and end:
                for listener in self.listeners:
                    listener.measurement_ended(end)
            collected, lost = self._collect(results, procs, buckets, window)
        if isinstance(failure, RunError):  # the sessions could not connect: say why, as the workers heard it
            problems = [p for item in collected for p in item["problems"]]
            why = f": {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "") \
                if problems else ""
            raise RunError(failure.message + why, failure.cause) from failure
        if failure is not None:
            raise failure
        result = self._result(collected, lost, len(procs), measure_from, end, interrupted)
        result.loop = loop
        return result

    @staticmethod
    def _stop_now(window) -> None:
        now = time.perf_counter_ns()
        window[END] = now
        if window[MEASURE_FROM] == 0:
            window[MEASURE_FROM] = now
        if window[START] == 0:
            window[START] = now

    def _wait_connected(self, status, procs) -> None:
        deadline = time.monotonic() + self.connect_timeout + self.total * 0.05
        while True:
            states = list(status)
            if FAILED in states:
                raise RunError(f"{states.count(FAILED)} of {self.total} sessions could not connect")
            if all(s != CONNECTING for s in states):
                return
            if any(not p.is_alive() for p in procs):
                raise RunError("a worker process exited before its sessions connected "
                               "(drive runs from Python under `if __name__ == '__main__':`)")
            if time.monotonic() > deadline:
                ready = sum(1 for s in states if s != CONNECTING)
                raise RunError(f"only {ready} of {self.total} sessions connected within "
                               f"{self.connect_timeout:.0f} s (is max_connections high enough?)")
            time.sleep(0.01)

    def _watch(self, window, counters, status, finished, measured_slots, measure_from, procs) -> int:
        """Report progress until the window ends (or every measured session is done); return the end.

        A worker process that dies ends the window at once: its sessions' share is gone for good."""
        last_count, last_t = 0, time.perf_counter_ns()
        while True:
            time.sleep(self.tick)
            now = time.perf_counter_ns()
            count = sum(counters)
            if now >= measure_from:
                rate = (count - last_count) / max((now - last_t) / 1e9, 1e-9)
                self.progress(LoadProgress(MEASURE, (now - measure_from) / 1e9, count, rate))
            else:
                self.progress(LoadProgress(WARMUP, (now - measure_from) / 1e9, 0, 0.0))
            last_count, last_t = count, now
            if self.gate.stop_now():
                window[END] = time.perf_counter_ns()
                return window[END]
            if self.fixed and (measured_slots or self.share is None):  # a host without: the coordinator ends it
                if all(status[s] == DONE for s in measured_slots):
                    end = max(finished[s] for s in measured_slots)
                    window[END] = time.perf_counter_ns()  # stops the background pools
                    return end
            elif now >= window[END]:
                return window[END]
            if any(p.exitcode not in (None, 0) for p in procs):
                window[END] = time.perf_counter_ns()
                return window[END]

    def _collect(self, results, procs, buckets, window) -> tuple[list[dict], list[str]]:
        """Every worker's results, and a message for each worker that sent none.

        A worker has its sessions ended END_BOUND_S after the window's end, and its results sent
        REPORT_GRACE_S later; one that exits without them, or is still silent then, is killed and
        named (its sessions' figures are missing, so the variant run is incomplete)."""
        waiting = {p.name: (i, p, bucket) for i, (p, bucket) in enumerate(zip(procs, buckets)) if p.pid is not None}
        deadline = min(window[END], time.perf_counter_ns()) / 1e9 + END_BOUND_S + REPORT_GRACE_S
        collected: list[dict] = []
        lost: list[str] = []
        while waiting:
            try:
                item = results.get(timeout=0.1)
            except queue_mod.Empty:
                item = None
            except KeyboardInterrupt:
                continue
            if item is not None:
                collected.append(item)
                waiting.pop(item["worker"], None)
                continue
            gone = [name for name, (_, p, _) in waiting.items() if p.exitcode is not None]
            if gone and results.empty():  # a worker that exits has flushed what it sent: nothing is on its way
                for name in gone:
                    index, p, bucket = waiting.pop(name)
                    lost.append(_lost_worker(index, len(procs), bucket, f"exited ({_exit_reason(p.exitcode)}) "
                                                                        "without sending its results"))
            elif time.perf_counter() > deadline:
                for index, p, bucket in waiting.values():
                    p.kill()
                    lost.append(_lost_worker(index, len(procs), bucket, "sent no results within "
                                             f"{END_BOUND_S + REPORT_GRACE_S:g} s of the window's end and was killed"))
                break
        for p in procs:
            if p.pid is None:
                continue
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        return collected, lost

    def _result(self, collected, lost, workers, measure_from, end, interrupted) -> PoolRunResult:
        pools = {p.name: PoolStats(p.name) for p in self.pools}
        messages: list[str] = []
        cpu, wall, waited = [], [], []
        stopped = next((item.get("stopped") for item in collected if item.get("stopped")), None)
        for item in collected:
            for name, data in item["pools"].items():
                pools[name].merge(PoolStats.from_dict(data))
            messages.extend(item["problems"])
            cpu.append(item["cpu_s"])
            wall.append(item["wall_s"])
            waited.append(item.get("wait_s"))
        elapsed = max(0.0, (end - measure_from) / 1e9) if measure_from and end else 0.0
        messages.extend(w for w in (behind(p, pools[p.name], elapsed) for p in self.pools) if w)
        messages.extend(lost)
        if stopped:
            messages.append(stopped)  # last: the reason the run stops
        timeline = merged(*(events(p, elapsed) for p in self.pools))
        return PoolRunResult(pools, elapsed, interrupted, worker_cpu_s=cpu, worker_wall_s=wall, worker_wait_s=waited,
                             messages=messages, workers=workers, reported=len(collected), stopped=stopped,
                             events=timeline)


def _lost_worker(index: int, workers: int, bucket: list[_SessionSpec], what: str) -> str:
    pools = Counter(spec.pool.name for spec in bucket)
    sessions = ", ".join(f"{n} sessions of pool {name}" for name, n in pools.items())
    return (f"worker process {index + 1} of {workers} ({sessions}) {what}: "
            f"the figures leave out its sessions")


def _exit_reason(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def resolve_clients(pools, point: int | None) -> list[Pool]:
    """The variant's pools with the sweep point filled in as their client count."""
    return [replace(p, clients=p.clients_at(point)) for p in pools]
