"""The SQL Server engine as the runner uses it: pyodbc connections, scripts, rows, server facts, and a
statement runner for the worker pools. Driver detection, connection strings, GO splitting and error
classes are in `mssql`; database and server configuration in `mssql_config`.

Every connection is in autocommit mode: a pool's `atomic: true` sends BEGIN TRANSACTION and COMMIT
TRANSACTION itself, and a failed transaction is ended with `IF @@TRANCOUNT > 0 ROLLBACK`, which is
harmless when the server has already rolled it back (a deadlock victim, error 1205).
"""

from __future__ import annotations

import re

from ..errors import EngineError
from . import mssql
from .blocking import BlockingStatementRunner, Dialect
from .classes import CONNECTION, plain

BEGIN, COMMIT = "BEGIN TRANSACTION", "COMMIT TRANSACTION"
ROLLBACK = "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION"
YEARS = {14: "2017", 15: "2019", 16: "2022", 17: "2025"}


def _cancel(conn, cursor) -> None:
    cursor.cancel()


DIALECT = Dialect(marker="?", begin=BEGIN, commit=COMMIT, rollback=ROLLBACK, classify=mssql.classify,
                  error_key=mssql.error_key, cancel=_cancel)


def with_option(conn_str: str, key: str, value: str) -> str:
    """The ODBC string with `key` set to `value` (replacing it when present)."""
    pairs = [(k, v) for k, v in mssql._split_conn(conn_str) if k.strip().lower() != key.lower()]
    pairs.append((key, mssql.odbc_value(value)))
    return ";".join(f"{k}={v}" for k, v in pairs) + ";"


def database_of(conn_str: str) -> str | None:
    for key, value in mssql._split_conn(conn_str):
        if key.strip().lower() in ("database", "initial catalog"):
            return value.strip("{}")
    return None


def connect(conninfo: str, *, autocommit: bool = True, application_name: str = "concurbench",
            connect_timeout: int = 10):
    conn = mssql.connect(with_option(conninfo, "APP", application_name), autocommit=autocommit,
                         timeout=connect_timeout)
    return conn


def first_line(exc: BaseException) -> str:
    text = mssql._message(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"^\s*(?:\[[^\]]*\]\s*)+", "", first)


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


def _drain(cursor) -> None:
    while True:
        if cursor.description is not None:
            cursor.fetchall()
        if not cursor.nextset():
            break


def run_script(conn, sql: str, origin: str = "inline", *, what: str = "setup SQL") -> None:
    """Run a script batch by batch (split on GO lines), reading every result; `GO n` runs a batch n times;
    `what` names it in errors (setup SQL, teardown SQL)."""
    for line, batch in mssql.split_batches(sql):
        try:
            _drain(conn.execute(batch))
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            where = f"{origin}, batch at line {line}" if origin != "inline" else f"inline SQL, line {line}"
def run_script(conn, sql: str, origin: str = "inline", *, what: str = "setup SQL") -> None:
    """Run a script batch by batch (split on GO lines), reading every result; `GO n` runs a batch n times;
    `what` names it in errors (setup SQL, teardown SQL)."""


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
        raise EngineError(f"{what} failed: {first_line(exc)}", exc) from exc


def version_num(product_version: str) -> int:
    """`16.0.4135.4` -> 16004135: the major in millions, the build below (the minor is always 0)."""
    parts = [int(p) for p in re.findall(r"\d+", product_version or "")] + [0, 0, 0]
    return parts[0] * 1_000_000 + parts[2]


def server_info(conn, names: list[str]) -> dict:
    """Version, edition, and the server configuration the run depends on, read from the server."""
    from .mssql_config import read_server

    row = query_rows(conn, mssql.server_info_query(), "reading the server version")[0]
    major = version_num(row["product_version"]) // 1_000_000
    year = YEARS.get(major, f"v{major}")
    level = row.get("product_update_level") or row.get("product_level") or ""
    return {"version": " ".join(str(row["version"]).split())[:200], "version_num": version_num(row["product_version"]),
            "version_short": f"{year}-{level}" if level else year, "product_version": row["product_version"],
            "edition": row["edition"], "engine_edition": row["engine_edition"],
            "settings": read_server(conn, names)}


def statement_runner(conn, statements: list[tuple[str, str]], params, protocol: str) -> BlockingStatementRunner:
    """A pool session's runner: statements run on a thread of their own (pyodbc blocks), row counts off."""
    _drain(conn.execute("SET NOCOUNT ON"))
    return BlockingStatementRunner(conn, statements, params, DIALECT)


def is_connection_error(exc: BaseException) -> bool:
    return mssql.classify(exc) == CONNECTION


class Configurator:
    """Applies a scenario's `server:` and `database:` choices to one server and undoes them at the end.

    `owned` servers (a container we started) take trace flags at start-up and may be restarted;
    on a server we do not own every change needs `allowed` (--allow-server-changes), a restart is
    refused, and every change is put back by `restore`.
    """

    def __init__(self, database: str, *, owned: bool, allowed: bool):
        self.database = database
        self.owned = owned
        self.allowed = allowed
        self.changes: list = []

    def apply(self, conn, server: dict, database: dict) -> bool:
        """Bring the server to `server` and the database to `database`; True when a restart must follow."""
        from . import mssql_config as mc

        wanted = {k: v for k, v in server.items() if k not in mc.CONTAINER_KEYS}
        if not self.owned:  # flags an earlier variant turned on and this one does not want go off first
            keep = set(mc.flag_numbers(wanted.get("trace_flags")))
            dropped = [c for c in self.changes if c.flag is not None and c.flag not in keep]
            self.changes = [c for c in self.changes if c not in dropped]
            for problem in mc.restore(conn, dropped):
                raise EngineError(problem)
        current = mc.read_server(conn, list(wanted))
        directory, names = mc.tempdb_layout(conn) if "tempdb_files" in wanted else ("", [])
        plan = mc.plan_server(current, wanted, startup_flags=self.owned, tempdb_dir=directory, tempdb_names=names)
        db_plan = mc.plan_database(mc.read_database(conn, self.database), database, self.database)
        if not self.owned:
            mc.refuse_unowned(mc.Plan(plan.changes + db_plan.changes, plan.restart), self.allowed,
                              "server or database options")
        self.changes += mc.apply(conn, plan)
        self.changes += mc.apply(conn, db_plan)
        return plan.restart

    def restore(self, conn) -> list[str]:
        from . import mssql_config as mc

        if self.owned:  # the server goes away with its container
            return []
        problems = mc.restore(conn, self.changes)
        self.changes = []
        return problems


def configurator(provisioner, conninfo: str) -> Configurator:
    return Configurator(database_of(conninfo) or "master", owned=getattr(provisioner, "name", "") != "dsn",
                        allowed=bool(getattr(provisioner, "allow", False)))
