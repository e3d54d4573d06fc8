"""PostgreSQL's half of the probe: settings, permissions, the rolled-back setup, leftovers.

The setup runs inside one transaction, each statement under a savepoint, and is rolled back at the
end; each variant's setup, its held transactions' statements, its probe queries and its teardown
run under a savepoint of their own after the scenario's setup. A statement that cannot run inside
a transaction (VACUUM, CREATE INDEX CONCURRENTLY; SQLSTATE 25001) or whose effect a rollback does
not undo (common.why_not_run) is not run and is reported as skipped. A script stops at its first
failure; the next script is still tried.
"""

from __future__ import annotations

import contextlib
import re
import time

import psycopg
from psycopg import pq

from ..util import first_line
from ..engines import pg_settings
from ..engines.sqlsplit import split_sql
from .common import CREATES, background_statements, labelled, scenario_sql, why_not_run, \
    without_statements
from .report import Check, failed, ok, skipped
from .touches import Touch, Verb, scenario_touches

EXTENSION = re.compile(r"\bCREATE\s+EXTENSION\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?([\w-]+)\"?", re.I)
IN_TRANSACTION_ONLY = ("25001", "2D000")  # cannot run inside a transaction block; invalid transaction termination
LEFT_WAIT_S = 3.0  # a closed session's backend leaves pg_stat_activity shortly after, not at once

FIXES = (("permission denied for schema", "GRANT CREATE ON SCHEMA public TO the role (or the schema the setup uses)"),
         ("permission denied to create extension", "have a superuser create the extension in this database first"),
         ("permission denied to examine", "GRANT pg_read_all_settings TO the role"),
         ("permission denied for function pg_", "GRANT pg_monitor TO the role (or EXECUTE on that function)"),
         ("must be loaded via", "the library is loaded at server start: see this variant's restart check (its "
                                "`variant` check on a server concurbench does not own)"))
# An object a statement names, as it exists in the database: "table public.accounts" (none when it does not)
RELATION = "SELECT i.type || ' ' || i.identity FROM pg_identify_object('pg_class'::regclass, to_regclass(%s), 0) i"
ROUTINES = ("SELECT i.type || ' ' || i.identity FROM pg_proc p, pg_identify_object('pg_proc'::regclass, p.oid, 0) i "
            "WHERE p.proname = %s AND (CASE WHEN %s::text IS NULL THEN pg_function_is_visible(p.oid) "
            "ELSE p.pronamespace = to_regnamespace(%s) END)")
LOOKUPS = {
    "relation": RELATION, "table": RELATION, "view": RELATION, "materialized view": RELATION, "foreign table": RELATION,
    "sequence": RELATION, "index": RELATION,
    "type": "SELECT i.type || ' ' || i.identity FROM pg_identify_object('pg_type'::regclass, to_regtype(%s), 0) i",
    "schema": "SELECT 'schema ' || nspname FROM pg_namespace WHERE oid = to_regnamespace(%s)",
    "extension": "SELECT 'extension ' || extname FROM pg_extension WHERE extname = %s",
    "trigger": "SELECT 'trigger ' || tgname || ' on ' || tgrelid::regclass FROM pg_trigger "
               "WHERE tgname = %s AND tgrelid = to_regclass(%s)",
    "rule": "SELECT 'rule ' || rulename || ' on ' || tablename FROM pg_rules WHERE rulename = %s "
            "AND tablename = %s",
}
LOOKUPS["domain"] = LOOKUPS["type"]
DONE = {Verb.DROP: "dropped", Verb.REPLACE: "replaced", Verb.ALTER: "altered", Verb.EMPTY: "emptied",
        Verb.WRITE: "written"}
SESSIONS = ("SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE 'concurbench:%%' "
            "AND pid <> pg_backend_pid()")
OBJECTS = ("SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
           "WHERE n.nspname NOT LIKE 'pg_temp%%' AND n.nspname NOT LIKE 'pg_toast_temp%%'")
FUNCTIONS = ("SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
             "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')")


