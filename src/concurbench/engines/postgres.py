"""PostgreSQL through psycopg 3: connecting, error classes, server facts."""

from __future__ import annotations

import re

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.types.numeric import Int8Dumper

from ..util import first_line
from ..errors import EngineError
from . import pg_settings
from .sqlsplit import split_sql

from .classes import CONNECTION, DEADLOCK, LOCK_NOT_AVAILABLE, OTHER, SERIALIZATION, SUCCESS, plain

_SQLSTATE_CLASSES = {"40P01": DEADLOCK, "40001": SERIALIZATION, "55P03": LOCK_NOT_AVAILABLE}


def classify_sqlstate(sqlstate: str | None) -> str:
    """Map a SQLSTATE to the harness's error class."""
    if not sqlstate:
        return CONNECTION
    if sqlstate in _SQLSTATE_CLASSES:
        return _SQLSTATE_CLASSES[sqlstate]
    if sqlstate.startswith("08"):
        return CONNECTION
    return OTHER


def classify(exc: BaseException) -> str:
    if isinstance(exc, psycopg.Error):
        if isinstance(exc, psycopg.OperationalError) and not exc.sqlstate:
            return CONNECTION
        return classify_sqlstate(exc.sqlstate)
    return OTHER


_NUMBERS = re.compile(r"\b\d+\b")


def error_key(exc: BaseException) -> str:
    """A grouping key for repeated errors: SQLSTATE and the first line with numbers masked."""
    first = (str(exc).strip().splitlines() or [""])[0]
    state = getattr(exc, "sqlstate", None) or type(exc).__name__
    return f"{state}: {_NUMBERS.sub('N', first)[:200]}"


def connect(conninfo: str, *, autocommit: bool = True, application_name: str = "concurbench",
            connect_timeout: int = 10) -> psycopg.Connection:
    """Open a connection; ints are sent as bigint so one prepared statement fits every value."""
    try:
        conn = psycopg.connect(conninfo, autocommit=autocommit, application_name=application_name,
                               connect_timeout=connect_timeout)
    except psycopg.Error as exc:
        raise EngineError(f"cannot connect to PostgreSQL: {first_line(exc)}", exc) from exc
    conn.adapters.register_dumper(int, Int8Dumper)
    return conn


def error_text(exc: BaseException) -> str:
    """The first line of a driver error, for messages (libpq's words carry no prefix to take off)."""
    return first_line(exc)


def run_script(conn: psycopg.Connection, sql: str, origin: str = "inline", *, what: str = "setup SQL") -> None:
    """Run a script outside any measurement, one statement at a time (so VACUUM may be among them);
    `what` names it in errors (setup SQL, teardown SQL)."""
    for line, statement in split_sql(sql):
        try:
            conn.execute(statement.encode())  # bytes: no client-side placeholder parsing
        except psycopg.Error as exc:
            where = f"{origin}, statement at line {line}" if origin != "inline" else f"inline SQL, line {line}"
            raise EngineError(f"{what} failed ({where}): {first_line(exc)}", exc) from exc


def query_rows(conn: psycopg.Connection, sql: str, what: str) -> list[dict]:
    """Rows of a query as JSON-ready dicts (numbers stay numbers, anything else becomes text)."""
    try:
        cur = conn.execute(sql.encode())
        if cur.description is None:
            return []
        names = [d.name for d in cur.description]
        return [{n: plain(v) for n, v in zip(names, row)} for row in cur.fetchall()]
    except psycopg.Error as exc:
        raise EngineError(f"{what} failed: {first_line(exc)}", exc) from exc


def server_info(conn: psycopg.Connection, names: list[str]) -> dict:
    """Version and the values of the named settings, read from the server itself."""
    row = conn.execute("SELECT version(), current_setting('server_version_num')::int, "
                       "current_setting('server_version')").fetchone()
    settings = {}
    if names:
        rows = conn.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", (names,)).fetchall()
        settings = {n: pg_settings.with_unit(s, u) for n, s, u in rows}
    return {"version": row[0], "version_num": row[1], "version_short": row[2], "settings": settings}


