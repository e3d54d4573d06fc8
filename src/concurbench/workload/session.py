"""One client session as a small state machine, stepped by its worker process's event loop.

A worker process drives many sessions from one thread, as pgbench's threads do: it sends a
statement, waits on all sockets at once, and steps whichever session has an answer. Statement
times of a transaction are kept in a short list and recorded only when the transaction completes
inside the measurement window, so warm-up and cut-off transactions never reach the statistics.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass

from ..engines import postgres as pg
from ..engines.classes import CONNECTION, RETRYABLE, SUCCESS, refused
from ..scenario.model import Pool
from .distributions import make_drawer
from .stats import PoolStats

FAR_FUTURE = 1 << 62
# The load window every worker process shares (a multiprocessing RawArray('q', 3), a list in tests): perf_counter
# nanoseconds of the loop's start, of the measurement's start, and of its end (moved earlier to stop the load).
START, MEASURE_FROM, END = 0, 1, 2
FLUSH_AT = 65_536  # pending transactions in a pool's buffers that make the hot loop flush them

# What a session is doing.
IDLE, RUNNING, ROLLING_BACK, THINKING, DONE = range(5)

# A session whose reconnects the server has refused this long ("too many clients") stops the load: the
# figures would no longer be those of the configured client count, and waiting for the window's end
# would only repeat the refusal.
REFUSED_FOR_NS = 1_000_000_000


def application_name(pool: str) -> str:
    """What a pool's sessions call themselves on the server (samplers wait for them to leave)."""
    return f"concurbench:{pool}"


