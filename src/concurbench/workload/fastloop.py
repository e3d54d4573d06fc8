"""The compiled event loop: pool.py's `_loop` in C (the optional extension `_fastloop`).

The pure Python loop costs about 10 us of CPU per statement in the worker process; pgbench spends
about 2. On a machine where the server and the load generator share the cores that difference is
taken from the server, so the C loop does the per-statement work (libpq calls, timing, buffers)
and calls back into Python only for what is rare: naming and counting a failure, reconnecting, and
handing over latencies in batches. It draws a transaction's parameters itself when all of them are
uniform or constant (draw_spec); other distributions are drawn in Python, once per transaction.

The extension is optional: without a C compiler `pip install` skips it and the pure loop runs.
It calls the libpq psycopg itself is linked with (found through psycopg's compiled pq module), so
a PGconn is never given to another libpq build. LoadGenerator's `loop` chooses: "auto" (compiled
when it can run), "compiled" (an error when it cannot) or "python".

The loop waits for a rate's due times to the nanosecond where it can (WAITS, best first; see
_fastloop.c). It takes the best that works here; CONCURBENCH_LOOP_WAIT names another (to measure or
test a fallback).

What crosses to C is named: numbers in the structs of seam.py (a session's SessionSpec, the run's
LoopEnv, the SessionSync a session comes back with), objects by attribute (a session's glue: its
spec, plans, pace and draws; Failures). bind() refuses a build whose structs or protocols are not
this side's.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import psycopg

from ..engines.registry import spec
from ..engines import postgres as pg
from ..engines.classes import CONNECTION, RETRYABLE
from ..errors import RunError
from . import seam
from .seam import ENV, SESSION, SYNC
from .session import DONE, END, FLUSH_AT, REFUSED_FOR_NS, ROLLING_BACK, RUNNING, THINKING, Session

_fastloop = seam.extension  # None when it is not built (seam.WHY says why)

LOOPS = ("auto", "python", "compiled")
_PLACEHOLDER = re.compile(rb"\$(\d+)")
# how the compiled loop waits for a due time, best first (its WAIT_NAMES): a timeout in nanoseconds, a timer
# armed for the due time, whole milliseconds rounded up (the last resort)
WAITS = ("epoll_pwait2", "timerfd", "epoll_wait")
WAIT_ENV = "CONCURBENCH_LOOP_WAIT"
_bound: list[str] = []  # the libpq file the extension calls, once bound in this process


class Plan(NamedTuple):
    """One statement as the C loop reads it (its struct Plan): the prepared statement's name, the text with $1..
    placeholders, which of the transaction's parameters each placeholder takes, and for the simple protocol the
    text split at them (inline_pieces; None: sent as it is)."""

    key: bytes
    text: bytes
    refs: tuple[int, ...]
    pieces: tuple | None


class Draw(NamedTuple):
    """One parameter the C loop draws itself: kind 0 uniform over [low, low + span) with `bits` random bits a try,
    1 the constant text `constant` (None: NULL)."""

    kind: int
    low: int
    span: int
    bits: int
    constant: bytes | None


class DrawSpec(NamedTuple):
    """A session's draws for the C loop: the state of its random.Random (getstate()[1]; None when nothing is
    uniform) and one Draw a parameter."""

    state: tuple[int, ...] | None
    draws: tuple[Draw, ...]


@dataclass(frozen=True)
class Failures:
    """What the C loop is given to name a failure and decide what follows (read by attribute when it starts): the
    class of a lost connection, the classes worth a retry, and the engine's functions that name a failure, the
    ones the pure loop calls."""

    connection: str
    retryable: frozenset[str]
    connection_failure: Callable[[bytes], tuple]
    result_failure: Callable[[bytes | None, bytes, bool], tuple]


FAILURES = Failures(CONNECTION, frozenset(RETRYABLE), pg.connection_failure, pg.result_failure)


def foreign(module) -> str:
    """How `module` (a build of the extension) differs from the seam this install speaks; "" when it does not."""
    interface = getattr(module, "INTERFACE", None)
    if interface is None:
        return "it has no INTERFACE: built before it"
    found = seam.differences(getattr(module, "LAYOUTS", None))
    if interface != seam.INTERFACE:
        found.append(f"it is interface {interface}, the structs here are stamped for {seam.INTERFACE}")
    if tuple(getattr(module, "PROTOCOLS", ())) != pg.PROTOCOLS:
        found.append(f"its protocols are {', '.join(getattr(module, 'PROTOCOLS', ())) or 'none'}, the engine's "
                     f"{', '.join(pg.PROTOCOLS)}")
    return "; ".join(found)


def bind() -> str:
    """Point the extension at psycopg's libpq; the file it resolved to. RuntimeError when it cannot."""
    if _fastloop is None:
        raise RuntimeError(f"the extension concurbench.workload._fastloop cannot be loaded ({seam.WHY}: "
                           f"the install had no C compiler or Python headers?)")
    why = foreign(_fastloop)
    if why:
        raise RuntimeError(f"the extension concurbench.workload._fastloop was built from other sources than this "
                           f"install's (an older checkout? {why}): rebuild it with `pip install -e .` or `python "
                           f"setup.py build_ext --inplace`")
    if not _bound:
        impl = psycopg.pq.__impl__
        path = getattr(sys.modules.get(psycopg.pq.PGconn.__module__), "__file__", None)
        if impl not in ("binary", "c") or not path:
            raise RuntimeError(f"psycopg's {impl} implementation has no compiled libpq module to bind to; "
                               f"install psycopg[binary] or psycopg[c]")
        _bound.append(_fastloop.bind(path, psycopg.pq.version()))
    return _bound[0]


