"""SQL Server's half of the probe: the configuration plan (engines/mssql_config.py, not applied), the
permissions the scenario needs, the setup inside BEGIN TRANSACTION ... ROLLBACK, and leftovers.

The plan is the one the runner's configurator makes, from the same functions, and is only shown.
The setup stops at its first failing batch; the transaction is then rolled back and what follows is
reported as not tried. Statements SQL Server refuses inside a transaction (ALTER DATABASE, CREATE
DATABASE: errors 226 and 574) are reported as skipped: the probe cannot undo them.

Permissions (Microsoft Learn: HAS_PERMS_BY_NAME, IS_SRVROLEMEMBER; the permissions of the DMVs,
CREATE EVENT SESSION, sp_trace_create, sp_configure, DBCC TRACEON): VIEW SERVER STATE (or VIEW
SERVER PERFORMANCE STATE, 2022 and later) for the samplers, ALTER ANY EVENT SESSION for an Extended
Events observer, ALTER TRACE for a SQL Trace, ALTER SETTINGS for sp_configure options (global trace flags are never
turned on on a server concurbench does not own: the `variants` check says so), ALTER on the database for its options,
CREATE TABLE and CREATE PROCEDURE in it for the setup.

On a server concurbench does not own, database options are planned as the run makes them: only in a
database of concurbench's own (`database_plan`, the provisioner's owned.DatabasePlan, when the probe has
it: one to be created is planned from model, which CREATE DATABASE copies), and never in another one.
`would_touch` names the existing objects the scenario's SQL would drop, replace, alter or empty
(mssql_touch.py), for a probe of a database that is not concurbench's."""

from __future__ import annotations

import contextlib

from ..util import first_line
from ..engines import mssql_config as mc
from ..errors import ConcurbenchError
from ..provisioners.mssql_owned import MARKER
from ..provisioners.owned import PROPERTY, DatabasePlan, Ownership, parse_marker
from . import mssql_touch
from .common import CREATES, background_statements, labelled, scenario_sql, why_not_run, \
    without_statements
from .report import Check, failed, ok, skipped

IN_TRANSACTION_ONLY = ("(226)", "(574)")
SESSIONS = ("SELECT session_id FROM sys.dm_exec_sessions WHERE program_name LIKE 'concurbench:%' "
            "AND session_id <> @@SPID")
EVENT_SESSIONS = "SELECT name FROM sys.server_event_sessions WHERE name LIKE 'concurbench%'"


AFTER_SETUP = object()  # a step of setup(): the samplers read after a variant's setup


def _perm(conn, sql: str) -> bool:
    row = conn.execute(sql).fetchone()
    return bool(row and row[0])


@contextlib.contextmanager
def _savepoint(conn):
    """What runs inside is undone when it fails, back to a savepoint; the probe's transaction goes on unless
    the error doomed it (XACT_STATE() -1), which the caller finds by @@TRANCOUNT. Microsoft Learn: SAVE
    TRANSACTION, ROLLBACK TRANSACTION (to a savepoint name), XACT_STATE."""
    conn.execute("SAVE TRANSACTION probe_sampler")
    try:
        yield
    except BaseException:
        conn.execute("IF XACT_STATE() = 1 ROLLBACK TRANSACTION probe_sampler")
        raise


