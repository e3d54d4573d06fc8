"""The `dsn` target for SQL Server: an existing server reached by an ODBC connection string or a URL.

    --dsn "Driver={ODBC Driver 18 for SQL Server};Server=db.lab,1433;Database=bench;UID=bench"
    --dsn "mssql://bench@db.lab:1433/bench?trust_server_certificate=yes"

Without a `Driver` the best installed one is chosen (Driver 18, 17, then FreeTDS). The password
comes from the string or from `--password-env`; it stays in memory, and what is shown or stored
is the string without it. Database and server options of the scenario are applied by the engine
only with `--allow-server-changes` and are put back when the run ends (see engines/sqlserver.py);
with `--server-settings as-is`, those that take a restart (and, without `--allow-server-changes`,
all of them) are left as the server has them and the run records each difference.

The run happens in one database: the DSN's `Database`, or, without one, the login's default
database as the session reports it (DB_NAME()), which is then written into the connection string so
that every session of the run lands there. A system database (master, tempdb, model, msdb) is
refused: the setup would create its tables there, and READ_COMMITTED_SNAPSHOT cannot be set on it.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit

from ..engines import odbc, sqlserver
from ..engines.sqlserver import with_option
from ..errors import ConfigError, ProvisionError
from .base import Connection

LOOPBACK = ("127.", "localhost", "::1", "[::1]")
SYSTEM_DATABASES = ("master", "tempdb", "model", "msdb")


def from_url(url: str, password: str | None, driver: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("mssql", "sqlserver"):
        raise ConfigError(f"--dsn: expected an ODBC connection string or an mssql:// URL, got a {parts.scheme}: URL")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    host = parts.hostname or "127.0.0.1"
    trust = query.get("trust_server_certificate", "yes" if host.startswith(LOOPBACK) else "no").lower() == "yes"
    encrypt = query.get("encrypt")
    return odbc.connection_string(driver, host, parts.port or 1433, unquote(parts.username or "sa"),
                                   password if password is not None else unquote(parts.password or ""),
                                   database=unquote(parts.path.lstrip("/")) or None, trust_server_certificate=trust,
                                   encrypt=None if encrypt is None else encrypt.lower() == "yes")


class ExistingSqlServer:
    name = "dsn"

    def __init__(self, dsn: str, *, password_env: str | None = None, allow_server_changes: bool = False,
                 as_is: bool = False, drivers: list[str] | None = None):
        password = None
        if password_env:
            if password_env not in os.environ:
                raise ConfigError(f"--password-env {password_env}: no such environment variable is set")
            password = os.environ[password_env]
        self.allow = allow_server_changes
        self.as_is = as_is
        if "://" in dsn:
            self.conninfo = from_url(dsn, password, odbc.detect_driver(drivers or odbc.installed_drivers()))
        else:
            pairs = dict((k.strip().lower(), v) for k, v in odbc._split_conn(dsn))
            text = dsn if dsn.rstrip().endswith(";") else dsn + ";"
            if "driver" not in pairs:
                driver = odbc.detect_driver(drivers or odbc.installed_drivers())
                text = f"Driver={{{driver}}};" + text
            if password is not None:
                text = with_option(text, "PWD", password)
            self.conninfo = text
        self.safe = odbc.safe_connection_string(self.conninfo)

    def start(self) -> Connection:
        try:
            conn = sqlserver.connect(self.conninfo, application_name="concurbench:check")
        except Exception as exc:  # noqa: BLE001 - EngineError or a driver error
            raise ProvisionError(f"cannot connect to {self.safe}: {getattr(exc, 'message', exc)}") from None
        try:
            database = sqlserver.database_of(self.conninfo) or self._session_database(conn)
        finally:
            conn.close()
        if database.lower() in SYSTEM_DATABASES:
            raise ProvisionError(
                f"the run would happen in {database}, a system database ({self.safe}): concurbench creates the "
                f"scenario's tables and sets its database options (READ_COMMITTED_SNAPSHOT, ...) in the database the "
                f"DSN names. Create a database for it (CREATE DATABASE concurbench) and name it in the DSN: "
                f"Database=concurbench in an ODBC string, or mssql://user@host:1433/concurbench")
        if sqlserver.database_of(self.conninfo) is None:
            self.conninfo = with_option(self.conninfo, "Database", database)
            self.safe = odbc.safe_connection_string(self.conninfo)
        return Connection(self.conninfo, self.safe)

    def _session_database(self, conn) -> str:
        """The login's default database, where a connection without `Database` lands."""
        try:
            name = sqlserver.scalar(conn, "SELECT DB_NAME() AS database_name")
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            raise ProvisionError(f"cannot read the session's database on {self.safe}: {odbc.first_line(exc)}") from None
        if not name:
            raise ProvisionError(f"{self.safe} names no database and the session reports none: add Database=... to "
                                 f"the DSN")
        return str(name)

    def restart(self, settings: dict | None = None) -> Connection:
        """No restart: trace flags and sp_configure options of a variant are set over a connection by the
        engine (and put back); an option that needs a restart is refused there."""
        return Connection(self.conninfo, self.safe)

    def stop(self) -> None:
        """The server keeps running; what the run changed was put back by the engine's configurator."""

    def logs(self, lines: int = 40) -> str:
        return "(the server's log is not reachable through the dsn target)"

    def describe(self) -> dict:
        return {"target": self.name, "connection": self.safe}
