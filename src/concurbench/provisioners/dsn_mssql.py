"""The `dsn` target for SQL Server: an existing server reached by an ODBC connection string or a URL.

    --dsn "Driver={ODBC Driver 18 for SQL Server};Server=db.lab,1433;UID=bench"
    --dsn "mssql://bench@db.lab:1433/bench?trust_server_certificate=yes"

Without a `Driver` the best installed one is chosen (Driver 18, 17, then FreeTDS). The password
comes from the string or from `--password-env`; it stays in memory, and what is shown or stored
is the string without it. A certificate the driver refuses is reported with the option that accepts
it (engines/odbc.py).

Every run has an id (engines/mssql_names.py), carried by every name it makes on the server. A
scenario's setup drops and creates objects by name, so the run happens only in a database of
concurbench's own (provisioners/owned.py; the SQL in mssql_owned.py): without `Database` in the DSN
and without --database, the database `concurbench_<run id>`, created for the run (with its marker, the
extended property `concurbench`, saying it is temporary) and dropped when the run ends; with
`--keep-database` and no name, `concurbench`, kept for later runs; with a name (`Database` in the DSN,
or --database), that database when it carries the marker or holds no user objects (then it is marked
as kept), or created when it does not exist. Anything else, a login that may not create the database
it needs, and a temporary database another run is still connected to are refused before anything is
changed, with the way forward (`plan_database` reads, `start` acts). A system database (master, tempdb,
model, msdb) is refused: the setup would create its tables there, and READ_COMMITTED_SNAPSHOT cannot
be set on it. The run writes its record (`concurbench_run_<run id>`: which process on which machine)
into its database, and removes it at the end when the database stays.

Before anything else, `start` removes what a killed run of this same machine left on the server, as gc
decides it (mssql_sweep.py: no live session of that run, and its process gone here), never a live
run's; and a database it adopts that holds the record of a server change a gone run did not put back
has that change put back first. Database options of the scenario are set by the engine only in that
database (engines/sqlserver.py), and server options only with `--allow-server-changes`, put back when
the run ends (never a global trace flag: mssql_config.refuse_trace_flags); with `--server-settings
as-is`, those that take a restart (and, without `--allow-server-changes`, all of them) are left as the
server has them and the run records each difference. What a killed run left on the server is listed
and removed by `concurbench gc --target dsn` (`leftovers`, `remove`: mssql_sweep.py).

The database the run created is dropped only when no session that is not concurbench's is in it, and
while it holds no record of a server change that was not put back (then it stays, and `stop` says to
run gc, which puts the change back first); otherwise it is left, and `stop` says so and how `gc`
removes it. DROP DATABASE never disconnects anyone: it fails while a session uses the database (error
3702), and is tried again for a few seconds while only concurbench's own sessions are still closing.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from urllib.parse import parse_qs, unquote, urlsplit

import psutil

from ..engines.quoting import tsql_name
from ..engines import mssql_guards as guards
from ..engines import mssql_names as names
from ..engines import odbc, sqlserver
from ..engines.sqlserver import with_option
from ..errors import ConcurbenchError, ConfigError, ProvisionError
from . import mssql_owned as mo
from . import owned
from ..engines.base import ChangePolicy
from .base import Connection, Inspection, Leftover
from ..util import first_line
from .mssql_sweep import FLAG, SETTING, Sweep

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
                 sleep=time.sleep, database: str | None = None, run_id: str | None = None,
                 xe_without_max_duration: bool = False):
        password = None
        if password_env:
            if password_env not in os.environ:
                raise ConfigError(f"--password-env {password_env}: no such environment variable is set")
            password = os.environ[password_env]
        self.allow = allow_server_changes
        self.as_is = as_is
        self.keep_database = keep_database
        self.xe_without_max_duration = xe_without_max_duration
        self.sleep = sleep
        self.run_id = run_id or names.new_run_id()
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
        named = owned.chosen_database(sqlserver.database_of(conninfo), database)
        self.database = named or (owned.DATABASE if keep_database else names.run_database(self.run_id))
        self.named = named is not None
        self.conninfo = with_option(conninfo, "Database", self.database)
        self.safe = odbc.safe_connection_string(self.conninfo)
        self.where = server_of(self.conninfo)
        self.login = ""
        self.plan: owned.DatabasePlan | None = None  # what start() found; stop() drops by it
        self.marked = False  # start() found or wrote concurbench's marker on the run's database
        self.recorded = False  # start() wrote the run's record into its database
        self._sweeper = None

    # -- the run's database ------------------------------------------------------------------------------
    def _connect(self, database: str, purpose: str):
        try:
            return sqlserver.connect(with_option(self.conninfo, "Database", database),
                                     application_name=f"concurbench:{purpose}")
        except Exception as exc:  # noqa: BLE001 - EngineError or a driver error
            raise ProvisionError(f"cannot connect to {self.safe} (database {database}): "
                                 f"{first_line(exc) if isinstance(exc, ConcurbenchError) else odbc.error_text(exc)}") from None

    def inspect(self) -> Inspection:
        """The probe's view before the run (provisioners/base.py): the plan, the run's database, any refusal."""
        plan = self.plan_database()
        return Inspection(plan, Connection(self.conninfo, self.safe), self.refusal(plan) if plan.refused else "",
                          self.keep_database)

    def plan_database(self) -> owned.DatabasePlan:
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
                                 f"{odbc.error_text(exc)}") from None

    def policy(self) -> ChangePolicy:
        """Not the server's owner: server options only with --allow-server-changes; database options only in a
        database of concurbench's (marked), and not put back when that database goes at the end."""
        return ChangePolicy(owned=False, allow_server_changes=self.allow, as_is=self.as_is, owns_database=self.marked,
                            drops_database=self.plan is not None and self.plan.drops_at_end(self.keep_database),
                            xe_without_max_duration=self.xe_without_max_duration)

    def apply_settings(self) -> None:
        return None  # the engine's configurator applies a SQL Server's options over a connection

    def file_remover(self) -> None:
        return None  # the server's files are out of reach: gc lists them for an administrator

    def connect_hint(self) -> None:
        return None  # the server is the user's: it keeps running

    def start(self) -> Connection:
        """Remove what a killed run of this machine left; refuse a database that is not concurbench's before anything
        is changed; create and mark one, or mark an empty one; put back what records of gone runs in a database it
        adopts say; write the run's record; connect the run there."""
        plan = self.plan_database()
        if plan.refused:
            raise ConfigError(self.refusal(plan))
        notes = self._after_killed_runs()
        if notes:  # the database may have been a killed run's, removed now
            plan = self.plan_database()
        if plan.ownership == owned.Ownership.OWN:
            notes += self._put_back_records()
        if plan.ownership == owned.Ownership.CREATE:
            self._create(temporary=not self.keep_database)
        elif plan.ownership == owned.Ownership.EMPTY and plan.may_mark:
            self._mark(owned.marker_text(temporary=False))
        elif plan.marker is not None and plan.marker.temporary and self.keep_database:
            self._mark(owned.marker_text(temporary=False), update=True)  # a killed run's database, now kept
        self.plan = plan  # only now: stop() after a refused or failed start drops nothing
        self.marked = plan.ownership != owned.Ownership.EMPTY or plan.may_mark
        if self.marked:
            self._in_database(guards.record(names.run_property(self.run_id), guards.change_note()),
                              "write the run's record")
            self.recorded = True
        return Connection(self.conninfo, self.safe, {"database": {
            "name": self.database, "ownership": str(plan.ownership),
            "dropped_at_end": plan.drops_at_end(self.keep_database)}, "run_id": self.run_id},
            run_id=self.run_id, notes=tuple(notes))

    def _after_killed_runs(self) -> list[str]:
        """What a killed run of this machine left (as gc decides, and its process gone here), removed; one note each."""
        sweep = self._sweep()
        try:
            found = sweep.of_dead_runs(socket.gethostname(), _pid_alive)
        except ConfigError:
            return [f"what a killed run of this machine may have left on {self.where} was not looked for: the login "
                    f"cannot see every session (VIEW SERVER STATE), so it cannot tell a live run from a killed one; "
                    f"`concurbench gc --target dsn` with such a login lists it"]
        except ProvisionError as exc:
            return [exc.message]
        notes = []
        for item in found:
            if item.by_hand:  # files on the server's disk: said, and listed by gc, never forgotten
                notes.append(f"a killed run of this machine left {item.kind} {item.name} ({item.detail}); "
                             f"{item.by_hand}")
                continue
            try:
                sweep.remove(item)
            except ProvisionError as exc:
                notes.append(f"could not remove {item.kind} {item.name}, which a killed run of this machine left: "
                             f"{exc.message}")
                continue
            notes.append(f"removed what a killed run of this machine left: {item.kind} {item.name} ({item.detail})")
        return notes

    def _put_back_records(self) -> list[str]:
        """A database of concurbench's the run adopts may hold the record of a server change a killed run did not put
        back: the change is put back first (as gc would), and a record of a run that still lives is refused."""
        if not self._records():
            return []
        sweep = self._sweep()
        try:
            found = [item for item in sweep.leftovers() if item.kind in (FLAG, SETTING)
                     and sweep.found[(item.kind, item.name)]["database"] == self.database]
        except ConfigError:
            found = []
        notes = []
        for item in found:
            sweep.remove(item)
            notes.append(f"put back what a killed run recorded in database {self.database}: {item.kind} {item.name} "
                         f"({item.detail})")
        left = self._records()
        if left:
            raise ConfigError(f"database {self.database} on {self.where} holds the record of server changes that are "
                              f"not put back ({'; '.join(f'{n}: {v}' for n, v in left)}), made by a run that still has "
                              f"sessions on the server or that this login cannot tell from a live one (VIEW SERVER "
                              f"STATE); nothing was changed. Wait for that run to end, or run `concurbench gc --target "
                              f"dsn` with a login that sees every session")
        return notes

    def _records(self) -> list[tuple[str, str]]:
        conn = self._connect(self.database, "check")
        try:
            return self._read(conn, guards.records_in)
        finally:
            conn.close()

    def _in_database(self, statements: list[str], what: str) -> None:
        conn = self._connect(self.database, "admin")
        try:
            for sql in statements:
                conn.execute(sql)
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            raise ProvisionError(f"cannot {what} in database {self.database} on {self.where}: "
                                 f"{odbc.error_text(exc)}") from None
        finally:
            conn.close()

    def refusal(self, plan: owned.DatabasePlan) -> str:
        """Why a run will not use the database `plan_database` found, and the ways forward."""
        return owned.refusal(plan, self.where, self.login or "the login", "mssql",
                             default=names.run_database(self.run_id))

    def _create(self, temporary: bool) -> None:
        conn = self._connect("master", "admin")
        try:
            conn.execute(mo.create_sql(self.database))
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            raise ProvisionError(f"cannot create database {self.database} on {self.where}: "
                                 f"{odbc.error_text(exc)}") from None
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
                                 f"(sp_addextendedproperty): {odbc.error_text(exc)}") from None
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
        """Drop the database the run created (or a killed run's temporary one it used), unless kept, and never while it
        holds the record of a server change that was not put back; remove the run's record from a database that
        stays. What the run changed on the server was put back by the engine's configurator."""
        if self.plan is None:
            return
        drops = self.policy().drops_database
        self.plan = None  # once: a second stop() does nothing
        if not drops:
            if self.recorded:
                self.recorded = False
                self._in_database(guards.unrecord(names.run_property(self.run_id)), "remove the run's record")
            return
        try:
            left = self._records()
        except ProvisionError as exc:  # a lost server: the database stays, marked temporary
            raise ProvisionError(f"the run's temporary database {self.database} was left: {exc.message}; "
                                 f"{self._later()}") from None
        if left:
            raise ProvisionError(f"the run's temporary database {self.database} on {self.where} was left: it holds the "
                                 f"record of server changes that were not put back ({'; '.join(n for n, _ in left)}); "
                                 f"`concurbench gc --target dsn --dsn '{self.safe}' --yes` puts them back and then "
                                 f"drops it")
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
                f"(or DROP DATABASE {tsql_name(self.database)})")

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
                                         f"be dropped ({odbc.error_text(exc)}); {later}") from None
            self.sleep(DROP_PAUSE_S)

    # -- what killed runs left (concurbench gc --target dsn) ---------------------------------------------------
    def leftovers(self) -> list[Leftover]:
        return self._sweep().leftovers()

    def remove(self, leftover: Leftover) -> None:
        self._sweep().remove(leftover)

    def _sweep(self):
        if self._sweeper is None:
            self._sweeper = Sweep(lambda database, purpose: self._connect(database, purpose), self.where, self.safe,
                                  local=self.where.lower().startswith(LOOPBACK))
        return self._sweeper

    def logs(self, lines: int = 40) -> str:
        return "(the server's log is not reachable through the dsn target)"

    def describe(self) -> dict:
        out = {"target": self.name, "connection": self.safe, "database": self.database, "run_id": self.run_id}
        if self.plan is not None:
            out["database_ownership"] = str(self.plan.ownership)
        return out


def _pid_alive(pid: int) -> bool:
    """Whether a process of this machine with that id runs (a record's writer on this machine)."""
    return psutil.pid_exists(pid)


def server_of(conninfo: str) -> str:
    """The server a connection string names (`Server`, and FreeTDS's `Port`), for messages."""
    pairs = {k.strip().lower(): v for k, v in odbc._split_conn(conninfo)}
    server = pairs.get("server") or pairs.get("address") or "the server"
    return f"{server}:{pairs['port']}" if "port" in pairs else server
