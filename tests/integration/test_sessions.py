"""The worker pool's sessions against a real PostgreSQL, once with each event loop.

Every test runs with the pure Python loop and with the compiled one (fastloop.py): counts,
protocols and parameters, errors, rollbacks and retries, reconnecting after the server drops a
connection, think times, the end of the window, and the per-interval series. Without the compiled
extension its half skips with the reason (a failure when CI=true: CI builds it).
"""

from __future__ import annotations

import json

import psycopg
import pytest

from concurbench.check.sides import side_data
from concurbench.results.metrics import nested, pool_figures
from concurbench.results.model import PoolResult, VariantRun
from concurbench.scenario.claims import Ref
from concurbench.scenario.model import Pool, Statement
from concurbench.scenario.distributions import Distribution, parse_distribution
from concurbench.workload import fastloop
from concurbench.workload.pool import MEASURE, LoadGenerator, LoadProgress
from concurbench.workload.session import Session

pytestmark = pytest.mark.integration


def run(server, pools, loop, *, duration=0.8, warmup=0.1, **kwargs):
    result = LoadGenerator(server[1].conninfo, pools, warmup=warmup, duration=duration, loop=loop, **kwargs).run()
    assert result.loop == loop
    return result


def params(**dists) -> tuple:
    return tuple((name, parse_distribution(d) if isinstance(d, str) else d) for name, d in dists.items())


def concurbench_sessions(admin) -> int:
    return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'concurbench:%%'"
                         ).fetchone()[0]


def assert_series_add_up(stats) -> None:
    series = stats.series
    assert int(series.count.sum()) == stats.transactions
    assert int(series.txn_ns.sum()) == stats.txn.total_ns
    assert int(series.failed.sum()) == stats.failed
    for name, lat in stats.statements.items():
        assert int(series.statement_ns[name].sum()) == lat.total_ns, name


@pytest.fixture()
def table(admin):
    admin.execute("DROP TABLE IF EXISTS loop_rows")
    admin.execute("CREATE TABLE loop_rows (session int, a bigint, b bigint, name text)")
    yield "loop_rows"
    admin.execute("DROP TABLE IF EXISTS loop_rows")


# -- counting ------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["prepared", "extended", "simple"])
def test_transactions_statements_and_series_add_up(server, admin, loop, protocol):
    pool = Pool("reads", 4, (Statement("one", "SELECT 1"), Statement("two", "SELECT 2; SELECT 3"
                                                                       if protocol == "simple" else "SELECT 2")),
                atomic=True, protocol=protocol)
    result = run(server, [pool], loop)
    stats = result.pools["reads"]
    assert not result.messages
    assert stats.transactions > 0 and stats.failed == 0
    assert stats.sessions == 4
    for name in ("begin", "one", "two", "commit"):
        assert stats.statements[name].count == stats.transactions, name
    assert_series_add_up(stats)
    assert len(stats.series.count) <= int((0.8 + 0.2) / 0.1) + 1  # 100 ms buckets over the window
    assert concurbench_sessions(admin) == 0


def test_fixed_count_per_client_is_exact(server, loop, table):
    pool = Pool("fixed", 3, (Statement("ins", "INSERT INTO loop_rows (session) VALUES (:s)"),),
                params=params(s="sequence(1)"), transactions=40)
    stats = run(server, [pool], loop, duration=30).pools["fixed"]
    assert stats.transactions == 120 and stats.failed == 0
    assert_series_add_up(stats)


