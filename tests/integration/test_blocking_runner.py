"""The thread-per-session statement runner that SQL Server's pyodbc sessions use, driven by the real
worker loop against a real PostgreSQL through psycopg's blocking calls.

pyodbc and a SQL Server cannot run here; psycopg's blocking cursor is a DB-API driver like pyodbc,
so this exercises everything of the SQL Server path but the driver itself: the pipe that wakes the
epoll loop, transactions, error outcomes and rollbacks, cancelling at the end of the window.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from concurbench.engines import postgres as pg
from concurbench.engines.blocking import BlockingStatementRunner, Dialect, placeholders
from concurbench.scenario.model import Pool, Statement
from concurbench.workload.distributions import parse_distribution
from concurbench.workload.pool import _loop
from concurbench.workload.session import Session

DIALECT = Dialect(marker="%s", begin="BEGIN", commit="COMMIT", rollback="ROLLBACK", classify=pg.classify,
                  error_key=pg.error_key, cancel=lambda conn, cursor: conn.cancel())

BLOCKING_PG = SimpleNamespace(
    BEGIN="BEGIN", COMMIT="COMMIT", connect=pg.connect, init=pg.init,
    statement_runner=lambda conn, statements, params, protocol: BlockingStatementRunner(conn, statements, params,
                                                                                        DIALECT))


def run_sessions(conninfo, pool: Pool, seconds: float, warmup: float = 0.0):
    n = pool.clients
    counters, status, finished = [0] * n, [0] * n, [0] * n
    sessions = [Session(conninfo, pool, i, 7, counters, i, BLOCKING_PG) for i in range(n)]
    for s in sessions:
        s.connect()
    now = time.perf_counter_ns()
    window = [now + 50_000_000, now + 50_000_000 + int(warmup * 1e9), now + int((0.05 + warmup + seconds) * 1e9)]
    try:
        _loop(sessions, window, status, finished)
    finally:
        for s in sessions:
            s.abandon()
            s.close()
    stats = sessions[0].settle_stats()
    for s in sessions[1:]:
        stats.merge(s.settle_stats())
    return stats


@pytest.fixture()
def counters_table(admin):
    admin.execute("DROP TABLE IF EXISTS blocking_counts")
    admin.execute("CREATE TABLE blocking_counts (k int PRIMARY KEY, n int NOT NULL)")
    admin.execute("INSERT INTO blocking_counts SELECT g, 0 FROM generate_series(1, 10) g")
    yield "blocking_counts"
    admin.execute("DROP TABLE IF EXISTS blocking_counts")


def test_placeholders_follow_every_use_of_a_name():
    text, order = placeholders("UPDATE t SET a = :a, b = :b WHERE k = :a AND s = '::text' AND x = @v", {"a", "b"}, "?")
    assert text == "UPDATE t SET a = ?, b = ? WHERE k = ? AND s = '::text' AND x = @v"
    assert order == ("a", "b", "a")


def test_fixed_count_of_atomic_transactions_commits_each_once(server, admin, counters_table):
    pool = Pool("writers", 4, (Statement("bump", "UPDATE blocking_counts SET n = n + 1 WHERE k = :k"),
                               Statement("read", "SELECT n FROM blocking_counts WHERE k = :k")),
                params=(("k", parse_distribution("uniform(1, 10)")),), atomic=True, transactions=50)
    stats = run_sessions(server[1].conninfo, pool, seconds=60)
    assert stats.transactions == 200 and stats.failed == 0
    assert admin.execute("SELECT sum(n) FROM blocking_counts").fetchone()[0] == 200
    assert stats.statement("bump").count == 200
    assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'").fetchone()[0] == 0


def test_errors_are_classified_and_rolled_back(server, admin, counters_table):
    """A row held by another session and a 50 ms lock_timeout: every transaction fails as lock_not_available."""
    holder = pg.connect(server[1].conninfo)
    try:
        holder.execute("BEGIN")
        holder.execute("UPDATE blocking_counts SET n = n WHERE k = 1")
        pool = Pool("blocked", 2, (Statement("bump", "UPDATE blocking_counts SET n = n + 1 WHERE k = 1"),),
                    atomic=True, transactions=3, init=("SET lock_timeout = '50ms'",))
        stats = run_sessions(server[1].conninfo, pool, seconds=30)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert stats.transactions == 0 and stats.failed == 6
    assert stats.errors["lock_not_available"] == 6
    assert any(key.startswith("55P03") for key in stats.error_messages)
    assert admin.execute("SELECT sum(n) FROM blocking_counts").fetchone()[0] == 0


def test_a_running_statement_is_cancelled_when_the_window_ends(server, admin):
    pool = Pool("sleepers", 2, (Statement("sleep", "SELECT pg_sleep(30)"),))
    started = time.monotonic()
    stats = run_sessions(server[1].conninfo, pool, seconds=0.5)
    assert time.monotonic() - started < 10
    assert stats.transactions == 0
    waiting = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' "
                            "AND state = 'active'").fetchone()[0]
    assert waiting == 0
