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
- sys.fn_xe_file_target_read_file raises error 25718 when no file matches its path;
- the observers' statements (issue 45): CREATE EVENT SESSION keeps the session's predicate on
  `[sqlserver].[database_id]`, its target and MAX_DURATION, which the server accepts from major version 17
  (SQL Server 2025) only (error 25706 before: an unknown session option); a started session with
  MAX_DURATION stops by itself that many seconds after it started; sp_trace_create keeps @stoptime (by the
  server's clock, GETDATE()) and the trace stops by itself then; sp_trace_setfilter only on a stopped
  trace (return code 2 on a running one); DB_ID() is the connection's database's id;
- the server's clock (`now`, seconds) moves only when a test moves it (`advance`);
- `connected` sessions: those of concurbench's connections that a test registers (mssql_remote_standin.py
  registers each connection of a harness running in another process, and ends them when that process
  dies, as a server does when a client's connection is gone).

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
VERSIONS = {  # @@VERSION of each version, as the server words it
    "2019": "Microsoft SQL Server 2019 (RTM-CU27) (KB5037331) - 15.0.4375.4 (X64) \n\tDeveloper Edition (64-bit) "
            "on Linux (Ubuntu 20.04.6 LTS) <X64>",
    "2022": "Microsoft SQL Server 2022 (RTM-CU15) (KB5041321) - 16.0.4145.4 (X64) \n\tDeveloper Edition (64-bit) "
            "on Linux (Ubuntu 22.04.4 LTS) <X64>",
    "2025": "Microsoft SQL Server 2025 (RTM) - 17.0.1000.7 (X64) \n\tDeveloper Edition (64-bit) on Linux "
            "(Ubuntu 22.04.5 LTS) <X64>",
}


def like(pattern: str) -> re.Pattern:
    """A LIKE pattern (%, _, [x]) as a regular expression."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            j = pattern.index("]", i + 2) if pattern[i + 1] == "]" else pattern.index("]", i + 1)
            out += re.escape(pattern[i + 1:j])
            i = j + 1
            continue
        out += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.compile(out + r"\Z", re.S)


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
    version: str = VERSIONS["2022"]
    data_dir: str = DATA_DIR  # SERVERPROPERTY('InstanceDefaultDataPath')
    now: float = 0.0  # the server's clock, in seconds
    next_trace: int = 2  # trace 1 is the default trace
    database_ids: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self.databases = {name: dict(options) for name, options in self.databases.items()}

    @property
    def major(self) -> int:
        return int(re.search(r" - (\d+)\.", self.version).group(1))

    def product_version(self) -> str:
        return re.search(r" - (\d+\.\d+\.\d+\.\d+)", self.version).group(1)

    def database_id(self, name: str) -> int:
        return self.database_ids.setdefault(name, 5 + len(self.database_ids))

    def advance(self, seconds: float) -> None:
        """The server's clock moves on; sessions and traces whose limit is reached stop by themselves."""
        self.now += seconds
        self.expire()

    def expire(self) -> None:
        for session in self.xe_sessions.values():
            if session.get("running") and session.get("stop_at") is not None and self.now >= session["stop_at"]:
                session["running"] = False
        for trace in self.traces.values():
            if trace["status"] == 1 and trace.get("stop_at") is not None and self.now >= trace["stop_at"]:
                trace["status"] = 0

    def running(self) -> dict[str, list]:
        """What of concurbench's is running or switched on: XE sessions, traces, global trace flags."""
        return {"xe": sorted(n for n, x in self.xe_sessions.items() if x.get("running")),
                "traces": sorted(t["path"] for t in self.traces.values() if t["status"] == 1),
                "flags": sorted(self.trace_flags)}

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
        if sql.startswith("SELECT CAST(name AS nvarchar(128)) AS name, CAST(value AS nvarchar(4000)) AS value "
                          "FROM sys.extended_properties WHERE class = 0 AND (name LIKE N'concurbench[_]trace"):
            mine = server.properties.get(self.database, {})
            return StandInCursor(("name", "value"), [(n, v) for n, v in sorted(mine.items())
                                                     if n.startswith(("concurbench_trace_flag_", "concurbench_configure:"))])
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
        return self._observers(sql, params) or self._sweep(sql, params)

    def _observers(self, sql: str, params: tuple):  # noqa: C901 - one answer per statement
        server = self.server
        server.expire()
        if sql.startswith("SELECT @@VERSION AS version"):  # server_info: this server's version
            return StandInCursor(("version", "product_version", "product_level", "product_update_level", "edition",
                                  "engine_edition"), [(server.version, server.product_version(), "RTM", None,
                                                       "Developer Edition (64-bit)", 3)])
        if sql == "SELECT DB_ID() AS database_id":
            return StandInCursor(("database_id",), [(server.database_id(self.database),)])
        if "SERVERPROPERTY('EngineEdition')" in sql and "@@VERSION" in sql:
            return StandInCursor(("engine_edition", "version"), [(3, server.version)])
        if sql == "SELECT COUNT(*) AS n FROM sys.server_event_sessions WHERE name = ?":
            return StandInCursor(("n",), [(int(params[0] in server.xe_sessions),)])
        if sql == "SELECT COUNT(*) AS n FROM sys.dm_xe_sessions WHERE name = ?":
            return StandInCursor(("n",), [(int(bool(server.xe_sessions.get(params[0], {}).get("running"))),)])
        if sql.startswith("SELECT dropped_event_count, dropped_buffer_count FROM sys.dm_xe_sessions"):
            return StandInCursor(("a", "b"), [(0, 0)] if server.xe_sessions.get(params[0], {}).get("running") else [])
        if "t.target_name = N'ring_buffer'" in sql:
            head = '<RingBufferTarget truncated="0" totalEventsProcessed="7" eventCount="7" droppedCount="0">'
            return StandInCursor(("head",), [(head,)] if server.xe_sessions.get(params[0], {}).get("running") else [])
        if "t.target_name = N'event_file'" in sql:
            found = server.xe_sessions.get(params[0], {})
            name = (found.get("filename") or "")[:-4] + "_0_134343910972710000.xel" if found.get("filename") else ""
            return StandInCursor(("target_data",), [(f'<EventFileTarget><File name="{name}"/></EventFileTarget>',)])
        if "fn_xe_file_target_read_file(?, NULL, NULL, NULL) WHERE file_name >= ?" in sql:
            return StandInCursor(("n", "oldest"), [(3, None)])
        m = re.match(r"CREATE EVENT SESSION \[(\w+)\] ON SERVER (.*) WITH \((.*)\)$", sql, re.S)
        if m:
            name, body, options = m.groups()
            if name in server.xe_sessions:
                raise StandInSqlError(25631, f'The event session, "{name}", already exists.  Choose a unique name for '
                                             f'the event session.')
            duration = re.search(r"MAX_DURATION = (\d+) SECONDS", options)
            if duration and server.major < 17:
                raise StandInSqlError(25706, "The event session option, \"MAX_DURATION\", is unknown.")
            predicate = re.findall(r"WHERE \(\[sqlserver\]\.\[database_id\] = \((\d+)\)\)", body)
            filename = re.search(r"SET filename = N'((?:[^']|'')*)'", body)
            server.xe_sessions[name] = {"running": False, "filename": filename.group(1) if filename else None,
                                        "database_id": int(predicate[0]) if predicate else None,
                                        "events": body.count("ADD EVENT "), "filtered": len(predicate),
                                        "max_duration": int(duration.group(1)) if duration else None,
                                        "stop_at": None, "sql": sql}
            return StandInCursor()
        m = re.fullmatch(r"ALTER EVENT SESSION \[(\w+)\] ON SERVER STATE = (START|STOP)", sql)
        if m:
            found = server.xe_sessions[m.group(1)]
            if m.group(2) == "START":
                assert not found["running"], "START of a running session is an error"
                found["running"] = True
                if found["filename"]:  # the event_file target makes its first file
                    server.xel_files.append(found["filename"][:-4] + f"_0_{134343910972710000 + len(server.xel_files)}.xel")
                found["stop_at"] = None if found["max_duration"] is None else server.now + found["max_duration"]
            else:
                assert found["running"], "STOP of a session that does not run is an error"
                found["running"] = False
            return StandInCursor()
        if sql.startswith("SELECT id, status FROM sys.traces WHERE path LIKE ?"):
            rx = like(params[0])
            return StandInCursor(("id", "status"), [(i, t["status"]) for i, t in server.traces.items()
                                                    if rx.match(t["path"])])
        if sql.startswith("SELECT status, event_count, dropped_event_count FROM sys.traces"):
            t = server.traces.get(params[0])
            ok = t is not None and like(params[1]).match(t["path"])
            return StandInCursor(("status", "events", "dropped"), [(t["status"], 12, 0)] if ok else [])
        m = re.search(r"@stoptime DATETIME = DATEADD\(SECOND, (\d+), GETDATE\(\)\); EXEC @rc = sys\.sp_trace_create "
                      r"@traceid OUTPUT, 2, N'((?:[^']|'')*)', @maxfilesize, @stoptime, (\d+);", sql)
        if m:
            trace_id, server.next_trace = server.next_trace, server.next_trace + 1
            server.traces[trace_id] = {"status": 0, "path": m.group(2).replace("''", "'") + ".trc",
                                       "stop_at": server.now + int(m.group(1)), "files": int(m.group(3)),
                                       "filter_database": None, "events": 0}
            return StandInCursor(("rc", "trace_id"), [(0, trace_id)])
        m = re.search(r"sp_trace_setevent (\d+), (\d+), (\d+), @on", sql)
        if m:
            server.traces[int(m.group(1))]["events"] += 1
            return StandInCursor(("rc",), [(0,)])
        m = re.search(r"@database_id INT = (\d+); EXEC @rc = sys\.sp_trace_setfilter (\d+), 3, 0, 0, @database_id", sql)
        if m:
            trace = server.traces[int(m.group(2))]
            if trace["status"] != 0:
                return StandInCursor(("rc",), [(2,)])  # the trace is running
            trace["filter_database"] = int(m.group(1))
            return StandInCursor(("rc",), [(0,)])
        m = re.search(r"EXEC @rc = sys\.sp_trace_setstatus (\d+), (\d)", sql)
        if m:
            trace_id, status = int(m.group(1)), int(m.group(2))
            trace = server.traces.get(trace_id)
            if trace is None:
                return StandInCursor(("rc",), [(9,)])
            if status == 2:
                assert trace["status"] == 0, "a trace is stopped before it is closed"
                del server.traces[trace_id]
            elif status == 1 and trace.get("stop_at") is not None and server.now >= trace["stop_at"]:
                return StandInCursor(("rc",), [(14,)])  # its stop time is already past
            else:
                trace["status"] = status
            return StandInCursor(("rc",), [(0,)])
        return None

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
            return StandInCursor(("data_dir",), [(server.data_dir,)])
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
