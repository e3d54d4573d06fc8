"""What a SQL Server engineer looks at beside the articles' figures: waits of the load sessions,
requests and blocking chains, lock waits by resource type, the version store, tempdb's allocation
counters, page-latch wait statistics, the objects of the pages waited on, and peaks over one-second
buckets. No SQL Server here: every DMV row is written by hand in the shape Microsoft's reference
pages give, and served by a stand-in (`CannedDmvs`).
"""

from __future__ import annotations

import pytest
from mssql_standin import CannedDmvs, StepClock

from concurbench.samplers.mssql import LockWaits, PerfCounters, Requests, TempdbAllocation, TempdbLatches, VersionStore
from concurbench.samplers.mssql_rows import (PERF_COUNTER_BULK_COUNT, PERF_COUNTER_LARGE_RAWCOUNT,
                                              PERF_LARGE_RAW_BASE, PERF_LARGE_RAW_FRACTION, counter_rates, one_second_max,
                                              pool_of)
from concurbench.samplers.mssql_pages import PAGE_INFO
from concurbench.samplers.mssql_requests import blocking, resource_kind, wait_key
from concurbench.samplers.mssql_waits import SessionWaits, WaitStats
from concurbench.results.model import PoolResult, VariantRun
from concurbench.check import judge_claims
from concurbench.scenario.claims import parse_claim
from concurbench.scenario.model import SamplerSpec
from figured import figured

COUNTER_COLUMNS = ("object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")
WAIT_COLUMNS = ("wait_type", "waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")
SESSION_COLUMNS = ("session_id", "login_time", "program_name", *WAIT_COLUMNS)


def readings(sampler, query: str, answers: list, times: list[float], version_num: int = 16_000_000) -> list[dict]:
    """Read `sampler` once per answer at the given clock times; the rows with their t_s, as the driver keeps them."""
    conn = CannedDmvs({query: [(COUNTER_COLUMNS, a) for a in answers]})
    sampler.clock = StepClock(*times)
    sampler.prepare(conn, version_num)
    return [{"t_s": t, **row} for t in times for row in sampler.read(conn)]


# -- item 10: a peak over one-second buckets, as perfmon samples -----------------------------------------
def test_one_second_buckets_smooth_a_quarter_second_spike():
    points = [(i * 0.25, v) for i, v in enumerate([0, 100, 200, 300, 400, 1400, 1500, 1600, 1700])]
    assert one_second_max(points) == 1300.0  # 0-1 s: 400/s, 1-2 s: 1300/s
    assert max((b[1] - a[1]) / 0.25 for a, b in zip(points, points[1:])) == 4000.0
    assert one_second_max(points[:3]) is None and one_second_max([]) is None


def test_batch_requests_peak_is_reported_over_one_second_buckets():
    """Stand-in for SQL Server read every 250 ms (the tempdb scenario's interval): the article's ~3,100
    batch requests/s came from one-second perfmon samples, so it is compared with `_max_1s`."""
    values = [0, 500, 1000, 1500, 2000, 3500, 4000, 4500, 5000]
    answers = [[("SQLServer:SQL Statistics", "Batch Requests/sec", "", v, PERF_COUNTER_BULK_COUNT)] for v in values]
    sampler = PerfCounters()
    rows = readings(sampler, PerfCounters.query(), answers, [i * 0.25 for i in range(len(values))])
    out = sampler.summarize(None, None, rows, 2.0)
    assert out["batch_requests_per_s_max"] == 6000.0  # one 250 ms interval
    assert out["batch_requests_per_s_max_1s"] == 3000.0 and out["batch_requests_per_s_mean"] == 2500.0


# -- lock waits by resource type -----------------------------------------------------------------------
def lock_rows(key_waits: int, app_waits: int, key_ms: int, app_ms: int) -> list[tuple]:
    out = []
    for counter, key, app in (("Lock Waits/sec", key_waits, app_waits), ("Lock Wait Time (ms)", key_ms, app_ms),
                              ("Lock Requests/sec", 10 * key_waits, 10 * app_waits),
                              ("Lock Timeouts/sec", 0, 0), ("Number of Deadlocks/sec", 0, 0)):
        for instance, value in (("_Total", key + app), ("Key", key), ("Application", app), ("Object", 0)):
            out.append(("SQLServer:Locks", counter, instance, value, PERF_COUNTER_BULK_COUNT))
    return out