@dataclass
class Session:
    """One client. Sessions of a pool in one worker process may share one PoolStats (`stats`): the hot
    loop only appends to its buffers (a transaction's values together, so they stay aligned), and one
    set of histograms per pool is far smaller than one per session."""

    def __init__(self, conninfo: str, pool: Pool, index: int, seed: int, counter, slot: int, engine=pg,
                 stats: PoolStats | None = None, clock=time.perf_counter_ns):
        self.clock = clock  # nanoseconds; a test drives the state machine with its own
        self.conninfo = conninfo
        self.engine = engine  # the engine module: postgres or sqlserver
        self.pool = pool
        self.index = index
        self.seed = seed
        self.counter = counter  # shared array: completed measured transactions per session
        self.slot = slot
        self.rng = rng = random.Random(f"{seed}:{pool.name}:{index}")  # the compiled loop may draw from it too
        self.drawers = [(name, make_drawer(dist, rng, index, pool.clients or 1)) for name, dist in pool.params]
        statements = [(st.name, st.sql) for st in pool.transaction]
        if pool.atomic:
            statements = [("begin", engine.BEGIN), *statements, ("commit", engine.COMMIT)]
        self.names = [name for name, _ in statements]
        self.statements = statements
        self.stats = stats if stats is not None else PoolStats(pool.name)
        self.stats.sessions += 1
        self._settled = 0  # transactions already added to stats.transactions
        self.conn = None
        self.channel = None
        self.state = IDLE
        self.fd = -1
        self.counted = 0  # successful transactions in the window
        self.finished = 0  # successful or failed for good, in the window (for `transactions:`)
        self.wake_at = 0
        self.n_statements = len(self.names)
        self.limit = pool.transactions
        self.think = int(pool.think * 1e9)
        self.measure_from = 0  # set by the worker loop from the shared window
        self._txn_append = self.stats.txn.pending.append
        self._ends = self.stats.ends  # completion times, for the per-interval series
        self._end_append = self._ends.append
        self._appends = [self.stats.statement(name).pending.append for name in self.names]
        self._lag_append = self.stats.lag.pending.append
        self._timings: list[int] = []
        self.refused_since = 0  # perf_counter ns of the first of this session's reconnects the server refused
        self.refusal = ""  # what the server said
        self._reconnect_failure = "connection: cannot reconnect"
        self.pace = None  # timed pools: the pool's schedule.Pace in this worker, set when the window opens
        self.paced = pool.paced
        self.due = -1  # an arrival taken from the pace and waited for; -1: none
        self.lag = 0  # this transaction's first send minus its due time
        self.latency_limit = int((pool.latency_limit or 0) * 1e9)

    # -- connection ---------------------------------------------------------
    def connect(self) -> None:
        engine = self.engine
        self.conn = engine.connect(self.conninfo, application_name=application_name(self.pool.name))
        for sql in self.pool.init:
            engine.init(self.conn, sql)
        self.channel = engine.statement_channel(self.conn, self.statements, [n for n, _ in self.pool.params],
                                              self.pool.protocol)
        self.fd = self.channel.fileno()

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.conn = None

    def _reconnect(self) -> bool:
        self.close()
        try:
            self.connect()
            self.refused_since = 0
            return True
        except Exception as exc:  # noqa: BLE001 - counted as a connection error; tried again next transaction
            self.channel = None
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1].strip()
            reason = reason.rsplit("FATAL:", 1)[-1].strip() or reason  # the server's own words, when it spoke
            self._reconnect_failure = f"connection: cannot reconnect: {re.sub(r'[0-9]+', 'N', reason)[:160]}"
            if refused(str(exc)):
                self.refused_since = self.refused_since or self.clock()
                self.refusal = reason
            return False

    def open_window(self, measure_from: int) -> None:
        """The worker loop starts: transactions completing from `measure_from` on are counted."""
        self.measure_from = self.stats.origin_ns = measure_from

    # -- stepping -------------------------------------------------------------
    # The success path (readable -> next statement, or _complete -> begin) is the hot loop of the
    # load generator: it reads the shared window once, appends to preallocated buffers, and makes
    # no call it can avoid.
    def begin(self, now: int, window) -> None:
        """Start the next transaction, or finish when the window or the transaction count says so."""
        if now >= window[END] or (self.limit is not None and self.finished >= self.limit):
            self.state = DONE
            return
        due = now
        if self.pace is not None:
            due, self.due = self.due, -1
            if due < 0:
                when, due = self.pace.take(self.index, now, window[END])
                if when != now:
                    self._wait(when, due)
                    return
        # The transaction's time includes drawing its parameters, its first statement's not; with a rate
        # it runs from the due time (coordinated-omission-correct), and the lag is kept apart.
        self.t0 = due
        if self.drawers:
            self.params = {name: draw() for name, draw in self.drawers}
            now = self.clock()
        else:
            self.params = None
        self.lag = now - due
        self.attempt = 0
        self.retries = 0
        self._start_attempt(now, window)

    def _wait(self, when: int, due: int) -> None:
        """The pace said to wait until `when` (FAR_FUTURE: never again) for the arrival `due` (-1: to ask again)."""
        if when >= FAR_FUTURE:
            self.state = DONE
        else:
            self.due = due
            self.state = THINKING
            self.wake_at = when

    def _start_attempt(self, now: int, window) -> None:
        if self.channel is None and not self._reconnect():
            self._finish(now, window, (CONNECTION, self._reconnect_failure))
            return
        self._timings.clear()
        self.step = 0
        self.s0 = now
        self.state = RUNNING
        self.channel.send(0, self.params)

    def readable(self, now: int, window) -> None:
        """The socket has data: advance as far as the answers allow."""
        channel = self.channel
        outcome = channel.receive()
        if outcome is None:
            return
        if outcome is not SUCCESS or self.state != RUNNING:
            self._slow_path(outcome, now, window)
            return
        timings = self._timings
        timings.append(now - self.s0)
        step = self.step + 1
        if step < self.n_statements:
            self.step = step
            self.s0 = now
            channel.send(step, self.params)
            return
        # The transaction is complete; record it, then start the next one right here.
        if self.measure_from <= now <= window[END]:
            self.finished += 1
            counted = self.counted = self.counted + 1
            self._txn_append(now - self.t0)
            self._end_append(now)
            for append, ns in zip(self._appends, timings):
                append(ns)
            self.counter[self.slot] = counted
            if self.retries:
                self.stats.retries += self.retries
            if self.paced:
                self._lag_append(self.lag)
                if self.latency_limit and now - self.t0 > self.latency_limit:
                    self.stats.late += 1
            if len(self._ends) >= FLUSH_AT:
                self.stats.flush()
        if self.think or now >= window[END] or (self.limit is not None and self.finished >= self.limit):
            self._complete(now, window)
            return
        # A timed pool starts here too when its next arrival is already due (Pace.take: one call, whose common
        # case is a pop() from the arrivals it drew ahead).
        due = now
        pace = self.pace
        if pace is not None:
            when, due = pace.take(self.index, now, window[END])
            if when != now:
                self._wait(when, due)
                return
        drawers = self.drawers
        self.attempt = self.retries = self.step = 0
        self.t0 = due
        if drawers:
            self.params = params = {name: draw() for name, draw in drawers}
            self.s0 = now = self.clock()
        else:
            self.params = params = None
            self.s0 = now
        self.lag = now - due
        timings.clear()
        channel.send(0, params)

    def _slow_path(self, outcome, now: int, window) -> None:
        """A failure, or the answer to a ROLLBACK."""
        if self.state == ROLLING_BACK:
            self._after_rollback(now, window)
            return
        self.failure = outcome
        if outcome[0] == CONNECTION:
            self.close()
            self.channel = None
        elif self.channel.in_transaction():
            self.state = ROLLING_BACK
            self.channel.send_rollback()
            return
        self._after_rollback(now, window)

    def _complete(self, now: int, window) -> None:
        """After a recorded transaction: think, stop, or begin the next."""
        if self.think:
            self.state = THINKING
            self.wake_at = now + self.think
            return
        self.begin(now, window)

    def _after_rollback(self, now: int, window) -> None:
        kind = self.failure[0]
        if kind in RETRYABLE and self.attempt + 1 < self.pool.max_tries:
            self.attempt += 1
            self.retries += 1
            self._start_attempt(now, window)
            return
        self._finish(now, window, self.failure)

    def _finish(self, now: int, window, failure) -> None:
        """End a transaction that failed for good (after its tries)."""
        if self.measure_from <= now <= window[END]:
            self.finished += 1  # a failed transaction counts toward `transactions:` too, as in pgbench -t
            self.count_failure(failure, self.retries, now)
        if failure[0] == CONNECTION:
            self.state = THINKING  # back off before reconnecting
            self.wake_at = now + 100_000_000
            return
        if self.think:
            self.state = THINKING
            self.wake_at = now + self.think
            return
        self.begin(now, window)

    def count_failure(self, failure, retries: int, now: int) -> None:
        """A transaction that failed for good inside the window (the compiled loop calls this too)."""
        stats = self.stats
        stats.retries += retries
        stats.failed += 1
        stats.errors[failure[0]] += 1
        stats.error_messages[failure[1]] += 1
        stats.failed_ends.append(now)

    # -- shutdown ---------------------------------------------------------------
    def settle_stats(self) -> PoolStats:
        """Bring the statistics up to date (the hot loop only appends to buffers); any number of times."""
        self.stats.transactions += self.counted - self._settled
        self._settled = self.counted
        self.stats.flush()
        return self.stats

    def busy(self) -> bool:
        return self.state in (RUNNING, ROLLING_BACK)
