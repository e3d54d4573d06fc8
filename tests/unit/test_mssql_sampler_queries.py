"""SQL Server samplers run against a stand-in for SQL Server (canned DMV rows per query), and the
quoting helpers of engines/quoting.py (the samplers' SQL is parsed in test_tsql_parses.py).

No SQL Server here: every row below is written by hand in the shape the DMV returns.
"""

from __future__ import annotations

import sqlite3

import pytest
import sqlglot
from mssql_standin import CannedDmvs, StepClock
from ruamel.yaml import YAML
from test_tsql_parses import SCENARIO_DIR

from concurbench.errors import ConfigError, EngineError
from concurbench.samplers.base import NoReading
from concurbench.samplers.mssql import (MSSQL_SAMPLERS, IndexPhysicalStats, PerfCounters, SnapshotTransactions,
                                        TempdbLatches, WaitStats, aggregate_levels)
from concurbench.samplers.mssql_rows import PERF_COUNTER_BULK_COUNT, PERF_COUNTER_LARGE_RAWCOUNT, latch_page_counts
from concurbench.scenario.model import SamplerSpec

COUNTER_COLUMNS = ("object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")


def counter_rows(prefix: str, skipped: int, locks: int, batches: int, version_kb: int, temp_tables: int = 0,
                 compilations: int = 0):
    return (COUNTER_COLUMNS, [
        (f"{prefix}:Access Methods", "Skipped Ghosted Records/sec", "", skipped, PERF_COUNTER_BULK_COUNT),
        (f"{prefix}:Locks", "Lock Requests/sec", "_Total", locks, PERF_COUNTER_BULK_COUNT),
        (f"{prefix}:SQL Statistics", "Batch Requests/sec", "", batches, PERF_COUNTER_BULK_COUNT),
        (f"{prefix}:SQL Statistics", "SQL Compilations/sec", "", compilations, PERF_COUNTER_BULK_COUNT),
        (f"{prefix}:SQL Statistics", "SQL Re-Compilations/sec", "", 0, PERF_COUNTER_BULK_COUNT),
        (f"{prefix}:General Statistics", "Temp Tables Creation Rate", "", temp_tables, PERF_COUNTER_BULK_COUNT),
        (f"{prefix}:Transactions", "Version Store Size (KB)", "", version_kb, PERF_COUNTER_LARGE_RAWCOUNT),
    ])


# -- mssql_counters ----------------------------------------------------------------------------------
@pytest.mark.parametrize("prefix", ["SQLServer", "MSSQL$SQL2022"])
def test_counters_rates_over_two_reads_on_default_and_named_instances(prefix):
    """Stand-in for SQL Server: two readings 2 s apart; named instances prefix MSSQL$NAME."""
    conn = CannedDmvs({PerfCounters.query(): [counter_rows(prefix, 100, 1_000, 50, 64, 7, 40),
                                                    counter_rows(prefix, 700, 5_000, 250, 128, 27, 240)]})
    sampler = PerfCounters(SamplerSpec("mssql_counters"), clock=StepClock(10.0, 12.0))
    sampler.prepare(conn, 16_000_004)
    assert sampler.read(conn) == []  # the first reading is the baseline
    assert sampler.read(conn) == [{"skipped_ghosted_per_s": 300.0, "lock_requests_per_s": 2000.0,
                                   "batch_requests_per_s": 100.0, "sql_compilations_per_s": 100.0,
                                   "sql_recompilations_per_s": 0.0, "temp_tables_created_per_s": 10.0,
                                   "version_store_kb": 128}]


def test_counters_missing_counter_is_none_and_prepare_resets_the_baseline():
    """Stand-in for SQL Server without the Access Methods row."""
    cols, rows = counter_rows("SQLServer", 0, 0, 0, 8)
    partial = (cols, [r for r in rows if "Access" not in r[0]])
    conn = CannedDmvs({PerfCounters.query(): [partial]})
    sampler = PerfCounters(clock=StepClock(1.0, 2.0, 3.0))
    sampler.prepare(conn, 15_000_000)
    sampler.read(conn)
    assert sampler.read(conn)[0]["skipped_ghosted_per_s"] is None
    sampler.prepare(conn, 15_000_000)
    assert sampler.read(conn) == []