def test_lock_waits_by_resource_type_key_against_application():
    """Stand-in for SQL Server: two readings 2 s apart of the Locks object's instances."""
    sampler = LockWaits()
    rows = readings(sampler, LockWaits.query(), [lock_rows(10, 100, 50, 2000), lock_rows(30, 500, 150, 12000)],
                    [0.0, 2.0])
    by_resource = {r["resource"]: r for r in rows}
    assert set(by_resource) == {"_total", "key", "application", "object"}
    assert by_resource["application"]["waits_per_s"] == 200.0 and by_resource["key"]["wait_ms_per_s"] == 50.0
    out = sampler.summarize(None, None, rows, 2.0)
    assert out["samples"] == 1
    assert out["waits_total.key"] == 20 and out["waits_total.application"] == 400 and out["waits_total._total"] == 420
    assert out["waits_per_s_mean._total"] == 210.0 and out["wait_ms_total.application"] == 10000
    assert out["wait_ms_per_wait.application"] == 25.0 and out["wait_ms_per_wait.object"] is None
    assert "Lock Waits/sec" in LockWaits.query() and "instance_name IN" not in LockWaits.query()


# -- version store -------------------------------------------------------------------------------------
def test_version_store_size_generation_and_cleanup():
    """Stand-in for SQL Server: the Transactions object's version store counters (values the server keeps
    as current values, cntr_type 65792) over three readings."""
    def rows(size, generation, cleanup, units, created, truncated):
        return [("SQLServer:Transactions", name, "", value, PERF_COUNTER_LARGE_RAWCOUNT) for name, value in (
            ("Version Store Size (KB)", size), ("Version Generation rate (KB/s)", generation),
            ("Version Cleanup rate (KB/s)", cleanup), ("Version Store unit count", units),
            ("Version Store unit creation", created), ("Version Store unit truncation", truncated))]
    sampler = VersionStore()
    samples = readings(sampler, VersionStore.query(), [rows(64, 0, 0, 1, 10, 9), rows(4096, 2000, 0, 3, 12, 9),
                                                        rows(8192, 4000, 100, 5, 14, 9)], [0.0, 1.0, 2.0])
    out = sampler.summarize(None, None, samples, 2.0)
    assert out["size_kb_max"] == 8192 and out["size_kb_change"] == 4096
    assert out["generation_kb_per_s_mean"] == 3000.0 and out["cleanup_kb_per_s_max"] == 100
    assert out["units_created_change"] == 2 and out["units_truncated_change"] == 0


# -- tempdb allocation ---------------------------------------------------------------------------------
def test_tempdb_allocation_counters_and_the_cache_ratio():
    """Stand-in for SQL Server: temp tables and worktables, with the ratio over its base counter."""
    def rows(created, destroy, worktables, hits, lookups):
        return [("SQLServer:General Statistics", "Temp Tables Creation Rate", "", created, PERF_COUNTER_BULK_COUNT),
                ("SQLServer:General Statistics", "Temp Tables For Destruction", "", destroy,
                 PERF_COUNTER_LARGE_RAWCOUNT),
                ("SQLServer:Access Methods", "Worktables Created/sec", "", worktables, PERF_COUNTER_BULK_COUNT),
                ("SQLServer:Access Methods", "Workfiles Created/sec", "", 0, PERF_COUNTER_BULK_COUNT),
                ("SQLServer:Access Methods", "Worktables From Cache Ratio", "", hits, PERF_LARGE_RAW_FRACTION),
                ("SQLServer:Access Methods", "Worktables From Cache Base", "", lookups, PERF_LARGE_RAW_BASE)]
    sampler = TempdbAllocation()
    samples = readings(sampler, TempdbAllocation.query(), [rows(0, 0, 0, 9, 10), rows(300, 40, 20, 45, 50)],
                       [0.0, 1.0])
    out = sampler.summarize(None, None, samples, 1.0)
    assert out["temp_tables_created_total"] == 300 and out["temp_tables_for_destruction_max"] == 40
    assert out["worktables_created_total"] == 20 and out["worktables_from_cache_pct_last"] == 90.0
    assert "Worktables From Cache Base" in TempdbAllocation.query()


