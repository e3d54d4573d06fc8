"""The `dsn` target: an existing server (a cloud database, a lab box) reached by a connection string.

The password may sit in the string or come from an environment variable (`--password-env`); it is
kept in memory only, and what is shown or stored is the string without it.

The scenario's server-wide settings are planned when the server is reached (`start`, which changes
nothing) and applied only once the run's connections have been checked against the server
(`apply_settings`): engines/pg_settings.py decides. A setting the server already has needs nothing.
Another one is set with ALTER SYSTEM and a reload, and put back as it was when the run ends, only
with `--allow-server-changes`. One that needs a restart (concurbench does not restart a server it
does not own), one the role may not read and one the server lacks are refused, unless
`--server-settings as-is`: then they, and without `--allow-server-changes` every setting that
differs, are left as the server has them, and the run records each difference (the runner reads
them back from the server once it is configured).
"""

from __future__ import annotations

import os
import time

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..engines import pg_settings
from ..errors import ConfigError, ProvisionError
from . import registry
from .base import Connection
from .registry import AS_IS
from .dsn_mssql import ExistingSqlServer


def engine_of(dsn: str) -> str:
    """The engine a connection string is for, by its form: mssql:// and sqlserver:// URLs and ODBC strings (with
    Server= or Driver=) are SQL Server's; anything else is PostgreSQL's."""
    text = dsn.strip().lower()
    if text.startswith(("mssql://", "sqlserver://")):
        return "mssql"
    keys = {part.split("=", 1)[0].strip() for part in text.split(";") if "=" in part}
    return "mssql" if keys & {"server", "driver", "uid", "database"} else "postgres"


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
                 allow_server_changes: bool = False, as_is: bool = False):
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
        self.as_is = as_is
        self.plan: list[pg_settings.Planned] = []
        self.changed: list[tuple[str, str | None]] = []  # (name, previous ALTER SYSTEM value or None)

    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                                   application_name="concurbench:admin")
        except psycopg.Error as exc:
            raise ProvisionError(f"cannot connect to {self.safe}: {_first_line(exc)}") from None

    def start(self) -> Connection:
        """Reach the server and plan its settings; nothing is changed yet (see apply_settings)."""
        with self._connect() as conn:
            if self.settings:
                self.plan = pg_settings.plan(pg_settings.read(conn, list(self.settings)), self.settings,
                                             as_is=self.as_is, allowed=self.allow)
        self._refuse([p for p in self.plan if p.action == pg_settings.REFUSE])
        return Connection(self.conninfo, self.safe)

    def _refuse(self, refused: list[pg_settings.Planned]) -> None:
        """The scenario asks what this server cannot give: a usage error (exit 2) naming each setting and the way on."""
        if not refused:
            return
        listed = "; ".join(f"{p.name} (wanted {p.wanted}, found "
                           f"{'unknown' if p.found.shown is None else p.found.shown}: {p.why})" for p in refused)
        ways = []
        unset = [p.name for p in refused if p.why == pg_settings.NOT_ALLOWED]
        if unset:
            ways.append(f"add --allow-server-changes to let concurbench set {', '.join(unset)} with ALTER SYSTEM for "
                        f"the run and restore {'them' if len(unset) > 1 else 'it'} afterwards")
        fixed = [p.name for p in refused if p.why in (pg_settings.RESTART, pg_settings.FIXED)]
        if fixed:
            ways.append(f"set {', '.join(fixed)} yourself (concurbench does not restart a server it does not own) or "
                        f"use the embedded, binaries or docker target")
        if any(p.found.unknown for p in refused):
            ways.append("correct the name, or grant the role pg_read_all_settings")
        ways.append("add --server-settings as-is to run on the server as it is and record the differences")
        raise ConfigError(f"server.settings: the server at {self.safe} does not have what the scenario asks: "
                          f"{listed}. To go on, " + "; or ".join(ways))

    def apply_settings(self) -> None:
        """Set what the plan applies (ALTER SYSTEM and a reload), once the run's connections were checked; wait
        until the server shows the new values."""
        todo = [p for p in self.plan if p.action == pg_settings.APPLY]
        if not todo:
            return
        names = [p.name for p in todo]
        with self._connect() as conn:
            if not conn.execute(pg_settings.MAY_RESTORE_SQL).fetchone()[0]:
                raise ProvisionError(f"cannot change {', '.join(names)} on {self.safe} and put "
                                     f"{'them' if len(names) > 1 else 'it'} back: {pg_settings.RESTORE_FIX}")
            try:  # what ALTER SYSTEM holds now, to put back at the end
                previous = dict(conn.execute(
                    "SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%%postgresql.auto.conf' "
                    "AND name = ANY(%s) AND applied", (names,)).fetchall())
                for p in todo:
                    conn.execute(f"ALTER SYSTEM SET {_ident(p.name)} = {_literal(p.wanted)}")
                    self.changed.append((p.name, previous.get(p.name)))
                conn.execute("SELECT pg_reload_conf()")
            except psycopg.Error as exc:
                self._restore(conn)
                raise ProvisionError(f"cannot change server settings: {_first_line(exc)} (needs superuser "
                                     f"or ALTER SYSTEM privileges)") from None
            _wait_reloaded(conn, {p.name: p.wanted for p in todo})

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


def _wait_reloaded(conn, wanted: dict, timeout_s: float = 5.0) -> None:
    """A reload reaches each session shortly after pg_reload_conf() returns: wait until this one sees the values
    (the run then records what differs; a value the server did not take is recorded as such after the wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = pg_settings.read(conn, list(wanted))
        if all(pg_settings.same(value, found[name]) for name, value in wanted.items()):
            return
        time.sleep(0.05)


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
                                 allow_server_changes=options.allow_server_changes,
                                 as_is=options.server_settings == AS_IS)
    dsn = options.dsn or os.environ.get("CONCURBENCH_DSN")
    if not dsn:
        raise ConfigError("the dsn target needs --dsn (or CONCURBENCH_DSN): a postgresql:// URL or a "
                          "'host=... port=... dbname=... user=...' string; the password may come from "
                          "--password-env VAR")
    return ExistingServer(dsn, settings, password_env=options.password_env,
                          allow_server_changes=options.allow_server_changes, as_is=options.server_settings == AS_IS)


registry.register("dsn", _factory)