def unavailable(engine: str) -> str | None:
    """Why the compiled loop cannot run here, or None when it can."""
    if not spec(engine).compiled_loop:
        return f"the compiled loop drives PostgreSQL only, not {spec(engine).display}"
    try:
        bind()
    except RuntimeError as exc:
        return str(exc)
    return None


def wait() -> str:
    """How the compiled loop waits for a due time here: the best of WAITS that works, or the one
    CONCURBENCH_LOOP_WAIT names. RuntimeError when that one is unknown or does not work here."""
    works = _fastloop.waits()
    asked = os.environ.get(WAIT_ENV, "")
    if not asked:
        return works[0]
    if asked not in WAITS:
        raise RuntimeError(f"{WAIT_ENV}={asked}: not a wait of the compiled loop (one of {', '.join(WAITS)})")
    if asked not in works:
        raise RuntimeError(f"{WAIT_ENV}={asked}: that wait does not work here (these do: {', '.join(works)})")
    return asked


def resolve(requested: str, engine: str) -> str:
    """The loop to run: "compiled" or "python"."""
    if requested not in LOOPS:
        raise RunError(f"unknown event loop '{requested}': one of {', '.join(LOOPS)}")
    if requested == "python":
        return "python"
    why = unavailable(engine)
    if why is None:
        try:
            wait()
        except RuntimeError as exc:
            raise RunError(f"the compiled event loop cannot run: {exc}") from None
        return "compiled"
    if requested == "compiled":
        raise RunError(f"the compiled event loop cannot run: {why}")
    return "python"


def describe(requested: str, engine: str = "postgres") -> str:
    """One line for people: which loop `requested` gives here, and why."""
    if requested == "python":
        return "pure Python loop"
    why = unavailable(engine)
    if why is None:
        try:
            how = f"waiting with {wait()}"
        except RuntimeError as exc:
            how = f"but it cannot run: {exc}"
        return f"compiled loop over {bind()}, {how}"
    return f"pure Python loop ({why})" if requested == "auto" else f"unavailable: {why}"


