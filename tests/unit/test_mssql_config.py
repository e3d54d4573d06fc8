"""SQL Server configuration: what is planned, applied and put back. No SQL Server can run here, so a
stand-in connection records the statements and answers the few reads with canned rows."""

from __future__ import annotations

import re

import pytest
import sqlglot
from test_tsql_parses import check_tsql

from concurbench.engines import mssql_config as mc
from concurbench.engines import sqlserver
from concurbench.errors import EngineError, ProvisionError


class StandInCursor:
    def __init__(self, rows):
        self.rows = rows
        self.description = [("c",)] if rows is not None else None

    def fetchall(self):
        return list(self.rows or [])

    def fetchone(self):
        return (self.rows or [None])[0]

    def nextset(self):
        return False


class StandInSqlServer:
    """Stands in for a SQL Server connection: records statements, fails those matching `fail`."""

    def __init__(self, answers=None, fail=()):
        self.executed: list[str] = []
        self.answers = answers or {}
        self.fail = fail

    def execute(self, sql, *params):
        self.executed.append(sql)
        if any(f in sql for f in self.fail):
            raise RuntimeError(f"stand-in failure for: {sql}")
        for key, rows in self.answers.items():
            if key in sql:
                return StandInCursor(rows)
        return StandInCursor(None)


CURRENT_DB = {"read_committed_snapshot": False, "allow_snapshot_isolation": False,
              "accelerated_database_recovery": True, "delayed_durability": "disabled", "recovery": "full"}


def test_database_plan_changes_only_what_differs_and_knows_the_way_back():
    plan = mc.plan_database(CURRENT_DB, {"read_committed_snapshot": True, "recovery": "full",
                                         "delayed_durability": "forced", "accelerated_database_recovery": False},
                            "concurbench")
    applied = [sql for c in plan.changes for sql in c.apply]
    assert applied == [
        "ALTER DATABASE [concurbench] SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE",
        "ALTER DATABASE [concurbench] SET ACCELERATED_DATABASE_RECOVERY = OFF WITH ROLLBACK IMMEDIATE",
        "ALTER DATABASE [concurbench] SET DELAYED_DURABILITY = FORCED"]
    undo = [sql for c in plan.changes for sql in c.undo]
    assert undo == [
        "ALTER DATABASE [concurbench] SET READ_COMMITTED_SNAPSHOT OFF WITH ROLLBACK IMMEDIATE",
        "ALTER DATABASE [concurbench] SET ACCELERATED_DATABASE_RECOVERY = ON WITH ROLLBACK IMMEDIATE",
        "ALTER DATABASE [concurbench] SET DELAYED_DURABILITY = DISABLED"]
    assert not plan.restart


def test_adr_on_a_server_without_it_is_a_clear_error():
    with pytest.raises(EngineError, match="2019"):
        mc.plan_database({**CURRENT_DB, "accelerated_database_recovery": None},
                         {"accelerated_database_recovery": False}, "db")


def test_restore_undoes_in_reverse_order_and_carries_on_past_failures():
    plan = mc.plan_database(CURRENT_DB, {"read_committed_snapshot": True, "recovery": "simple"}, "db")
    conn = StandInSqlServer()
    done = mc.apply(conn, plan)
    assert conn.executed == ["ALTER DATABASE [db] SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE",
                             "ALTER DATABASE [db] SET RECOVERY SIMPLE"]
    failing = StandInSqlServer(fail=("RECOVERY FULL",))
    problems = mc.restore(failing, done)
    assert failing.executed == ["ALTER DATABASE [db] SET RECOVERY FULL",
                                "ALTER DATABASE [db] SET READ_COMMITTED_SNAPSHOT OFF WITH ROLLBACK IMMEDIATE"]
    assert len(problems) == 1 and "recovery" in problems[0]


def test_a_failed_change_undoes_the_ones_before_it():
    plan = mc.plan_database(CURRENT_DB, {"read_committed_snapshot": True, "recovery": "simple"}, "db")
    conn = StandInSqlServer(fail=("RECOVERY SIMPLE",))
    with pytest.raises(EngineError, match="cannot change db.recovery"):
        mc.apply(conn, plan)
    assert conn.executed[-1] == "ALTER DATABASE [db] SET READ_COMMITTED_SNAPSHOT OFF WITH ROLLBACK IMMEDIATE"


