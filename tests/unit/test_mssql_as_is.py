"""`--server-settings as-is` on a SQL Server concurbench does not own (the dsn target), against the stand-in for
SQL Server of `mssql_standin.py`: no SQL Server can run where concurbench is built. The stand-in answers as
Microsoft's documentation says SQL Server would: sp_configure sets a value that RECONFIGURE puts in use only
for a dynamic option (`user connections` is not), @@MAX_CONNECTIONS is `user connections`, and a login without
VIEW SERVER STATE sees neither other logins' sessions nor sys.dm_os_sys_info.

What needs a restart (an sp_configure option that is not dynamic, a startup-only trace flag, memory-optimized
tempdb metadata, fewer tempdb files) is left and recorded, the rest is made only with --allow-server-changes
and put back; without as-is the same run is refused before any change; and the run's connections are checked
against `user connections` and the workers `max worker threads` gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mssql_standin import StandInProvisioner, StandInSqlServer

from concurbench.running import guards
from concurbench.engines import odbc, sqlserver
from concurbench.engines.mssql_differences import NOT_ALLOWED, RESTART, TRACE_FLAG
from concurbench.errors import ConfigError, ProvisionError
from concurbench.provisioners.registry import DSN
from concurbench.running.runner import Runner
from concurbench.running.servers import ServerSession
from concurbench.running.load import load_scenario

ROOT = Path(__file__).resolve().parents[2]
CONNINFO = "Driver={FreeTDS};Server=127.0.0.1;Port=1;Database=concurbench;UID=bench;PWD=x;"
SETTINGS = {"trace_flags": [834, 7006], "user connections": 500, "max degree of parallelism": 1,
            "memory_optimized_tempdb_metadata": True, "tempdb_files": 1, "memory_limit": "4g"}
DATABASE = {"read_committed_snapshot": True}
CHANGES = ("EXEC", "RECONFIGURE", "DBCC TRACEON", "DBCC TRACEOFF", "ALTER")


def changes(server: StandInSqlServer) -> list[str]:
    return [sql for _, sql in server.log if sql.startswith(CHANGES)]


def configured(allowed: bool, as_is: bool = True, database_owned: bool = True):
    server = StandInSqlServer.with_tempdb_files(4, holding_pages=False)
    conn = server.connect(CONNINFO)
    config = sqlserver.Configurator("concurbench", owned=False, allowed=allowed, as_is=as_is,
                                    database_owned=database_owned, sleep=lambda s: None)
    return server, conn, config


def test_standin_as_is_without_changes_allowed_changes_nothing_and_records_every_difference():
    """In a database that is not concurbench's (database options left too)."""
    server, conn, config = configured(allowed=False, database_owned=False)
    assert config.apply(conn, SETTINGS, DATABASE) is False  # never a restart
    assert changes(server) == []
    assert sorted(c.what for c in config.left) == [
        "concurbench.read_committed_snapshot: False -> True", "memory_optimized_tempdb_metadata: False -> True",
        "sp_configure max degree of parallelism: 0 -> 1", "sp_configure user connections: 0 -> 500",
        "tempdb data files: 4 -> 1", "trace flag 7006 on", "trace flag 834 on"]
    assert sqlserver.setting_differences(conn, SETTINGS, DATABASE, allowed=False) == [
        {"setting": "trace_flags", "wanted": "834, 7006", "found": "none", "why": TRACE_FLAG},
        {"setting": "user connections", "wanted": "500", "found": "0", "why": RESTART},
        {"setting": "max degree of parallelism", "wanted": "1", "found": "0", "why": NOT_ALLOWED},
        {"setting": "memory_optimized_tempdb_metadata", "wanted": "on", "found": "off", "why": RESTART},
        {"setting": "tempdb_files", "wanted": "1", "found": "4", "why": RESTART},
        {"setting": "concurbench.read_committed_snapshot", "wanted": "on", "found": "off", "why": NOT_ALLOWED}]
    assert changes(server) == []


def test_standin_as_is_with_changes_allowed_makes_what_needs_no_restart_and_puts_it_back():
    server, conn, config = configured(allowed=True)
    assert config.apply(conn, SETTINGS, DATABASE) is False
    made = [sql for sql in changes(server) if "sp_addextendedproperty" not in sql]
    # no trace flag: concurbench turns none on on a server it does not own (issue 45), it is left and recorded
    assert made == ["EXEC sp_configure N'show advanced options', 1", "RECONFIGURE",
                    "EXEC sp_configure N'max degree of parallelism', 1", "RECONFIGURE",
                    "ALTER DATABASE [concurbench] SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE"]
    # each server-wide change is recorded first: gc finds and undoes a killed run's by it
    assert sorted(server.properties["concurbench"]) == ["concurbench_configure:max degree of parallelism",
                                                        "concurbench_configure:show advanced options"]
    assert server.trace_flags == set() and server.configurations["max degree of parallelism"][0] == 1
    assert "trace flag 7006 on" in [c.what for c in config.left]
    assert [d["setting"] for d in sqlserver.setting_differences(conn, SETTINGS, DATABASE, allowed=True)] == \
        ["trace_flags", "user connections", "memory_optimized_tempdb_metadata", "tempdb_files"]
    assert server.restarts == 0 and server.pending_memory_optimized is None and len(server.tempdb_files) == 4
    assert config.restore(conn) == []
    assert server.trace_flags == set() and server.databases["concurbench"]["read_committed_snapshot"] == 0
    assert server.properties["concurbench"] == {}  # the records go with the changes
    assert {k: v[0] for k, v in server.configurations.items()}["max degree of parallelism"] == 0
    assert server.configurations["show advanced options"][0] == 0


