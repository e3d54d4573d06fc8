"""The SQL Server half of `concurbench probe`, against a stand-in for SQL Server (a fake connection that
answers the probe's statements and refuses any other): no SQL Server can run where concurbench is
built. It checks what is sent, not what a real server would answer beyond the canned rows."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from mssql_standin import StandInCursor

from concurbench.engines import sqlserver
from concurbench.probe import probe
from concurbench.engines.base import ChangePolicy
from concurbench.provisioners.base import Connection, Inspection
from concurbench.provisioners.owned import DatabasePlan, Ownership, parse_marker, refusal
from concurbench.running.load import load_scenario

SCENARIO = """\
name: standin
engine: mssql
server: {trace_flags: [7006]}
database: {read_committed_snapshot: true}
setup:
  - CREATE TABLE dbo.items (id int PRIMARY KEY)
  - ALTER DATABASE CURRENT SET ALLOW_SNAPSHOT_ISOLATION ON
duration: 1s
warmup: 0s
variants:
  v:
    background:
      - {name: xe, kind: xevents, options: {target: ring_buffer}}
    probes: [{name: rows, sql: SELECT COUNT(*) AS n FROM dbo.items}]
    pools:
      p: {clients: 1, transaction: [SELECT 1]}
"""


class StandInSqlServer:
    """Canned answers to what the probe reads; the setup's batches and the transaction around them are logged.
    A statement that would change the server (DBCC TRACEON, ALTER DATABASE ... SET) is an AssertionError."""

    def __init__(self, database="bench", missing=("ALTER ANY EVENT SESSION",)):
        self.database = database
        self.marker = "concurbench database: kept, marked by a DBA"  # the database is concurbench's
        self.missing = missing  # permissions HAS_PERMS_BY_NAME denies
        self.log: list[str] = []
        self.closed = 0

    def execute(self, sql: str, *params):
        self.log.append(sql)
        answers = [
            (r"SELECT DB_NAME\(\)", [(self.database,)]),
            (r"DBCC TRACESTATUS", []),
            (r"SELECT CAST\(SERVERPROPERTY\('IsTempdbMetadataMemoryOptimized'\)", [(0,)]),
            (r"IF COL_LENGTH\('sys.databases', 'is_accelerated_database_recovery_on'\)", [(0, 0, "DISABLED", "FULL", 0)]),
            (r"SELECT CAST\(value AS nvarchar\(4000\)\) AS marker", [(self.marker,)] if self.marker else []),
            (r"SELECT SUSER_SNAME\(\), IS_SRVROLEMEMBER", [("bench_login", 0)]),
            (r"SELECT session_id FROM sys.dm_exec_sessions|SELECT name FROM sys.server_event_sessions", []),
            (r"BEGIN TRANSACTION|IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION|CREATE TABLE dbo.items", None),
            (r"SELECT COUNT\(\*\) AS n FROM dbo.items", [(0,)]),
        ]
        if sql.startswith("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition"):  # needs.py
            return StandInCursor(("e", "v", "login", "xe", "trace", "settings"), [(3, "16.0.4135.4", "bench_login", *(
                int(p not in self.missing) for p in ("ALTER ANY EVENT SESSION", "ALTER TRACE", "ALTER SETTINGS")))])
        if "HAS_PERMS_BY_NAME" in sql:
            return StandInCursor(("has",), [(0 if any(p in sql for p in self.missing) else 1,)])
        if sql.startswith("ALTER DATABASE CURRENT"):  # as SQL Server answers inside a user transaction
            raise RuntimeError("[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]ALTER DATABASE "
                               "statement not allowed within multi-statement transaction. (226) (SQLExecDirectW)")
        for pattern, rows in answers:
            if re.match(pattern, sql):
                return StandInCursor(("c",) if rows is not None else None, rows or ())
        raise AssertionError(f"the stand-in did not expect: {sql}")

    def close(self):
        self.closed += 1


class StandInObserver:
    def __init__(self, spec):
        self.spec, self.started, self.closed = spec, 0, 0

    def start(self):
        self.started += 1

    def close(self):
        self.closed += 1

    def describe(self):
        return {"name": self.spec.name}


class StandInProvisioner:
    """A dsn provisioner over the stand-in server: its database is concurbench's when it carries the marker, the
    server's own when it is master, and otherwise empty and not the login's to mark (used as it is)."""

    name = "dsn"
    keep_database = False
    safe = "mssql://u@h/bench"

    def __init__(self, server: StandInSqlServer, allow_server_changes: bool = False, as_is: bool = False):
        self.server = server
        self.stopped = 0
        self.allow, self.as_is = allow_server_changes, as_is

    def policy(self) -> ChangePolicy:
        return ChangePolicy(owned=False, allow_server_changes=self.allow, as_is=self.as_is)

    def inspect(self) -> Inspection:
        name = self.server.database
        if name.lower() == "master":
            plan = DatabasePlan(name, Ownership.SYSTEM, named=True)
        elif self.server.marker:
            plan = DatabasePlan(name, Ownership.OWN, named=True, marker=parse_marker(self.server.marker))
        else:
            plan = DatabasePlan(name, Ownership.EMPTY, named=True, may_mark=False)
        return Inspection(plan, self.start(), refusal(plan, self.safe, "u", "mssql") if plan.refused else "",
                          self.keep_database)

    def start(self):
        return Connection("Driver={ODBC Driver 18 for SQL Server};Server=h;Database=bench;UID=u;PWD=secret-1",
                          "mssql://u@h/bench")

    def stop(self):
        self.stopped += 1


@pytest.fixture()
def standin(tmp_path):
    path = tmp_path / "standin.yaml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    server = StandInSqlServer()
    observers: list[StandInObserver] = []
    engine = SimpleNamespace(
        connect=lambda conninfo, application_name="": server,
        server_info=lambda conn, names: {"version": "Microsoft SQL Server 2022", "version_num": 16_000_004_135,
                                         "version_short": "2022-CU14"},
        run_script=sqlserver.run_script, query_rows=sqlserver.query_rows)

    def run(**options):
        provisioner = StandInProvisioner(server, **options)
        report = probe(scenario, provisioner, engine=engine,
                       backgrounds=lambda spec, conninfo, eng, **kw: observers.append(StandInObserver(spec))
                       or observers[-1])
        return report, {c.check: c for c in report.checks}, provisioner

    return SimpleNamespace(run=run, server=server, observers=observers)


def test_standin_settings_are_planned_not_applied_and_permissions_checked(standin):
    report, checks, provisioner = standin.run(allow_server_changes=True)
    assert not any(s.startswith(("DBCC TRACEON", "ALTER DATABASE [bench]")) for s in standin.server.log)
    # issue 45: no trace flag on a server concurbench does not own, --allow-server-changes or not
    assert checks["scenario: settings"].status == "failed"
    assert "only on a server it starts" in checks["scenario: settings"].server_says
    assert "sysadmin" not in checks  # nothing the run does on a server it does not own needs it
    assert checks["permission ALTER ANY EVENT SESSION"].status == "failed"
    assert checks["permission ALTER on the database"].status == "ok"
    assert checks["permission CREATE TABLE and PROCEDURE"].status == "ok"
    planned = [(c.check, c.status, c.server_says) for c in report.checks if c.check.startswith(("variant", "every"))]
    assert planned == [
        ("every variant", "failed", "needs a global trace flag: trace flag 7006 on server-wide"),
        ("variant v", "failed", "needs a permission: Extended Events observer xe, which needs ALTER ANY EVENT SESSION"),
        ("variant v", "failed", "needs an observer that stops by itself: Extended Events observer xe on SQL Server 2022, "
                                "which has no MAX_DURATION")]
    assert "GRANT ALTER ANY EVENT SESSION TO [bench_login]" in [c for c in report.checks if c.check == "variant v"][0].fix
    assert not report.ok and provisioner.stopped == 1
    assert "secret-1" not in repr(report.as_dict())


def test_standin_setup_runs_inside_a_rolled_back_transaction(standin):
    report, checks, _ = standin.run(allow_server_changes=True)
    log = standin.server.log
    begin, rollback = log.index("BEGIN TRANSACTION"), log.index("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION")
    assert begin < log.index("CREATE TABLE dbo.items (id int PRIMARY KEY)") < rollback
    assert checks["setup 1 (inline)"].status == "ok"
    refused = checks["setup 2 (inline)"]  # SQL Server refuses ALTER DATABASE inside a transaction: not undoable
    assert refused.status == "skipped" and "(226)" in refused.server_says
    assert checks["v: probe rows"].status == "skipped"  # not tried once the transaction was given up
    assert [(o.spec.name, o.started, o.closed) for o in standin.observers] == [("xe", 1, 1)]
    assert checks["background xe (xevents)"].status == "ok"
    assert checks["nothing left behind"].status == "ok"


def test_standin_changes_without_the_flag_fail_and_the_master_database_is_refused_before_anything(standin):
    _, checks, _ = standin.run()
    assert checks["scenario: settings"].status == "failed"
    assert "only on a server it starts" in checks["scenario: settings"].server_says
    standin.server.database, standin.server.marker, standin.server.log[:] = "master", None, []
    _, checks, provisioner = standin.run()
    assert list(checks) == ["connect", "database"] and checks["database"].status == "failed"
    assert "database master on mssql://u@h/bench is one of the server's own" in checks["database"].server_says
    assert standin.server.log == [] and provisioner.stopped == 0  # not connected, nothing started


def test_standin_as_is_shows_what_the_run_leaves_as_the_server_has_it(standin):
    """--server-settings as-is without --allow-server-changes: the trace flag is left and recorded by the run, so the
    settings check does not fail; the database option is made, in concurbench's own database (it needs no flag), and
    left in a database that is not concurbench's; nothing is changed by the probe either way."""
    _, checks, _ = standin.run(as_is=True)
    assert "scenario: settings" not in checks
    flag, rcsi = checks["setting trace flag 7006 on"], checks["setting bench.read_committed_snapshot: False -> True"]
    assert flag.status == "ok" and flag.server_says == (
        "left as the server has it (--allow-server-changes was not given): the run records the difference "
        "(--server-settings as-is)")
    assert rcsi.status == "ok" and rcsi.server_says.startswith("not applied; the run runs: ALTER DATABASE [bench]")
    standin.server.marker = None  # a database that is not concurbench's
    _, checks, _ = standin.run(as_is=True)
    assert checks["setting bench.read_committed_snapshot: False -> True"].server_says == (
        "left as the server has it (database bench is not concurbench's): the run records the difference "
        "(--server-settings as-is)")
    assert not any(s.startswith(("DBCC TRACEON", "ALTER DATABASE [bench]")) for s in standin.server.log)


