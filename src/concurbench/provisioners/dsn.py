"""The `dsn` target: an existing server (a cloud database, a lab box) reached by a connection string.

The password may sit in the string or come from an environment variable (`--password-env`); it is
kept in memory only, and what is shown or stored is the string without it.

The run happens only in a database of concurbench's own (owned.py): without a database in the DSN
or --database, `concurbench` (created when missing, which needs CREATEDB, marked with a comment, and
dropped when the run ends unless --keep-database); a database the DSN or --database names is created
when missing, and used when it carries the marker, or holds no user objects (USER_OBJECTS below) and
is then marked. A user's database of the default name is refused with the way to choose another name
(--database NAME). The database is created from
template1, as any new database is, so what a DBA put there for every new database (an extension
such as pgstattuple, grants on pg_file_settings and pg_reload_conf) is in it. Anything else is
refused before the run changes anything. `plan_database` finds this without changing anything (`inspect`
gives it to the probe); `start` acts on it; `stop` drops what the run created.

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

from ..engines.quoting import pg_literal, pg_name, pg_setting
from ..util import first_line
from ..engines import pg_settings
from ..errors import ConfigError, ProvisionError
from . import owned
from ..engines.base import ChangePolicy
from .base import Connection, Inspection, Leftover, LeftoverKind
from .options import TargetOptions
from .dsn_mssql import ExistingSqlServer

MAINTENANCE = ("postgres", "template1")  # where CREATE and DROP DATABASE run from, in this order
SYSTEM_DATABASES = ("postgres", "template0", "template1")  # the server's own: never a run's
DROP_WAIT_S = 10.0  # the run's own sessions leave the database shortly after they close
SYSTEM_SCHEMAS = ("SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema', 'pg_toast') "
                  "OR nspname LIKE 'pg\\_temp\\_%%' OR nspname LIKE 'pg\\_toast\\_temp\\_%%'")
# Objects made after initdb (OIDs from 16384, FirstNormalObjectId) outside the system schemas, not members of an
# extension (the extension itself counts): what a user, or an earlier run, created in the database.
USER_OBJECTS = f"""
WITH sys AS ({SYSTEM_SCHEMAS}),
found AS (
  SELECT 'pg_class'::regclass AS classid, oid AS objid, 1 AS rank FROM pg_class
   WHERE oid >= 16384 AND relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND relnamespace NOT IN (SELECT oid FROM sys)
  UNION ALL SELECT 'pg_proc'::regclass, oid, 2 FROM pg_proc WHERE oid >= 16384 AND pronamespace NOT IN (SELECT oid FROM sys)
  UNION ALL SELECT 'pg_type'::regclass, t.oid, 3 FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid
   WHERE t.oid >= 16384 AND t.typnamespace NOT IN (SELECT oid FROM sys) AND t.typtype IN ('b', 'c', 'd', 'e', 'r')
     AND (t.typrelid = 0 OR c.relkind = 'c') AND NOT (t.typelem <> 0 AND t.typlen = -1 AND t.typname LIKE '\\_%%')
  UNION ALL SELECT 'pg_namespace'::regclass, oid, 4 FROM pg_namespace WHERE oid >= 16384 AND oid NOT IN (SELECT oid FROM sys)
  UNION ALL SELECT 'pg_extension'::regclass, oid, 5 FROM pg_extension WHERE oid >= 16384
  UNION ALL SELECT 'pg_largeobject_metadata'::regclass, oid, 6 FROM pg_largeobject_metadata
  UNION ALL SELECT 'pg_event_trigger'::regclass, oid, 7 FROM pg_event_trigger
  UNION ALL SELECT 'pg_foreign_data_wrapper'::regclass, oid, 7 FROM pg_foreign_data_wrapper WHERE oid >= 16384
  UNION ALL SELECT 'pg_foreign_server'::regclass, oid, 7 FROM pg_foreign_server
  UNION ALL SELECT 'pg_publication'::regclass, oid, 7 FROM pg_publication
  UNION ALL SELECT 'pg_collation'::regclass, oid, 8 FROM pg_collation
   WHERE oid >= 16384 AND collnamespace NOT IN (SELECT oid FROM sys)
  UNION ALL SELECT 'pg_operator'::regclass, oid, 8 FROM pg_operator
   WHERE oid >= 16384 AND oprnamespace NOT IN (SELECT oid FROM sys)
)
SELECT i.type || ' ' || i.identity, count(*) OVER ()
  FROM found f, pg_identify_object(f.classid, f.objid, 0) i
 WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = f.classid AND d.objid = f.objid AND d.deptype = 'e')
 ORDER BY f.rank, 1
 LIMIT %s"""
DATABASE_SQL = ("SELECT shobj_description(d.oid, 'pg_database'), pg_has_role(d.datdba, 'MEMBER') OR r.rolsuper "
                "FROM pg_database d, pg_roles r WHERE d.datname = %s AND r.rolname = current_user")
OTHER_SESSIONS = ("SELECT coalesce(nullif(application_name, ''), usename::text, 'a session') || ' (pid ' || pid || ')' "
                  "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() ORDER BY pid")


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
                 allow_server_changes: bool = False, as_is: bool = False, keep_database: bool = False,
                 database: str | None = None):
        try:
            parts = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"--dsn is not a valid PostgreSQL connection string or URL: {exc}") from None
        if password_env:
            if password_env not in os.environ:
                raise ConfigError(f"--password-env {password_env}: no such environment variable is set")
            parts["password"] = os.environ[password_env]
        named = owned.chosen_database(parts.get("dbname") or None, database)
        self.named = named is not None
        self.database = named or owned.DATABASE
        self.role = parts.get("user") or ""
        parts["dbname"] = self.database
        self.conninfo = make_conninfo(**parts)  # the run's database
        self.safe = safe_conninfo(self.conninfo)
        self.server = self.safe.rsplit("/", 1)[0]  # the server, for messages about its databases
        self.settings = dict(settings)
        self.allow = allow_server_changes
        self.as_is = as_is
        self.keep_database = keep_database
        self.plan: list[pg_settings.Planned] = []
        self.changed: list[tuple[str, str | None]] = []  # (name, previous ALTER SYSTEM value or None)
        self.database_plan: owned.DatabasePlan | None = None
        self.drop_database = False  # the run drops its database when it ends (set by start)

    def _connect(self, dbname: str | None = None) -> psycopg.Connection:
        conninfo = self.conninfo if dbname is None else make_conninfo(self.conninfo, dbname=dbname)
        try:
            return psycopg.connect(conninfo, autocommit=True, connect_timeout=10, application_name="concurbench:admin")
        except psycopg.Error as exc:
            where = self.safe if dbname is None else f"{self.server}/{dbname}"
            raise ProvisionError(f"cannot connect to {where}: {first_line(exc)}", exc) from None

    def _maintenance(self) -> psycopg.Connection:
        """A connection to a database other than the run's, to create, inspect and drop the run's database."""
        problems = []
        for name in MAINTENANCE:
            try:
                return self._connect(name)
            except ProvisionError as exc:
                problems.append(exc.message)
        raise ProvisionError(f"concurbench needs a database to create and drop its own from, and none answered: "
                             f"{'; '.join(problems)}. Name a database in --dsn instead (an empty one, or one "
                             f"marked as concurbench's)")

    def inspect(self) -> Inspection:
        """The probe's view before the run (provisioners/base.py): the plan, the run's database, any refusal."""
        plan = self.plan_database()
        return Inspection(plan, Connection(self.conninfo, self.safe), self.refusal(plan) if plan.refused else "",
                          self.keep_database)

    def plan_database(self) -> owned.DatabasePlan:
        """Whose the run's database is and what the run will do about it; nothing is changed."""
        with self._maintenance() as conn:
            role, may_create = conn.execute("SELECT current_user, rolcreatedb OR rolsuper FROM pg_roles "
                                            "WHERE rolname = current_user").fetchone()
            self.role = role
            row = conn.execute(DATABASE_SQL, (self.database,)).fetchone()
            if self.database in SYSTEM_DATABASES:
                plan = owned.DatabasePlan(self.database, owned.Ownership.SYSTEM, self.named, may_create=may_create)
            elif row is None:
                plan = owned.DatabasePlan(self.database, owned.Ownership.CREATE, self.named, may_create=may_create)
            else:
                plan = self._existing(conn, row[0], row[1], may_create)
        self.database_plan = plan
        return plan

    def _existing(self, conn, comment: str | None, owner: bool, may_create: bool) -> owned.DatabasePlan:
        """A database that exists: the role may mark it when it owns it and it has no comment of someone else's."""
        marker = owned.parse_marker(comment)
        common = dict(name=self.database, named=self.named, marker=marker, may_create=may_create,
                      may_mark=owner and (comment is None or marker is not None))
        if marker is not None:
            sessions = tuple(r[0] for r in conn.execute(OTHER_SESSIONS, (self.database,)).fetchall()) \
                if marker.temporary else ()
            return owned.DatabasePlan(ownership=owned.Ownership.OWN, sessions=sessions, **common)
        with self._connect() as inside:
            rows = inside.execute(USER_OBJECTS, (owned.LISTED,)).fetchall()
        if not rows:
            return owned.DatabasePlan(ownership=owned.Ownership.EMPTY, **common)
        return owned.DatabasePlan(ownership=owned.Ownership.FOREIGN, objects=tuple(r[0] for r in rows),
                                  object_count=rows[0][1], **common)

    def start(self) -> Connection:
        """Plan the settings and make sure of the database: refused (ConfigError) before anything is changed
        when the database is not concurbench's; created and marked when missing. Settings are applied later
        (apply_settings)."""
        with self._maintenance() as conn:
            if self.settings:
                self.plan = pg_settings.plan(pg_settings.read(conn, list(self.settings)), self.settings,
                                             as_is=self.as_is, allowed=self.allow)
        self._refuse([p for p in self.plan if p.action == pg_settings.REFUSE])
        plan = self.plan_database()
        if plan.refused:
            raise ConfigError(self.refusal(plan))
        self._take(plan)
        self.drop_database = plan.drops_at_end(self.keep_database)
        return Connection(self.conninfo, self.safe, {"database": {
            "name": self.database, "ownership": str(plan.ownership), "dropped_at_end": self.drop_database}})

    def refusal(self, plan: owned.DatabasePlan) -> str:
        """Why a run will not use the database `plan_database` found, and the ways forward."""
        return owned.refusal(plan, self.safe, self.role, "postgres")

    def _take(self, plan: owned.DatabasePlan) -> None:
        """Create the database, or mark it, as the plan says."""
        name = pg_name(self.database)
        temporary = not self.keep_database
        try:
            with self._maintenance() as conn:
                if plan.ownership == owned.Ownership.CREATE:
                    conn.execute(f"CREATE DATABASE {name}")  # a copy of template1, with what a DBA put there
                    self._mark(conn, temporary)
                elif plan.ownership == owned.Ownership.EMPTY and plan.may_mark:
                    self._mark(conn, temporary=False)  # the user's database: never dropped by concurbench
                elif plan.marker is not None and plan.marker.temporary and self.keep_database and plan.may_mark:
                    self._mark(conn, temporary=False)
        except psycopg.Error as exc:
            raise ProvisionError(f"cannot prepare database {self.database} on {self.server}: {first_line(exc)}",
                                 exc) from None

    def _mark(self, conn, temporary: bool) -> None:
        conn.execute(owned.comment_sql(self.database, temporary))

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
                    conn.execute(f"ALTER SYSTEM SET {pg_setting(p.name)} = {pg_literal(p.wanted)}")
                    self.changed.append((p.name, previous.get(p.name)))
                conn.execute("SELECT pg_reload_conf()")
            except psycopg.Error as exc:
                self._restore(conn)
                raise ProvisionError(f"cannot change server settings: {first_line(exc)} (needs superuser "
                                     f"or ALTER SYSTEM privileges)") from None
            _wait_reloaded(conn, {p.name: p.wanted for p in todo})

    def _put_back(self) -> None:
        """_restore over a connection to the run's database, where the role's grants were found when applying."""
        statements = "; ".join(f"ALTER SYSTEM {'RESET ' + name if old is None else f'SET {name} = {pg_literal(old)}'}"
                               for name, old in reversed(self.changed))
        try:
            with self._connect() as conn:
                self._restore(conn)
        except (psycopg.Error, ProvisionError) as exc:
            raise ProvisionError(f"the settings this run changed on {self.safe} could not be put back "
                                 f"({first_line(exc)}): as a superuser run {statements}; SELECT pg_reload_conf()",
                                 exc) from None

    def _restore(self, conn: psycopg.Connection) -> None:
        for name, old in reversed(self.changed):
            if old is None:
                conn.execute(f"ALTER SYSTEM RESET {pg_setting(name)}")
            else:
                conn.execute(f"ALTER SYSTEM SET {pg_setting(name)} = {pg_literal(old)}")
        if self.changed:
            conn.execute("SELECT pg_reload_conf()")
        self.changed = []

    def restart(self, settings: dict[str, str] | None = None) -> Connection:
        raise ConfigError(f"a variant sets server settings of its own, which needs a restart, and concurbench does "
                          f"not restart a server it does not own ({self.safe}); run that variant on the embedded, "
                          f"binaries or docker target")

    def stop(self) -> None:
        """Put back every setting this run changed, and drop the database it created (unless kept); the server
        itself keeps running."""
        try:
            if self.changed:
                self._put_back()
        finally:
            if self.drop_database:
                self.drop_database = False
                self._drop(self.database)

    def _drop(self, name: str, wait_s: float = DROP_WAIT_S) -> None:
        """DROP DATABASE once the run's own sessions have left it; never forced, so a session that is not the run's
        keeps it (ProvisionError naming them and the way to drop it later)."""
        deadline = time.monotonic() + wait_s
        with self._maintenance() as conn:
            while True:
                comment = conn.execute(DATABASE_SQL, (name,)).fetchone()
                if comment is None:
                    return
                if owned.parse_marker(comment[0]) is None:  # not concurbench's (any more): never dropped
                    raise ProvisionError(f"database {name} on {self.server} no longer carries concurbench's marker; "
                                         f"it was left as it is")
                try:
                    conn.execute(f"DROP DATABASE {pg_name(name)}")
                    return
                except psycopg.errors.ObjectInUse:
                    if time.monotonic() >= deadline:
                        others = [r[0] for r in conn.execute(OTHER_SESSIONS, (name,)).fetchall()]
                        raise ProvisionError(
                            f"database {name} on {self.server} was not dropped: other sessions are connected to it "
                            f"({', '.join(others) or 'gone now'}); `concurbench gc --target dsn --dsn ... --yes` "
                            f"drops it once they are gone") from None
                    time.sleep(0.1)
                except psycopg.Error as exc:
                    raise ProvisionError(f"database {name} on {self.server} was not dropped: {first_line(exc)}",
                                         exc) from None

    def leftovers(self) -> list[Leftover]:
        """Temporary databases of concurbench's that no session uses: what killed runs left."""
        with self._maintenance() as conn:
            rows = conn.execute("SELECT d.datname, shobj_description(d.oid, 'pg_database'), "
                                "(SELECT count(*) FROM pg_stat_activity a WHERE a.datname = d.datname) "
                                "FROM pg_database d ORDER BY 1").fetchall()
        found = []
        for name, comment, sessions in rows:
            marker = owned.parse_marker(comment)
            if marker is not None and marker.temporary and not sessions:
                found.append(Leftover(LeftoverKind.DATABASE, name, f"{self.server}/{name}: {marker.text}"))
        return found

    def remove(self, leftover: Leftover) -> None:
        self._drop(leftover.name, wait_s=0)

    def logs(self, lines: int = 40) -> str:
        return "(the server's log is not reachable through the dsn target)"

    def policy(self) -> ChangePolicy:
        return ChangePolicy(owned=False, allow_server_changes=self.allow, as_is=self.as_is,
                            drops_database=self.drop_database)

    def file_remover(self) -> None:
        return None  # the server's files are out of reach

    def connect_hint(self) -> None:
        return None  # the server is the user's: it keeps running

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