class SqlServerSide:
    def __init__(self, eng, *, owned: bool, allowed: bool, as_is: bool = False,
                 database_plan: DatabasePlan | None = None):
        self.eng = eng
        self.owned = owned
        self.allowed = allowed
        self.as_is = as_is  # --server-settings as-is
        self.database_plan = database_plan  # a dsn server's: the run's database, and whose it is

    def database_owned(self, conn) -> bool:
        """Whether the run's database is (or will be) concurbench's, so that the run sets its options there: by
        the provisioner's plan, or else by the marker of the connection's database."""
        plan = self.database_plan
        if self.owned:
            return True
        if plan is None:
            row = conn.execute(MARKER, PROPERTY).fetchone()
            return parse_marker(row[0] if row else None) is not None
        return plan.ownership in (Ownership.CREATE, Ownership.OWN) or (plan.ownership == Ownership.EMPTY and
                                                                       plan.may_mark)

    def would_touch(self, conn, scenario, variants) -> list[str]:
        """The existing objects of the connection's database the scenario's SQL would drop, replace, alter or
        empty (a database that is not concurbench's: the probe lists them and stops there)."""
        return mssql_touch.would_touch(conn, scenario, variants)

    background_spec = staticmethod(without_statements)

    @staticmethod
    def database_changes(scenario, variants) -> list[str]:
        """The database options (ALTER DATABASE) the run sets, in concurbench's own database only."""
        options = dict(scenario.database)
        for variant in variants:
            options.update(dict(variant.database))
        return [f"ALTER DATABASE ... SET {name} {value}" for name, value in options.items()]

    @staticmethod
    def fix(words: str | None, what: str) -> str:
        if words and ("permission" in words.lower() or "(229)" in words or "(300)" in words):
            return f"grant the login the permission to {what} (see docs/mssql.md), or use a sysadmin login"
        return ""

    # -- settings ---------------------------------------------------------------------------------------
    def settings(self, conn, scenario, variants) -> list[Check]:
        checks: list[Check] = []
        plan = self.database_plan
        database = plan.name if plan is not None else conn.execute("SELECT DB_NAME()").fetchone()[0]
        if not self.owned and plan is None and str(database).lower() == "master":
            checks.append(failed("database", "the connection's database is master",
                                 "name the run's database in the DSN (Database=bench;), not master"))
        # a database the run creates starts as a copy of model (CREATE DATABASE)
        read_from = "model" if plan is not None and plan.ownership == Ownership.CREATE else database
        ours = self.database_owned(conn)
        seen: set[str] = set()
        for where, server, db in [("scenario", dict(scenario.settings), dict(scenario.database)),
                                  *((v.name, {**dict(scenario.settings), **dict(v.settings)},
                                     {**dict(scenario.database), **dict(v.database)}) for v in variants)]:
            wanted = {k: v for k, v in server.items() if k not in mc.CONTAINER_KEYS}
            left = []
            try:
                current = mc.read_server(conn, list(wanted) + ([mc.ADVANCED] if mc.configure_names(wanted) else []))
                directory, names = mc.tempdb_layout(conn) if "tempdb_files" in wanted else ("", [])
                restart_options = mc.restart_only(conn) if not self.owned and mc.configure_names(wanted) else ()
                plan = mc.plan_server(current, wanted, owned=self.owned, tempdb_dir=directory, tempdb_names=names,
                                      restart_options=restart_options, as_is=self.as_is)
                db_plan = mc.plan_database(mc.read_database(conn, read_from), db, database)
                if not self.owned:
                    made, left = mc.unowned(plan, db_plan, allowed=self.allowed, as_is=self.as_is,
                                            database_owned=ours)
                    plan, db_plan = mc.Plan(made.changes), mc.Plan()
            except ConcurbenchError as exc:
                checks.append(failed(f"{where}: settings", first_line(exc), "" if self.owned else
                                     "use --target docker, or leave the variant out with --variant"))
                continue
            except Exception as exc:  # noqa: BLE001 - a driver error reading the configuration
                checks.append(failed(f"{where}: settings", first_line(exc), self.fix(str(exc), "read it")))
                continue
            for change in [*plan.changes, *db_plan.changes, *plan.after_restart]:
                if change.what in seen:
                    continue
                seen.add(change.what)
                checks.append(ok(f"setting {change.what}", "not applied; the run runs: " + "; ".join(change.apply)
                                 + (" (then restarts the server)" if plan.restart else "")))
            for change in left:
                if change.what not in seen:
                    seen.add(change.what)
                    why = ("it takes a server restart" if change.restart else
                           f"database {database} is not concurbench's" if change.database else
                           "--allow-server-changes was not given")
                    checks.append(ok(f"setting {change.what}", f"left as the server has it ({why}): the run records "
                                                               f"the difference (--server-settings as-is)"))
        return checks

    # -- permissions ------------------------------------------------------------------------------------
    def permissions(self, conn, scenario, variants) -> list[Check]:
        checks = []
        login, sysadmin = conn.execute("SELECT SUSER_SNAME(), IS_SRVROLEMEMBER('sysadmin')").fetchone()
        checks.append(ok("login", f"{login}{' (sysadmin)' if sysadmin == 1 else ' (not sysadmin)'}"))
        if sysadmin == 1:
            return checks
        kinds = {b.kind for v in variants for b in v.background}
        settings = {k for k, _ in scenario.settings} | {k for v in variants for k, _ in v.settings}
        wanted = []
        if any(v.samplers for v in variants):
            wanted.append(("VIEW SERVER STATE", "SELECT CASE WHEN HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') = 1 "
                           "OR HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER PERFORMANCE STATE') = 1 THEN 1 ELSE 0 END",
                           "GRANT VIEW SERVER STATE TO the login (VIEW SERVER PERFORMANCE STATE on 2022 and later)"))
        if "xevents" in kinds:
            wanted.append(("ALTER ANY EVENT SESSION", "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY EVENT SESSION')",
                           "GRANT ALTER ANY EVENT SESSION TO the login"))
        if "sql_trace" in kinds:
            wanted.append(("ALTER TRACE", "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER TRACE')",
                           "GRANT ALTER TRACE TO the login"))
        if not self.owned and settings - set(mc.SERVER_KEYS) - set(mc.CONTAINER_KEYS):
            wanted.append(("ALTER SETTINGS", "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER SETTINGS')",
                           "GRANT ALTER SETTINGS TO the login"))
        if not self.owned and (scenario.database or any(v.database for v in variants)):
            wanted.append(("ALTER on the database", "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'ALTER')",
                           "GRANT ALTER ON DATABASE::<the run's database> TO the user"))
        if CREATES.search(scenario_sql(scenario, variants)):
            wanted.append(("CREATE TABLE and PROCEDURE",
                           "SELECT CASE WHEN HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'CREATE TABLE') = 1 AND "
                           "HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'CREATE PROCEDURE') = 1 THEN 1 ELSE 0 END",
                           "GRANT CREATE TABLE, CREATE PROCEDURE TO the user, with ALTER on its schema"))
        for name, sql, fix in wanted:
            try:
                has = _perm(conn, sql)
            except Exception as exc:  # noqa: BLE001 - a driver error is the server's answer
                checks.append(failed(f"permission {name}", first_line(exc), fix))
                continue
            checks.append(ok(f"permission {name}", "granted") if has else
                          failed(f"permission {name}", f"login {login} lacks {name}", fix))
        return checks

    # -- the setup, rolled back -------------------------------------------------------------------------
    def setup(self, conn, scenario, variants, after_setup=None) -> list[Check]:
        """`after_setup(conn, variant, guard)` runs after each variant's setup, inside the transaction (the
        samplers that need the setup's objects); `guard()` undoes what fails in it back to a savepoint."""
        steps = [(check, s.sql, False) for check, s in labelled("setup", scenario.setup)]
        for v in variants:
            steps += [(check, s.sql, False) for check, s in labelled(f"{v.name}: setup", v.setup)]
            if after_setup is not None:
                steps.append((f"{v.name}: samplers after the setup", v, AFTER_SETUP))
            steps += [(f"{v.name}: {what}", sql, True) for what, sql in background_statements(v)]
            steps += [(f"{v.name}: probe {p.name}", p.sql, True) for p in v.probes]
            steps += [(check, s.sql, False) for check, s in labelled(f"{v.name}: teardown", v.teardown)]
        steps += [(check, s.sql, False) for check, s in labelled("teardown", scenario.teardown)]
        checks: list[Check] = []
        conn.execute("BEGIN TRANSACTION")
        try:
            for i, (check, sql, query) in enumerate(steps):
                if query is AFTER_SETUP:
                    read = after_setup(conn, sql, lambda: _savepoint(conn))
                    checks += read
                    if not read or _perm(conn, "SELECT @@TRANCOUNT"):  # nothing read, or the transaction goes on
                        continue
                    checks.append(failed(check, "reading a sampler ended the probe's transaction",
                                         "report the probe's JSON as a bug"))
                    checks += [skipped(c, "not tried: the probe's transaction ended") for c, _, q in steps[i + 1:]
                               if q is not AFTER_SETUP]
                    break
                why = why_not_run(sql)
                if why:
                    checks.append(skipped(check, f"not run: {why}; the run does run it"))
                    continue
                try:
                    if query:
                        self.eng.query_rows(conn, sql, check)
                    else:
                        self.eng.run_script(conn, sql, "inline")
                except ConcurbenchError as exc:
                    words = first_line(exc)
                    if any(code in words for code in IN_TRANSACTION_ONLY):
                        checks.append(skipped(check, f"not run: {words} (the probe cannot undo it)"))
                    else:
                        checks.append(failed(check, words, self.fix(words, "run it")))
                    checks += [skipped(c, "not tried: an earlier step failed and the probe's transaction was "
                                          "rolled back") for c, _, q in steps[i + 1:] if q is not AFTER_SETUP]
                    break
                checks.append(ok(check, "ran and was rolled back"))
        finally:
            conn.execute("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION")
        return checks

    # -- leftovers --------------------------------------------------------------------------------------
    def snapshot(self, conn, scenario, variants) -> dict:
        return {"sessions": {r[0] for r in conn.execute(SESSIONS).fetchall()},
                "event sessions": {r[0] for r in conn.execute(EVENT_SESSIONS).fetchall()}}

    def left_behind(self, conn, scenario, variants, before: dict) -> Check:
        after = self.snapshot(conn, scenario, variants)
        found = [f"{key} {', '.join(map(str, sorted(after[key] - before[key])))}" for key in after
                 if after[key] - before[key]]
        if found:
            return failed("nothing left behind", "; ".join(found),
                          "remove them by hand, and report the probe's JSON as a bug")
        return ok("nothing left behind", "no session or event session of the probe remains")