def test_the_worktable_cache_share_is_of_the_interval_not_since_the_server_started():
    """Stand-in for SQL Server: Worktables From Cache Ratio and its base count every worktable since the
    server started (900 of 1,000 from the cache before the run); in the interval 10 of 100 are. The old
    code divided the raw counters and reported 83% for an interval whose share was 10%."""
    def rows(hits, lookups):
        return [("SQLServer:Access Methods", "Worktables From Cache Ratio", "", hits, PERF_LARGE_RAW_FRACTION),
                ("SQLServer:Access Methods", "Worktables From Cache Base", "", lookups, PERF_LARGE_RAW_BASE)]
    sampler = TempdbAllocation()
    samples = readings(sampler, TempdbAllocation.query(), [rows(900, 1000), rows(910, 1100), rows(910, 1100)],
                       [0.0, 1.0, 2.0])
    assert [s.get("worktables_from_cache_pct") for s in samples] == [10.0, None]  # no worktable: no share
    before, after = ([dict(zip(COUNTER_COLUMNS, r)) for r in rows(*x)] for x in ((900, 1000), (910, 1100)))
    [plain] = counter_rates(before, after, 1.0).values()  # a fraction of a snapshot counter: the last reading
    [windowed] = counter_rates(before, after, 1.0, ["Worktables From Cache Ratio"]).values()
    assert plain == pytest.approx(82.727, abs=1e-3) and windowed == 10.0


# -- requests and blocking chains ----------------------------------------------------------------------
@pytest.mark.parametrize("resource, kind", [
    ("KEY: 5:72057594044284928 (3300a4f361aa)", "KEY"), ("APPLICATION: 5:0:[accounts:42]:(6a2c0f1e)", "APPLICATION"),
    ("OBJECT: 5:261575970:0 ", "OBJECT"), ("PAGE: 5:1:104", "PAGE"), ("2:1:118", "PAGE"), ("RID: 5:1:104:3", "RID"),
    ("", ""), (None, ""), ("something", "OTHER")])
def test_resource_kind(resource, kind):
    assert resource_kind(resource) == kind


def request(session, blocker=0, wait=None, resource="", command="UPDATE", program="concurbench:lockers"):
    return {"session_id": session, "program_name": program, "blocking_session_id": blocker, "wait_type": wait,
            "wait_time": 5 if wait else 0, "wait_resource": resource, "command": command}


KEY = "KEY: 5:72057594044284928 (3300a4f361aa)"
APP = "APPLICATION: 5:0:[accounts:7]:(6a2c0f1e)"


def test_blocking_chain_depth_and_the_head_blocker():
    rows = [request(51, 0, None, command=None),  # idle, holding its transaction's locks
            request(52, 51, "LCK_M_U", KEY), request(53, 52, "LCK_M_U", KEY), request(54, 53, "LCK_M_U", KEY),
            request(60, 0, "WRITELOG"), request(61, -5, "PAGELATCH_EX", "2:1:118")]
    found = blocking(rows)
    assert found["blocked"] == 4 and found["depth"] == 3 and list(found["heads"]) == [51]
    assert [wait_key(r) for r in rows[1:]] == ["LCK_M_U:KEY"] * 3 + ["WRITELOG", "PAGELATCH_EX:PAGE"]
    assert blocking([request(1, 2, "LCK_M_X", KEY), request(2, 1, "LCK_M_X", KEY)])["heads"] == {}  # a cycle


def test_requests_sampler_lock_waits_by_resource_and_heads_by_pool():
    """Stand-in for SQL Server: three readings of sys.dm_exec_requests in the applock arm (waiters on the
    application lock behind a locker), then one with nothing running."""
    columns = ("session_id", "program_name", "blocking_session_id", "wait_type", "wait_time", "wait_resource",
               "command")
    reading = [request(70, 0, None, command="UPDATE"), request(71, 70, "LCK_M_X", APP),
               request(72, 70, "LCK_M_X", APP), request(80, 71, "LCK_M_U", KEY, program="concurbench:bystanders")]
    conn = CannedDmvs({Requests.QUERY: [(columns, [tuple(r[c] for c in columns) for r in reading])] * 3
                       + [(columns, [])]})
    sampler = Requests()
    sampler.prepare(conn, 16_000_000)
    rows = [{"t_s": t, **row} for t in (0.2, 0.4, 0.6, 0.8) for row in sampler.read(conn)]
    assert rows[-1] == {"t_s": 0.8, "wait": "none", "requests": 0}
    out = sampler.summarize(None, None, rows, 0.8)
    assert out["samples"] == 4 and out["requests.LCK_M_X:APPLICATION"] == 6 and out["requests.running"] == 3
    assert out["lock_resource.APPLICATION"] == 6 and out["lock_resource.KEY"] == 3
    assert out["share.LCK_M_X:APPLICATION"] == pytest.approx(6 / 9, abs=1e-4)
    assert out["blocked_max"] == 3 and out["chain_depth_max"] == 2 and out["blocked_mean"] == 2.25
    assert out["head_samples.lockers"] == 3
    assert out["head_blockers"] == [{"session_id": 70, "who": "lockers", "samples": 3}]