def test_counters_summary_totals_mean_max_and_last_version_store():
    """Stand-in for SQL Server: three readings at 0, 1 and 3 s (the rates differ per interval)."""
    conn = CannedDmvs({PerfCounters.query(): [counter_rows("SQLServer", 0, 0, 100, 64, 0),
                                                  counter_rows("SQLServer", 10, 100, 105, 96, 2),
                                                  counter_rows("SQLServer", 70, 700, 111, 32, 2)]})
    sampler = PerfCounters(clock=StepClock(0.0, 1.0, 3.0))
    sampler.prepare(conn, 16_000_000)
    rows = [{"t_s": t, **row} for t in (0.0, 1.0, 3.0) for row in sampler.read(conn)]
    assert [r["skipped_ghosted_per_s"] for r in rows] == [10.0, 30.0]
    out = sampler.summarize(None, None, rows, 3.0)
    assert out["samples"] == 2
    assert out["skipped_ghosted_total"] == 70 and out["skipped_ghosted_per_s_mean"] == pytest.approx(70 / 3, abs=1e-3)
    assert out["skipped_ghosted_per_s_max"] == 30.0
    assert out["lock_requests_total"] == 700 and out["batch_requests_total"] == 11
    assert out["batch_requests_per_s_max"] == 5.0 and out["temp_tables_created_total"] == 2
    assert out["version_store_kb_last"] == 32 and out["version_store_kb_max"] == 96
    assert out["version_store_kb_mean"] == 64.0 and out["version_store_kb_change"] == -64
    assert "version_store_total" not in out
    assert out["skipped_ghosted_per_s_max_1s"] == 30.0  # buckets 0-1 s (10/s) and 1-3 s (30/s)


def test_counters_are_those_asked_for():
    assert {c[2] for c in PerfCounters.COUNTERS} == {
        "Skipped Ghosted Records/sec", "Lock Requests/sec", "Batch Requests/sec", "SQL Compilations/sec",
        "SQL Re-Compilations/sec", "Temp Tables Creation Rate", "Version Store Size (KB)"}
    assert PerfCounters.kind == "periodic" and PerfCounters.default_interval == 1.0


# -- tempdb_latches ----------------------------------------------------------------------------------
LATCH_ROWS = [("PAGELATCH_UP", "2:1:1", 3), ("PAGELATCH_UP", "2:1:8088", 1), ("PAGELATCH_EX", "2:1:2", 2),
              ("PAGELATCH_SH", "2:1:100", 2), ("PAGELATCH_EX", "2:3:511233", 1), ("PAGELATCH_EX", "5:1:1", 9),
              ("PAGELATCH_SH", "2:1:1 (PFS)", 1)]


NO_PAGELATCH_WAITS = (("wait_type", "waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms"), [])


def test_tempdb_latches_rows_by_wait_and_page_type():
    """Stand-in for SQL Server: waiting tasks on tempdb pages (and one on database 5, skipped)."""
    conn = CannedDmvs({TempdbLatches.QUERY: (("wait_type", "resource_description", "tasks"), LATCH_ROWS),
                             TempdbLatches.WAIT_STATS: NO_PAGELATCH_WAITS})
    rows = TempdbLatches().read(conn)
    assert rows == [{"latch": "PAGELATCH_EX:GAM", "tasks": 2}, {"latch": "PAGELATCH_EX:SGAM", "tasks": 1},
                    {"latch": "PAGELATCH_SH:PFS", "tasks": 1}, {"latch": "PAGELATCH_SH:other", "tasks": 2},
                    {"latch": "PAGELATCH_UP:PFS", "tasks": 4}]


def test_tempdb_latches_reads_a_none_row_when_nothing_waits():
    """Stand-in for SQL Server with no waiting task."""
    conn = CannedDmvs({TempdbLatches.QUERY: (("wait_type", "resource_description", "tasks"), []),
                             TempdbLatches.WAIT_STATS: NO_PAGELATCH_WAITS})
    assert TempdbLatches().read(conn) == [{"latch": "none", "tasks": 0}]