def settings_in_effect(conn: psycopg.Connection) -> dict[str, str]:
    """The server's settings that are not its built-in defaults, read-only (engines/pg_settings.py, in_effect)."""
    try:
        return pg_settings.in_effect(conn)
    except psycopg.Error as exc:
        raise EngineError(f"reading the server's settings in effect (pg_settings) failed: {first_line(exc)}",
                          exc) from exc


def setting_differences(conn: psycopg.Connection, settings: dict, database: dict, *, allowed: bool) -> list[dict]:
    """The scenario's settings this server does not match (a server concurbench does not own), as the run
    records them: {setting, wanted, found, why} (engines/pg_settings.py). PostgreSQL has no `database:`."""
    return pg_settings.differences(pg_settings.read(conn, list(settings)), dict(settings), allowed=allowed)


def flush_statistics(conn: psycopg.Connection, version_num: int) -> None:
    """Hand this session's pending activity counts to the statistics views now, so that they are not
    counted in a measurement window that follows. From PostgreSQL 15 an idle session would flush
    them up to 10 s later; before 15 an idle session sends nothing until its next transaction."""
    if version_num >= 150000:
        try:
            conn.execute("SELECT pg_stat_force_next_flush()")
        except psycopg.Error as exc:
            raise EngineError(f"flushing the session's statistics failed: {first_line(exc)}", exc) from exc


def configurator(policy, conninfo: str) -> None:
    """None: a PostgreSQL server's settings are its provisioner's (started or restarted with them, or a dsn
    server's applied by the provisioner), and PostgreSQL has no `database:` options."""
    return None


def is_connection_error(exc: BaseException) -> bool:
    return classify(exc) == CONNECTION


BEGIN, COMMIT = "BEGIN", "COMMIT"


def execute(conn: psycopg.Connection, sql: str) -> None:
    conn.execute(sql.encode())


init = execute  # a pool's per-session statement (SET ..., a temp table), run once after connecting


def begin_isolated(conn: psycopg.Connection, isolation: str) -> None:
    conn.execute(f"BEGIN ISOLATION LEVEL {isolation.upper()}")


def scalar(conn: psycopg.Connection, sql: str):
    row = conn.execute(sql.encode()).fetchone()
    return row[0] if row else None


def session_id(conn: psycopg.Connection) -> int:
    return conn.info.backend_pid


def sessions_named(conn: psycopg.Connection, names: list[str]) -> int:
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s) "
                        "AND pid <> pg_backend_pid()", (list(names),)).fetchone()[0]


def statement_channel(conn: psycopg.Connection, statements: list[tuple[str, str]], params, protocol: str):
    return StatementChannel(conn, statements, params, protocol)


_PARAM_REF = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)\b")
PROTOCOLS = ("prepared", "extended", "simple")


def positional(sql: str, names) -> tuple[bytes, tuple[str, ...]]:
    """Rewrite pgbench-style :name references (declared names only) as $1, $2, ...; return the order."""
    order: list[str] = []

    def repl(match: re.Match) -> str:
        name = match.group(1)
        if name not in names:
            return match.group(0)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    return _PARAM_REF.sub(repl, sql).encode(), tuple(order)


