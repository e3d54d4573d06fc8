"""The SQL Server engine as the runner uses it: pyodbc connections, scripts, rows, server facts, and a
statement channel for the worker pools. Driver detection, connection strings, GO splitting and error
classes are in `mssql`; database and server configuration in `mssql_config`.

Every connection is in autocommit mode: a pool's `atomic: true` sends BEGIN TRANSACTION and COMMIT
TRANSACTION itself, and a failed transaction is ended with `IF @@TRANCOUNT > 0 ROLLBACK`, which is
harmless when the server has already rolled it back (a deadlock victim, error 1205).
"""

from __future__ import annotations

import re
import time

from .base import ChangePolicy
from ..errors import EngineError, ProvisionError
from . import mssql_differences, odbc
from . import mssql_guards as guards
from . import mssql_config as mc
from .blocking import BlockingChannel, Dialect
from .quoting import tsql_literal
from .classes import CONNECTION, plain

BEGIN, COMMIT = "BEGIN TRANSACTION", "COMMIT TRANSACTION"
ROLLBACK = "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION"
YEARS = {14: "2017", 15: "2019", 16: "2022", 17: "2025"}


def _cancel(conn, cursor) -> None:
    cursor.cancel()


DIALECT = Dialect(marker="?", begin=BEGIN, commit=COMMIT, rollback=ROLLBACK, classify=odbc.classify,
                  error_key=odbc.error_key, cancel=_cancel)


def with_option(conn_str: str, key: str, value: str) -> str:
    """The ODBC string with `key` set to `value` (replacing it when present)."""
    pairs = [(k, v) for k, v in odbc._split_conn(conn_str) if k.strip().lower() != key.lower()]
    pairs.append((key, odbc.odbc_value(value)))
    return ";".join(f"{k}={v}" for k, v in pairs) + ";"


def database_of(conn_str: str) -> str | None:
    for key, value in odbc._split_conn(conn_str):
        if key.strip().lower() in ("database", "initial catalog"):
            return value.strip("{}")
    return None


def connect(conninfo: str, *, autocommit: bool = True, application_name: str = "concurbench",
            connect_timeout: int = 10):
    conn = odbc.connect(with_option(conninfo, "APP", application_name), autocommit=autocommit,
                         timeout=connect_timeout)
    return conn


error_text = odbc.error_text


def init(conn, sql: str) -> None:
    _drain(conn.execute(sql))


execute = init


def scalar(conn, sql: str):
    cursor = conn.execute(sql)
    while cursor.description is None:
        if not cursor.nextset():
            return None
    row = cursor.fetchone()
    _drain(cursor)
    return row[0] if row else None


def begin_isolated(conn, isolation: str) -> None:
    """An explicit transaction at an isolation level (SNAPSHOT needs ALLOW_SNAPSHOT_ISOLATION ON)."""
    _drain(conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation.upper()}; BEGIN TRANSACTION"))


def session_id(conn) -> int:
    return int(scalar(conn, "SELECT @@SPID"))


def sessions_named(conn, names: list[str]) -> int:
    """Without VIEW SERVER STATE the view lists this session only: then nothing is waited for."""
    if not names:
        return 0
    listed = ", ".join(tsql_literal(n) for n in names)
    return int(scalar(conn, f"SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE program_name IN ({listed}) "
                            "AND session_id <> @@SPID") or 0)


def _drain(cursor) -> None:
    while True:
        if cursor.description is not None:
            cursor.fetchall()
        if not cursor.nextset():
            break


def run_script(conn, sql: str, origin: str = "inline", *, what: str = "setup SQL") -> None:
    """Run a script batch by batch (split on GO lines), reading every result; `GO n` runs a batch n times;
    `what` names it in errors (setup SQL, teardown SQL)."""
    for line, batch in odbc.split_batches(sql):
        try:
            _drain(conn.execute(batch))
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            where = f"{origin}, batch at line {line}" if origin != "inline" else f"inline SQL, line {line}"
            raise EngineError(f"{what} failed ({where}): {error_text(exc)}", exc) from exc


def query_rows(conn, sql: str, what: str) -> list[dict]:
    """Rows of the first result set that has columns, as JSON-ready dicts."""
    try:
        cursor = conn.execute(sql)
        while cursor.description is None:
            if not cursor.nextset():
                return []
        names = [d[0] for d in cursor.description]
        rows = [{n: plain(v) for n, v in zip(names, row)} for row in cursor.fetchall()]
        while cursor.nextset():
            pass
        return rows
    except Exception as exc:  # noqa: BLE001 - pyodbc errors
        raise EngineError(f"{what} failed: {error_text(exc)}", exc) from exc


