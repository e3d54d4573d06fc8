"""The `dsn` target: an existing server (a cloud database, a lab box) reached by a connection string.

The password may sit in the string or come from an environment variable (`--password-env`); it is
kept in memory only, and what is shown or stored is the string without it. A scenario that changes
server-wide settings is refused unless `--allow-server-changes` is given; then each setting is set
with ALTER SYSTEM and a reload, and put back as it was when the run ends (settings that need a
restart cannot be applied to a server we do not own, and are refused).
"""

from __future__ import annotations

import os

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import ConfigError, ProvisionError
from . import registry
from .base import Connection
from .dsn_mssql import ExistingSqlServer


def safe_conninfo(conninfo: str) -> str:
    """The connection string without its password, as a URL for display."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "(unparseable connection string)"
    user = parts.get("user", "")
    host = parts.get("host", "localhost")
    port = parts.get("port", "5432")
    dbname = parts.get("dbname", user)
    return f"postgresql://{user + '@' if user else ''}{host}:{port}/{dbname}"


class ExistingServer:
    name = "dsn"

    def __init__(self, conninfo: str, settings: dict[str, str], *, password_env: str | None = None,
                 allow_server_changes: bool = False):
        try:
            parts = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"--dsn is not a valid PostgreSQL connection string or URL: {exc}") from None
        if password_env:
            if password_env not in os.environ:
                raise ConfigError(f"--password-env {password_env}: no such environment variable is set")
            parts["password"] = os.environ[password_env]
        self.conninfo = make_conninfo(**parts)
        self.safe = safe_conninfo(self.conninfo)
        self.settings = dict(settings)
        self.allow = allow_server_changes
        self.changed: list[tuple[str, str | None]] = []  # (name, previous ALTER SYSTEM value or None)
        if self.settings and not self.allow:
            raise ConfigError(
                f"this scenario changes server-wide settings ({', '.join(self.settings)}), and the dsn "
                f"target is a server concurbench does not own: add --allow-server-changes to let it set "
                f"them with ALTER SYSTEM for the run and restore them afterwards")

    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                                   application_name="concurbench:admin")
        except psycopg.Error as exc:
            raise ProvisionError(f"cannot connect to {self.safe}: {_first_line(exc)}") from None

    def start(self) -> Connection:
        with self._connect() as conn:
            self._apply(conn)
        return Connection(self.conninfo, self.safe)

    def _apply(self, conn: psycopg.Connection) -> None:
        if not self.settings:
            return
        rows = conn.execute("SELECT name, context FROM pg_settings WHERE name = ANY(%s)",
                            (list(self.settings),)).fetchall()
        context = dict(rows)
        # the scenario asks for what this server cannot give: a usage error (exit 2), not a failed run
        unknown = [n for n in self.settings if n not in context]
        if unknown:
            raise ConfigError(f"server.settings: the server at {self.safe} has no setting named {', '.join(unknown)}")
        needs_restart = [n for n in self.settings if context[n] == "postmaster"]
        if needs_restart:
            raise ConfigError(f"server.settings: {', '.join(needs_restart)} can only change with a server restart, "
                              f"which concurbench does not do to a server it does not own ({self.safe}); set "
                              f"{'them' if len(needs_restart) > 1 else 'it'} yourself or use the embedded, "
                              f"binaries or docker target")
        previous = dict(conn.execute(
            "SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%%postgresql.auto.conf' "
            "AND name = ANY(%s) AND applied", (list(self.settings),)).fetchall())
        try:
            for name, value in self.settings.items():
                conn.execute(f"ALTER SYSTEM SET {_ident(name)} = {_literal(value)}")
                self.changed.append((name, previous.get(name)))
            conn.execute("SELECT pg_reload_conf()")
        except psycopg.Error as exc:
            self._restore(conn)
            raise ProvisionError(f"cannot change server settings: {_first_line(exc)} (needs superuser "
                                 f"or ALTER SYSTEM privileges)") from None

    def _restore(self, conn: psycopg.Connection) -> None:
        for name, old in reversed(self.changed):
            if old is None:
                conn.execute(f"ALTER SYSTEM RESET {_ident(name)}")
            else:
                conn.execute(f"ALTER SYSTEM SET {_ident(name)} = {_literal(old)}")
        if self.changed:
            conn.execute("SELECT pg_reload_conf()")
        self.changed = []

    def restart(self, settings: dict[str, str] | None = None) -> Connection:
        raise ConfigError(f"a variant sets server settings of its own, which needs a restart, and concurbench does "
                          f"not restart a server it does not own ({self.safe}); run that variant on the embedded, "
                          f"binaries or docker target")

    def stop(self) -> None:
        """Put back every setting this run changed; the server itself keeps running."""
        if not self.changed:
            return
        with self._connect() as conn:
            self._restore(conn)

    def logs(self, lines: int = 40) -> str:
        return "(the server's log is not reachable through the dsn target)"

    def describe(self) -> dict:
        return {"target": self.name, "connection": self.safe}


def _ident(name: str) -> str:
    if not name.replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"not a setting name: {name!r}")
    return name


def _literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _factory(engine: str, settings: dict, options):
    if engine == "mssql":
        dsn = options.dsn or os.environ.get("CONCURBENCH_MSSQL_DSN")
        if not dsn:
            raise ConfigError("the dsn target needs --dsn (or CONCURBENCH_MSSQL_DSN): an ODBC connection string "
                              "('Server=host,1433;Database=bench;UID=user') or an mssql://user@host:1433/bench URL; "
                              "the password may come from --password-env VAR")
        return ExistingSqlServer(dsn, password_env=options.password_env,
                                 allow_server_changes=options.allow_server_changes)
    dsn = options.dsn or os.environ.get("CONCURBENCH_DSN")
    if not dsn:
        raise ConfigError("the dsn target needs --dsn (or CONCURBENCH_DSN): a postgresql:// URL or a "
                          "'host=... port=... dbname=... user=...' string; the password may come from "
                          "--password-env VAR")
    return ExistingServer(dsn, settings, password_env=options.password_env,
                          allow_server_changes=options.allow_server_changes)


registry.register("dsn", _factory)
