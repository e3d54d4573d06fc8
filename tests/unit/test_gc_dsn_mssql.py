"""`concurbench gc --target dsn` on a SQL Server: what a killed run left (a running Extended Events session, a
SQL Trace, trace flag 7006, its temporary database, .xel files) is listed, and removed with --yes, while what a
live run uses is left alone; against the stand-in of mssql_dsn_standin.py (no SQL Server can run here). The
dsn provisioner had no leftovers() before issue 38: each test failed there."""

from __future__ import annotations

import pytest
from mssql_dsn_standin import DATA_DIR, StandInDsnServer
from mssql_standin import StandInSession

from concurbench.engines import odbc
from concurbench.errors import ConfigError
from concurbench.housekeeping import remote
from concurbench.housekeeping.gc import GcOutcome
from concurbench.provisioners import owned
from concurbench.provisioners.base import Leftover
from concurbench.provisioners.dsn_mssql import ExistingSqlServer

DSN = "Driver={FreeTDS};Server=db.lab;Port=1433;UID=sa;PWD=s3cret-pw;"
TRACE = f"{DATA_DIR}concurbench-plans-20260101T120000123Z.trc"


def killed_run(server: StandInDsnServer) -> None:
    """What a run killed in the middle of an observer arm leaves: its database, flag, session, trace and files."""
    server.databases[owned.DATABASE] = {}
    server.properties[owned.DATABASE] = {
        owned.PROPERTY: owned.marker_text(temporary=True),
        "concurbench_trace_flag_7006": "made by concurbench pid 4711 on lab-runner at 2026-01-01T12:00:00Z"}
    server.trace_flags.add(7006)
    server.xe_sessions["concurbench_xe"] = {"running": True, "filename": f"{DATA_DIR}concurbench_xe.xel"}
    server.traces[2] = {"status": 1, "path": TRACE}
    server.xel_files.append(f"{DATA_DIR}concurbench_xe_0_134343910972710000.xel")


def live_run(server: StandInDsnServer) -> None:
    """A run that is still going on another machine: its observer's session and its own temporary database."""
    server.databases["bench2"] = {}
    server.properties["bench2"] = {owned.PROPERTY: owned.marker_text(temporary=True)}
    server.sessions += [StandInSession(70, "bench2", program="concurbench:observer:live", pid=99, host="other"),
                        StandInSession(71, "bench2", program="concurbench:w0", pid=99, host="other")]
    server.xe_sessions["concurbench_live"] = {"running": True, "filename": None}
    server.xel_files.append(f"{DATA_DIR}concurbench_live_0_134343910972710001.xel")


def sweeper(server: StandInDsnServer, monkeypatch) -> ExistingSqlServer:
    monkeypatch.setattr(odbc, "connect", server.connect)
    return ExistingSqlServer(DSN, drivers=["FreeTDS"])


def test_standin_gc_lists_what_a_killed_run_left_and_nothing_of_a_live_run(monkeypatch):
    server = StandInDsnServer.with_databases(app=["dbo.accounts"])
    killed_run(server)
    live_run(server)
    actions = remote.collect(sweeper(server, monkeypatch), remove=False)
    listed = [(a.outcome, a.kind, a.name) for a in actions]
    assert listed == [
        ("would remove", "trace flag", "7006 (concurbench)"), ("would remove", "xe session", "concurbench_xe"),
        ("would remove", "trace", "2"),
        (GcOutcome.BY_HAND, "file", f"{DATA_DIR}concurbench-plans-20260101T120000123Z*.trc"),
        ("would remove", "database", "concurbench"),
        (GcOutcome.BY_HAND, "file", f"{DATA_DIR}concurbench_xe_0_134343910972710000.xel")]
    assert "rm -f -- '/var/opt/mssql/data/concurbench_xe_0_134343910972710000.xel'" in actions[-1].notes[0]
    assert server.trace_flags == {7006} and "concurbench_xe" in server.xe_sessions  # listing changed nothing


def test_standin_gc_yes_removes_it_and_leaves_the_live_run_and_the_users_database(monkeypatch):
    server = StandInDsnServer.with_databases(app=["dbo.accounts"])
    killed_run(server)
    live_run(server)
    actions = remote.collect(sweeper(server, monkeypatch), remove=True)
    assert [a.outcome for a in actions if a.kind != "file"] == ["removed"] * 4, [a.notes for a in actions]
    assert server.trace_flags == set() and server.traces == {}
    assert list(server.xe_sessions) == ["concurbench_live"] and server.xe_sessions["concurbench_live"]["running"]
    assert owned.DATABASE not in server.databases and {"app", "bench2"} <= set(server.databases)
    assert server.objects["app"] == {"dbo.accounts"}
    again = remote.collect(sweeper(server, monkeypatch), remove=False)
    assert [(a.kind, a.outcome) for a in again] == [("file", GcOutcome.BY_HAND)]  # only an administrator deletes files


