"""A stand-in for a SQL Server reached by the dsn target, that concurbench does not own: its databases (each
with options, user objects and extended properties), the sessions of other programs in them, and what
observers and trace flags a killed run may leave (Extended Events sessions, SQL Traces, .xel files, a global
trace flag). It extends mssql_standin.StandInSqlServer with the statements the dsn provisioner's `inspect`,
`start` and `stop` and its Sweeper (`concurbench gc --target dsn`) send, answered as Microsoft's
documentation says SQL Server would:

- DB_ID is NULL for a database that does not exist; HAS_DBACCESS is 0 for one the login may not open;
- CREATE DATABASE needs CREATE ANY DATABASE or dbcreator (error 262 otherwise); DROP DATABASE fails with
  error 3702 while any session is in the database, and never disconnects one;
- sys.extended_properties (class 0) shows a database's own properties; HAS_PERMS_BY_NAME(db, 'DATABASE',
  'ALTER') says whether the login may add one;
- sys.dm_exec_sessions shows other sessions only to a login with VIEW SERVER STATE;
- sys.fn_xe_file_target_read_file raises error 25718 when no file matches its path.

No SQL Server can run where concurbench is built; tests that use this say so in their names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mssql_standin import StandInConnection, StandInCursor, StandInSession, StandInSqlError, StandInSqlServer

from concurbench.engines import sqlserver

DATA_DIR = "/var/opt/mssql/data/"
DEFAULTS = {"read_committed_snapshot": 0, "snapshot_isolation": 0, "delayed_durability": "DISABLED",
            "recovery": "FULL", "adr": 0}


@dataclass
class StandInDsnServer(StandInSqlServer):
    login: str = "bench"
    may_create: bool = True  # CREATE ANY DATABASE, dbcreator or sysadmin
    may_alter: bool = True  # ALTER on the databases the login opens (db_owner)
    no_access: set[str] = field(default_factory=set)  # databases HAS_DBACCESS is 0 for
    object_kinds: dict[str, str] = field(default_factory=dict)  # schema.name -> sys.objects type_desc
    xe_sessions: dict[str, dict] = field(default_factory=dict)  # name -> {"running": bool, "filename": str|None}
    traces: dict[int, dict] = field(default_factory=dict)  # id -> {"status": 0|1, "path": str}
    xel_files: list[str] = field(default_factory=list)
    connections: list = field(default_factory=list)

    def __post_init__(self):
        self.databases = {name: dict(options) for name, options in self.databases.items()}

    @classmethod
    def with_databases(cls, **objects: list[str]) -> "StandInDsnServer":
        """A server whose user databases hold the objects named (`app=["dbo.accounts"]`); no concurbench yet."""
        server = cls(databases={name: dict(DEFAULTS) for name in objects})
        server.objects = {name: set(names) for name, names in objects.items()}
        return server

    def connect(self, conn_str: str, autocommit: bool = True, timeout: int = 10) -> "StandInDsnConnection":
        database = sqlserver.database_of(conn_str) or "master"
        if database not in self.databases and database not in ("master", "tempdb", "model", "msdb"):
            raise StandInSqlError(4060, f'Cannot open database "{database}" requested by the login. The login failed.')
        conn = StandInDsnConnection(self, database)
        self.connections.append(conn)
        return conn

    def user_sessions(self, database: str) -> list[StandInSession]:
        return [s for s in self.sessions if s.database == database]


class StandInDsnConnection(StandInConnection):
    server: StandInDsnServer

    def _run(self, sql: str, params: tuple):
        found = self._dsn(sql, params)
        if found is not None:
            self.server.log.append((self.database, sql))
            return found
        return super()._run(sql, params)

    def _dsn(self, sql: str, params: tuple):  # noqa: C901 - one answer per statement, as the base does
        server = self.server
        if "HAS_DBACCESS(?) AS may_open" in sql:
            name = params[0]
            exists = name in server.databases or name in ("master", "tempdb", "model", "msdb")
            return StandInCursor(("database_id", "login", "may_create", "may_open"),
                                 [(5 if exists else None, server.login, int(server.may_create),
                                   (0 if name in server.no_access else 1) if exists else None)])
        if sql == "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'ALTER') AS may_mark":
            return StandInCursor(("may_mark",), [(int(server.may_alter),)])
        if "COUNT(*) OVER () AS total" in sql and "sys.objects AS o" in sql:
            names = sorted(server.objects.get(self.database, set()))
            rows = [(server.object_kinds.get(n, "user_table").lower(), n, len(names)) for n in names]
            return StandInCursor(("kind", "name", "total"), sorted(rows)[:5])
        m = re.fullmatch(r"CREATE DATABASE \[(\w+)\]", sql)
        if m:
            if not server.may_create:
                raise StandInSqlError(262, "CREATE DATABASE permission denied in database 'master'.")
            if m.group(1) in server.databases:
                raise StandInSqlError(1801, f"Database '{m.group(1)}' already exists. Choose a different database name.")
            server.databases[m.group(1)] = dict(DEFAULTS)
            return StandInCursor()
        m = re.fullmatch(r"DROP DATABASE \[(\w+)\]", sql)
        if m:
            if server.user_sessions(m.group(1)):
                raise StandInSqlError(3702, f"Cannot drop database \"{m.group(1)}\" because it is currently in use.")
            server.databases.pop(m.group(1))
            server.objects.pop(m.group(1), None)
            server.properties.pop(m.group(1), None)
            return StandInCursor()
        return self._sweep(sql, params)

    def _sweep(self, sql: str, params: tuple):
        server = self.server
        if "host_process_id, DB_NAME(database_id)" in sql:
            seen = server.sessions if server.view_server_state else []
            return StandInCursor(("session_id", "login_name", "host_name", "program_name", "host_process_id", "db"),
                                 [(s.session_id, s.login, s.host, s.program, s.pid, s.database) for s in seen])
        if "STRING_AGG" in sql and "sys.extended_properties" in sql:
            rows = [(db, name, value) for db, found in sorted(server.properties.items())
                    if db in server.databases and db not in server.no_access
                    for name, value in sorted(found.items()) if name.startswith("concurbench")]
            return StandInCursor(("db", "property", "value"), rows)
        if sql.startswith("SELECT s.name, CASE WHEN r.name IS NULL") and "server_event_sessions" in sql:
            return StandInCursor(("name", "running", "filename"),
                                 [(n, int(x["running"]), x.get("filename")) for n, x in server.xe_sessions.items()])
        if sql.startswith("SELECT id, status, path FROM sys.traces"):
            return StandInCursor(("id", "status", "path"),
                                 [(i, t["status"], t["path"]) for i, t in server.traces.items()
                                  if "concurbench-" in t["path"]])
        if "SERVERPROPERTY('InstanceDefaultDataPath')" in sql:
            return StandInCursor(("data_dir",), [(DATA_DIR,)])
        if sql.startswith("SELECT DISTINCT file_name FROM sys.fn_xe_file_target_read_file"):
            rx = re.compile(re.escape(params[0]).replace(r"\*", ".*") + r"\Z")
            names = [f for f in server.xel_files if rx.match(f)]
            if not names:
                raise StandInSqlError(25718, f'The log file name "{params[0]}" is invalid. Verify that the file exists '
                                             f"and that the SQL Server service account has access to it.")
            return StandInCursor(("file_name",), [(n,) for n in names])
        m = re.fullmatch(r"ALTER EVENT SESSION \[(\w+)\] ON SERVER STATE = STOP", sql)
        if m:
            assert server.xe_sessions[m.group(1)]["running"], "STOP of a session that does not run is an error"
            server.xe_sessions[m.group(1)]["running"] = False
            return StandInCursor()
        m = re.fullmatch(r"DROP EVENT SESSION \[(\w+)\] ON SERVER", sql)
        if m:
            del server.xe_sessions[m.group(1)]
            return StandInCursor()
        m = re.fullmatch(r"IF EXISTS \(SELECT 1 FROM sys\.traces WHERE id = (\d+) AND status = 1\) "
                         r"BEGIN EXEC sys\.sp_trace_setstatus \1, 0 END", sql)
        if m:
            trace = server.traces.get(int(m.group(1)))
            if trace and trace["status"] == 1:
                trace["status"] = 0
            return StandInCursor()
        m = re.fullmatch(r"EXEC sys\.sp_trace_setstatus (\d+), 2", sql)
        if m:
            assert server.traces[int(m.group(1))]["status"] == 0, "a trace is stopped before it is closed"
            del server.traces[int(m.group(1))]
            return StandInCursor()
        return None
