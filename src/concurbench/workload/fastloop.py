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
"""

from __future__ import annotations

import os
import re
import sys
import time

import psycopg

from ..engines.registry import spec
from ..engines import postgres as pg
from ..engines.classes import CONNECTION, RETRYABLE
from ..errors import RunError
from . import schedule
from .session import DONE, END, FLUSH_AT, REFUSED_FOR_NS, ROLLING_BACK, RUNNING, THINKING, Session

try:
    from . import _fastloop
except ImportError as exc:  # not built (no compiler at install), or built for another Python
    _fastloop = None
    _IMPORT_ERROR = "not built" if "_fastloop" in str(exc) and "cannot import name" in str(exc) else str(exc)

LOOPS = ("auto", "python", "compiled")
INTERFACE = 7  # the extension's, as its INTERFACE constant: a build of older sources has another (or none)
PROTOCOLS = {"prepared": 0, "extended": 1, "simple": 2}
_PLACEHOLDER = re.compile(rb"\$(\d+)")
# how the compiled loop waits for a due time, best first (its WAIT_NAMES): a timeout in nanoseconds, a timer
# armed for the due time, whole milliseconds rounded up (the last resort)
WAITS = ("epoll_pwait2", "timerfd", "epoll_wait")
WAIT_ENV = "CONCURBENCH_LOOP_WAIT"
_bound: list[str] = []  # the libpq file the extension calls, once bound in this process


def bind() -> str:
    """Point the extension at psycopg's libpq; the file it resolved to. RuntimeError when it cannot."""
    if _fastloop is None:
        raise RuntimeError(f"the extension concurbench.workload._fastloop cannot be loaded ({_IMPORT_ERROR}: "
                           f"the install had no C compiler or Python headers?)")
    if (getattr(_fastloop, "INTERFACE", 1), getattr(_fastloop, "PACE_LAYOUT", 0)) != (INTERFACE, schedule.LAYOUT):
        raise RuntimeError("the extension concurbench.workload._fastloop was built from other sources than this "
                           "install's (an older checkout?): rebuild it with `pip install -e .` or `python setup.py "
                           "build_ext --inplace`")
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
    """What the C loop asks of one Python session: the rare steps, and the hand-back at the end."""

    def __init__(self, session: Session, window):
        self.session = session
        self.window = window
        self.latencies = [session.stats.statement(name) for name in session.names]
        self.draws = [draw for _name, draw in session.drawers]

    def spec(self, exported: bytes | None) -> tuple:
        """The session as the C loop reads it; `exported`: its pool's Pace.export (one object per pool)."""
        s = self.session
        channel = s.channel
        names = [name for name, _ in s.pool.params]
        plans = []
        for key, text, order in channel.plans:
            refs = tuple(names.index(name) for name in order)
            pieces = inline_pieces(text, refs) if s.pool.protocol == "simple" and order else None
            plans.append((key, text, refs, pieces))
        limit = -1 if s.limit is None else s.limit
        return (self, channel.pgconn.pgconn_ptr, s.fd, s.slot, PROTOCOLS[s.pool.protocol], tuple(plans), len(names),
                s.think, limit, s.pool.max_tries, exported, s.index, int(s.paced), s.latency_limit, draw_spec(s))

    # -- called from C ----------------------------------------------------------------
    def draw(self) -> tuple:
        text = pg._text
        return tuple([text(draw()) for draw in self.draws])

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

    def sync(self, state, counted, finished, step, attempt, retries, t0, s0, wake_at, failure, prepared,
             connected) -> None:
        """The loop has ended: leave the session as the pure loop would have."""
        s = self.session
        s.state, s.counted, s.finished, s.step, s.attempt, s.retries = state, counted, finished, step, attempt, retries
        s.t0, s.s0, s.wake_at = t0, s0, wake_at
        if failure is not None:
            s.failure = failure
        channel = s.channel
        if channel is not None and connected:
            channel._pending = channel._error = None
            channel.prepared.update(channel.plans[i][0] for i in prepared)


def draw_spec(session: Session):
    """What the C loop needs to draw the session's parameters itself, or None when Python must draw them.

    Every parameter uniform or constant: (the state of the session's random.Random, which the C loop
    continues word for word, so both loops draw the same values; ((kind, low, span, bits, constant
    text), ...)) with kind 0 uniform, 1 constant. Any other distribution (zipfian, sequence) leaves all
    the session's drawing to Python: a zipfian draw takes from the same generator, so splitting the
    draws between the loops would change their order and the values.
    """
    draws = []
    for _name, dist in session.pool.params:
        if dist.kind == "constant":
            draws.append((1, 0, 0, 0, pg._text(dist.args[0])))
        elif dist.kind == "uniform" and -(1 << 63) <= dist.args[0] <= dist.args[1] < (1 << 63):
            span = dist.args[1] - dist.args[0] + 1
            if span >= 1 << 64:
                return None
            draws.append((0, dist.args[0], span, span.bit_length(), None))
        else:
            return None
    if not draws:
        return None
    uniform = any(kind == 0 for kind, *_ in draws)
    return (session.rng.getstate()[1] if uniform else None), tuple(draws)


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
    specs = [_Glue(s, window).spec(exported.get(id(s.pace))) for s in sessions]
    env = (RUNNING, ROLLING_BACK, THINKING, DONE, slot_done, CONNECTION, frozenset(RETRYABLE), pg.connection_failure,
           pg.result_failure, WAITS.index(how or wait()))
    _fastloop.run(specs, window, status, finished, sessions[0].counter, env)
