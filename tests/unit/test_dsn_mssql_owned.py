"""The SQL Server dsn target runs only in a database of concurbench's own (issue 38), against the stand-in for a
SQL Server concurbench does not own (mssql_dsn_standin.py): no SQL Server can run where concurbench is built.
Each test failed on the code before issue 38, which ran the setup in whatever database the DSN or the login's
default named, and dropped nothing it had made. Since issue 45 the database a run creates carries the run's id
(`concurbench_<run id>`; `concurbench` when kept), so a second run never adopts a live or a killed run's."""

from __future__ import annotations

import socket

import pytest
from mssql_dsn_standin import StandInDsnServer
from mssql_standin import StandInSession, StandInSqlError

from concurbench.engines import odbc, sqlserver
from concurbench.engines import mssql_names as names
from concurbench.errors import ConfigError, ProvisionError
from concurbench.provisioners import owned
from concurbench.provisioners.dsn_mssql import ExistingSqlServer

SERVER = "Driver={FreeTDS};Server=db.lab;Port=1433;UID=bench;PWD=s3cret-pw;"
CHANGES = ("CREATE", "DROP", "ALTER", "EXEC", "IF EXISTS", "DBCC TRACEON", "TRUNCATE", "INSERT", "DELETE")


def target(server: StandInDsnServer, monkeypatch, database: str | None = None, **options) -> ExistingSqlServer:
    monkeypatch.setattr(odbc, "connect", server.connect)
    dsn = SERVER + (f"Database={database};" if database else "")
    made = ExistingSqlServer(dsn, drivers=["FreeTDS"], **options)
    made.sleep = lambda s: None
    return made


def changed(server: StandInDsnServer) -> list[str]:
    return [sql for _, sql in server.log if sql.lstrip().upper().startswith(CHANGES)]


def test_standin_a_named_database_with_objects_of_its_own_is_refused_before_anything_runs(monkeypatch):
    server = StandInDsnServer.with_databases(app=["dbo.accounts", "dbo.orders", "sales.invoices"])
    with pytest.raises(ConfigError) as refused:
        target(server, monkeypatch, "app").start()
    message = refused.value.message
    assert "database app on db.lab:1433 holds objects concurbench did not create" in message
    assert "dbo.accounts (user_table)" in message and "sales.invoices (user_table)" in message
    assert "leave the database out of --dsn" in message and "s3cret" not in message
    assert changed(server) == []
    assert server.objects["app"] == {"dbo.accounts", "dbo.orders", "sales.invoices"}
    assert refused.value.exit_code == 2


def test_standin_without_a_database_the_run_creates_its_own_marked_temporary_and_drops_it_at_the_end(monkeypatch):
    server = StandInDsnServer.with_databases(app=["dbo.accounts"])
    dsn = target(server, monkeypatch)
    connection = dsn.start()
    mine = names.run_database(dsn.run_id)
    assert sqlserver.database_of(connection.conninfo) == mine and "s3cret" not in connection.safe
    assert connection.run_id == dsn.run_id and len(dsn.run_id) == names.RUN_ID_LENGTH
    marker = owned.parse_marker(server.properties[mine][owned.PROPERTY])
    assert marker is not None and marker.temporary
    assert server.properties[mine][names.run_property(dsn.run_id)].startswith("made by concurbench pid ")
    assert dsn.policy().owns_database and dsn.policy().drops_database
    configurator = sqlserver.configurator(dsn.policy(), connection.conninfo)
    assert configurator.database == mine and configurator.database_owned and configurator.drops_database
    dsn.stop()
    assert mine not in server.databases and server.objects["app"] == {"dbo.accounts"}
    dsn.stop()  # a second stop does nothing
    made = changed(server)
    assert made[0] == f"CREATE DATABASE [{mine}]" and made[-1] == f"DROP DATABASE [{mine}]"


def test_standin_keep_database_keeps_the_database_the_run_made(monkeypatch):
    server = StandInDsnServer.with_databases()
    dsn = target(server, monkeypatch, keep_database=True)
    dsn.start()
    assert dsn.database == owned.DATABASE  # kept: one name for every later run
    dsn.stop()
    assert not owned.parse_marker(server.properties[owned.DATABASE][owned.PROPERTY]).temporary
    assert owned.DATABASE in server.databases
    assert names.run_property(dsn.run_id) not in server.properties[owned.DATABASE]  # the run's record went


def test_standin_an_empty_named_database_is_marked_kept_and_never_dropped(monkeypatch):
    server = StandInDsnServer.with_databases(bench=[])
    dsn = target(server, monkeypatch, "bench")
    dsn.start()
    assert dsn.plan.ownership == owned.Ownership.EMPTY and dsn.policy().owns_database and not dsn.policy().drops_database
    assert not owned.parse_marker(server.properties["bench"][owned.PROPERTY]).temporary
    dsn.stop()
    assert "bench" in server.databases