def version_num(product_version: str) -> int:
    """`16.0.4135.4` -> 16004135: the major in millions, the build below (the minor is always 0)."""
    parts = [int(p) for p in re.findall(r"\d+", product_version or "")] + [0, 0, 0]
    return parts[0] * 1_000_000 + parts[2]


def server_info(conn, names: list[str]) -> dict:
    """Version, edition, and the server configuration the run depends on, read from the server."""
    row = query_rows(conn, odbc.server_info_query(), "reading the server version")[0]
    major = version_num(row["product_version"]) // 1_000_000
    year = YEARS.get(major, f"v{major}")
    level = row.get("product_update_level") or row.get("product_level") or ""
    return {"version": " ".join(str(row["version"]).split())[:200], "version_num": version_num(row["product_version"]),
            "version_short": f"{year}-{level}" if level else year, "product_version": row["product_version"],
            "edition": row["edition"], "engine_edition": row["engine_edition"],
            "settings": mc.read_server(conn, names), "facts": server_facts(conn)}


def server_facts(conn) -> dict:
    """cpu_count, scheduler_count, Query Store state, ADR, optimized locking and lightweight query
    profiling of the connection's database (`odbc.SERVER_FACTS`); None where a query failed."""
    facts: dict = dict.fromkeys(odbc.FACT_COLUMNS)
    for sql in odbc.SERVER_FACTS:
        try:
            rows = query_rows(conn, sql, "reading the server's configuration")
        except EngineError:
            continue
        if rows:
            facts.update({k: v for k, v in rows[0].items() if k in facts})
    return facts


def statement_channel(conn, statements: list[tuple[str, str]], params, protocol: str) -> BlockingChannel:
    """A pool session's runner: statements run on a thread of their own (pyodbc blocks), row counts off."""
    _drain(conn.execute("SET NOCOUNT ON"))
    return BlockingChannel(conn, statements, params, DIALECT)


def is_connection_error(exc: BaseException) -> bool:
    return odbc.classify(exc) == CONNECTION


def flush_statistics(conn, version_num: int) -> None:
    """Does nothing: concurbench has no flush of a session's statistics to ask SQL Server for before a window
    (the runner calls this on every engine)."""