@pytest.mark.parametrize("protocol", ["prepared", "extended", "simple"])
@pytest.mark.parametrize("drawn_by", ["python", "loop"])
def test_parameters_reach_the_server_the_same_with_both_loops(server, admin, table, protocol, drawn_by, compiled):
    """Seeded draws: a fixed count of transactions (no warm-up) inserts the same rows with either loop, whether
    Python draws the parameters (a zipfian or sequence among them) or the compiled loop does (all uniform)."""
    quoted = Distribution("constant", ("O'Brien; --\\",))
    first, third = ("sequence(1)", "zipfian(1, 50, 1.2)") if drawn_by == "python" else ("uniform(1, 3)", "uniform(1, 50)")
    pool = Pool("inserts", 3, (Statement("ins", "INSERT INTO loop_rows (session, a, b, name) "
                                                "VALUES (:s, :a, :b, :name)"),),
                params=params(s=first, a="uniform(-1000000, 1000000)", b=third, name=quoted),
                transactions=25, protocol=protocol)
    assert (fastloop.draw_spec(Session("", pool, 0, 1, [0], 0)) is None) == (drawn_by == "python")
    rows = {}
    for loop in ("python", "compiled"):
        admin.execute("TRUNCATE loop_rows")
        stats = run(server, [pool], loop, duration=30, warmup=0).pools["inserts"]
        assert stats.transactions == 75 and stats.failed == 0
        rows[loop] = admin.execute("SELECT session, a, b, name FROM loop_rows ORDER BY 1, 2, 3").fetchall()
    assert rows["python"] == rows["compiled"]
    assert len(rows["python"]) == 75
    assert {r[3] for r in rows["python"]} == {"O'Brien; --\\"}


# -- failures --------------------------------------------------------------------------------
def test_a_failed_statement_rolls_back_its_transaction(server, admin, loop, table):
    """Half the transactions fail at their second statement: only the others' rows stay."""
    pool = Pool("halves", 2, (Statement("ins", "INSERT INTO loop_rows (session, a) VALUES (:s, :x)"),
                              Statement("check", "SELECT 1 / (:x - 1)")),
                params=params(s="sequence(1)", x="uniform(1, 2)"), atomic=True, transactions=60)
    stats = run(server, [pool], loop, duration=30, warmup=0).pools["halves"]
    assert stats.transactions + stats.failed == 120
    assert stats.failed > 0 and stats.errors["other"] == stats.failed
    assert any(key.startswith("22012") for key in stats.error_messages)  # division_by_zero
    assert admin.execute("SELECT count(*) FROM loop_rows").fetchone()[0] == stats.transactions
    assert admin.execute("SELECT count(*) FROM loop_rows WHERE a = 1").fetchone()[0] == 0
    assert_series_add_up(stats)
    assert concurbench_sessions(admin) == 0


def test_serialization_failures_are_retried(server, admin, loop):
    admin.execute("DROP TABLE IF EXISTS loop_counter")
    admin.execute("CREATE TABLE loop_counter (id int PRIMARY KEY, v int NOT NULL)")
    admin.execute("INSERT INTO loop_counter VALUES (1, 0)")
    pool = Pool("incrementers", 4, (Statement("begin", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
                                    Statement("read", "SELECT v FROM loop_counter WHERE id = 1"),
                                    Statement("write", "UPDATE loop_counter SET v = v + 1 WHERE id = 1"),
                                    Statement("commit", "COMMIT")), max_tries=50, transactions=30)
    stats = run(server, [pool], loop, duration=60, warmup=0).pools["incrementers"]
    v = admin.execute("SELECT v FROM loop_counter").fetchone()[0]
    admin.execute("DROP TABLE loop_counter")
    assert stats.transactions + stats.failed == 120
    assert stats.retries > 0
    assert stats.errors["serialization"] == stats.failed
    assert v == stats.transactions  # every counted transaction committed exactly once


def test_lock_not_available_is_counted(server, admin, loop):
    admin.execute("DROP TABLE IF EXISTS loop_locked")
    admin.execute("CREATE TABLE loop_locked (id int PRIMARY KEY)")
    admin.execute("INSERT INTO loop_locked VALUES (1)")
    with psycopg.connect(server[1].conninfo) as holder:
        holder.execute("SELECT id FROM loop_locked WHERE id = 1 FOR UPDATE")
        pool = Pool("grabbers", 2, (Statement("grab", "SELECT id FROM loop_locked WHERE id = 1 FOR UPDATE NOWAIT"),),
                    atomic=True, think=0.005)
        stats = run(server, [pool], loop, duration=0.5).pools["grabbers"]
        holder.rollback()
    admin.execute("DROP TABLE loop_locked")
    assert stats.transactions == 0
    assert stats.failed == stats.errors["lock_not_available"] > 0
    assert any(key.startswith("55P03") for key in stats.error_messages)
    assert_series_add_up(stats)


class Killer:
    """Terminates the pool's backends once transactions are being counted (from the progress ticks)."""

    def __init__(self, conninfo: str, pool: str):
        self.conninfo, self.pool = conninfo, pool
        self.killed_at: int | None = None
        self.killed = 0

    def __call__(self, info: LoadProgress) -> None:
        if self.killed_at is None and info.phase == MEASURE and info.transactions > 0:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                self.killed = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                           "WHERE application_name = %s", (f"concurbench:{self.pool}",)).fetchone()[0]
            self.killed_at = info.transactions


