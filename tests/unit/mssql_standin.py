"""A stand-in for a SQL Server and for a provisioner that owns (or does not own) it, for tests of what
the runner and the engine send, in which database, and how often the server restarts.

No SQL Server can run on the machine concurbench is built on, so this keeps the little state those
tests look at and answers the statements the runner, the configurator and `server_info` send, as
Microsoft's documentation says SQL Server would:

- a connection's database is the one of its connection string; `USE db` at the top level of a batch
  changes it for the rest of the session, while inside `EXEC sys.sp_executesql N'...'` it lasts
  only until that statement ends (the sp_executesql and EXECUTE pages);
- `DBCC SHRINKFILE (name, EMPTYFILE)` looks the file up in the current database (error 8985 when it
  is not there) and fails with 2555 when the file holds pages that cannot be moved; `ALTER DATABASE
  tempdb REMOVE FILE` fails with 5042 while the file is not empty;
- a restart re-creates tempdb's files empty and makes a pending MEMORY_OPTIMIZED TEMPDB_METADATA
  change take effect; startup itself may put pages in them (`busy_after_restart`), which EMPTYFILE
  moves out only on a later attempt (one attempt fewer each time: `TempdbFile.busy`);
- procedures are created in the current database;
- the run database's options are read in one batch that names the ADR column only inside sp_executesql,
  where COL_LENGTH found it (a 2017 server, `adr_column` False, answers NULL for it);
- a login without VIEW SERVER STATE sees only its own session in sys.dm_exec_sessions; `sessions` are the
  others, each in a database;
- database-level extended properties (sys.extended_properties, class 0) are added and dropped by
  sp_addextendedproperty and sp_dropextendedproperty in the current database;
- sp_configure sets an option's `value`, and RECONFIGURE makes it the value in use only for an option
  that is dynamic (sys.configurations.is_dynamic; `user connections` is not); @@MAX_CONNECTIONS is
  `user connections` (32,767 when 0); sys.dm_exec_sessions shows a login without VIEW SERVER STATE
  only its own session, and sys.dm_os_sys_info is refused to it (error 300);
- HAS_PERMS_BY_NAME(NULL, NULL, permission) is 1 for the server permissions the login holds (`permissions`).

Any other statement is an AssertionError, so a test notices SQL it did not expect; a statement matching one of
`fail`'s patterns raises that pattern's error once (a server that refuses it).

`CannedDmvs` is a simpler stand-in for the samplers' tests: canned rows per exact query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from concurbench.engines.base import ChangePolicy
from concurbench.engines import sqlserver
from concurbench.provisioners.base import Connection
from concurbench.provisioners.registry import TARGETS

PRODUCT_VERSION = "16.0.4135.4"  # SQL Server 2022 CU14


class StandInSqlError(Exception):
    """Shaped like a pyodbc error: (SQLSTATE, message with the native number before the function name)."""

    def __init__(self, number: int, text: str):
        super().__init__("42000", f"[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]{text} "
                                  f"({number}) (SQLExecDirectW)")
        self.number = number


@dataclass
class TempdbFile:
    name: str
    holds_pages: bool = False  # pages EMPTYFILE cannot move (system objects, version store)
    busy: int = 0  # EMPTYFILE attempts that still fail with 2555 (pages in use that move out later)


@dataclass
class StandInSqlServer:
    """The state of one stand-in SQL Server and the log of every statement with the database it ran in."""

    tempdb_files: list[TempdbFile] = field(default_factory=lambda: [TempdbFile("tempdev")])
    memory_optimized: bool = False
    pending_memory_optimized: bool | None = None
    trace_flags: set[int] = field(default_factory=set)
    databases: dict[str, dict] = field(default_factory=lambda: {"concurbench": {
        "read_committed_snapshot": 0, "snapshot_isolation": 0, "delayed_durability": "DISABLED",
        "recovery": "FULL", "adr": 0}})
    objects: dict[str, set[str]] = field(default_factory=dict)
    restarts: int = 0
    busy_after_restart: int = 0  # each tempdb file's `busy` right after a restart
    # sp_configure options: name -> [value in use, value set, dynamic]
    configurations: dict[str, list] = field(default_factory=lambda: {
        "show advanced options": [0, 0, True], "max degree of parallelism": [0, 0, True],
        "max worker threads": [0, 0, True], "user connections": [0, 0, False]})
    other_sessions: int = 0  # user sessions of other logins
    max_workers: int = 512  # sys.dm_os_sys_info.max_workers_count (what max worker threads 0 gives 4 CPUs)
    view_server_state: bool = True
    adr_column: bool = True  # sys.databases.is_accelerated_database_recovery_on (2019 and later)
    read_database_error: Exception | None = None  # what reading the database's options raises (once)
    sessions: list["StandInSession"] = field(default_factory=list)  # other sessions
    properties: dict[str, dict[str, str]] = field(default_factory=dict)  # database -> extended properties
    log: list[tuple[str, str]] = field(default_factory=list)  # (database, statement)
    login: str = "bench"
    fail: dict[str, Exception] = field(default_factory=dict)  # a statement matching the pattern raises this, once
    permissions: set[str] = field(default_factory=lambda: {"ALTER ANY EVENT SESSION", "ALTER TRACE", "ALTER SETTINGS"})

    def product_version(self) -> str:
        return PRODUCT_VERSION

    @classmethod
    def with_tempdb_files(cls, count: int, holding_pages: bool) -> "StandInSqlServer":
        files = [TempdbFile("tempdev")] + [TempdbFile(f"temp{n}", holding_pages) for n in range(2, count + 1)]
        return cls(tempdb_files=files)

    def connect(self, conn_str: str, autocommit: bool = True, timeout: int = 10) -> "StandInConnection":
        return StandInConnection(self, sqlserver.database_of(conn_str) or "master")

    def restart(self) -> None:
        self.restarts += 1
        if self.pending_memory_optimized is not None:
            self.memory_optimized, self.pending_memory_optimized = self.pending_memory_optimized, None
        for f in self.tempdb_files:
            f.holds_pages = False
            f.busy = self.busy_after_restart

    def ran_in(self, database: str) -> list[str]:
        return [sql for db, sql in self.log if db == database]


@dataclass
class StandInSession:
    """Another session on the stand-in server, as sys.dm_exec_sessions shows it."""

    session_id: int
    database: str
    program: str = "SSMS - Query"
    login: str = "app_user"
    host: str = "desk7"
    pid: int = 4242


class StandInCursor:
    def __init__(self, columns=None, rows=()):
        self.description = [(c, None, None, None, None, None, None) for c in columns] if columns else None
        self._rows = list(rows)

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None

    def fetchall(self):
        rows, self._rows = self._rows, []
        return rows

    def nextset(self):
        return False


class NoResultSet(StandInCursor):
    """A statement that returned no result set: pyodbc leaves `description` None, and fetching raises."""

    def fetchone(self):
        raise StandInProgrammingError("No results.  Previous SQL was not a query.")

    fetchall = fetchone


class StandInProgrammingError(Exception):
    """Shaped like pyodbc.ProgrammingError."""


class StandInConnection:
    def __init__(self, server: StandInSqlServer, database: str):
        self.server = server
        self.database = database
        self.closed = False

    def close(self):
        self.closed = True

    def execute(self, sql: str, *params):
        assert not self.closed, "a statement on a closed connection"
        return self._run(_code(sql), params)

    # -- statements ---------------------------------------------------------------------------------
    def _run(self, sql: str, params: tuple):
        server = self.server
        server.log.append((self.database, sql))
        for pattern, error in list(server.fail.items()):
            if re.search(pattern, sql):
                del server.fail[pattern]
                raise error
        m = re.fullmatch(r"EXEC sys\.sp_executesql N'((?:[^']|'')*)'", sql, re.S)
        if m:  # a change of database inside lasts only until the statement ends
            outer = self.database
            try:
                for part in _split(m.group(1).replace("''", "'")):
                    self._run(part, ())
            finally:
                self.database = outer
            return StandInCursor()
        if re.match(r"(CREATE OR ALTER|CREATE) PROCEDURE\b", sql, re.I):
            name = re.match(r"\S+(?: OR ALTER)? PROCEDURE\s+([\w.\[\]]+)", sql, re.I).group(1)
            server.objects.setdefault(self.database, set()).add(name)
            return StandInCursor()
        parts = _split(sql)
        if len(parts) > 1:
            for part in parts:
                self._run(part, params)
            return StandInCursor()
        return self._one(sql, params)

    def _one(self, sql: str, params: tuple):
        server = self.server
        m = re.fullmatch(r"USE \[?(\w+)\]?", sql, re.I)
        if m:
            self.database = m.group(1)
            return StandInCursor()
        m = re.fullmatch(r"DROP PROCEDURE IF EXISTS ([\w.\[\]]+)", sql, re.I)
        if m:
            server.objects.get(self.database, set()).discard(m.group(1))
            return StandInCursor()
        m = re.fullmatch(r"DBCC TRACE(ON|OFF)\((\d+), -1\)", sql)
        if m:
            (server.trace_flags.add if m.group(1) == "ON" else server.trace_flags.discard)(int(m.group(2)))
            return StandInCursor()
        if sql == "DBCC TRACESTATUS(-1) WITH NO_INFOMSGS":  # no flag on: no result set at all
            return StandInCursor(("TraceFlag", "Status", "Global", "Session"),
                                 [(f, 1, 1, 0) for f in sorted(server.trace_flags)]) if server.trace_flags \
                else NoResultSet()
        if sql == "SELECT CAST(SERVERPROPERTY('IsTempdbMetadataMemoryOptimized') AS int)":
            return StandInCursor(("v",), [(int(server.memory_optimized),)])
        if sql == "SELECT COUNT(*) FROM tempdb.sys.database_files WHERE type = 0":
            return StandInCursor(("n",), [(len(server.tempdb_files),)])
        if sql.startswith("SELECT name, physical_name FROM tempdb.sys.database_files WHERE type = 0"):
            return StandInCursor(("name", "physical_name"),
                                 [(f.name, f"/var/opt/mssql/data/{f.name}.ndf") for f in server.tempdb_files])
        if sql.startswith("SELECT CAST(value_in_use AS bigint) FROM sys.configurations WHERE name = ?"):
            found = server.configurations.get(params[0])  # no row for an option the server lacks
            return StandInCursor(("v",), [(found[0],)] if found else [])
        if sql == "SELECT name FROM sys.configurations WHERE is_dynamic = 0":
            return StandInCursor(("name",), [(n,) for n, (_, _, dyn) in server.configurations.items() if not dyn])
        m = re.fullmatch(r"EXEC sp_configure N'([^']+)', (-?\d+)", sql)
        if m:
            server.configurations[m.group(1)][1] = int(m.group(2))
            return StandInCursor()
        if sql == "RECONFIGURE":
            for option in server.configurations.values():
                if option[2]:
                    option[0] = option[1]
            return StandInCursor()
        if sql.startswith("SELECT @@MAX_CONNECTIONS AS max_connections"):
            limit = server.configurations["user connections"][0] or 32767
            return StandInCursor(("max_connections", "sees_all", "others"),
                                 [(limit, int(server.view_server_state),
                                   server.other_sessions if server.view_server_state else 0)])
        if sql == "SELECT max_workers_count FROM sys.dm_os_sys_info":
            if not server.view_server_state:
                raise StandInSqlError(300, "VIEW SERVER PERFORMANCE STATE permission was denied on object 'server', "
                                           "database 'master'.")
            return StandInCursor(("max_workers_count",), [(server.max_workers,)])
        if sql == "SELECT DB_NAME() AS database_name":
            return StandInCursor(("database_name",), [(self.database,)])
        if sql.startswith("SELECT is_read_committed_snapshot_on, snapshot_isolation_state"):  # before issue 38
            db = server.databases.get(params[0])
            return StandInCursor(("a", "b", "c", "d"), [(db["read_committed_snapshot"], db["snapshot_isolation"],
                                                         db["delayed_durability"], db["recovery"])] if db else [])
        if sql.startswith("SELECT is_accelerated_database_recovery_on FROM sys.databases"):  # before issue 38
            if server.read_database_error is not None or not server.adr_column:
                error, server.read_database_error = server.read_database_error, None
                raise error or StandInSqlError(207, "Invalid column name 'is_accelerated_database_recovery_on'.")
            return StandInCursor(("adr",), [(server.databases[params[0]]["adr"],)])
        if sql.startswith("IF COL_LENGTH('sys.databases', 'is_accelerated_database_recovery_on') IS NULL"):
            if server.read_database_error is not None:
                error, server.read_database_error = server.read_database_error, None
                raise error
            db = server.databases.get(params[0])
            adr = db["adr"] if db and server.adr_column else None
            return StandInCursor(("a", "b", "c", "d", "adr"), [(db["read_committed_snapshot"], db["snapshot_isolation"],
                                                                db["delayed_durability"], db["recovery"], adr)]
                                 if db else [])
        m = re.fullmatch(r"ALTER DATABASE \[(\w+)\] SET (.+?)(?: WITH ROLLBACK IMMEDIATE)?", sql)
        if m:
            db, option = server.databases[m.group(1)], m.group(2)
            if option.startswith("RECOVERY "):
                db["recovery"] = option.split()[1]
            elif option.startswith("DELAYED_DURABILITY = "):
                db["delayed_durability"] = option.split(" = ")[1]
            elif option.startswith("READ_COMMITTED_SNAPSHOT "):
                db["read_committed_snapshot"] = int(option.endswith("ON"))
            elif option.startswith("ALLOW_SNAPSHOT_ISOLATION "):
                db["snapshot_isolation"] = int(option.endswith("ON"))
            elif option.startswith("ACCELERATED_DATABASE_RECOVERY = "):
                db["adr"] = int(option.endswith("ON"))
            else:
                raise AssertionError(f"stand-in for SQL Server does not know the option: {sql}")
            return StandInCursor()
        m = re.fullmatch(r"ALTER SERVER CONFIGURATION SET MEMORY_OPTIMIZED TEMPDB_METADATA = (ON|OFF)", sql)
        if m:
            server.pending_memory_optimized = m.group(1) == "ON"
            return StandInCursor()
        m = re.match(r"ALTER DATABASE tempdb ADD FILE \(NAME = \[(\w+)\]", sql)
        if m:
            server.tempdb_files.append(TempdbFile(m.group(1)))
            return StandInCursor()
        m = re.fullmatch(r"ALTER DATABASE tempdb REMOVE FILE \[(\w+)\]", sql)
        if m:
            file = self._tempdb_file(m.group(1), "tempdb")
            if file.holds_pages:
                raise StandInSqlError(5042, f"The file '{file.name}' cannot be removed because it is not empty.")
            server.tempdb_files.remove(file)
            return StandInCursor()
        m = re.fullmatch(r"DBCC SHRINKFILE \(N'(\w+)', EMPTYFILE\) WITH NO_INFOMSGS", sql)
        if m:
            file = self._tempdb_file(m.group(1), self.database)
            if file.busy or file.holds_pages:
                file.busy = max(0, file.busy - 1)
                raise StandInSqlError(2555, f"Cannot move all contents of file \"{file.name}\" to other places to "
                                            f"complete the emptyfile operation.")
            return StandInCursor()
        if sql.startswith("SELECT @@VERSION AS version"):
            return StandInCursor(("version", "product_version", "product_level", "product_update_level", "edition",
                                  "engine_edition"),
                                 [("Microsoft SQL Server 2022 (RTM-CU14) - 16.0.4135.4 (X64) on Linux", PRODUCT_VERSION,
                                   "RTM", "CU14", "Developer Edition (64-bit)", 3)])
        for marker, columns, row in FACTS:
            if marker in sql:
                return StandInCursor(columns, [row])
        found = self._sessions_and_properties(sql, params)
        if found is not None:
            return found
        raise AssertionError(f"stand-in for SQL Server does not know: {sql}")

    def _sessions_and_properties(self, sql: str, params: tuple):
        server = self.server
        if sql.startswith("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition, "
                          "CAST(SERVERPROPERTY('ProductVersion')"):  # running/needs.py's SERVER_FACTS
            granted = [int(p in server.permissions) for p in ("ALTER ANY EVENT SESSION", "ALTER TRACE", "ALTER SETTINGS")]
            return StandInCursor(("engine_edition", "product_version", "login", "xe", "trace", "settings"),
                                 [(3, server.product_version(), server.login, *granted)])
        if sql.startswith("SELECT CASE WHEN HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') = 1"):
            return StandInCursor(("sees_all",), [(int(server.view_server_state),)])
        if sql.startswith("SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE program_name IN ("):
            names = re.findall(r"N'((?:[^']|'')*)'", sql)
            seen = server.sessions if server.view_server_state else []
            return StandInCursor(("count",), [(sum(x.program in names for x in seen),)])
        if sql.startswith("SELECT session_id, login_name, host_name, program_name FROM sys.dm_exec_sessions "
                          "WHERE database_id = DB_ID(?)"):
            seen = server.sessions if server.view_server_state else []
            return StandInCursor(("session_id", "login_name", "host_name", "program_name"),
                                 [(x.session_id, x.login, x.host, x.program) for x in seen if x.database == params[0]])
        mine = server.properties.setdefault(self.database, {})
        m = re.fullmatch(r"IF EXISTS \(SELECT 1 FROM sys\.extended_properties WHERE class = 0 AND name = N'([^']+)'\) "
                         r"BEGIN EXEC sys\.sp_dropextendedproperty @name = N'\1' END", sql)
        if m:
            mine.pop(m.group(1), None)
            return StandInCursor()
        m = re.fullmatch(r"EXEC sys\.sp_(add|update)extendedproperty @name = N'([^']+)', @value = N'((?:[^']|'')*)'", sql)
        if m:
            if (m.group(1) == "add") == (m.group(2) in mine):
                raise StandInSqlError(15233 if m.group(1) == "add" else 15217,
                                      f"Property '{m.group(2)}' {'already exists' if m.group(1) == 'add' else 'does not exist'}.")
            mine[m.group(2)] = m.group(3).replace("''", "'")
            return StandInCursor()
        if sql.startswith("SELECT CAST(value AS nvarchar(4000)) AS marker FROM sys.extended_properties"):
            return StandInCursor(("marker",), [(mine[params[0]],)] if params[0] in mine else [])
        return None

    def _tempdb_file(self, name: str, database: str) -> TempdbFile:
        found = [f for f in self.server.tempdb_files if f.name == name] if database == "tempdb" else []
        if not found:
            raise StandInSqlError(8985, f"Could not locate file '{name}' for database '{database}' in "
                                        f"sys.database_files. The file either does not exist, or was dropped.")
        return found[0]


# What server_info reads besides the version: (a text the query holds, its columns, the row).
FACTS = [
    ("sys.dm_os_sys_info", ("cpu_count", "scheduler_count"), (8, 8)),
    ("sys.database_query_store_options", ("query_store",), ("READ_WRITE",)),
    ("IsOptimizedLockingOn", ("optimized_locking",), (None,)),
    ("LIGHTWEIGHT_QUERY_PROFILING", ("lightweight_query_profiling",), (1,)),
    ("AS adr FROM sys.databases WHERE database_id = DB_ID()", ("adr",), (0,)),
]


def _code(sql: str) -> str:
    """The statement without the comment lines in front of it (a setup batch starts with its comment)."""
    lines = sql.strip().splitlines()
    while lines and lines[0].lstrip().startswith("--"):
        lines.pop(0)
    return "\n".join(lines).strip()


def _split(sql: str) -> list[str]:
    """Statements of a batch split on `;` outside string literals (enough for the statements tested)."""
    parts, current, quoted = [], [], False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
        if ch == ";" and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class StandInProvisioner:
    """A provisioner over the stand-in server: `docker` (owned: restarts) or `dsn` (not owned)."""

    def __init__(self, server: StandInSqlServer, name: str = "docker", allow: bool = False,
                 owns_database: bool = True, as_is: bool = False):
        self.server = server
        self.name = name
        self.allow = allow
        self.as_is = as_is
        self.owns_database = owns_database  # dsn: the run's database is concurbench's (it made or marked it)
        self.restart_settings: list[dict] = []

    def start(self) -> Connection:
        return Connection("Driver={FreeTDS};Server=127.0.0.1;Port=1;Database=concurbench;UID=sa;PWD=x;",
                          "mssql://sa@127.0.0.1:1/concurbench")

    def restart(self, settings=None) -> Connection:
        assert TARGETS[self.name].owns_server, "a server concurbench does not own is never restarted"
        self.restart_settings.append(dict(settings or {}))
        self.server.restart()
        return self.start()

    def stop(self) -> None:
        pass

    def apply_settings(self) -> None:
        pass

    def inspect(self) -> None:
        return None  # only the probe asks, and the runner's tests do not probe

    def policy(self) -> ChangePolicy:
        if TARGETS[self.name].owns_server:
            return ChangePolicy()
        return ChangePolicy(owned=False, allow_server_changes=self.allow, as_is=self.as_is,
                            owns_database=self.owns_database)

    def file_remover(self) -> None:
        return None

    def connect_hint(self) -> None:
        return None

    def logs(self, lines: int = 40) -> str:
        return ""

    def describe(self) -> dict:
        return {"target": self.name}


# -- canned DMV rows, for the samplers ---------------------------------------------------------------
class CannedDmvs:
    """Stand-in for a SQL Server connection for the samplers: canned (columns, rows) per exact query text;
    a list of answers is served one per execution (the last repeats). Records (sql, params), and refuses
    a None parameter: pyodbc declares it as a varchar of length 1 (see tests/integration/
    test_odbc_binding.py), which silently truncates whatever the server compares or combines it with."""

    def __init__(self, answers: dict):
        self.answers = {sql: (a if isinstance(a, list) else [a]) for sql, a in answers.items()}
        self.executed: list[tuple[str, tuple]] = []

    def execute(self, sql, *params):
        self.executed.append((sql, params))
        assert None not in params, f"a None parameter is bound as varchar(1): {sql} {params}"
        if sql not in self.answers:
            raise AssertionError(f"stand-in for SQL Server has no answer for: {sql}")
        queue = self.answers[sql]
        columns, rows = queue.pop(0) if len(queue) > 1 else queue[0]
        return StandInCursor(columns, rows)

    def rollback(self):
        pass


class StepClock:
    """A clock that returns the times it was given, one per call."""

    def __init__(self, *times):
        self.times = list(times)

    def __call__(self):
        return self.times.pop(0)