# -- waits of the load sessions --------------------------------------------------------------------------
def session_row(session, wait, tasks, ms, program="concurbench:bystanders", login="2026-01-01T10:00:00"):
    return {"session_id": session, "login_time": login, "program_name": program, "wait_type": wait,
            "waiting_tasks_count": tasks, "wait_time_ms": ms, "signal_wait_time_ms": 0}


def test_pool_of_leaves_the_harness_sessions_out():
    assert pool_of("concurbench:bystanders") == "bystanders" and pool_of("concurbench:lockers ") == "lockers"
    for name in ("concurbench:admin", "concurbench:sampler", "concurbench:observer:xe", "concurbench:background:h",
                 "concurbench:check", "SQLCMD", None, "concurbench:"):
        assert pool_of(name) is None


def test_session_waits_over_the_window_keep_sessions_that_closed():
    tracker = SessionWaits()
    tracker.add([session_row(51, "LCK_M_U", 10, 1000), session_row(52, "WRITELOG", 5, 50),
                 session_row(53, "LCK_M_U", 99, 9999, program="concurbench:sampler")])
    tracker.add([session_row(51, "LCK_M_U", 30, 4000), session_row(51, "PAGELATCH_EX", 2, 4),
                 session_row(52, "WRITELOG", 9, 90), session_row(60, "LCK_M_U", 1, 100, login="2026-01-01T10:00:05")])
    tracker.add([session_row(52, "WRITELOG", 10, 100)])  # 51 and 60 closed when the window ended
    pools = tracker.by_pool()
    assert list(pools) == ["bystanders"] and tracker.sessions() == 3
    got = {r["wait_type"]: (r["waiting_tasks_count"], r["wait_time_ms"]) for r in pools["bystanders"]}
    assert got == {"LCK_M_U": (20 + 1, 3000 + 100), "PAGELATCH_EX": (2, 4), "WRITELOG": (5, 50)}


def test_waits_sampler_reports_the_load_sessions_beside_the_server():
    """Stand-in for SQL Server: server-wide waits dominated by the observer's XE_TIMER_EVENT-like sleeps,
    the load sessions' own waits on locks."""
    server = [[("LCK_M_U", 0, 0, 0), ("XE_DISPATCHER_WAIT", 0, 0, 0)],
              [("LCK_M_U", 21, 3100, 10), ("XE_DISPATCHER_WAIT", 4, 20000, 0)]]
    sessions = [[session_row(51, "LCK_M_U", 10, 1000)],
                [session_row(51, "LCK_M_U", 31, 4100), session_row(70, "LCK_M_X", 3, 30, program="concurbench:lockers")]]
    conn = CannedDmvs({WaitStats.QUERY: [(WAIT_COLUMNS, r) for r in server],
                       WaitStats.SESSIONS: [(SESSION_COLUMNS, [tuple(r[c] for c in SESSION_COLUMNS) for r in s])
                                            for s in sessions]})
    sampler = WaitStats(SamplerSpec("mssql_waits", (("exclude_benign", False),)), clock=StepClock(0.0, 5.0))
    sampler.prepare(conn, 16_000_000)
    assert sampler.read(conn) == [] and sampler.read(conn) == []
    out = sampler.summarize(None, None, [], 5.0)
    assert out["top"][0]["wait_type"] == "XE_DISPATCHER_WAIT"
    assert out["sessions.top"][0]["wait_type"] == "LCK_M_U" and out["sessions.wait_ms.LCK_M_U"] == 3100
    assert out["pool.bystanders.wait_ms.LCK_M_U"] == 3100 and out["pool.lockers.wait_ms.LCK_M_X"] == 30
    assert out["sessions.count"] == 2 and out["sessions.total_wait_ms"] == 3130
    assert "sessions.wait_ms.XE_DISPATCHER_WAIT" not in out


# -- item 9: tempdb page latches, enough samples, wait statistics and the objects of pages -------------------
LATCH_COLUMNS = ("wait_type", "resource_description", "tasks")