# -- a database that is not concurbench's (issue 38) ---------------------------------------------------------
class StandInUserDatabase:
    """Stand-in for a user's SQL Server database holding objects of its own: OBJECT_ID, TYPE_ID and SCHEMA_ID
    answer for what exists (as SQL Server resolves a name, brackets and all), nothing else may run."""

    def __init__(self, objects: dict[str, str]):
        self.objects = {name.lower(): kind for name, kind in objects.items()}
        self.log: list[tuple[str, tuple]] = []

    def execute(self, sql: str, *params):
        self.log.append((sql, params))
        name = re.sub(r"[\[\]\"]", "", params[0]).lower() if params else ""
        if sql.startswith("SELECT LOWER(type_desc) AS kind FROM sys.objects WHERE object_id = OBJECT_ID(?)"):
            kind = self.objects.get(name if "." in name else f"dbo.{name}")
            return StandInCursor(("kind",), [(kind,)] if kind else [])
        if sql.startswith(("SELECT N'type' AS kind", "SELECT N'schema' AS kind", "SELECT N'index' AS kind")):
            return StandInCursor(("kind",), [])
        raise AssertionError(f"the stand-in did not expect: {sql}")


@pytest.mark.parametrize("file, expected", [
    ("row-lock-vs-applock.yaml", ["dbo.accounts (user_table): dropped by setup (sql/mssql/row-lock-setup.sql), "
                                  "dropped by teardown 2 (inline)"]),
    ("observer-overhead.yaml", ["dbo.payments (user_table): dropped by setup (sql/mssql/observer-setup.sql), "
                                "dropped by teardown 1 (inline)",
                                "dbo.numbers (view): replaced by setup (sql/mssql/observer-setup.sql), "
                                "dropped by teardown 3 (inline)"]),
])
def test_standin_the_probe_names_every_user_object_the_scenarios_sql_would_drop_or_replace(file, expected):
    """A user's database with tables and a view named as the scenarios' own. The old probe ran the setup inside a
    rolled-back transaction and said "ok": the run then dropped them."""
    from concurbench.probe.mssql import SqlServerSide
    from pathlib import Path

    scenario = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "mssql" / file, quick=True)
    conn = StandInUserDatabase({"dbo.accounts": "user_table", "dbo.payments": "user_table", "dbo.numbers": "view",
                                "dbo.customers": "user_table"})
    side = SqlServerSide(None, owned=False, allowed=False)
    assert side.would_touch(conn, scenario, list(scenario.variants)) == expected
    assert all(sql.startswith("SELECT") for sql, _ in conn.log)  # it only looks


def test_what_the_sql_touches_is_read_as_the_engine_sends_it():
    from concurbench.probe.mssql_touch import touched

    sql = ("-- DROP TABLE dbo.in_a_comment\nDROP TABLE IF EXISTS dbo.a, [sales].[b];\nTRUNCATE TABLE dbo.c;\n"
           "/* DROP VIEW dbo.d */ DROP INDEX ix_e ON dbo.e;\nGO\nCREATE OR ALTER PROCEDURE dbo.f AS SELECT 1;\n"
           "GO\nALTER TABLE dbo.g ADD x int;\nDROP TABLE #temp; EXEC (N'DROP VIEW dbo.h');")
    assert touched(sql) == [("dropped", "TABLE", ("dbo.a",)), ("dropped", "TABLE", ("[sales].[b]",)),
                            ("dropped", "INDEX", ("dbo.e", "ix_e")), ("emptied", "TABLE", ("dbo.c",)),
                            ("replaced", "PROCEDURE", ("dbo.f",)), ("dropped", "VIEW", ("dbo.h",)),
                            ("altered", "TABLE", ("dbo.g",))]