def test_standin_without_as_is_an_option_that_takes_a_restart_is_refused_before_any_change():
    server, conn, config = configured(allowed=True, as_is=False)
    with pytest.raises(ProvisionError) as refused:
        config.apply(conn, {"user connections": 500, "max degree of parallelism": 1}, {})
    assert "sp_configure user connections: 0 -> 500 needs a server restart" in refused.value.message
    assert "--server-settings as-is" in refused.value.message
    assert changes(server) == []


@pytest.mark.parametrize("flag", [834, 7006])
def test_standin_no_trace_flag_is_turned_on_with_dbcc_even_with_changes_allowed(flag):
    """Issue 45: the old code ran DBCC TRACEON(7006, -1), a global undocumented switch, on a server concurbench
    does not own once --allow-server-changes was given (834, a start-up flag, was refused for the restart)."""
    server, conn, config = configured(allowed=True, as_is=False)
    with pytest.raises(ProvisionError, match=f"trace flag {flag} on server-wide, and concurbench turns a global "
                                             f"trace flag on only on a server it starts"):
        config.apply(conn, {"trace_flags": [flag]}, {})
    assert changes(server) == [] and server.trace_flags == set()


def scenario(tmp_path: Path, clients: int):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nengine: mssql\nduration: 1s\nvariants:\n  v:\n    pools:\n"
                    f"      p: {{clients: {clients}, transaction: [SELECT 1]}}\n")
    return load_scenario(path)


def limit(server: StandInSqlServer) -> guards.ConnectionLimit:
    conn = server.connect(CONNINFO)
    return guards.server_limit("mssql", lambda sql: sqlserver.query_rows(conn, sql, "reading the limit"))


def test_standin_connections_are_checked_against_user_connections_and_max_worker_threads(tmp_path):
    server = StandInSqlServer(other_sessions=3, max_workers=512)
    found = limit(server)
    assert found.allowed == 512
    assert found.why == ("max worker threads gives 512 workers, so at most 512 requests run at once; user "
                         "connections allows 32,767, 3 are in use by other sessions")
    with pytest.raises(ConfigError) as refused:
        guards.check_server(scenario(tmp_path, 600), list(scenario(tmp_path, 600).variants), found, "the stand-in")
    assert "600 clients make 601 connections" in refused.value.message and "gives this run 512" in refused.value.message
    assert refused.value.message.endswith("Lower the clients, or raise `max worker threads` (sp_configure)")
    server.configurations["user connections"][0] = 100
    assert limit(server).allowed == 97 and "raise `user connections`" in limit(server).fix


def test_standin_a_login_without_view_server_state_gets_what_is_known_and_the_rest_said_unknown():
    found = limit(StandInSqlServer(other_sessions=3, view_server_state=False))
    assert found.allowed == 32767
    assert found.why == ("user connections allows 32,767, sessions of other logins unknown (VIEW SERVER STATE); "
                         "max worker threads unknown (VIEW SERVER STATE)")


def test_standin_runner_records_what_a_dsn_server_ran_without(tmp_path, monkeypatch):
    """The runner's start on the dsn target with as-is: the scenario wants one tempdb file and the server has four
    (removing them takes a restart): nothing is changed, and the server's record says so."""
    server = StandInSqlServer.with_tempdb_files(4, holding_pages=False)
    monkeypatch.setattr(odbc, "connect", server.connect)
    provisioner = StandInProvisioner(server, name="dsn", allow=True)
    provisioner.as_is = True
    runner = Runner(load_scenario(ROOT / "scenarios/mssql/tempdb-gam-contention.yaml", quick=True), provisioner,
                    out_dir=tmp_path, target=DSN)
    state = runner.session(provisioner)
    runner._start(state)
    assert state.info.differences == [{"setting": "tempdb_files", "wanted": "1", "found": "4", "why": RESTART}]
    assert runner._recorded[0].differences == state.info.differences
    assert not [sql for _, sql in server.log if sql.startswith(("DBCC SHRINKFILE", "ALTER DATABASE tempdb"))]
    assert len(server.tempdb_files) == 4 and server.restarts == 0