def test_a_claim_on_gam_shares_needs_enough_samples():
    """The 2022 claim `gam_tasks <= 0.2 * task_samples` held with nothing sampled (0 <= 0). It is written
    on the share now, which is None below `min_task_samples`, so the claim fails as having no value."""
    empty = TempdbLatches().summarize(None, None, [{"t_s": 0.1, "latch": "none", "tasks": 0}], 0.1)
    assert empty["task_samples"] == 0 and empty["gam_share"] is None and empty["gam_tasks"] == 0
    result = figured(VariantRun("dynamic_memopt", "g", None, server="2022-CU14", elapsed_s=1.0,
                                pools={"callers": PoolResult("callers", True, 100)}, samplers={"tempdb_latches": empty}),
                     {"callers": {"transactions": 1}})
    (verdict,) = judge_claims([parse_claim("dynamic_memopt: tempdb_latches.gam_share <= 0.2")], [result])
    assert verdict.passed is not True and "no value" in verdict.reason
    few = TempdbLatches().summarize(None, None, [{"t_s": 0.1, "latch": "PAGELATCH_EX:GAM", "tasks": 3}], 0.1)
    assert few["gam_tasks"] == 3 and few["gam_share"] is None and few["min_task_samples"] == 20


def test_tempdb_latches_wait_statistics_and_the_objects_of_other_pages():
    """Stand-in for SQL Server 2019: two polls; page 2:1:118 belongs to sysallocunits (object 7), named once
    with sys.dm_db_page_info on the sampler's own connection (never the shared one); PAGELATCH_* wait
    statistics grow between the polls."""
    polls = [[("PAGELATCH_EX", "2:1:118", 30), ("PAGELATCH_UP", "2:1:2", 2)],
             [("PAGELATCH_SH", "2:1:118", 10), ("PAGELATCH_EX", "2:1:3000", 1)]]
    stats = [[("PAGELATCH_EX", 100, 40, 1), ("PAGELATCH_UP", 10, 5, 0)],
             [("PAGELATCH_EX", 2100, 900, 30), ("PAGELATCH_UP", 60, 25, 2), ("PAGELATCH_SH", 7, 1, 0)]]
    conn = CannedDmvs({TempdbLatches.QUERY: [(LATCH_COLUMNS, p) for p in polls],
                       TempdbLatches.WAIT_STATS: [(WAIT_COLUMNS, s) for s in stats]})
    own = CannedDmvs({PAGE_INFO: [(("object_id", "object_name", "index_id", "page_type"), [(7, "sysallocunits", 1, 1)]),
                                  (("object_id", "object_name", "index_id", "page_type"), [(34, None, 1, 1)])]})
    own.close = lambda: None
    sampler = TempdbLatches()
    sampler.prepare(conn, 15_000_000)
    sampler.attach(lambda: own)
    rows = [{"t_s": t, **row} for t in (0.1, 0.2) for row in sampler.read(conn)]
    sampler.detach()
    assert [params for sql, params in own.executed if sql == PAGE_INFO] == [(1, 118), (1, 3000)]  # each page once
    out = sampler.summarize(None, None, rows, 0.2)
    assert out["task_samples"] == 43 and out["other_tasks"] == 41 and out["other_share"] == pytest.approx(41 / 43, 1e-3)
    assert out["wait_ms.PAGELATCH_EX"] == 860 and out["waits.PAGELATCH_EX"] == 2000 and out["waits.PAGELATCH_SH"] == 7
    assert out["pagelatch_wait_ms"] == 860 + 20 + 1
    assert out["object.sysallocunits_tasks"] == 40 and out["object.object_34_tasks"] == 1
    assert out["other_pages"][0] == {"page": "2:1:118", "tasks": 40, "object_id": 7, "object": "sysallocunits",
                                     "index_id": 1, "page_type": 1}


def test_tempdb_latches_name_no_page_before_2019():
    """Stand-in for SQL Server 2017-like version numbers: sys.dm_db_page_info does not exist there."""
    conn = CannedDmvs({TempdbLatches.QUERY: (LATCH_COLUMNS, [("PAGELATCH_EX", "2:1:118", 3)]),
                       TempdbLatches.WAIT_STATS: (WAIT_COLUMNS, [])})
    sampler = TempdbLatches()
    sampler.prepare(conn, 14_000_000)
    sampler.attach(lambda: pytest.fail("no connection of its own is needed before 2019"))
    sampler.read(conn)
    sampler.detach()
    assert sampler.namer is None and all(sql != PAGE_INFO for sql, _ in conn.executed)
    assert sampler.summarize(None, None, [], 0.1)["other_pages"] == [{"page": "2:1:118", "tasks": 3}]
