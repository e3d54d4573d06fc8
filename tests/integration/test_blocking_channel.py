"""The thread-per-session statement channel that SQL Server's pyodbc sessions use, driven by the real
worker loop against a real PostgreSQL through psycopg's blocking calls.

pyodbc and a SQL Server cannot run here; psycopg's blocking cursor is a DB-API driver like pyodbc,
so this exercises everything of the SQL Server path but the driver itself: the pipe that wakes the
epoll loop, transactions, error outcomes and rollbacks, cancelling at the end of the window.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace

import pytest

from concurbench.engines import postgres as pg
from concurbench.engines.blocking import BlockingChannel, Dialect, placeholders
from concurbench.scenario.model import Pool, Statement
from concurbench.scenario.distributions import parse_distribution
from concurbench.workload.pool import _loop
from concurbench.workload.session import Session
from concurbench.workload.window_end import end_sessions

DIALECT = Dialect(marker="%s", begin="BEGIN", commit="COMMIT", rollback="ROLLBACK", classify=pg.classify,
                  error_key=pg.error_key, cancel=lambda conn, cursor: conn.cancel())

BLOCKING_PG = SimpleNamespace(
    BEGIN="BEGIN", COMMIT="COMMIT", connect=pg.connect, init=pg.init,
    statement_channel=lambda conn, statements, params, protocol: BlockingChannel(conn, statements, params,
                                                                                 DIALECT))


def run_sessions(conninfo, pool: Pool, seconds: float, warmup: float = 0.0, engine=BLOCKING_PG, counters=None):
    n = pool.clients
    counters = counters if counters is not None else [0] * n
    status, finished = [0] * n, [0] * n
    sessions = [Session(conninfo, pool, i, 7, counters, i, engine) for i in range(n)]
    for s in sessions:
        s.connect()
    now = time.perf_counter_ns()
    window = [now + 50_000_000, now + 50_000_000 + int(warmup * 1e9), now + int((0.05 + warmup + seconds) * 1e9)]
    try:
        _loop(sessions, window, status, finished)
    finally:
        end_sessions(sessions)
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


@contextlib.contextmanager
def row_held(conninfo: str):
    """Another session holds row k = 1 of blocking_counts (an open transaction) until the block ends."""
    holder = pg.connect(conninfo)
    try:
        holder.execute("BEGIN")
        holder.execute("UPDATE blocking_counts SET n = n WHERE k = 1")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def blocked_pool(transactions: int) -> Pool:
    """Two sessions bumping the held row with a 50 ms lock_timeout: every transaction fails."""
    return Pool("blocked", 2, (Statement("bump", "UPDATE blocking_counts SET n = n + 1 WHERE k = 1"),),
                atomic=True, transactions=transactions, init=("SET lock_timeout = '50ms'",))


def test_errors_are_classified_and_rolled_back(server, admin, counters_table):
    """A row held by another session and a 50 ms lock_timeout: every transaction fails as lock_not_available."""
    with row_held(server[1].conninfo):
        stats = run_sessions(server[1].conninfo, blocked_pool(3), seconds=30)
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


@pytest.mark.parametrize("engine", [BLOCKING_PG, pg], ids=["blocking", "libpq"])
def test_sessions_reconnect_after_their_backends_are_killed(server, admin, engine):
    """Both channels: a killed connection is a connection error, the session reconnects and goes on
    (the new socket may get the old one's fd number; the loop must watch it again all the same)."""
    pool = Pool("sleepers", 2, (Statement("nap", "SELECT pg_sleep(0.005)"),))
    counters = [0, 0]
    at_kill: list[int] = []

    def kill():
        deadline = time.monotonic() + 2.0  # kill once the sessions have done some work (or at the latest after 2 s)
        while sum(counters) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        at_kill.append(sum(counters))
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
                      "'concurbench:sleepers'")

    killer = threading.Thread(target=kill)
    killer.start()
    stats = run_sessions(server[1].conninfo, pool, seconds=3.0, engine=engine, counters=counters)
    killer.join()
    assert stats.errors["connection"] >= 1
    assert at_kill and stats.transactions > at_kill[0] + 20  # work went on after the kill


def _odbc_postgres(conninfo: str) -> str | None:
    """An ODBC string for the test server through psqlODBC, or None when pyodbc or the driver is missing."""
    try:
        import pyodbc
    except ImportError:
        return None
    if "PostgreSQL Unicode" not in pyodbc.drivers():
        return None
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(conninfo)
    return (f"Driver={{PostgreSQL Unicode}};Server={parts.get('host', '127.0.0.1')};Port={parts.get('port', 5432)};"
            f"Database={parts['dbname']};Uid={parts['user']};Pwd={{{parts.get('password', '')}}};")


def _pyodbc_pg_engine():
    """The SQL Server engine's pieces (pyodbc connections, `?` markers, SQLCancel from another thread) with
    PostgreSQL's transaction words and SQLSTATE classes, through the psqlODBC driver."""
    import pyodbc

    from concurbench.engines.odbc import error_key

    def classify(exc):
        state = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
        return pg.classify_sqlstate(state) if state and state != "HY000" else "other"

    dialect = Dialect(marker="?", begin="BEGIN", commit="COMMIT", rollback="ROLLBACK", classify=classify,
                      error_key=error_key, cancel=lambda conn, cursor: cursor.cancel())
    return SimpleNamespace(
        BEGIN="BEGIN", COMMIT="COMMIT",
        connect=lambda conninfo, application_name="": pyodbc.connect(conninfo, autocommit=True),
        init=lambda conn, sql: conn.execute(sql),
        statement_channel=lambda conn, statements, params, protocol: BlockingChannel(conn, statements,
                                                                                     params, dialect))


def test_pyodbc_sessions_through_odbc_run_commit_fail_and_cancel(server, admin, counters_table):
    """pyodbc itself (the SQL Server engine's driver) against PostgreSQL via psqlODBC: `?` parameters,
    transactions, a lock timeout classified by SQLSTATE and rolled back, SQLCancel at the end."""
    conn_str = _odbc_postgres(server[1].conninfo)
    if conn_str is None:
        pytest.skip("pyodbc or psqlODBC ('PostgreSQL Unicode', Debian package odbc-postgresql) is not installed")
    engine = _pyodbc_pg_engine()
    pool = Pool("writers", 3, (Statement("bump", "UPDATE blocking_counts SET n = n + 1 WHERE k = :k"),
                               Statement("read", "SELECT n, :k AS k FROM blocking_counts WHERE k = :k")),
                params=(("k", parse_distribution("uniform(2, 10)")),), atomic=True, transactions=40)
    stats = run_sessions(conn_str, pool, seconds=60, engine=engine)
    assert stats.transactions == 120 and stats.failed == 0
    assert admin.execute("SELECT sum(n) FROM blocking_counts").fetchone()[0] == 120

    with row_held(server[1].conninfo):
        failed = run_sessions(conn_str, blocked_pool(2), seconds=30, engine=engine)
    assert failed.failed == 4 and failed.errors["lock_not_available"] == 4

    started = time.monotonic()
    sleepers = run_sessions(conn_str, Pool("sleepers", 2, (Statement("sleep", "SELECT pg_sleep(30)"),)),
                            seconds=0.5, engine=engine)
    assert time.monotonic() - started < 10 and sleepers.transactions == 0
    assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' "
                         "AND state = 'active'").fetchone()[0] == 0
    assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'").fetchone()[0] == 0