class PostgresSide:
    def __init__(self, eng, *, owned: bool, allowed: bool, as_is: bool = False, database_plan=None):
        self.eng = eng
        self.database_plan = database_plan  # a dsn server's (provisioners/owned.py): the database check says it
        self.owned = owned  # a server concurbench starts (and may restart)
        self.allowed = allowed  # --allow-server-changes
        self.as_is = as_is  # --server-settings as-is

    background_spec = staticmethod(without_statements)

    @staticmethod
    def database_owned(conn) -> bool:
        """A dsn run uses only a database of concurbench's (the database check says which); PostgreSQL's plan of
        each variant's needs does not depend on it."""
        return True

    @staticmethod
    def database_changes(scenario, variants) -> list[str]:
        """Database options a run sets (ALTER DATABASE): a PostgreSQL scenario has none; the database itself is
        created, marked or dropped as the database check says."""
        return []

    @staticmethod
    def fix(words: str | None, what: str) -> str:
        """What to do about an error, by the server's words."""
        for pattern, fix in FIXES:
            if words and pattern in words:
                return fix
        if words and "permission denied" in words:
            return f"grant the role what it needs to {what}, or use a superuser"
        return ""

    # -- settings ---------------------------------------------------------------------------------------
    def settings(self, conn, scenario, variants) -> list[Check]:
        """The plan for the scenario's server settings and the variants' own, read from the server, not applied."""
        wanted = dict(scenario.settings)
        found = pg_settings.read(conn, list(wanted))
        if self.owned:
            checks = [self._owned(name, value, found[name]) for name, value in wanted.items()]
        else:
            checks = [self._unowned(conn, p) for p in pg_settings.plan(found, wanted, as_is=self.as_is,
                                                                         allowed=self.allowed)]
        for variant in variants:
            if not variant.settings or {**dict(scenario.settings), **dict(variant.settings)} == dict(scenario.settings):
                continue
            wanted = ", ".join(f"{k}={v}" for k, v in variant.settings)
            if self.owned:  # on a server it does not own the `variants` check says why it cannot (needs.py)
                checks.append(ok(f"{variant.name}: restart", f"the run restarts the server with {wanted} for this "
                                                             f"variant (not applied)"))
        return checks

    @staticmethod
    def _owned(name: str, value, found: pg_settings.Found) -> Check:
        check = f"setting {name}"
        if not found.unknown:
            return ok(check, f"now {found.shown}; the run starts the server with {value} (not applied)")
        if "." in name:  # a library's setting: known once shared_preload_libraries loads it
            return ok(check, f"not known to the server until its library is loaded; the run starts the server "
                             f"with {value} (not applied)")
        return failed(check, found.unknown, "correct or remove it under server.settings")

    def _unowned(self, conn, p: pg_settings.Planned) -> Check:
        check, now = f"setting {p.name}", f"now {p.found.shown}"
        if p.action == pg_settings.SAME:
            return ok(check, f"{now}, as the scenario wants")
        if p.action == pg_settings.RECORD:
            return ok(check, f"{now if p.found.shown is not None else 'unknown'}; the scenario wants {p.wanted}; "
                             f"{p.why}: the run leaves it as it is and records the difference (--server-settings "
                             f"as-is)")
        if p.action == pg_settings.APPLY:
            role, superuser = conn.execute("SELECT current_user, rolsuper FROM pg_roles "
                                           "WHERE rolname = current_user").fetchone()
            if not superuser and not self._may_alter_system(conn, p.name, conn.info.server_version):
                words = self._refusal(conn, p.name, p.wanted, p.found.context) or \
                    f"role {role} may not ALTER SYSTEM SET {p.name}"
                return failed(check, f"{now}; {words}", f"run as a superuser, or GRANT ALTER SYSTEM ON PARAMETER "
                                                        f"{p.name} TO {role} (PostgreSQL 15 and later)")
            if not conn.execute(pg_settings.MAY_RESTORE_SQL).fetchone()[0]:
                return failed(check, f"{now}; role {role} may not read pg_file_settings or reload the configuration, "
                                     f"which the run does to put the setting back exactly",
                              pg_settings.RESTORE_FIX.replace("the role", role))
            return ok(check, f"{now}; the run sets {p.wanted} with ALTER SYSTEM and a reload and puts {p.found.shown} "
                             f"back at the end (not applied)")
        if p.why == pg_settings.NOT_ALLOWED:
            return failed(check, f"{now}; the run would set {p.wanted} with ALTER SYSTEM and a reload",
                          "add --allow-server-changes (the run puts the old value back at the end), or "
                          "--server-settings as-is to run with the server's value and record the difference")
        if p.found.unknown:
            return failed(check, p.found.unknown, "correct or remove it under server.settings, grant the role "
                                                  "pg_read_all_settings, or add --server-settings as-is")
        return failed(check, f"{now}; {p.name} {p.why} (context {p.found.context}), which concurbench does not do "
                             f"to a server it does not own",
                      "set it yourself and restart the server, add --server-settings as-is to run with the server's "
                      "value and record the difference, or use the embedded, binaries or docker target")

    @staticmethod
    def _may_alter_system(conn, name: str, version: int) -> bool:
        if version < 150000:  # before 15 only a superuser may
            return False
        return bool(conn.execute("SELECT has_parameter_privilege(%s, 'ALTER SYSTEM')", (name,)).fetchone()[0])

    @staticmethod
    def _refusal(conn, name: str, value: str, context: str) -> str | None:
        """The server's own words for a setting this role may not change: SET LOCAL in a transaction that
        is rolled back (only settings a session may set at all can be tried this way)."""
        if context not in ("user", "superuser"):
            return None
        try:
            with conn.transaction(force_rollback=True):
                conn.execute("SELECT set_config(%s, %s, true)", (name, str(value)))
        except psycopg.Error as exc:
            return first_line(exc)
        return None

    # -- permissions ------------------------------------------------------------------------------------
    def permissions(self, conn, scenario, variants) -> list[Check]:
        role, superuser, db = conn.execute("SELECT current_user, rolsuper, current_database() FROM pg_roles "
                                           "WHERE rolname = current_user").fetchone()
        checks = [ok("role", f"{role} in database {db}{' (superuser)' if superuser else ' (not a superuser)'}")]
        sql = scenario_sql(scenario, variants)
        if CREATES.search(sql) and not superuser:
            schema, may = conn.execute("SELECT current_schema(), has_schema_privilege(current_schema(), 'CREATE') "
                                       "FROM (SELECT 1) s WHERE current_schema() IS NOT NULL").fetchone() \
                or (None, False)
            if may:
                checks.append(ok("create objects", f"role {role} may create in schema {schema}"))
            else:
                checks.append(failed("create objects", f"role {role} may not create objects in schema "
                                                       f"{schema or '(none on the search_path)'}",
                                     f"GRANT CREATE ON SCHEMA {schema or 'public'} TO {role} (as the schema's "
                                     f"owner), or use a role that owns it"))
        for name in dict.fromkeys(EXTENSION.findall(sql)):
            checks.append(self._extension(conn, name, role, db, superuser))
        if conn.info.server_version >= 150000 and variants and not superuser:
            may = conn.execute("SELECT has_function_privilege('pg_stat_force_next_flush()', 'EXECUTE')").fetchone()[0]
            checks.append(ok("pg_stat_force_next_flush()", "may execute") if may else
                          failed("pg_stat_force_next_flush()", f"role {role} may not execute it (the runner calls it "
                                                               f"before each measurement window)",
                                 f"GRANT EXECUTE ON FUNCTION pg_stat_force_next_flush() TO {role}"))
        return checks

    @staticmethod
    def _extension(conn, name: str, role: str, db: str, superuser: bool) -> Check:
        check = f"extension {name}"
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (name,)).fetchone()
        if row:
            return ok(check, f"installed (version {row[0]})")
        available = conn.execute("SELECT bool_or(trusted) FROM pg_available_extension_versions WHERE name = %s",
                                 (name,)).fetchone()[0]
        if available is None:
            return failed(check, f"extension \"{name}\" is not available on this server",
                          "install the server's contrib package (it ships the extension's files)")
        if superuser:
            return ok(check, "not installed; the setup creates it")
        creator = conn.execute("SELECT has_database_privilege(current_database(), 'CREATE')").fetchone()[0]
        if available and creator:
            return ok(check, f"not installed; it is trusted, and role {role} may create it")
        return failed(check, f"not installed in database {db}, and role {role} may not create it "
                             f"({'it is not trusted: only a superuser may' if not available else 'no CREATE on the database'})",
                      f"have a superuser run CREATE EXTENSION {name}; in database {db} first, or use a superuser role")

    # -- a database that is not concurbench's ---------------------------------------------------------------
    def would_touch(self, conn, scenario, variants) -> list[str]:
        """The database's objects that the run's statements would drop, replace, alter, empty or write, each
        with where the statement is: read from the statements, nothing run."""
        hits: dict[str, dict[Verb, str]] = {}
        for touch in scenario_touches(scenario, variants):
            for identity in self._existing(conn, touch):
                hits.setdefault(identity, {}).setdefault(touch.verb, touch.where)
        return [f"{identity} would be " + "; ".join(f"{DONE[verb]} ({where})" for verb, where in verbs.items())
                for identity, verbs in hits.items()]

    @staticmethod
    def _existing(conn, touch: Touch) -> list[str]:
        if touch.kind in ("function", "procedure", "routine", "aggregate"):
            if "(" in touch.name:
                sql, args = ("SELECT i.type || ' ' || i.identity FROM pg_identify_object('pg_proc'::regclass, "
                             "to_regprocedure(%s), 0) i", (touch.name,))
            else:
                schema, name = _parts(touch.name)
                sql, args = ROUTINES, (name, schema, schema)
        elif touch.kind in ("trigger", "rule"):
            sql, args = LOOKUPS[touch.kind], (_parts(touch.name)[1], touch.on if touch.kind == "trigger"
                                              else _parts(touch.on or "")[1])
        elif touch.kind in ("extension",):
            sql, args = LOOKUPS["extension"], (_parts(touch.name)[1],)
        elif touch.kind in LOOKUPS:
            sql, args = LOOKUPS[touch.kind], (touch.name,)
        else:
            return []
        try:
            with conn.transaction():
                return [r[0] for r in conn.execute(sql, args).fetchall() if r[0]]
        except psycopg.Error:  # a name the server cannot read as one (written for another engine): nothing of its
            return []

    # -- the setup, rolled back -------------------------------------------------------------------------
    def setup(self, conn, scenario, variants, after_setup=None) -> list[Check]:
        """`after_setup(conn, variant, guard)` runs after each variant's setup, inside the transaction (the
        samplers that need the setup's objects); `guard()` undoes what fails in it under a savepoint."""
        checks: list[Check] = []
        conn.execute("BEGIN")
        try:
            for check, step in labelled("setup", scenario.setup):
                checks += self._script(conn, check, step.sql)
            for variant in variants:
                conn.execute("SAVEPOINT probe_variant")
                for check, step in labelled(f"{variant.name}: setup", variant.setup):
                    checks += self._script(conn, check, step.sql)
                if after_setup is not None:
                    checks += after_setup(conn, variant, lambda: _savepoint(conn))
                    if conn.info.transaction_status != pq.TransactionStatus.INTRANS:
                        raise RuntimeError(f"{variant.name}: reading a sampler ended the probe's transaction")
                for what, sql in background_statements(variant):
                    checks += self._script(conn, f"{variant.name}: {what}", sql, query=True)
                for p in variant.probes:
                    checks += self._script(conn, f"{variant.name}: probe {p.name}", p.sql, query=True)
                for check, step in labelled(f"{variant.name}: teardown", variant.teardown):
                    checks += self._script(conn, check, step.sql)
                conn.execute("ROLLBACK TO SAVEPOINT probe_variant")
            for check, step in labelled("teardown", scenario.teardown):
                checks += self._script(conn, check, step.sql)
        finally:
            conn.execute("ROLLBACK")
        return checks

    def _script(self, conn, check: str, sql: str, *, query: bool = False) -> list[Check]:
        """One script, statement by statement under a savepoint: ok, failed at its first failing statement,
        and a skipped check for each statement left out."""
        out, ran = [], 0
        for line, statement in split_sql(sql):
            where = f"line {line}" if not query else "the query"
            why = why_not_run(statement)
            if why:
                out.append(skipped(f"{check}, {where}", f"not run: {why}; the run does run it"))
                continue
            conn.execute("SAVEPOINT probe_step")
            try:
                cur = conn.execute(statement.encode())
                if cur.description is not None:
                    cur.fetchall()
            except psycopg.Error as exc:
                conn.execute("ROLLBACK TO SAVEPOINT probe_step")
                if exc.sqlstate in IN_TRANSACTION_ONLY:
                    out.append(skipped(f"{check}, {where}", f"not run: {first_line(exc)} (the probe cannot undo it)"))
                    continue
                return [failed(check, f"{where}: {first_line(exc)}", self.fix(first_line(exc), "run it")), *out]
            conn.execute("RELEASE SAVEPOINT probe_step")
            ran += 1
            if conn.info.transaction_status != pq.TransactionStatus.INTRANS:  # never: why_not_run keeps them out
                raise RuntimeError(f"{check}: {where} ended the probe's transaction")
        return [ok(check, f"{ran} statement{'s' if ran != 1 else ''} ran and {'were' if ran != 1 else 'was'} "
                          f"rolled back"), *out]

    # -- leftovers --------------------------------------------------------------------------------------
    def snapshot(self, conn, scenario, variants) -> dict:
        names = sorted({n for n, _ in scenario.settings} | {n for v in variants for n, _ in v.settings})
        return {
            "sessions": {pid for pid, _ in conn.execute(SESSIONS).fetchall()},
            "objects": {r[0] for r in conn.execute(OBJECTS).fetchall()},
            "functions": {r[0] for r in conn.execute(FUNCTIONS).fetchall()},
            "extensions": {r[0] for r in conn.execute("SELECT extname FROM pg_extension").fetchall()},
            "roles": {r[0] for r in conn.execute("SELECT rolname FROM pg_roles").fetchall()},
            "settings": dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                                          (names,)).fetchall()),
            # what ALTER SYSTEM wrote: readable by superusers and pg_read_all_settings only
            "auto.conf": set(conn.execute("SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE "
                                          "'%%postgresql.auto.conf'").fetchall()) if conn.execute(
                "SELECT has_table_privilege('pg_file_settings', 'SELECT')").fetchone()[0] else set(),
        }

    def left_behind(self, conn, scenario, variants, before: dict, *, wait_s: float = LEFT_WAIT_S,
                    sleep=time.sleep) -> Check:
        """What the probe's own sessions, objects and settings changed, against the snapshot taken first."""
        deadline = time.monotonic() + wait_s
        while True:
            after = self.snapshot(conn, scenario, variants)
            new_sessions = after["sessions"] - before["sessions"]
            if not new_sessions or time.monotonic() >= deadline:
                break
            sleep(0.1)
        found = []
        if new_sessions:
            names = dict(conn.execute(SESSIONS).fetchall())
            found.append("sessions " + ", ".join(f"{names.get(p, '?')} (pid {p})" for p in sorted(new_sessions)))
        for key in ("objects", "functions", "extensions", "roles"):
            new = after[key] - before[key]
            if new:
                found.append(f"{key} {', '.join(sorted(new))}")
        changed = [f"{n}: {before['settings'].get(n)} -> {v}" for n, v in after["settings"].items()
                   if before["settings"].get(n) != v]
        if changed or after["auto.conf"] != before["auto.conf"]:
            found.append("settings " + ("; ".join(changed) or "postgresql.auto.conf changed"))
        if found:
            return failed("nothing left behind", "; ".join(found),
                          "remove them by hand, and report the probe's JSON as a bug")
        return ok("nothing left behind", "no session, object, extension, role or setting of the probe remains")


def _parts(name: str) -> tuple[str | None, str]:
    """(schema or None, name) of a possibly qualified, possibly quoted name, as the server stores them."""
    parts = [p.strip() for p in re.findall(r'"(?:[^"]|"")+"|[^.]+', name)]
    unquoted = [p[1:-1].replace('""', '"') if p.startswith('"') else p.lower() for p in parts]
    return (unquoted[-2] if len(unquoted) > 1 else None), unquoted[-1]


@contextlib.contextmanager
def _savepoint(conn):
    """What runs inside is undone when it fails, and the probe's transaction goes on."""
    conn.execute("SAVEPOINT probe_sampler")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO SAVEPOINT probe_sampler")
        raise
    conn.execute("RELEASE SAVEPOINT probe_sampler")