def test_server_plan_trace_flags_startup_or_global():
    current = {"trace_flags": [3604], "memory_optimized_tempdb_metadata": False, "tempdb_files": 1,
               "max degree of parallelism": 0, "show advanced options": 1}
    wanted = {"trace_flags": "7006,3604", "max degree of parallelism": "1", "memory_limit": "4g"}
    owned = mc.plan_server(current, wanted, owned=True)
    assert [c.apply for c in owned.changes] == [mc._set_option("max degree of parallelism", 1)]
    unowned = mc.plan_server(current, wanted, owned=False)
    assert unowned.changes[0].apply == ["DBCC TRACEON(7006, -1)"]
    assert unowned.changes[0].undo == ["DBCC TRACEOFF(7006, -1)"]  # 3604 was on before: left alone
    assert unowned.changes[1].undo == mc._set_option("max degree of parallelism", 0)


def test_memory_optimized_tempdb_metadata_needs_a_restart():
    plan = mc.plan_server({"memory_optimized_tempdb_metadata": False}, {"memory_optimized_tempdb_metadata": "on"},
                          owned=True)
    assert plan.restart
    assert plan.changes[0].apply == ["ALTER SERVER CONFIGURATION SET MEMORY_OPTIMIZED TEMPDB_METADATA = ON"]
    same = mc.plan_server({"memory_optimized_tempdb_metadata": True}, {"memory_optimized_tempdb_metadata": "on"},
                          owned=True)
    assert not same.changes and not same.restart


def test_tempdb_files_added_now_and_removed_only_after_a_restart_of_an_owned_server():
    grow = mc.plan_server({"tempdb_files": 1}, {"tempdb_files": "3"}, owned=True,
                          tempdb_dir="/var/opt/mssql/data", tempdb_names=["tempdev"])
    assert [c.what for c in grow.changes] == ["tempdb file concurbench_temp2 added", "tempdb file concurbench_temp3 added"]
    assert "FILENAME = N'/var/opt/mssql/data/concurbench_temp2.ndf'" in grow.changes[0].apply[0]
    assert not grow.restart and not grow.after_restart
    shrink = mc.plan_server({"tempdb_files": 4}, {"tempdb_files": 1}, owned=True,
                            tempdb_names=["tempdev", "temp2", "temp3", "temp4"])
    assert shrink.changes == [] and shrink.restart
    assert [c.apply[-1] for c in shrink.after_restart] == ["ALTER DATABASE tempdb REMOVE FILE [temp4]",
                                                           "ALTER DATABASE tempdb REMOVE FILE [temp3]",
                                                           "ALTER DATABASE tempdb REMOVE FILE [temp2]"]


def test_tempdb_statements_keep_the_connection_in_its_database():
    """No `USE tempdb` at batch level (it would outlive the statement and the setup would run in tempdb):
    DBCC SHRINKFILE runs inside sp_executesql, whose change of database ends with the statement."""
    grow = mc.plan_server({"tempdb_files": 1}, {"tempdb_files": 2}, owned=False, tempdb_names=["tempdev"])
    shrink = mc.plan_server({"tempdb_files": 2}, {"tempdb_files": 1}, owned=True, tempdb_names=["tempdev", "t'2"])
    statements = [sql for c in grow.changes + shrink.after_restart for sql in c.apply + c.undo]
    assert not [sql for sql in statements if sql.upper().startswith("USE ")]
    assert grow.changes[0].undo[0] == ("EXEC sys.sp_executesql N'USE tempdb; DBCC SHRINKFILE "
                                       "(N''concurbench_temp2'', EMPTYFILE) WITH NO_INFOMSGS'")
    assert shrink.after_restart[0].apply[0] == ("EXEC sys.sp_executesql N'USE tempdb; DBCC SHRINKFILE "
                                                "(N''t''''2'', EMPTYFILE) WITH NO_INFOMSGS'")
    for sql in statements:
        assert sqlglot.parse(sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)