def _text(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return str(value).encode()


class StatementChannel:
    """Sends a pool's statements on one connection without blocking, as pgbench does.

    It talks to libpq directly (psycopg's `pgconn`): `send(i, values)` puts statement i on the
    wire, and `receive()` collects the outcome once the socket is readable: None while the server
    is still working, SUCCESS, or (error class, error key). `prepared` (the default,
    like `pgbench -M prepared`) prepares each statement on first use; `extended` sends the text
    with its parameters each time; `simple` inlines the values as literals.
    """

    def __init__(self, conn: psycopg.Connection, statements: list[tuple[str, str]], params, protocol: str):
        self.conn = conn
        self.pgconn = conn.pgconn
        self.protocol = protocol
        names = set(params)
        self.prepared: set[bytes] = set()
        self._pending: tuple | None = None  # a statement to send once its PREPARE completes
        self._error = None
        # (prepared statement name, text with $n placeholders, parameter names in $n order)
        self.plans = [(f"cb{i}".encode(), *positional(sql, names)) for i, (_name, sql) in enumerate(statements)]
        self.senders = [self._sender(*plan) for plan in self.plans]

    def fileno(self) -> int:
        return self.pgconn.socket

    def send(self, index: int, values: dict | None) -> None:
        self._error = None
        self.senders[index](values)

    def _sender(self, key: bytes, text: bytes, order: tuple[str, ...]):
        """The function that puts one statement on the wire (built once per statement)."""
        pgconn = self.pgconn
        if self.protocol == "prepared":
            prepared = self.prepared

            def send_prepared(values):
                args = [_text(values[n]) for n in order] if order else None
                if key in prepared:
                    pgconn.send_query_prepared(key, args)
                else:
                    self._pending = (key, args)
                    pgconn.send_prepare(key, text)

            return send_prepared
        if self.protocol == "extended" or order and self.protocol != "simple":
            return lambda values: pgconn.send_query_params(text, [_text(values[n]) for n in order] if order else None)
        if order:
            return lambda values: pgconn.send_query(_inline(text, [_text(values[n]) for n in order]))
        return lambda values: pgconn.send_query(text)

    def receive(self):
        """None while busy; SUCCESS; or a (class, key) pair for a failure."""
        pgconn = self.pgconn
        try:
            pgconn.consume_input()
        except psycopg.OperationalError:
            return connection_failure(pgconn.error_message)
        if pgconn.is_busy():
            return None
        res = pgconn.get_result()
        while res is not None:
            if self._error is None and res.status not in _OK:
                self._error = res
            if pgconn.is_busy():  # a multi-statement text: more results to come
                return None
            res = pgconn.get_result()
        error, self._error = self._error, None
        if self._pending is not None:
            key, args = self._pending
            self._pending = None
            if error is None:
                self.prepared.add(key)
                pgconn.send_query_prepared(key, args)
                return None
        if error is None:
            return SUCCESS
        return result_failure(error.error_field(pq.DiagnosticField.SQLSTATE),
                              error.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or error.error_message or b"",
                              pgconn.status == pq.ConnStatus.BAD)

    def in_transaction(self) -> bool:
        return self.pgconn.transaction_status != pq.TransactionStatus.IDLE

    def broken(self) -> bool:
        return self.pgconn.status == pq.ConnStatus.BAD

    def send_rollback(self) -> None:
        self._pending = None
        self.pgconn.send_query(b"ROLLBACK")

    def cancel(self) -> None:
        """Ask the server to stop the statement in flight (at the end of the window; the caller drains).

        A statement waiting on its PREPARE is not sent after all. The server drops a cancel that
        arrives before the backend has read the statement, so the caller cancels again while the
        statement still runs."""
        self._pending = None
        try:
            self.pgconn.get_cancel().cancel()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass

    def close(self) -> None:
        """Nothing of its own to release: the connection is closed by its owner."""


def _libpq_line(message: bytes | None, default: str) -> str:
    lines = message.decode(errors="replace").strip().splitlines() if message else []
    return lines[0] if lines else default


def connection_failure(message: bytes | None) -> tuple[str, str]:
    """The outcome of a statement whose connection broke (libpq's error message)."""
    return CONNECTION, f"connection: {_libpq_line(message, 'connection lost')}"


def result_failure(sqlstate: bytes | None, message: bytes | None, broken: bool) -> tuple[str, str]:
    """The outcome of a statement the server failed: (error class, grouping key with numbers masked)."""
    state = sqlstate.decode() if sqlstate else None
    kind = CONNECTION if broken else classify_sqlstate(state)
    return kind, f"{state or 'connection'}: {_NUMBERS.sub('N', _libpq_line(message, 'error'))[:200]}"


_OK = frozenset({pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY})


def _inline(text: bytes, args) -> bytes:
    def literal(match: re.Match) -> bytes:
        value = args[int(match.group(1)) - 1]
        if value is None:
            return b"NULL"
        return b"'" + value.replace(b"'", b"''") + b"'"

    return re.sub(rb"\$(\d+)", literal, text)
