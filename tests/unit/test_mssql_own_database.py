"""What a run changes in a SQL Server database and on the server (issue 38), against the stand-in for SQL Server
of mssql_standin.py: no SQL Server can run where concurbench is built. Database options go only to a database
of concurbench's own, never WITH ROLLBACK IMMEDIATE against a session that is not concurbench's; the run
database's options are read in one query; a trace flag turned on is recorded while it is on; `show advanced
options` is never turned on when it cannot be read; a tempdb file that cannot be removed is one warning. Each
test failed on the code before issue 38; the docstrings say how."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from mssql_standin import StandInSession, StandInSqlError, StandInSqlServer

from concurbench.engines.base import ChangePolicy
from concurbench.engines import mssql_config as mc
from concurbench.engines import sqlserver
from concurbench.errors import ConfigError, EngineError, ProvisionError

CONNINFO = "Driver={FreeTDS};Server=127.0.0.1;Port=1;Database=concurbench;UID=bench;PWD=x;"
FOREIGN = StandInSession(61, "concurbench", program="Microsoft SQL Server Management Studio - Query",
                         login="CORP\\ana", host="ana-laptop")


def configured(*, database_owned: bool, allowed: bool = True, as_is: bool = False, drops_database: bool = False):
    """The configurator the runner makes for a dsn server with --allow-server-changes (`allowed`), whose run database
    is concurbench's or not (`database_owned`: what the dsn provisioner found or made)."""
    server = StandInSqlServer()
    conn = server.connect(CONNINFO)
    policy = ChangePolicy(owned=False, allow_server_changes=allowed, as_is=as_is, owns_database=database_owned,
                          drops_database=drops_database)
    config = sqlserver.configurator(policy, CONNINFO)
    config.sleep = lambda s: None
    return server, conn, config


def altered(server: StandInSqlServer) -> list[str]:
    return [sql for _, sql in server.log if sql.startswith("ALTER DATABASE")]


# -- database options only in concurbench's own database --------------------------------------------------
def test_standin_no_recovery_model_change_on_a_database_concurbench_does_not_own():
    """The old configurator set RECOVERY SIMPLE (and back to FULL: a broken log-backup chain) on whatever database
    the DSN named, with --allow-server-changes."""
    server, conn, config = configured(database_owned=False)
    with pytest.raises(ConfigError) as refused:
        config.apply(conn, {}, {"recovery": "simple", "delayed_durability": "forced"})
    assert "concurbench.recovery: full -> simple" in refused.value.message
    assert "only in a database of its own" in refused.value.message
    assert altered(server) == [] and server.databases["concurbench"]["recovery"] == "FULL"


def test_standin_with_as_is_a_database_that_is_not_concurbenchs_keeps_its_options_and_the_run_records_them():
    server, conn, config = configured(database_owned=False, as_is=True)
    assert config.apply(conn, {}, {"recovery": "simple"}) is False
    assert altered(server) == [] and [c.what for c in config.left] == ["concurbench.recovery: full -> simple"]


def test_standin_in_its_own_database_options_need_no_flag_and_go_with_the_dropped_database():
    server, conn, config = configured(database_owned=True, allowed=False, drops_database=True)
    config.apply(conn, {}, {"recovery": "simple", "delayed_durability": "forced"})
    assert altered(server) == ["ALTER DATABASE [concurbench] SET DELAYED_DURABILITY = FORCED",
                               "ALTER DATABASE [concurbench] SET RECOVERY SIMPLE"]
    assert config.restore(conn) == [] and len(altered(server)) == 2  # not put back: the database is dropped


def test_standin_no_rollback_immediate_while_a_session_that_is_not_concurbenchs_is_in_the_database():
    """The old configurator ran READ_COMMITTED_SNAPSHOT ... WITH ROLLBACK IMMEDIATE, disconnecting every other
    session in the database."""
    server, conn, config = configured(database_owned=True)
    server.sessions.append(FOREIGN)
    server.sessions.append(StandInSession(62, "concurbench", program="concurbench:sampler", login="bench"))
    with pytest.raises(ProvisionError) as refused:
        config.apply(conn, {}, {"read_committed_snapshot": True})
    message = refused.value.message
    assert ("session 61 (login CORP\\ana, host ana-laptop, program Microsoft SQL Server Management Studio - Query)"
            in message) and "session 62" not in message
    assert "no ROLLBACK IMMEDIATE" in message and altered(server) == []


def test_standin_a_login_that_cannot_see_other_sessions_gets_no_wait_instead_of_rollback_immediate():
    server, conn, config = configured(database_owned=True)
    server.view_server_state = False
    config.apply(conn, {}, {"read_committed_snapshot": True})
    assert altered(server) == ["ALTER DATABASE [concurbench] SET READ_COMMITTED_SNAPSHOT ON WITH NO_WAIT"]


def test_standin_putting_rcsi_back_waits_for_no_foreign_session_and_says_so():
    server, conn, config = configured(database_owned=True)
    config.apply(conn, {}, {"read_committed_snapshot": True, "recovery": "simple"})
    server.sessions.append(FOREIGN)
    problems = config.restore(conn)
    assert len(problems) == 1 and "will not put back concurbench.read_committed_snapshot" in problems[0]
    assert altered(server)[-1] == "ALTER DATABASE [concurbench] SET RECOVERY FULL"  # the rest is put back


