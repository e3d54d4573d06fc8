"""One client session: connect, then run its pool's transaction in a loop inside the time window.

The hot loop does only what it must: draw parameters, execute, read the clock. Statement times
of a transaction are kept in a short list and recorded only when the transaction completes inside
the measurement window, so warm-up and cut-off transactions never reach the statistics.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import psycopg

from ..engines import postgres as pg
from ..scenario.model import Pool
from .distributions import make_drawer
from .stats import PoolStats

FAR_FUTURE = 1 << 62


@dataclass
class Window:
    """Shared clock values in perf_counter nanoseconds: [start, measure_from, end]."""

    shared: object  # a multiprocessing RawArray('q', 3) or a plain list in tests

    def start(self) -> int:
        return self.shared[0]

    def measure_from(self) -> int:
        return self.shared[1]

    def end(self) -> int:
        return self.shared[2]


class Session:
    def __init__(self, conninfo: str, pool: Pool, index: int, seed: int, counter, slot: int):
        self.conninfo = conninfo
        self.pool = pool
        self.index = index
        self.counter = counter  # shared array: completed measured transactions per session
        self.slot = slot
        rng = random.Random(f"{seed}:{pool.name}:{index}")
        clients = pool.clients or 1
        self.drawers = [(name, make_drawer(dist, rng, index, clients)) for name, dist in pool.params]
        statements = [(st.name, st.sql) for st in pool.transaction]
        if pool.atomic:
            statements = [("begin", "BEGIN"), *statements, ("commit", "COMMIT")]
        self.names = [name for name, _ in statements]
        self.statements = statements
        self.stats = PoolStats(pool.name, sessions=1)
        self.conn: psycopg.Connection | None = None
        self.runner: pg.StatementRunner | None = None

    def connect(self) -> None:
        self.conn = pg.connect(self.conninfo, application_name=f"concurbench:{self.pool.name}")
        self.runner = pg.StatementRunner(self.conn, self.statements, [n for n, _ in self.pool.params],
                                         self.pool.protocol)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error:
                pass

    def _reconnect(self) -> None:
        self.close()
        try:
            self.connect()
        except Exception:  # noqa: BLE001 - counted by the caller, retried next transaction
            self.conn = None
            time.sleep(0.1)

    def run(self, window: Window) -> PoolStats:
        """Loop until the window ends or the pool's per-client transaction count is reached."""
        clock = time.perf_counter_ns
        while window.start() == 0:
            time.sleep(0.0005)
        delay = window.start() - clock()
        if delay > 0:
            time.sleep(delay / 1e9)
        stats = self.stats
        pool = self.pool
        limit = pool.transactions
        shared = window.shared
        measure_from = shared[1]
        counter, slot = self.counter, self.slot
        txn_record = stats.txn.record
        stmt_records = [stats.statement(name).record for name in self.names]
        counted = 0
        timings: list[int] = []
        think = pool.think
        while True:
            now = clock()
            if now >= shared[2] or (limit is not None and counted >= limit):
                break
            params = {name: draw() for name, draw in self.drawers} if self.drawers else None
            t0 = now
            failure, retries = self._transaction(params, timings, clock)
            t1 = clock()
            if think:
                time.sleep(think)
            if not measure_from <= t1 <= shared[2]:
                continue
            if failure is None:
                counted += 1
                txn_record(t1 - t0)
                for record, ns in zip(stmt_records, timings):
                    record(ns)
                counter[slot] = counted
                if not counted & 4095:
                    stats.flush()
            else:
                stats.retries += retries
                stats.failed += 1
                stats.errors[failure[0]] += 1
                stats.error_messages[failure[1]] += 1
                continue
            stats.retries += retries
        stats.transactions += counted
        stats.flush()
        return stats

    def _transaction(self, params, timings, clock) -> tuple[tuple[str, str] | None, int]:
        """Run the transaction with up to max_tries attempts: (failure class and key or None, retries)."""
        retries = 0
        failure: tuple[str, str] = (pg.OTHER, "")
        for attempt in range(self.pool.max_tries):
            if self.conn is None or self.conn.closed or self.runner is None:
                self._reconnect()
                if self.conn is None:
                    return (pg.CONNECTION, "connection: cannot reconnect"), retries
            calls = self.runner.calls
            timings.clear()
            try:
                for index in range(len(calls)):
                    s0 = clock()
                    calls[index](params)
                    timings.append(clock() - s0)
                return None, retries
            except psycopg.Error as exc:
                kind = pg.classify(exc)
                failure = (kind, pg.error_key(exc))
                try:
                    self.runner.rollback()
                except psycopg.Error:
                    kind = pg.CONNECTION
                if kind == pg.CONNECTION:
                    self._reconnect()
                if kind in pg.RETRYABLE and attempt + 1 < self.pool.max_tries:
                    retries += 1
                    continue
                return failure, retries
        return failure, retries
