"""The second review of every SQL Server path (issue 34): the probe on a fresh server, the container's
CPUs, the smaller fixes (memory floor, one driver list, TRACESTATUS without flags, the DSN example).

No SQL Server can run here: every server, connection and Docker engine below is a stand-in, named so,
that answers as Microsoft's (or Docker's) documentation says the real one would. Each test failed on the
code before the fix; the docstrings say how.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from mssql_standin import StandInCursor

from concurbench import doctor
from concurbench.engines import mssql, sqlserver
from concurbench.engines import mssql_config as mc
from concurbench.errors import ConfigError, EngineError
from concurbench.probe import probe
from concurbench.provisioners.base import Connection
from concurbench.scenarios import load_scenario

ROOT = Path(__file__).resolve().parents[2]


# -- 1. the probe reads a sampler of a table only the setup creates ---------------------------------------
GHOSTS = """\
name: fresh
engine: mssql
setup:
  - CREATE TABLE dbo.ghost_demo (id int NOT NULL PRIMARY KEY)
samplers:
  index_physical_stats: {table: dbo.ghost_demo}
duration: 1s
warmup: 0s
variants:
  v:
    pools:
      p: {clients: 1, transaction: [SELECT 1]}
"""


class StandInFreshSqlServer:
    """Stand-in for a fresh SQL Server (no earlier run left dbo.ghost_demo), reached over several connections.

    As Microsoft Learn documents it: OBJECT_ID returns NULL for an object that does not exist; a table created
    inside a transaction is seen by that session until the transaction is rolled back (and by no other one
    here, the others are not in it); SAVE TRANSACTION sets a savepoint, @@TRANCOUNT counts open transactions.
    Every statement is logged with the connection that ran it; any other statement is an AssertionError."""

    OBJECT_ID = 901578250

    def __init__(self):
        self.log: list[tuple[int, str]] = []
        self.connections = 0

    def connect(self, conninfo, application_name=""):
        self.connections += 1
        return StandInSession(self, self.connections)


class StandInSession:
    def __init__(self, server: StandInFreshSqlServer, number: int):
        self.server, self.number = server, number
        self.trancount, self.created = 0, set()

    def close(self):
        pass

    def rollback(self):
        pass

    def execute(self, sql: str, *params):
        self.server.log.append((self.number, sql))
        sampler = mssql_sampler()
        if sql == "BEGIN TRANSACTION":
            self.trancount += 1
            return StandInCursor()
        if sql == "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION":
            self.trancount, self.created = 0, set()
            return StandInCursor()
        if sql.startswith(("SAVE TRANSACTION", "IF XACT_STATE() = 1 ROLLBACK TRANSACTION")):
            assert self.trancount, "a savepoint outside a transaction (error 628)"
            return StandInCursor()
        if sql == "SELECT @@TRANCOUNT":
            return StandInCursor(("n",), [(self.trancount,)])
        if sql.startswith("CREATE TABLE dbo.ghost_demo"):
            assert self.trancount, "the probe's setup must run inside its transaction"
            self.created.add("[dbo].[ghost_demo]")
            return StandInCursor()
        if sql == sampler.RESOLVE:
            return StandInCursor(("database_id", "object_id"),
                                 [(5, self.server.OBJECT_ID if params[0] in self.created else None)])
        if sql == sampler.INDEXES:
            return StandInCursor(("index_id", "name"), [(1, "PK__ghost_demo")])
        if sql == sampler.QUERY:
            assert params == (5, self.server.OBJECT_ID)
            return StandInCursor(("index_id", "partition_number", "index_level", "page_count", "record_count",
                                  "ghost_record_count", "version_ghost_record_count", "avg_page_space_used_in_percent"),
                                 [(1, 1, 0, 1, 0, 0, 0, 0.0)])
        if sql.startswith("SELECT DB_NAME()"):
            return StandInCursor(("db",), [("concurbench",)])
        if sql == "DBCC TRACESTATUS(-1) WITH NO_INFOMSGS":  # no flag on: no result set
            return StandInCursor()
        if sql.startswith(("SELECT CAST(SERVERPROPERTY('IsTempdbMetadataMemoryOptimized')",
                           "SELECT COUNT(*) FROM tempdb.sys.database_files")):
            return StandInCursor(("v",), [(1,)])
        if sql.startswith("SELECT is_read_committed_snapshot_on"):
            return StandInCursor(("a", "b", "c", "d"), [(0, 0, "DISABLED", "FULL")])
        if sql.startswith("SELECT SUSER_SNAME(), IS_SRVROLEMEMBER"):
            return StandInCursor(("login", "sysadmin"), [("sa", 1)])
        if sql.startswith(("SELECT session_id FROM sys.dm_exec_sessions", "SELECT name FROM sys.server_event_sessions")):
            return StandInCursor(("c",), [])
        raise AssertionError(f"the stand-in did not expect: {sql}")


def mssql_sampler():
    from concurbench.samplers.mssql import IndexPhysicalStats
    return IndexPhysicalStats


class StandInOwnedProvisioner:
    """Stand-in for the docker target's container (owned: the probe plans, never applies)."""

    name = "docker"

    def start(self):
        return Connection("Driver={FreeTDS};Server=127.0.0.1;Port=1;Database=concurbench;UID=sa;PWD=x;",
                          "mssql://sa@127.0.0.1:1/concurbench")

    def stop(self):
        pass