def test_tempdb_latches_summary_shares_by_page_and_wait_type():
    rows = [{"t_s": 0.1, "latch": "PAGELATCH_UP:PFS", "tasks": 6},
            {"t_s": 0.1, "latch": "PAGELATCH_EX:GAM", "tasks": 2},
            {"t_s": 0.2, "latch": "PAGELATCH_UP:PFS", "tasks": 1},
            {"t_s": 0.2, "latch": "PAGELATCH_SH:other", "tasks": 1},
            {"t_s": 0.3, "latch": "none", "tasks": 0}]
    out = TempdbLatches(SamplerSpec("tempdb_latches", (("min_task_samples", 10),))).summarize(None, None, rows, 0.3)
    assert out["samples"] == 3 and out["task_samples"] == 10 and out["max_waiting"] == 8
    assert out["mean_waiting"] == pytest.approx(10 / 3, abs=1e-3)
    assert out["pfs_share"] == 0.7 and out["gam_share"] == 0.2 and out["sgam_share"] == 0.0
    assert out["other_share"] == 0.1 and "unknown_share" not in out
    assert out["pagelatch_up_share"] == 0.7 and out["pagelatch_ex_tasks"] == 2 and out["pfs_tasks"] == 7


def test_latch_page_counts_unknown_resource_format_is_kept():
    counts = latch_page_counts([("pagelatch_up", "2:1:1", 1), ("PAGELATCH_UP", "something else", 2)])
    assert counts == {("PAGELATCH_UP", "PFS"): 1, ("PAGELATCH_UP", "unknown"): 2}


# -- mssql_waits -------------------------------------------------------------------------------------
WAIT_COLUMNS = ("wait_type", "waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")
WAITS_BEFORE = [("LCK_M_X", 10, 1_000, 10), ("XE_TIMER_EVENT", 5, 50_000, 0), ("PAGELATCH_UP", 100, 300, 30),
                ("WRITELOG", 40, 200, 5)]
WAITS_AFTER = [("LCK_M_X", 60, 9_000, 90), ("XE_TIMER_EVENT", 9, 90_000, 0), ("PAGELATCH_UP", 400, 1_500, 200),
               ("WRITELOG", 40, 200, 5), ("SOS_SCHEDULER_YIELD", 30, 100, 100)]


NO_SESSIONS = (("session_id", "login_time", "program_name", *WAIT_COLUMNS), [])


def _wait_readings(options=()):
    conn = CannedDmvs({WaitStats.QUERY: [(WAIT_COLUMNS, WAITS_BEFORE), (WAIT_COLUMNS, WAITS_AFTER)],
                             WaitStats.SESSIONS: NO_SESSIONS})
    sampler = WaitStats(SamplerSpec("mssql_waits", options), clock=StepClock(0.0, 10.0))
    sampler.prepare(conn, 16_000_000)
    return sampler, sampler.read(conn), sampler.read(conn)


def test_waits_exclude_benign_by_default():
    """Stand-in for SQL Server: XE_TIMER_EVENT grows but is in the benign list."""
    sampler, *_ = _wait_readings()
    assert "XE_TIMER_EVENT" in WaitStats.BENIGN
    out = sampler.summarize(None, None, [], 10.0)
    assert [w["wait_type"] for w in out["top"]] == ["LCK_M_X", "PAGELATCH_UP", "SOS_SCHEDULER_YIELD"]
    assert out["wait_ms.LCK_M_X"] == 8_000 and out["tasks.LCK_M_X"] == 50 and out["signal_ms.LCK_M_X"] == 80
    assert "wait_ms.XE_TIMER_EVENT" not in out and "wait_ms.WRITELOG" not in out  # WRITELOG did not grow
    assert out["total_wait_ms"] == 8_000 + 1_200 + 100
    assert out["window_s"] == 10.0 and out["waits"]["PAGELATCH_UP"] == 1_200


def test_waits_keep_benign_when_asked():
    """Stand-in for SQL Server: exclude_benign false, or XE_TIMER_EVENT kept by name or as an observer wait."""
    for options in ((("exclude_benign", False),), (("keep", ["xe_timer_event"]),), (("keep", "observer"),)):
        sampler, *_ = _wait_readings(options)
        out = sampler.summarize(None, None, [], 10.0)
        assert out["top"][0]["wait_type"] == "XE_TIMER_EVENT"
        assert out["wait_ms.XE_TIMER_EVENT"] == 40_000 and out["tasks.XE_TIMER_EVENT"] == 4


