"""The `dsn` target for SQL Server: an existing server reached by an ODBC connection string or a URL.

    --dsn "Driver={ODBC Driver 18 for SQL Server};Server=db.lab,1433;UID=bench"
    --dsn "mssql://bench@db.lab:1433/bench?trust_server_certificate=yes"

Without a `Driver` the best installed one is chosen (Driver 18, 17, then FreeTDS). The password
comes from the string or from `--password-env`; it stays in memory, and what is shown or stored
is the string without it.

A scenario's setup drops and creates objects by name, so the run happens only in a database of
concurbench's own (provisioners/owned.py; the SQL in mssql_owned.py): without `Database` in the DSN,
the database `concurbench`, created for the run (with its marker, the extended property
`concurbench`, saying it is temporary) and dropped when the run ends unless `--keep-database`; with
`Database`, that database when it carries the marker or holds no user objects (then it is marked as
kept). Anything else, a login that may not create the database it needs, and a temporary database
another run is still connected to are refused before anything is changed, with the way forward
(`inspect` reads, `start` acts). A system database (master, tempdb, model, msdb) is refused: the
setup would create its tables there, and READ_COMMITTED_SNAPSHOT cannot be set on it.

Database options of the scenario are set by the engine only in that database (engines/sqlserver.py),
and server options only with `--allow-server-changes`, put back when the run ends; with
`--server-settings as-is`, those that take a restart (and, without `--allow-server-changes`, all of
them) are left as the server has them and the run records each difference. What a killed run left on
the server is listed and removed by `concurbench gc --target dsn` (`leftovers`, `remove`:
mssql_sweep.py).

The database the run created is dropped only when no session that is not concurbench's is in it;
otherwise it is left, and `stop` says so and how `gc` removes it. DROP DATABASE never disconnects
anyone: it fails while a session uses the database (error 3702), and is tried again for a few seconds
while only concurbench's own sessions are still closing.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from urllib.parse import parse_qs, unquote, urlsplit

from ..engines import mssql_guards as guards
from ..engines import odbc, sqlserver
from ..engines.sqlserver import with_option
from ..errors import ConcurbenchError, ConfigError, ProvisionError
from ..housekeeping.remote import Leftover
from ..samplers.mssql_logic import quote_ident
from . import mssql_owned as mo
from . import owned
from .base import Connection
from .mssql_sweep import Sweep

LOOPBACK = ("127.", "localhost", "::1", "[::1]")
IN_USE = 3702  # DROP DATABASE: the database is in use
DROP_ATTEMPTS = 5  # while concurbench's own sessions are still closing
DROP_PAUSE_S = 1.0


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
                 as_is: bool = False, keep_database: bool = False, drivers: list[str] | None = None,
                 sleep=time.sleep):
        password = None
        if password_env:
            if password_env not in os.environ:
                raise ConfigError(f"--password-env {password_env}: no such environment variable is set")
            password = os.environ[password_env]
        self.allow = allow_server_changes
        self.as_is = as_is
        self.keep_database = keep_database
        self.sleep = sleep
        if "://" in dsn:
            conninfo = from_url(dsn, password, odbc.detect_driver(drivers or odbc.installed_drivers()))
        else:
            pairs = dict((k.strip().lower(), v) for k, v in odbc._split_conn(dsn))
            conninfo = dsn if dsn.rstrip().endswith(";") else dsn + ";"
            if "driver" not in pairs:
                driver = odbc.detect_driver(drivers or odbc.installed_drivers())
                conninfo = f"Driver={{{driver}}};" + conninfo
            if password is not None:
                conninfo = with_option(conninfo, "PWD", password)
        named = sqlserver.database_of(conninfo)
        self.database = named or owned.DATABASE
        self.named = named is not None
        self.conninfo = with_option(conninfo, "Database", self.database)
        self.safe = odbc.safe_connection_string(self.conninfo)
        self.where = server_of(self.conninfo)
        self.login = ""
        self.plan: owned.DatabasePlan | None = None  # what start() found; stop() drops by it
        self.marked = False  # start() found or wrote concurbench's marker on the run's database
        self._sweeper = None

    # -- the run's database ------------------------------------------------------------------------------
    def _connect(self, database: str, purpose: str):
        try:
            return sqlserver.connect(with_option(self.conninfo, "Database", database),
                                     application_name=f"concurbench:{purpose}")
        except Exception as exc:  # noqa: BLE001 - EngineError or a driver error
            raise ProvisionError(f"cannot connect to {self.safe} (database {database}): "
                                 f"{getattr(exc, 'message', None) or odbc.first_line(exc)}") from None

    def inspect(self) -> owned.DatabasePlan:
        """What a run would do about its database, read without changing anything."""
        conn = self._connect("master", "check")
        try:
            exists, self.login, may_create, may_open = self._read(conn, mo.server_facts, self.database)
            if self.database.lower() in mo.SYSTEM_DATABASES:  # master, tempdb, model, msdb: never a run's
                return owned.DatabasePlan(self.database, owned.Ownership.SYSTEM, self.named, may_create=may_create)
            if not exists:
                return owned.DatabasePlan(self.database, owned.Ownership.CREATE, self.named, may_create=may_create)
            if not may_open:
                raise ConfigError(f"database {self.database} on {self.where} exists, and login {self.login} may not "
                                  f"open it (HAS_DBACCESS is 0), so concurbench cannot tell whether it is its own; "
                                  f"nothing was changed. Name another database in --dsn, or leave Database= out")
            sessions = tuple(map(str, self._read(conn, guards.sessions_in, self.database)))
        finally:
            conn.close()
        inside = self._connect(self.database, "check")
        try:
            plan = self._read(inside, lambda c: mo.plan_of(c, self.database, named=self.named, may_create=may_create))
        finally:
            inside.close()
        if plan.marker is not None and plan.marker.temporary and sessions:
            return replace(plan, sessions=sessions)  # another run is still in its temporary database
        return plan

    def _read(self, conn, read, *args):
        try:
            return read(conn, *args)
        except ConcurbenchError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(f"cannot read what database {self.database} on {self.where} is: "
                                 f"{odbc.first_line(exc)}") from None

    @property
    def owns_database(self) -> bool:
        """Whether the run's database is concurbench's: the configurator sets database options only then."""
        return self.marked

    @property
    def drops_database(self) -> bool:
        """Whether the run's database goes when the run ends (the configurator does not put its options back)."""
        return self.plan is not None and self.plan.drops_at_end(self.keep_database)

    def start(self) -> Connection:
        """Refuse a database that is not concurbench's before anything is changed; create and mark one, or mark an
        empty one; connect the run there."""
        plan = self.inspect()
        if plan.refused:
            raise ConfigError(self.refusal(plan))
        if plan.ownership == owned.Ownership.CREATE:
            self._create(temporary=not self.keep_database)
        elif plan.ownership == owned.Ownership.EMPTY and plan.may_mark:
            self._mark(owned.marker_text(temporary=False))
        elif plan.marker is not None and plan.marker.temporary and self.keep_database:
            self._mark(owned.marker_text(temporary=False), update=True)  # a killed run's database, now kept
        self.plan = plan  # only now: stop() after a refused or failed start drops nothing
        self.marked = plan.ownership != owned.Ownership.EMPTY or plan.may_mark
        return Connection(self.conninfo, self.safe)

    def refusal(self, plan: owned.DatabasePlan) -> str:
        """Why a run will not use the database `inspect` found, and the ways forward."""
        return owned.refusal(plan, self.where, self.login or "the login", "mssql")

    def _create(self, temporary: bool) -> None:
        conn = self._connect("master", "admin")
        try:
            conn.execute(mo.create_sql(self.database))
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            raise ProvisionError(f"cannot create database {self.database} on {self.where}: "
                                 f"{odbc.first_line(exc)}") from None
        finally:
            conn.close()
        try:
            self._mark(owned.marker_text(temporary=temporary))
        except ProvisionError:
            self._drop_quietly()
            raise

    def _mark(self, text: str, update: bool = False) -> None:
        conn = self._connect(self.database, "admin")
        try:
            conn.execute(mo.mark_sql(text, update))
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            raise ProvisionError(f"cannot mark database {self.database} on {self.where} as concurbench's "
                                 f"(sp_addextendedproperty): {odbc.first_line(exc)}") from None
        finally:
            conn.close()

    def _drop_quietly(self) -> None:
        conn = self._connect("master", "admin")
        try:
            conn.execute(mo.drop_sql(self.database))
        except Exception:  # noqa: BLE001 - the error being raised is the one to tell; gc finds what is left
            pass
        finally:
            conn.close()

    def restart(self, settings: dict | None = None) -> Connection:
        """No restart: trace flags and sp_configure options of a variant are set over a connection by the
        engine (and put back); an option that needs a restart is refused there."""
        return Connection(self.conninfo, self.safe)

    def stop(self) -> None:
        """Drop the database the run created (or a killed run's temporary one it used), unless kept; what the run
        changed on the server was put back by the engine's configurator."""
        if not self.drops_database:
            return
        self.plan = None  # once: a second stop() does nothing
        try:
            conn = self._connect("master", "admin")
        except ProvisionError as exc:  # a lost server: the database stays, marked temporary
            raise ProvisionError(f"the run's temporary database {self.database} was left: {exc.message}; "
                                 f"{self._later()}") from None
        try:
            self._drop(conn)
        finally:
            conn.close()

    def _later(self) -> str:
        return (f"`concurbench gc --target dsn --dsn '{self.safe}' --yes` drops it once no session uses it "
                f"(or DROP DATABASE {quote_ident(self.database)})")

    def _drop(self, conn) -> None:
        later = self._later()
        for attempt in range(1, DROP_ATTEMPTS + 1):
            others = guards.sessions_in(conn, self.database)
            foreign = [s for s in others if not s.ours]
            if foreign:
                raise ProvisionError(f"the run's temporary database {self.database} on {self.where} was left: "
                                     f"{'; '.join(map(str, foreign))} {'is' if len(foreign) == 1 else 'are'} in it, "
                                     f"which concurbench did not open and will not disconnect; {later}")
            try:
                conn.execute(mo.drop_sql(self.database))
                return
            except Exception as exc:  # noqa: BLE001 - pyodbc errors: in use (3702) is tried again
                if odbc.error_number_from_pyodbc(exc) != IN_USE or attempt == DROP_ATTEMPTS:
                    raise ProvisionError(f"the run's temporary database {self.database} on {self.where} could not "
                                         f"be dropped ({odbc.first_line(exc)}); {later}") from None
            self.sleep(DROP_PAUSE_S)

    # -- what killed runs left (concurbench gc --target dsn) ---------------------------------------------------
    def leftovers(self) -> list[Leftover]:
        return self._sweep().leftovers()

    def remove(self, leftover: Leftover) -> None:
        self._sweep().remove(leftover)

    def _sweep(self):
        if self._sweeper is None:
            self._sweeper = Sweep(lambda database, purpose: self._connect(database, purpose), self.where, self.safe)
        return self._sweeper

    def logs(self, lines: int = 40) -> str:
        return "(the server's log is not reachable through the dsn target)"

    def describe(self) -> dict:
        out = {"target": self.name, "connection": self.safe, "database": self.database}
        if self.plan is not None:
            out["database_ownership"] = str(self.plan.ownership)
        return out


def server_of(conninfo: str) -> str:
    """The server a connection string names (`Server`, and FreeTDS's `Port`), for messages."""
    pairs = {k.strip().lower(): v for k, v in odbc._split_conn(conninfo)}
    server = pairs.get("server") or pairs.get("address") or "the server"
    return f"{server}:{pairs['port']}" if "port" in pairs else server