# -- a server-wide change is recorded while it is made ------------------------------------------------------
def test_standin_a_trace_flag_is_never_turned_on_even_with_server_changes_allowed():
    """Issue 38 recorded the trace flag 7006 a run turned on; issue 45 turns none on at all on a server concurbench
    does not own (the old code ran DBCC TRACEON(7006, -1) there with --allow-server-changes)."""
    server, conn, config = configured(database_owned=True)
    with pytest.raises(ProvisionError, match="only on a server it starts"):
        config.apply(conn, {"trace_flags": [7006]}, {})
    assert server.trace_flags == set() and server.properties.get("concurbench", {}) == {}


def test_standin_an_sp_configure_option_is_recorded_with_its_old_value_until_it_is_put_back():
    """A killed run left `max degree of parallelism` (and `show advanced options`) as it had set them, with nothing
    to say what they were."""
    server, conn, config = configured(database_owned=True)
    config.apply(conn, {"max degree of parallelism": 1}, {})
    records = server.properties["concurbench"]
    assert records["concurbench_configure:max degree of parallelism"].startswith("0 -> 1; made by concurbench pid ")
    assert records["concurbench_configure:show advanced options"].startswith("0 -> 1; ")
    assert config.restore(conn) == [] and records == {}
    assert server.configurations["max degree of parallelism"][0] == 0


# -- reading the database's options --------------------------------------------------------------------------
def test_standin_adr_and_rcsi_are_read_in_one_query_and_only_a_missing_column_reads_as_no_adr():
    """The old code read ADR in a second query and took any failure of it (here a lost connection) for a server
    without ADR, stopping rcsi-ghost-churn with a false "needs SQL Server 2019"."""
    server = StandInSqlServer(read_database_error=StandInSqlError(10054, "TCP Provider: Error code 0x2746"))
    conn = server.connect(CONNINFO)
    with pytest.raises(EngineError) as failed:
        mc.plan_database(mc.read_database(conn, "concurbench"), {"accelerated_database_recovery": False},
                         "concurbench")
    assert "(10054)" in failed.value.message and "2019" not in failed.value.message
    reads = [sql for _, sql in server.log if "sys.databases" in sql]
    assert len(reads) == 1 and "COL_LENGTH('sys.databases', 'is_accelerated_database_recovery_on')" in reads[0]
    older = StandInSqlServer(adr_column=False)  # SQL Server 2017: no such column
    found = mc.read_database(older.connect(CONNINFO), "concurbench")
    assert found["accelerated_database_recovery"] is None and found["recovery"] == "full"
    with pytest.raises(EngineError, match="2019"):
        mc.plan_database(found, {"accelerated_database_recovery": False}, "concurbench")


def test_standin_a_lost_connection_during_tracestatus_is_an_error_and_a_refusal_is_no_flags():
    """The old code caught every exception of DBCC TRACESTATUS and read it as "no flag is on"."""
    server = StandInSqlServer(trace_flags={7006})
    conn = server.connect(CONNINFO)
    conn.execute = lambda sql, *p: (_ for _ in ()).throw(StandInSqlError(10054, "Communication link failure"))
    with pytest.raises(EngineError, match="DBCC TRACESTATUS"):
        mc.read_server(conn, [])
    refused = StandInSqlServer().connect(CONNINFO)
    refused.execute = lambda sql, *p: (_ for _ in ()).throw(
        StandInSqlError(40518, "DBCC command 'TRACESTATUS' is not supported in this version of SQL Server."))
    assert mc.global_trace_flags(refused) is None


def test_standin_show_advanced_options_that_cannot_be_read_is_never_turned_on():
    """The old plan turned `show advanced options` on for each change when its value was unknown, and left it on."""
    server, conn, config = configured(database_owned=True)
    del server.configurations["show advanced options"]  # sys.configurations has no row for it: unknown
    with pytest.raises(ProvisionError, match="show advanced options"):
        config.apply(conn, {"max degree of parallelism": 1}, {})
    assert not [sql for _, sql in server.log if sql.startswith(("EXEC sp_configure", "RECONFIGURE"))]


# -- tempdb files ----------------------------------------------------------------------------------------------
def test_standin_a_tempdb_file_that_cannot_be_removed_is_one_warning_not_a_restart_before_every_variant():
    """A container's server (owned) whose two extra tempdb files stay busy after the restart. The old configurator
    planned the removal again for every later variant: a restart (and the same warnings) before each of them."""
    server = StandInSqlServer.with_tempdb_files(3, holding_pages=False)
    server.busy_after_restart = 99
    conn = server.connect(CONNINFO)
    config = sqlserver.Configurator("concurbench", owned=True, allowed=True, sleep=lambda s: None)
    assert config.apply(conn, {"tempdb_files": "1"}, {}) is True
    server.restart()
    warnings = config.after_restart(conn)
    assert len(warnings) == 1 and "temp2" in warnings[0] and "temp3" in warnings[0]
    for _ in range(2):  # the next variants want one tempdb file too: no restart, no warning again
        assert config.apply(conn, {"tempdb_files": "1"}, {}) is False
        assert config.after_restart(conn) == []
    assert server.restarts == 1 and len(server.tempdb_files) == 3