def test_waits_top_ten():
    """Stand-in for SQL Server: 15 wait types grow."""
    before = [(f"W{i:02d}", 0, 0, 0) for i in range(15)]
    after = [(f"W{i:02d}", 1, 100 + i, 0) for i in range(15)]
    conn = CannedDmvs({WaitStats.QUERY: [(WAIT_COLUMNS, before), (WAIT_COLUMNS, after)],
                             WaitStats.SESSIONS: NO_SESSIONS})
    sampler = WaitStats()
    sampler.prepare(conn, 16_000_000)
    sampler.read(conn), sampler.read(conn)
    out = sampler.summarize(None, None, [], 1.0)
    assert len(out["top"]) == 10 and out["top"][0]["wait_type"] == "W14" and out["wait_types"] == 15
    assert sum(1 for k in out if k.startswith("wait_ms.")) == 10
    with pytest.raises(NoReading, match="no reading"):  # the driver keeps it as a SamplerFailure
        WaitStats().summarize(None, None, [], 1.0)


# -- index_physical_stats ----------------------------------------------------------------------------
IPS_COLUMNS = ("index_id", "partition_number", "index_level", "page_count", "record_count", "ghost_record_count",
               "version_ghost_record_count", "avg_page_space_used_in_percent")


def _ips_conn(before_rows, after_rows, ids=(5, 901578250), indexes=((1, "PK_accounts"), (2, "ix_balance"))):
    return CannedDmvs({
        IndexPhysicalStats.RESOLVE: (("database_id", "object_id"), [ids]),
        IndexPhysicalStats.INDEXES: (("index_id", "name"), list(indexes)),
        IndexPhysicalStats.QUERY: [(IPS_COLUMNS, before_rows), (IPS_COLUMNS, after_rows)],
    })


BEFORE = [(1, 1, 0, 1000, 100_000, 0, 0, 98.0), (1, 1, 1, 3, 1000, 0, 0, 60.0), (1, 1, 2, 1, 3, 0, 0, 1.0),
          (2, 1, 0, 300, 100_000, 0, 0, 99.0), (2, 1, 1, 1, 300, 0, 0, 20.0)]
AFTER = [(1, 1, 0, 1400, 100_000, 900, 800, 70.0), (1, 1, 1, 5, 1400, 0, 0, 80.0), (1, 1, 2, 1, 5, 0, 0, 1.0),
         (2, 1, 0, 500, 100_000, 50, 40, 60.0), (2, 1, 1, 2, 500, 0, 0, 30.0)]


def test_index_summary_picks_leaf_level_zero_of_the_clustered_index():
    """Stand-in for SQL Server: DETAILED rows of a clustered and a nonclustered index, before and after."""
    conn = _ips_conn(BEFORE, AFTER)
    sampler = IndexPhysicalStats(SamplerSpec("index_physical_stats", (("table", "dbo.accounts"),)))
    sampler.prepare(conn, 16_000_004)
    assert conn.executed[0] == (IndexPhysicalStats.RESOLVE, ("[dbo].[accounts]",))
    before, after = sampler.read(conn), sampler.read(conn)
    assert conn.executed[-1] == (IndexPhysicalStats.QUERY, (5, 901578250))
    out = sampler.summarize(before, after, [], 10.0)
    assert out["index_name"] == "PK_accounts" and out["levels"] == 3
    assert out["leaf_pages"] == 1400 and out["leaf_ghosts"] == 900 and out["leaf_version_ghosts"] == 800
    assert out["leaf_space_used_pct"] == 70.0
    assert out["before.leaf_pages"] == 1000 and out["before.leaf_ghosts"] == 0 and out["leaf_pages_growth"] == 400