class _Glue:
    """One Python session as the C loop sees it: what it reads when it starts (`spec`, a seam.SESSION; `plans`;
    `pace`, its pool's exported schedule or None; `draws`, a DrawSpec or None), the rare steps it calls back for,
    and the hand-back at the end (`sync`)."""

    def __init__(self, session: Session, window, exported: bytes | None):
        """`exported`: the session's pool's Pace.export (one object a pool, which its sessions share)."""
        self.session = session
        self.window = window
        self.latencies = [session.stats.statement(name) for name in session.names]
        self._draws = [draw for _name, draw in session.drawers]
        s = session
        channel = s.channel
        names = [name for name, _ in s.pool.params]
        plans = []
        for key, text, order in channel.plans:
            refs = tuple(names.index(name) for name in order)
            pieces = inline_pieces(text, refs) if s.pool.protocol == "simple" and order else None
            plans.append(Plan(key, text, refs, pieces))
        self.plans = tuple(plans)
        self.pace = exported
        self.draws = draw_spec(s)
        self.spec = SESSION.pack(
            conn=channel.pgconn.pgconn_ptr, fd=s.fd, slot=s.slot, protocol=pg.PROTOCOLS.index(s.pool.protocol),
            n_params=len(names), n_statements=len(plans), max_tries=s.pool.max_tries, index=s.index,
            paced=int(s.paced), think=s.think, transactions=-1 if s.limit is None else s.limit,
            latency_limit=s.latency_limit)

    # -- called from C ----------------------------------------------------------------
    def draw(self) -> tuple:
        text = pg._text
        return tuple([text(draw()) for draw in self._draws])

    def drain(self, txn: bytes, ends: bytes, statements: tuple, retries: int, lags: bytes, late: int,
              skipped: int) -> None:
        stats = self.session.stats
        stats.lag.pending.frombytes(lags)
        stats.late += late
        stats.skipped += skipped
        stats.txn.pending.frombytes(txn)
        stats.ends.frombytes(ends)
        for lat, data in zip(self.latencies, statements):
            lat.pending.frombytes(data)
        stats.retries += retries
        if len(stats.ends) >= FLUSH_AT:
            stats.flush()

    def failed(self, failure: tuple, retries: int, now: int) -> None:
        self.session.count_failure(failure, retries, now)

    def drop(self) -> None:
        self.session.close()
        self.session.channel = None

    def reconnect(self):
        s = self.session
        if not s._reconnect():
            now = time.perf_counter_ns()
            if s.refused_since and now - s.refused_since >= REFUSED_FOR_NS:
                self.window[END] = min(self.window[END], now)  # as pool._loop does: the load stops for every worker
            return None
        return s.channel.pgconn.pgconn_ptr, s.fd

    def done(self, counted: int, finished: int) -> None:
        self.session.counted, self.session.finished = counted, finished
        self.session.settle_stats()

    def sync(self, data: bytes, failure: tuple | None) -> None:
        """The loop has ended: leave the session as the pure loop would have. `data`: a seam.SYNC, then a byte a
        statement (1: prepared on the connection); `failure`: the one being handled, or None."""
        got = SYNC.read(data, exact=False)
        prepared = data[SYNC.size:]
        if len(prepared) != got["n_statements"]:
            raise ValueError(f"a SessionSync with {len(prepared)} statements' flags, not {got['n_statements']}")
        s = self.session
        for name in ("state", "counted", "finished", "step", "attempt", "retries", "t0", "s0", "wake_at"):
            setattr(s, name, got[name])  # session.py's fields of the same names
        if failure is not None:
            s.failure = failure
        channel = s.channel
        if channel is not None and got["connected"]:
            channel._pending = channel._error = None
            channel.prepared.update(plan[0] for plan, flag in zip(channel.plans, prepared) if flag)


def draw_spec(session: Session) -> DrawSpec | None:
    """What the C loop needs to draw the session's parameters itself, or None when Python must draw them.

    Every parameter uniform or constant: the state of the session's random.Random, which the C loop
    continues word for word, so both loops draw the same values, and a Draw a parameter. Any other
    distribution (zipfian, sequence) leaves all the session's drawing to Python: a zipfian draw takes
    from the same generator, so splitting the draws between the loops would change their order and the
    values.
    """
    draws = []
    for _name, dist in session.pool.params:
        if dist.kind == "constant":
            draws.append(Draw(1, 0, 0, 0, pg._text(dist.args[0])))
        elif dist.kind == "uniform" and -(1 << 63) <= dist.args[0] <= dist.args[1] < (1 << 63):
            span = dist.args[1] - dist.args[0] + 1
            if span >= 1 << 64:
                return None
            draws.append(Draw(0, dist.args[0], span, span.bit_length(), None))
        else:
            return None
    if not draws:
        return None
    uniform = any(draw.kind == 0 for draw in draws)
    return DrawSpec(session.rng.getstate()[1] if uniform else None, tuple(draws))


def inline_pieces(text: bytes, refs: tuple[int, ...]) -> tuple:
    """The simple protocol's statement for the C loop: (text, parameter index, text, ..., text).

    The text is split at the placeholders postgres._inline replaces ($1 is refs[0]); one beyond the
    statement's parameters stays text.
    """
    out: list = [b""]
    for i, part in enumerate(_PLACEHOLDER.split(text)):
        if i % 2 == 0:
            out[-1] += part
        elif 0 < int(part) <= len(refs):
            out += [refs[int(part) - 1], b""]
        else:
            out[-1] += b"$" + part
    return tuple(out)


def run(sessions: list[Session], window, status, finished, slot_done: int, how: str = "") -> None:
    """Step every session until the window ends or all are done, as pool._loop does; `how`: the wait for a due
    time (one of WAITS; empty: wait() here)."""
    bind()
    if not sessions:
        return
    paces = {id(s.pace): s.pace for s in sessions if s.pace is not None}
    exported = {key: pace.export() for key, pace in paces.items()}  # once per Pace: the sessions of a pool share it
    glues = [_Glue(s, window, exported.get(id(s.pace))) for s in sessions]
    env = ENV.pack(running=RUNNING, rolling_back=ROLLING_BACK, thinking=THINKING, done=DONE, slot_done=slot_done,
                   wait=WAITS.index(how or wait()))
    _fastloop.run(glues, window, status, finished, sessions[0].counter, env, FAILURES)