@pytest.mark.parametrize("think", [0.0, 0.02])
def test_sessions_reconnect_after_the_server_drops_them(server, admin, loop, think):
    pool = Pool("survivors", 2, (Statement("one", "SELECT 1"),), think=think)
    killer = Killer(server[1].conninfo, "survivors")
    result = run(server, [pool], loop, duration=2.0, progress=killer, tick=0.1)
    stats = result.pools["survivors"]
    assert killer.killed == 2
    assert not result.messages  # the workers carried on
    if think == 0.0:  # busy sessions see the connection go while a statement runs
        assert stats.errors["connection"] >= 1
    assert stats.transactions > killer.killed_at  # and went on after reconnecting
    assert_series_add_up(stats)
    assert concurbench_sessions(admin) == 0


# -- time ------------------------------------------------------------------------------------
def test_think_time_spaces_transactions(server, loop):
    pool = Pool("thinkers", 2, (Statement("one", "SELECT 1"),), think=0.05)
    result = run(server, [pool], loop, duration=1.0)
    stats = result.pools["thinkers"]
    # each session completes at most one transaction per 50 ms of the window (plus the one it started in)
    assert 0 < stats.transactions <= 2 * (result.elapsed_s / 0.05 + 1)
    assert_series_add_up(stats)


def test_window_end_cancels_a_running_statement(server, admin, loop):
    pool = Pool("sleepers", 2, (Statement("nap", "SELECT pg_sleep(30)"),), atomic=True)
    result = run(server, [pool], loop, duration=0.3)
    stats = result.pools["sleepers"]
    assert stats.transactions == 0 and stats.failed == 0  # cut off by the window, not failed
    assert result.elapsed_s < 5
    assert concurbench_sessions(admin) == 0


def test_background_pool_stops_when_the_counted_one_is_done(server, loop):
    counted = Pool("counted", 2, (Statement("one", "SELECT 1"),), transactions=200)
    background = Pool("background", 2, (Statement("two", "SELECT 2"),), measure=False)
    result = run(server, [counted, background], loop, duration=60)
    assert result.pools["counted"].transactions == 400
    assert result.pools["background"].transactions > 0
    assert result.elapsed_s < 30


# -- the claims check reads the series ---------------------------------------------------------
def test_the_claims_check_reads_the_series_the_pool_stores(server, loop):
    """The series a pool stores, through summary.json's form, give check/sides.py its within-run
    estimates, centred on the reported tps and means."""
    pool = Pool("reads", 2, (Statement("one", "SELECT 1"), Statement("two", "SELECT 2")), atomic=True)
    result = run(server, [pool], loop, duration=1.5)
    stats = result.pools["reads"]
    metrics = nested(pool_figures(stats, result.elapsed_s))
    data = json.loads(json.dumps({"variant": "v", "group": "g", "point": None, "elapsed_s": result.elapsed_s,
                                  "pools": {"reads": PoolResult("reads", True, 2, stats.to_dict()).as_dict(
                                      pool_figures(stats, result.elapsed_s))}}))
    variant_run = VariantRun.from_dict(data, "test")
    buckets = int(result.elapsed_s / 0.1 + 1e-9)
    for metric, reported in (("tps", metrics["tps"]), ("latency.mean_ms", metrics["latency"]["mean_ms"]),
                             ("statements.one.mean_ms", metrics["statements"]["one"]["mean_ms"]),
                             ("statements.commit.mean_ms", metrics["statements"]["commit"]["mean_ms"])):
        side = side_data(Ref("v", None, None, metric), [variant_run])
        within = side.within[0]
        assert within is not None and within.method == "within run", metric
        assert within.n >= min(buckets, 10) and within.se > 0, metric
        assert within.mean == pytest.approx(reported, rel=0.05), metric