def test_index_summary_named_index_and_heap():
    conn = _ips_conn(BEFORE, AFTER)
    sampler = IndexPhysicalStats(SamplerSpec("index_physical_stats", (("table", "accounts"), ("index", "IX_BALANCE"))))
    sampler.prepare(conn, 15_000_000)
    out = sampler.summarize(sampler.read(conn), sampler.read(conn), [], 1.0)
    assert out["index_id"] == 2 and out["levels"] == 2 and out["leaf_version_ghosts"] == 40
    assert out["before.leaf_pages"] == 300
    heap = aggregate_levels([dict(zip(IPS_COLUMNS, (0, 1, 0, 10, 500, 3, 2, 90.0))),
                             dict(zip(IPS_COLUMNS, (2, 1, 0, 4, 500, 0, 0, 90.0)))])
    sampler = IndexPhysicalStats(SamplerSpec("index_physical_stats", (("table", "heap_table"),)))
    out = sampler.summarize(heap, heap, [], 1.0)
    assert out["index_id"] == 0 and out["levels"] == 1 and out["leaf_ghosts"] == 3 and out["leaf_version_ghosts"] == 2


def test_index_levels_sum_partitions_weighting_space_by_pages():
    rows = [dict(zip(IPS_COLUMNS, r)) for r in [(1, 1, 0, 100, 1000, 1, 1, 50.0), (1, 2, 0, 300, 3000, 2, 0, 90.0)]]
    (level,) = aggregate_levels(rows)
    assert level["page_count"] == 400 and level["ghost_record_count"] == 3
    assert level["avg_page_space_used_in_percent"] == 80.0


def test_index_physical_stats_needs_table_and_finds_it():
    with pytest.raises(ConfigError, match="table"):
        IndexPhysicalStats(SamplerSpec("index_physical_stats"))
    conn = _ips_conn(BEFORE, AFTER, ids=(5, None))
    sampler = IndexPhysicalStats(SamplerSpec("index_physical_stats", (("table", "nope"),)))
    with pytest.raises(EngineError, match="no table 'nope'"):
        sampler.prepare(conn, 16_000_000)


def test_index_physical_stats_in_another_database_uses_three_part_names():
    """Stand-in for SQL Server: the table lives in database `bench`."""
    spec = SamplerSpec("index_physical_stats", (("table", "dbo.accounts"), ("database", "bench")))
    sampler = IndexPhysicalStats(spec)
    assert sampler.object_name == "[bench].[dbo].[accounts]"
    indexes_in = IndexPhysicalStats.INDEXES_IN.format(database="[bench]")
    conn = CannedDmvs({IndexPhysicalStats.RESOLVE_IN: (("database_id", "object_id"), [(7, 42)]),
                             indexes_in: (("index_id", "name"), [(1, "PK")])})
    sampler.prepare(conn, 16_000_000)
    assert conn.executed[0][1] == ("bench", "[bench].[dbo].[accounts]")
    assert sampler.index_names == {1: "PK"}
    assert IndexPhysicalStats(SamplerSpec("index_physical_stats", (("table", "t"), ("database", "b")))).object_name \
        == "[b]..[t]"


# -- snapshot_transactions ---------------------------------------------------------------------------
def test_snapshot_transactions_read_and_summary():
    """Stand-in for SQL Server: one aggregate row per sample."""
    conn = CannedDmvs({SnapshotTransactions.QUERY: [
        (SnapshotTransactions.KEYS, [(2, 2, 14, 3)]), (SnapshotTransactions.KEYS, [(0, 0, 0, 0)])]})
    sampler = SnapshotTransactions()
    rows = [{"t_s": 0.5, **sampler.read(conn)[0]}, {"t_s": 1.0, **sampler.read(conn)[0]}]
    assert rows[0] == {"t_s": 0.5, "active": 2, "sessions": 2, "max_elapsed_s": 14, "max_version_chain": 3}
    out = sampler.summarize(None, None, rows, 1.0)
    assert out == {"samples": 2, "max_active": 2, "mean_active": 1.0, "max_sessions": 2,
                   "max_elapsed_s": 14, "max_version_chain": 3}
    assert sampler.summarize(None, None, [], 1.0) == {"samples": 0}