class Configurator:
    """Applies a scenario's `server:` and `database:` choices to one server and undoes them at the end.

    `owned` servers (a container we started) take trace flags at start-up and may be restarted;
    on a server we do not own every server change needs `allowed` (--allow-server-changes), a restart
    is refused, and every change is put back by `restore`. Database options there go only to a
    database that is concurbench's (`database_owned`), need no flag (they touch nothing of anyone
    else's), and one that needs the database to itself waits for no session that is not concurbench's
    (mssql_guards.py); when the database is dropped at the end (`drops_database`) they are not put
    back. A server-wide change made there (a trace flag, an sp_configure option) is recorded in that
    database while it is made. The runner
    restarts the server when `apply` says so (once), then calls `after_restart` for what only a fresh
    server allows (removing tempdb files, tried a few times, `sleep` between); settings the
    configurator applies itself never take a restart of their own (`needs_restart`). A tempdb file
    that could not be removed is one warning: later variants run with the files there are.
    """

    def __init__(self, database: str, *, owned: bool, allowed: bool, as_is: bool = False,
                 database_owned: bool | None = None, drops_database: bool = False, sleep=time.sleep):
        self.database = database
        self.owned = owned
        self.allowed = allowed
        self.as_is = as_is  # --server-settings as-is: what a server we do not own cannot take is left and recorded
        self.database_owned = owned if database_owned is None else database_owned
        self.drops_database = drops_database
        self.sleep = sleep
        self.changes: list = []
        self.pending: list = []  # changes waiting for the restart `apply` asked for
        self.left: list = []  # changes the last `apply` left as the server has them (as_is)
        self.tempdb_files_kept: int | None = None  # tempdb files that could not be removed: not tried again

    def needs_restart(self, current: dict, wanted: dict) -> bool:
        """Whether going from the `current` server settings to `wanted` takes a new server process before
        `apply`: only start-up arguments of a server we own (trace flags, the container's keys).
        Options applied over a connection (memory-optimized tempdb metadata, tempdb files, sp_configure)
        restart, when they must, through `apply` alone, so the server restarts once."""
        if not self.owned:
            return False
        if set(mc.flag_numbers(current.get("trace_flags"))) != set(mc.flag_numbers(wanted.get("trace_flags"))):
            return True
        return any(current.get(key) != wanted.get(key) for key in mc.CONTAINER_KEYS)

    def apply(self, conn, server: dict, database: dict) -> bool:
        """Bring the server to `server` and the database to `database`; True when a restart must follow."""
        wanted = {k: v for k, v in server.items() if k not in mc.CONTAINER_KEYS}
        if self.tempdb_files_kept is not None and int(wanted.get("tempdb_files") or 0) < self.tempdb_files_kept:
            wanted["tempdb_files"] = self.tempdb_files_kept  # its removal failed once (warned): not again
        names = list(wanted) + ([mc.ADVANCED] if mc.configure_names(wanted) else [])
        current = mc.read_server(conn, names)
        directory, names = mc.tempdb_layout(conn) if "tempdb_files" in wanted else ("", [])
        restart_options = mc.restart_only(conn) if not self.owned and mc.configure_names(wanted) else ()
        plan = mc.plan_server(current, wanted, owned=self.owned, tempdb_dir=directory, tempdb_names=names,
                              restart_options=restart_options, as_is=self.as_is)
        if self.owned:
            self.changes += mc.apply(conn, plan, self.sleep)
            self.changes += mc.apply(conn, mc.plan_database(mc.read_database(conn, self.database), database,
                                                            self.database), self.sleep)
            self.pending = list(plan.after_restart)
            return plan.restart
        found = mc.read_database(conn, self.database)
        db_plan = mc.plan_database(found, database, self.database)
        if any(c.exclusive for c in db_plan.changes) and not guards.sees_all_sessions(conn):
            db_plan = mc.plan_database(found, database, self.database, mc.NO_WAIT)  # fails rather than disconnect
        made, self.left = mc.unowned(plan, db_plan, allowed=self.allowed, as_is=self.as_is,
                                     database_owned=self.database_owned)
        guards.guard_sessions(conn, self.database, made.changes)
        if self.database_owned:  # a server-wide change is recorded in the run's database while it is made
            made = mc.Plan([guards.recorded(c, guards.change_note()) for c in made.changes])
        self.changes += mc.apply(conn, made, self.sleep)
        return False

    def after_restart(self, conn) -> list[str]:
        """The changes `apply` left for a freshly restarted server (the files tempdb recreated empty); what
        could not be done is one warning, and the run goes on with the files there are."""
        pending, self.pending = self.pending, []
        done, problems = mc.apply_or_report(conn, pending, self.sleep)
        self.changes += done
        if problems:
            self.tempdb_files_kept = mc.read_server(conn, []).get("tempdb_files")
            kept = f"; the run goes on with {self.tempdb_files_kept} tempdb data files, and later variants do not " \
                   f"try again" if self.tempdb_files_kept else ""
            return ["; ".join(problems) + kept]
        return []

    def restore(self, conn) -> list[str]:
        if self.owned:  # the server goes away with its container
            return []
        changes, self.changes = self.changes, []
        if self.drops_database:  # the run's own database goes at the end, options and all
            changes = [c for c in changes if not c.database]
        try:
            guards.guard_sessions(conn, self.database, changes, doing="put back")
        except ProvisionError as exc:
            problems = [exc.message]
            changes = [c for c in changes if not c.exclusive]
        else:
            problems = []
        return problems + mc.restore(conn, changes, self.sleep)


def configurator(policy: ChangePolicy, conninfo: str) -> Configurator:
    """The run's database is the one of the connection string (the dsn target writes it there); never
    a default, so database options never land on master. The provisioner's policy says whether the server
    is concurbench's, what may change on one that is not, whether that database is concurbench's
    (`owns_database`) and whether it goes at the end (`drops_database`)."""
    database = database_of(conninfo)
    if not database:
        raise EngineError("the connection string names no database (Database=...), so concurbench cannot tell "
                          "which database to set the scenario's options on; name one in the DSN")
    return Configurator(database, owned=policy.owned, allowed=policy.allow_server_changes, as_is=policy.as_is,
                        database_owned=policy.owned or policy.owns_database, drops_database=policy.drops_database)


def setting_differences(conn, settings: dict, database: dict, *, allowed: bool) -> list[dict]:
    """The scenario's server and database options this server does not match (a server concurbench does not
    own), as the run records them: {setting, wanted, found, why} (engines/mssql_differences.py)."""
    return mssql_differences.differences(conn, settings, database, database_of_session(conn), allowed=allowed)


def settings_in_effect(conn) -> None:
    """None: sys.configurations holds each option's configured value and the value in use, but not its default,
    so the engine cannot tell which options differ from it. The options a scenario names are in `settings`."""
    return None


def database_of_session(conn) -> str:
    return str(scalar(conn, "SELECT DB_NAME() AS database_name"))