def test_standin_gc_leaves_a_trace_flag_whose_run_still_lives(monkeypatch):
    server = StandInDsnServer.with_databases()
    killed_run(server)
    server.sessions.append(StandInSession(80, "concurbench", program="concurbench:admin", pid=4711, host="lab-runner"))
    kinds = [a.kind for a in remote.collect(sweeper(server, monkeypatch), remove=False)]
    assert "trace flag" not in kinds and "database" not in kinds  # the run is still there, in its database


def test_standin_gc_refuses_to_guess_without_view_server_state(monkeypatch):
    server = StandInDsnServer.with_databases()
    killed_run(server)
    server.view_server_state = False
    with pytest.raises(ConfigError, match="VIEW SERVER STATE"):
        remote.collect(sweeper(server, monkeypatch), remove=True)
    assert server.trace_flags == {7006} and "concurbench_xe" in server.xe_sessions


def test_standin_gc_puts_back_the_sp_configure_options_a_killed_run_set_and_leaves_those_changed_since(monkeypatch):
    server = StandInDsnServer.with_databases()
    killed_run(server)
    note = "made by concurbench pid 4711 on lab-runner at 2026-01-01T12:00:00Z"
    server.properties[owned.DATABASE].update({
        "concurbench_configure:show advanced options": f"0 -> 1; {note}",
        "concurbench_configure:max degree of parallelism": f"0 -> 1; {note}",
        "concurbench_configure:max worker threads": f"0 -> 512; {note}"})
    for name, value in (("show advanced options", 1), ("max degree of parallelism", 1), ("max worker threads", 600)):
        server.configurations[name][:2] = [value, value]  # the DBA has set max worker threads since
    actions = remote.collect(sweeper(server, monkeypatch), remove=True)
    settings = [(a.name, a.outcome) for a in actions if a.kind == "sp_configure"]
    assert settings == [("max degree of parallelism (concurbench)", "removed"),
                        ("max worker threads (concurbench)", "removed"),
                        ("show advanced options (concurbench)", "removed")]  # put back last, as a run does
    assert {k: v[0] for k, v in server.configurations.items()} == {
        "show advanced options": 0, "max degree of parallelism": 0, "max worker threads": 600, "user connections": 0}


def test_the_dsn_targets_and_gcs_statements_parse_as_tsql():
    """Every statement the dsn target's inspect/start/stop and gc send, strictly parsed by sqlglot's T-SQL dialect
    (the Extended Events DDL and DBCC, which it does not model, are checked by the observers' tests)."""
    from test_tsql_parses import check_tsql

    from concurbench.engines import mssql_config as mc
    from concurbench.engines import mssql_guards as guards
    from concurbench.provisioners import mssql_owned as mo
    from concurbench.provisioners import mssql_sweep as sweep

    statements = [mo.SERVER, mo.MARKER, mo.MAY_MARK, mo.USER_OBJECTS, mo.create_sql("concurbench"),
                  mo.drop_sql("concurbench"), mo.mark_sql(owned.marker_text(temporary=True)), sweep.LIVE,
                  sweep.PROPERTIES, sweep.XE_SESSIONS, sweep.TRACES, sweep.XEL_FILES, sweep.DATA_DIR,
                  sweep.CONFIGURATION, guards.OTHER_SESSIONS, guards.SEES_ALL_SESSIONS, mc.READ_DATABASE,
                  mc.READ_DATABASE_WITHOUT_ADR, *guards.unrecord("concurbench_configure:max degree of parallelism"),
                  *sweep.Sweep._removal(Leftover(sweep.TRACE, "2", ""), {"id": 2}),
                  *sweep.Sweep._removal(Leftover(sweep.SETTING, "x", ""), {
                      "option": "max degree of parallelism", "old": 0, "restore": True, "record": "r"})]
    statements += guards.recorded(mc.Change("trace flag 7006 on", ["SELECT 1"], [], 7006), "note").apply[:2]
    for sql in statements:
        check_tsql(sql, sql[:60])