def _dsn(options: TargetOptions, variable: str, forms: str) -> str:
    """--dsn, else the environment's variable; a ConfigError naming the forms it takes when neither is there."""
    dsn = options.dsn or os.environ.get(variable)
    if not dsn:
        raise ConfigError(f"the dsn target needs --dsn (or {variable}): {forms}; the password may come from "
                          f"--password-env VAR")
    return dsn


def _sql_server(engine: str, settings: dict[str, str], options: TargetOptions) -> ExistingSqlServer:
    dsn = _dsn(options, "CONCURBENCH_MSSQL_DSN", "an ODBC connection string ('Server=host,1433;Database=bench;"
                                                 "UID=user') or an mssql://user@host:1433/bench URL")
    return ExistingSqlServer(dsn, password_env=options.password_env, allow_server_changes=options.allow_server_changes,
                             as_is=options.as_is, keep_database=options.keep_database,
                             database=options.database, xe_without_max_duration=options.xe_without_max_duration)


def _postgres(engine: str, settings: dict[str, str], options: TargetOptions) -> ExistingServer:
    dsn = _dsn(options, "CONCURBENCH_DSN", "a postgresql:// URL or a 'host=... port=... dbname=... user=...' string")
    if options.xe_without_max_duration:
        raise ConfigError("--allow-xe-without-max-duration is for SQL Server's Extended Events observers; a PostgreSQL "
                          "scenario has none")
    return ExistingServer(dsn, settings, password_env=options.password_env,
                          allow_server_changes=options.allow_server_changes, as_is=options.as_is,
                          keep_database=options.keep_database, database=options.database)


FACTORIES = {"postgres": _postgres, "mssql": _sql_server}  # registry.py: the dsn target