def test_standin_a_login_that_may_not_create_databases_is_told_the_grant(monkeypatch):
    server = StandInDsnServer.with_databases()
    server.may_create = False
    dsn = target(server, monkeypatch)
    with pytest.raises(ConfigError) as refused:
        dsn.start()
    assert "ALTER SERVER ROLE dbcreator ADD MEMBER [bench]" in refused.value.message
    assert "nothing was changed" in refused.value.message
    server.databases[owned.DATABASE] = {}  # someone else's, made since
    dsn.stop()  # the runner lets the server go after a failed start: nothing is dropped
    assert changed(server) == [] and owned.DATABASE in server.databases


def test_standin_the_temporary_database_of_a_run_still_going_is_left_to_it(monkeypatch):
    """Issue 45: a second run makes a database of its own name instead of meeting the first one's; one that names
    the first run's database is refused."""
    server = StandInDsnServer.with_databases()
    theirs = names.run_database("0badc0de")
    server.databases[theirs] = {}
    server.properties[theirs] = {owned.PROPERTY: owned.marker_text(temporary=True)}
    server.sessions.append(StandInSession(71, theirs, program="concurbench:w0", login="bench"))
    with pytest.raises(ConfigError, match="another concurbench run, which is still connected"):
        target(server, monkeypatch, database=theirs).start()
    assert changed(server) == []
    dsn = target(server, monkeypatch)
    dsn.start()
    dsn.stop()
    assert theirs in server.databases and server.properties[theirs][owned.PROPERTY].startswith(owned.MARKER)


def test_standin_a_killed_runs_temporary_database_named_with_database_is_used_and_dropped(monkeypatch):
    server = StandInDsnServer.with_databases()
    theirs = names.run_database("0badc0de")
    server.databases[theirs] = {}
    server.properties[theirs] = {owned.PROPERTY: owned.marker_text(temporary=True).replace(
        f"@{socket.gethostname()} ", "@another-machine ")}  # not this machine's: a start leaves it to gc
    server.objects[theirs] = {"dbo.accounts"}  # the killed run's own table
    dsn = target(server, monkeypatch, database=theirs)
    dsn.start()
    assert dsn.plan.ownership == owned.Ownership.OWN and dsn.policy().drops_database
    dsn.stop()
    assert theirs not in server.databases


def test_standin_the_database_is_left_while_a_session_that_is_not_concurbenchs_is_in_it(monkeypatch):
    """Never a ROLLBACK IMMEDIATE or a KILL: the database stays, and the message says how gc removes it."""
    server = StandInDsnServer.with_databases()
    dsn = target(server, monkeypatch)
    dsn.start()
    server.sessions.append(StandInSession(88, dsn.database, program="Microsoft SQL Server Management Studio"))
    with pytest.raises(ProvisionError) as left:
        dsn.stop()
    message = left.value.message
    assert "session 88 (login app_user, host desk7, program Microsoft SQL Server Management Studio)" in message
    assert "concurbench gc --target dsn" in message and "--yes" in message and "s3cret" not in message
    assert dsn.database in server.databases
    assert not [sql for sql in changed(server) if "ROLLBACK IMMEDIATE" in sql or sql.startswith("DROP")]


def test_standin_the_drop_waits_for_concurbenchs_own_sessions_to_close(monkeypatch):
    server = StandInDsnServer.with_databases()
    dsn = target(server, monkeypatch)
    dsn.start()
    lingering = StandInSession(90, dsn.database, program="concurbench:w1", login="bench")
    server.sessions.append(lingering)
    pauses = []
    dsn.sleep = lambda s: pauses.append(s) or server.sessions.remove(lingering)
    dsn.stop()
    assert dsn.database not in server.databases and len(pauses) == 1


@pytest.mark.parametrize("database", ["master", "tempdb"])
def test_standin_a_system_database_is_refused(monkeypatch, database):
    server = StandInDsnServer.with_databases()
    with pytest.raises(ConfigError, match=f"database {database} on db.lab:1433 is one of the server's own"):
        target(server, monkeypatch, database).start()
    assert not [sql for _, sql in server.log if not sql.lstrip().upper().startswith("SELECT")]  # read, nothing changed


def test_standin_a_server_lost_before_the_drop_leaves_the_database_and_says_how_gc_removes_it(monkeypatch):
    server = StandInDsnServer.with_databases()
    dsn = target(server, monkeypatch)
    dsn.start()
    monkeypatch.setattr(odbc, "connect", lambda *a, **k: (_ for _ in ()).throw(
        StandInSqlError(10054, "TCP Provider: An existing connection was forcibly closed by the remote host.")))
    with pytest.raises(ProvisionError) as left:
        dsn.stop()
    assert f"temporary database {dsn.database} was left" in left.value.message
    assert "concurbench gc --target dsn" in left.value.message and "s3cret" not in left.value.message