def test_removing_tempdb_files_of_an_unowned_server_is_refused_even_when_changes_are_allowed():
    """Stand-in for SQL Server (a server concurbench does not own, 4 tempdb data files): nothing is run
    but the reads; the old code emptied and removed the files with nothing to put them back."""
    answers = {"FROM sys.databases WHERE name": [(0, 0, "DISABLED", "FULL", 1)],
               "is_accelerated_database_recovery_on": [(1,)], "DBCC TRACESTATUS": [],
               "IsTempdbMetadataMemoryOptimized": [(0,)], "COUNT(*) FROM tempdb.sys.database_files": [(4,)],
               "SELECT name, physical_name FROM tempdb.sys.database_files": [
                   ("tempdev", "/var/opt/mssql/data/tempdb.mdf"), ("temp2", "/var/opt/mssql/data/tempdb_mssql_2.ndf"),
                   ("temp3", "/var/opt/mssql/data/tempdb_mssql_3.ndf"), ("temp4", "/var/opt/mssql/data/tempdb_mssql_4.ndf")]}
    conn = StandInSqlServer(answers)
    config = sqlserver.Configurator("bench", owned=False, allowed=True)
    with pytest.raises(ProvisionError, match="tempdb") as refused:
        config.apply(conn, {"tempdb_files": "1"}, {})
    assert "--target docker" in refused.value.message
    assert all(sql.lstrip().upper().startswith(("SELECT", "DBCC TRACESTATUS")) for sql in conn.executed), conn.executed
    assert config.changes == []


def test_unowned_servers_need_permission_and_no_restart():
    plan = mc.plan_database(CURRENT_DB, {"read_committed_snapshot": True}, "db")
    with pytest.raises(ProvisionError, match="--allow-server-changes"):
        mc.refuse_unowned(plan, allowed=False, what="database options")
    mc.refuse_unowned(plan, allowed=True, what="database options")
    restart = mc.plan_server({"memory_optimized_tempdb_metadata": False}, {"memory_optimized_tempdb_metadata": True},
                             owned=False)
    with pytest.raises(ProvisionError, match="restart"):
        mc.refuse_unowned(restart, allowed=True, what="server options")
    mc.refuse_unowned(mc.Plan(), allowed=False, what="nothing")


def test_configurator_on_an_unowned_server_restores_what_it_changed():
    answers = {"FROM sys.databases WHERE name": [(0, 0, "DISABLED", "FULL", 1)],
               "is_accelerated_database_recovery_on": [(1,)], "DBCC TRACESTATUS": [],
               "IsTempdbMetadataMemoryOptimized": [(0,)], "tempdb.sys.database_files WHERE type = 0\"": [(1,)]}
    answers["'VIEW SERVER STATE'"] = [(1,)]  # the login sees every session: none is in the database
    conn = StandInSqlServer(answers)
    config = sqlserver.Configurator("bench", owned=False, allowed=True, database_owned=True)
    assert config.apply(conn, {}, {"read_committed_snapshot": True}) is False
    assert "ALTER DATABASE [bench] SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE" in conn.executed
    conn.executed.clear()
    assert config.restore(conn) == []
    changes = [sql for sql in conn.executed if sql.startswith(("ALTER", "DBCC"))]
    assert changes == ["ALTER DATABASE [bench] SET READ_COMMITTED_SNAPSHOT OFF WITH ROLLBACK IMMEDIATE"]
    for allowed in (True, False):  # a global trace flag: never on a server concurbench does not own (issue 45)
        refused = sqlserver.Configurator("bench", owned=False, allowed=allowed, database_owned=True)
        conn = StandInSqlServer(answers)
        with pytest.raises(ProvisionError, match="only on a server it starts"):
            refused.apply(conn, {"trace_flags": "7006"}, {})
        assert not [sql for sql in conn.executed if sql.startswith("DBCC TRACEON")]


def test_generated_statements_parse_as_tsql():
    statements = [mc.database_statement("db", option, value) for option, value in (
        ("read_committed_snapshot", True), ("allow_snapshot_isolation", False), ("delayed_durability", "forced"),
        ("recovery", "simple"), ("accelerated_database_recovery", True))]
    statements += mc._set_option("max degree of parallelism", 1)
    for sql in statements:
        # sqlglot keeps ALTER DATABASE ... SET and sp_configure calls as commands; a parse error still raises
        assert sqlglot.parse(sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)


def test_connection_string_helpers():
    s = "Driver={ODBC Driver 18 for SQL Server};Server=127.0.0.1,1433;Database=bench;UID=sa;PWD={p;w};APP=x;"
    assert sqlserver.database_of(s) == "bench"
    changed = sqlserver.with_option(s, "APP", "concurbench:admin")
    assert changed.count("APP=") == 1 and changed.endswith("APP=concurbench:admin;")
    assert "PWD={p;w}" in changed
    assert sqlserver.version_num("16.0.4135.4") == 16_004_135
    assert sqlserver.version_num("15.0.2000.5") // 1_000_000 == 15