def probe_standin(tmp_path, text: str):
    path = tmp_path / "fresh.yaml"
    path.write_text(text)
    server = StandInFreshSqlServer()
    engine = SimpleNamespace(connect=server.connect,
                             server_info=lambda conn, names: {"version": "Microsoft SQL Server 2022",
                                                              "version_num": 16_000_004_135, "version_short": "2022"},
                             run_script=sqlserver.run_script, query_rows=sqlserver.query_rows)
    report = probe(load_scenario(path), StandInOwnedProvisioner(), target="docker", engine=engine)
    return report, {c.check: c for c in report.checks}, server


def test_the_probe_reads_index_physical_stats_after_the_setup_created_its_table(tmp_path):
    """Stand-in for a fresh SQL Server. The old probe read the sampler on its own connection before the rolled-back
    setup, where OBJECT_ID('dbo.ghost_demo') is NULL, and failed with "no table" (rcsi-ghost-churn on every fresh
    container). Now it is read again on the setup's connection, inside the transaction, after the setup."""
    report, checks, server = probe_standin(tmp_path, GHOSTS)
    sampler = checks["sampler index_physical_stats"]
    assert sampler.status == "ok", sampler
    assert "after v's setup" in sampler.server_says and "no table 'dbo.ghost_demo'" in sampler.server_says
    assert report.ok, [c for c in report.checks if c.status != "ok"]
    setup_conn = next(n for n, sql in server.log if sql == "BEGIN TRANSACTION")
    on_setup = [sql for n, sql in server.log if n == setup_conn]
    begin, end = on_setup.index("BEGIN TRANSACTION"), on_setup.index("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION")
    created = on_setup.index("CREATE TABLE dbo.ghost_demo (id int NOT NULL PRIMARY KEY)")
    read = on_setup.index(mssql_sampler().QUERY)
    assert begin < created < read < end  # read where the table exists, and rolled back with it
    assert checks["nothing left behind"].status == "ok"
    # a misspelt table is not there after the setup either: the probe still fails, in the server's words
    report, checks, _ = probe_standin(tmp_path, GHOSTS.replace("{table: dbo.ghost_demo}", "{table: dbo.ghost_dmeo}"))
    sampler = checks["sampler index_physical_stats"]
    assert sampler.status == "failed" and not report.ok
    assert sampler.server_says == "index_physical_stats: no table 'dbo.ghost_dmeo'"
