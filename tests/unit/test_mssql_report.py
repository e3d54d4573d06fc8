"""The SQL Server parts of a report: the server configuration table (what differs between versions
besides the version) and the waits table (load sessions' own waits; server-wide waits over the
baseline arm's). The run is made up, in the shape a SQL Server run stores (no SQL Server here):
its `mssql_waits` summaries come from the sampler itself, fed with recorded-shape DMV rows.
"""

from __future__ import annotations

from mssql_standin import CannedDmvs, StepClock

from concurbench.report.render import markdown
from concurbench.report.tables import build_report
from concurbench.report.waits import over_baseline
from concurbench.results.model import Run
from concurbench.samplers.mssql_waits import WaitStats
from concurbench.scenario.model import SamplerSpec

WAIT_COLUMNS = ("wait_type", "waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")
SESSION_COLUMNS = ("session_id", "login_time", "program_name", *WAIT_COLUMNS)


def waits_summary(seconds: float, server_ms: dict[str, int], session_ms: dict[str, int]) -> dict:
    """What mssql_waits summarises from two readings `seconds` apart (XE waits kept, as observer-overhead does)."""
    before = [(w, 0, 0, 0) for w in server_ms]
    after = [(w, 10, ms, 0) for w, ms in server_ms.items()]
    sessions = [(51, "2026-01-01T10:00:00", "concurbench:readers", w, 10, ms, 0) for w, ms in session_ms.items()]
    conn = CannedDmvs({WaitStats.QUERY: [(WAIT_COLUMNS, before), (WAIT_COLUMNS, after)],
                       WaitStats.SESSIONS: [(SESSION_COLUMNS, []), (SESSION_COLUMNS, sessions)]})
    sampler = WaitStats(SamplerSpec("mssql_waits", (("keep", "observer"),)), clock=StepClock(0.0, seconds))
    sampler.prepare(conn, 16_000_000)
    sampler.read(conn), sampler.read(conn)
    return sampler.summarize(None, None, [], seconds)


def result(variant: str, waits: dict, tps: float) -> dict:
    metrics = {"transactions": int(tps * 60), "tps": tps, "failed": 0, "errors": {}, "latency": {},
               "statements": {}, "statements_executed": int(tps * 60)}
    return {"variant": variant, "group": "main", "point": None, "clients": {"readers": 16}, "status": "ok",
            "elapsed_s": 60.0, "server": "2022-CU14", "samplers": {"mssql_waits": waits},
            "pools": {"readers": {"measure": True, "clients": 16, "metrics": metrics}}}


SERVER = {"version": "Microsoft SQL Server 2022 (RTM-CU14)", "version_short": "2022-CU14", "version_num": 16004135,
          "image": "mcr.microsoft.com/mssql/server:2022-CU14-ubuntu-22.04", "cpu_limit": "none",
          "facts": {"cpu_count": 2, "scheduler_count": 2, "query_store": "READ_WRITE", "adr": False,
                    "optimized_locking": None, "lightweight_query_profiling": 1}}


def manifest() -> dict:
    return {"scenario": {"name": "observer-overhead", "title": "Observer overhead", "engine": "mssql",
                         "baselines": {"main": "baseline"}, "source": {}},
            "server": SERVER, "servers": [SERVER], "target": "docker", "host": {"hostname": "h", "cpu_count": 2},
            "processes": 2, "status": "ok", "error": None}


def test_waits_over_the_baseline_cancel_what_grows_with_wall_time():
    # XE_DISPATCHER_WAIT grows 1 s per second in both arms; the XE arm adds XE_BUFFERMGR waits
    base = waits_summary(60.0, {"XE_DISPATCHER_WAIT": 60_000, "SOS_SCHEDULER_YIELD": 600},
                         {"SOS_SCHEDULER_YIELD": 500})
    xe = waits_summary(60.0, {"XE_DISPATCHER_WAIT": 60_030, "XE_BUFFERMGR_FREEBUF_EVENT": 6_000,
                              "SOS_SCHEDULER_YIELD": 660}, {"SOS_SCHEDULER_YIELD": 550, "WRITELOG": 50})
    assert over_baseline(xe, base) == [("XE_BUFFERMGR_FREEBUF_EVENT", 100.0), ("SOS_SCHEDULER_YIELD", 1.0)]
    report = build_report(Run.from_dicts(manifest(), {"results": [result("baseline", base, 14_000),
                                                                  result("xe_ring_buffer", xe, 4_700)]}))
    (waits,) = [t for t in report.tables if t.title == "main: waits (SQL Server)"]
    assert waits.rows == [["baseline", "SOS_SCHEDULER_YIELD 100%", "base"],
                          ["xe_ring_buffer", "SOS_SCHEDULER_YIELD 92%, WRITELOG 8%",
                           "XE_BUFFERMGR_FREEBUF_EVENT +100, SOS_SCHEDULER_YIELD +1"]]


def test_server_configuration_table_and_no_sql_server_tables_without_their_data():
    report = build_report(Run.from_dicts(manifest(), {"results": [result("baseline", waits_summary(1.0, {}, {}), 100)]}))
    facts = report.tables[0]
    assert facts.title.startswith("Server configuration")
    assert facts.rows == [["2022-CU14", "mcr.microsoft.com/mssql/server:2022-CU14-ubuntu-22.04", "2 (2 schedulers)",
                           "none", "READ_WRITE", "off", "–", "on"]]
    assert "| READ_WRITE |" in markdown(report)
    bare = manifest()
    bare["server"] = bare["servers"][0] = {"version_short": "2022-CU14", "version": "x"}
    plain = result("baseline", {}, 100)
    titles = [t.title for t in build_report(Run.from_dicts(bare, {"results": [plain]})).tables]
    assert not [t for t in titles if "Server configuration" in t or "waits (SQL Server)" in t]