def test_configurator_leaves_a_trace_flag_as_is_and_records_it_on_an_unowned_server():
    """Issue 45: with --server-settings as-is a flag the server lacks is left and recorded, never turned on."""
    answers = {"FROM sys.databases WHERE name": [(0, 0, "DISABLED", "FULL", 1)],
               "is_accelerated_database_recovery_on": [(1,)], "DBCC TRACESTATUS": []}
    conn = StandInSqlServer(answers)
    config = sqlserver.Configurator("bench", owned=False, allowed=True, as_is=True)
    config.apply(conn, {"trace_flags": "7006"}, {})
    assert not [sql for sql in conn.executed if sql.startswith(("DBCC TRACEON", "DBCC TRACEOFF"))]
    assert [c.what for c in config.left] == ["trace flag 7006 on"] and config.changes == []


# -- show advanced options (issue 22) -----------------------------------------------------------------------
class ConfigurationsStandIn(StandInSqlServer):
    """Stand-in for SQL Server's sp_configure: an advanced option can be changed only while `show
    advanced options` is 1 (otherwise error 15123, "does not exist, or it may be an advanced option");
    RECONFIGURE makes the value the one in use."""

    ADVANCED_OPTIONS = {"max degree of parallelism", "cost threshold for parallelism"}

    def __init__(self, values: dict):
        super().__init__({"FROM sys.databases WHERE name": [(0, 0, "DISABLED", "FULL", 1)],
                          "is_accelerated_database_recovery_on": [(1,)], "DBCC TRACESTATUS": []})
        self.values = dict(values)

    def execute(self, sql, *params):
        self.executed.append(sql)
        if sql.startswith("SELECT CAST(value_in_use AS bigint) FROM sys.configurations"):
            return StandInCursor([(self.values[params[0]],)] if params[0] in self.values else [])
        m = re.fullmatch(r"EXEC sp_configure N'([^']+)', (\d+)", sql)
        if m:
            if m.group(1) in self.ADVANCED_OPTIONS and not self.values["show advanced options"]:
                raise RuntimeError(f"(15123) The configuration option '{m.group(1)}' does not exist, or it may be "
                                   f"an advanced option.")
            self.values[m.group(1)] = int(m.group(2))
            return StandInCursor(None)
        if sql == "RECONFIGURE":
            return StandInCursor(None)
        return super().execute(sql, *params)


def test_show_advanced_options_is_put_back_on_a_server_concurbench_does_not_own():
    """Stand-in for SQL Server with `show advanced options` off. The old code turned it on for every
    sp_configure change and undid only the option, leaving it on."""
    conn = ConfigurationsStandIn({"show advanced options": 0, "max degree of parallelism": 0})
    config = sqlserver.Configurator("bench", owned=False, allowed=True)
    config.apply(conn, {"max degree of parallelism": 1}, {})
    assert conn.values == {"show advanced options": 1, "max degree of parallelism": 1}
    assert config.restore(conn) == []
    assert conn.values == {"show advanced options": 0, "max degree of parallelism": 0}


def test_show_advanced_options_already_on_is_left_alone():
    conn = ConfigurationsStandIn({"show advanced options": 1, "max degree of parallelism": 0})
    config = sqlserver.Configurator("bench", owned=False, allowed=True)
    config.apply(conn, {"max degree of parallelism": 1}, {})
    assert [c.what for c in config.changes] == ["sp_configure max degree of parallelism: 0 -> 1"]
    assert config.restore(conn) == [] and conn.values["show advanced options"] == 1


def test_two_variants_changing_options_put_everything_back_in_reverse():
    conn = ConfigurationsStandIn({"show advanced options": 0, "max degree of parallelism": 0,
                                  "cost threshold for parallelism": 5})
    config = sqlserver.Configurator("bench", owned=False, allowed=True)
    config.apply(conn, {"max degree of parallelism": 1}, {})
    config.apply(conn, {"max degree of parallelism": 2, "cost threshold for parallelism": 50}, {})
    assert conn.values == {"show advanced options": 1, "max degree of parallelism": 2,
                           "cost threshold for parallelism": 50}
    assert config.restore(conn) == []
    assert conn.values == {"show advanced options": 0, "max degree of parallelism": 0,
                           "cost threshold for parallelism": 5}


def test_sp_configure_statements_parse_strictly_as_tsql():
    plan = mc.plan_server({"show advanced options": 0, "max degree of parallelism": 0},
                          {"max degree of parallelism": 1}, owned=False)
    statements = [sql for change in plan.changes for sql in change.apply + change.undo]
    assert statements[:2] == ["EXEC sp_configure N'show advanced options', 1", "RECONFIGURE"]
    for sql in statements:
        check_tsql(sql, "sp_configure")