# -- what the samplers are ----------------------------------------------------------------------------
def test_sampler_names_kinds_and_intervals():
    got = {cls.name: (cls.kind, cls.default_interval if cls.kind == "periodic" else None) for cls in MSSQL_SAMPLERS}
    assert got == {"mssql_waits": ("periodic", 1.0), "mssql_counters": ("periodic", 1.0),
                   "tempdb_latches": ("periodic", 0.1), "index_physical_stats": ("snapshot", None),
                   "snapshot_transactions": ("periodic", 0.5), "mssql_requests": ("periodic", 0.2),
                   "mssql_lock_waits": ("periodic", 1.0), "mssql_version_store": ("periodic", 1.0),
                   "tempdb_allocation": ("periodic", 1.0)}
    for cls in MSSQL_SAMPLERS:
        assert cls.engine == "mssql"
        assert cls.description and (cls.kind == "snapshot" or "interval" in cls.options)


# -- snapshot transactions of the run's database only (issue 22) ---------------------------------------------
class SnapshotDmvs:
    """Stand-in for SQL Server's DMVs: SQLite holds sys.dm_tran_active_snapshot_database_transactions
    (one row per transaction, instance-wide, no database column) and sys.dm_exec_sessions (each
    session's current database); the T-SQL is translated by sqlglot and run there, with DB_ID() and
    @@SPID answered for the session running it."""

    def __init__(self, spid: int, database_id: int):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("ATTACH DATABASE ':memory:' AS sys")
        self.db.execute("CREATE TABLE sys.dm_tran_active_snapshot_database_transactions (session_id int, "
                        "elapsed_time_seconds int, max_version_chain_traversed int)")
        self.db.execute("CREATE TABLE sys.dm_exec_sessions (session_id int, database_id int)")
        self.db.create_function("DB_ID", 0, lambda: database_id)
        self.db.create_function("SPID", 0, lambda: spid)

    def session(self, session_id: int, database_id: int, *transactions: tuple[int, int]):
        self.db.execute("INSERT INTO sys.dm_exec_sessions VALUES (?, ?)", (session_id, database_id))
        for elapsed, chain in transactions:
            self.db.execute("INSERT INTO sys.dm_tran_active_snapshot_database_transactions VALUES (?, ?, ?)",
                            (session_id, elapsed, chain))

    def execute(self, sql: str):
        sqlite = sqlglot.transpile(sql, read="tsql", write="sqlite")[0].replace("@@SPID", "SPID()")
        return self.db.execute(sqlite)


def test_snapshot_transactions_count_only_the_run_databases_sessions_and_not_the_samplers():
    """Stand-in for SQL Server (SQLite playing the DMVs): database 7 is the run's, database 9 another
    user's on a shared server. The old query counted all five transactions."""
    dmvs = SnapshotDmvs(spid=60, database_id=7)
    dmvs.session(51, 7, (30, 4))  # the held transaction of the arm
    dmvs.session(52, 7, (1, 1), (2, 2))  # a pool session (two rows: a MARS session)
    dmvs.session(60, 7, (0, 0))  # the sampler's own statement, under RCSI
    dmvs.session(70, 9, (900, 50))  # someone else's report in another database
    row = dmvs.execute(SnapshotTransactions.QUERY).fetchone()
    assert dict(zip(SnapshotTransactions.KEYS, row)) == {"active": 3, "sessions": 2, "max_elapsed_s": 30,
                                                         "max_version_chain": 4}
    empty = SnapshotDmvs(spid=60, database_id=7)
    empty.session(70, 9, (900, 50))
    assert empty.execute(SnapshotTransactions.QUERY).fetchone() == (0, 0, 0, 0)


def test_the_rcsi_probe_counts_the_run_databases_held_transactions_only():
    """The same stand-in for rcsi-ghost-churn's `snapshot_txns` probe (the held transaction must be gone
    once the arm is over), which a transaction in another database used to fail."""
    doc = YAML(typ="safe").load((SCENARIO_DIR / "rcsi-ghost-churn.yaml").read_text(encoding="utf-8"))
    [probe] = [p["sql"] for p in doc["probes"] if p["name"] == "snapshot_txns"]
    dmvs = SnapshotDmvs(spid=60, database_id=7)
    dmvs.session(60, 7, (0, 0))
    dmvs.session(70, 9, (900, 50))
    assert dmvs.execute(probe).fetchone() == (0,)
    dmvs.session(51, 7, (30, 4))
    assert dmvs.execute(probe).fetchone() == (1,)
