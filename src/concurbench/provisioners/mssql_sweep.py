"""What killed runs left on a SQL Server concurbench does not own, for `concurbench gc --target dsn`
(housekeeping/remote.py's Sweeper: `leftovers`, then `remove` one by one).

A run cleans up as it ends, also after an error, Ctrl-C, SIGTERM or SIGHUP; a SIGKILL, a lost connection
or a crashed machine leaves what it had made:

- a global trace flag it turned on (DBCC TRACEON(n, -1)) and sp_configure options it set: found by
  their records, the extended properties `concurbench_trace_flag_<n>` and `concurbench_configure:<name>`
  of the run's database (engines/mssql_guards.py); the flag is turned off, and an option put back to
  its value before the run when it still has the run's value (one changed since is left as it is);
- Extended Events sessions named `concurbench_<observer>`: stopped and dropped (on SQL Server 2025 they
  also stop themselves, MAX_DURATION);
- SQL Traces writing to `concurbench-<observer>-<time>.trc`: stopped and closed (they also stop
  themselves at their @stoptime);
- the temporary database `concurbench` (its marker says temporary): dropped;
- .xel and .trc files in the server's data directory. SQL Server offers a client no documented way to
  delete a file (xp_cmdshell would have to be turned on, a server-wide change concurbench does not
  make), so these are listed with the command an administrator runs on the server. The .xel files are
  found with sys.fn_xe_file_target_read_file (which lists the files holding events); the .trc files of
  a trace gc closes are named by the trace's path; those of traces already closed cannot be listed from
  a client, and docs/targets.md says where to look.

Only what is concurbench's by name or record and what no live run uses is listed. Whether a run lives is
told by its sessions (sys.dm_exec_sessions): an observer's session is named `concurbench:observer:<name>`,
and a trace flag's record names the process (host and pid) that turned it on. A login without VIEW SERVER
STATE sees no other session, so it cannot tell, and gc refuses to look for it.

Sources (Microsoft Learn): sys.dm_exec_sessions (program_name, host_name, host_process_id, database_id);
sys.server_event_sessions, sys.dm_xe_sessions, sys.server_event_session_fields (the event_file target's
filename); ALTER/DROP EVENT SESSION; sys.traces (path, status), sp_trace_setstatus (0 stop, 2 close);
DBCC TRACESTATUS, DBCC TRACEOFF; sys.extended_properties, sp_dropextendedproperty; STRING_AGG (2017+),
QUOTENAME, sp_executesql; sys.fn_xe_file_target_read_file (VIEW SERVER STATE; error 25718 when no file
matches); DROP DATABASE (error 3702 while it is in use); xp_cmdshell (off by default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..engines import mssql_config as mc
from ..engines import mssql_guards as guards
from ..engines import odbc
from ..errors import ConfigError, ProvisionError
from ..housekeeping.remote import Leftover
from ..samplers.mssql_logic import quote_ident
from . import mssql_owned as mo
from . import owned

OBSERVER = "concurbench:observer:"  # the program name of an observer's sessions (background/mssql_common.py)
LIVE = ("SELECT session_id, login_name, host_name, program_name, host_process_id, DB_NAME(database_id) "
        "FROM sys.dm_exec_sessions WHERE is_user_process = 1 AND session_id <> @@SPID")
# The extended properties named concurbench... of every database the login may open, in one result.
PROPERTIES = ("DECLARE @sql nvarchar(max); "
              "SELECT @sql = STRING_AGG(CAST(N'SELECT CAST(' + QUOTENAME(name, '''') + N' AS sysname) AS db, "
              "CAST(p.name AS sysname) AS property, CAST(p.value AS nvarchar(4000)) AS value FROM ' + QUOTENAME(name) "
              "+ N'.sys.extended_properties AS p WHERE p.class = 0 AND p.name LIKE N''concurbench%''' "
              "AS nvarchar(max)), N' UNION ALL ') FROM sys.databases "
              "WHERE database_id > 4 AND state = 0 AND HAS_DBACCESS(name) = 1; "
              "IF @sql IS NOT NULL BEGIN EXEC sys.sp_executesql @sql END")
XE_SESSIONS = ("SELECT s.name, CASE WHEN r.name IS NULL THEN 0 ELSE 1 END AS running, "
               "(SELECT CAST(f.value AS nvarchar(4000)) FROM sys.server_event_session_fields AS f "
               "WHERE f.event_session_id = s.event_session_id AND f.name = N'filename') AS filename "
               "FROM sys.server_event_sessions AS s LEFT JOIN sys.dm_xe_sessions AS r ON r.name = s.name "
               "WHERE s.name LIKE N'concurbench[_]%'")
TRACES = "SELECT id, status, path FROM sys.traces WHERE path LIKE N'%concurbench-%'"
XEL_FILES = "SELECT DISTINCT file_name FROM sys.fn_xe_file_target_read_file(?, NULL, NULL, NULL)"
DATA_DIR = "SELECT CAST(SERVERPROPERTY('InstanceDefaultDataPath') AS nvarchar(4000)) AS data_dir"
NO_FILE = 25718  # fn_xe_file_target_read_file: no file matches the path
_TRACE_FILE = re.compile(r"concurbench-(\w+)-\d{8}T\d{9}Z(?:_\d+)?\.trc$", re.I)
CONFIGURATION = "SELECT CAST(value_in_use AS bigint) FROM sys.configurations WHERE name = ?"
DATABASE, XE, TRACE, FLAG, SETTING, FILE = "database", "xe session", "trace", "trace flag", "sp_configure", "file"


@dataclass(frozen=True)
class Run:
    """A live session of concurbench's, as sys.dm_exec_sessions shows it."""

    program: str
    host: str
    pid: int | None
    database: str | None


class Sweep:
    """The Sweeper of one SQL Server (`connect(database, purpose)` opens a connection as the provisioner does)."""

    def __init__(self, connect, where: str, safe: str):
        self.connect = connect
        self.where = where
        self.safe = safe
        self.found: dict[tuple[str, str], dict] = {}  # what leftovers() learnt of each, for remove()

    # -- finding ----------------------------------------------------------------------------------------
    def leftovers(self) -> list[Leftover]:
        conn = self.connect("master", "gc")
        try:
            if not guards.sees_all_sessions(conn):
                raise ConfigError(f"gc --target dsn needs a login that sees every session on {self.where} (VIEW "
                                  f"SERVER STATE, or VIEW SERVER PERFORMANCE STATE from 2022): without it a live "
                                  f"run's sessions look like a killed run's leftovers; nothing was listed or removed")
            sessions = [(str(r[1] or ""), Run(str(r[3] or ""), str(r[2] or ""), _int(r[4]), r[5]))
                        for r in conn.execute(LIVE).fetchall()]
            runs = [run for _, run in sessions if run.program.startswith(guards.OURS)]
            properties = [(str(r[0]), str(r[1]), r[2]) for r in _rows(conn.execute(PROPERTIES))]
            directory = str((conn.execute(DATA_DIR).fetchone() or [None])[0] or "/var/opt/mssql/data/")
            found = [*self._records(conn, properties, runs), *self._xe_sessions(conn, runs, directory),
                     *self._traces(conn, runs), *self._databases(properties, sessions),
                     *self._xel_files(conn, runs, directory)]
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(f"cannot look for what killed runs left on {self.where}: "
                                 f"{odbc.first_line(exc)}") from None
        finally:
            conn.close()
        self.found = {(item.kind, item.name): data for item, data in found}
        return [item for item, _ in found]

    def _records(self, conn, properties, runs) -> list:
        """The server-wide changes whose record a killed run left: trace flags, then sp_configure options (`show
        advanced options` last, as a run puts them back)."""
        on = set(mc.global_trace_flags(conn) or [])
        flags, settings = [], []
        for database, name, value in properties:
            note = guards.parse_note(value)
            if note is None or _alive(runs, note[0], note[1]):
                continue
            if name.startswith(guards.FLAG_PROPERTY):
                flag = int(name[len(guards.FLAG_PROPERTY):])
                state = "on" if flag in on else "already off (only its record goes)"
                flags.append((Leftover(FLAG, f"{flag} ({database})", f"{state}; {value}, and that run is gone"),
                              {"flag": flag, "on": flag in on, "database": database, "record": name}))
            elif name.startswith(guards.CONFIGURE_PROPERTY) and guards.parse_setting(value):
                option, (old, new) = name[len(guards.CONFIGURE_PROPERTY):], guards.parse_setting(value)
                row = conn.execute(CONFIGURATION, option).fetchone()
                now = None if row is None else int(row[0])
                state = (f"{now}, as a run that is gone set it ({value}); put back to {old}" if now == new else
                         f"{now} now, not the {new} a run that is gone set ({value}): left as it is, only its "
                         f"record goes")
                settings.append((Leftover(SETTING, f"{option} ({database})", state),
                                 {"option": option, "old": old, "restore": now == new, "database": database,
                                  "record": name}))
        settings.sort(key=lambda found: found[1]["option"] == mc.ADVANCED)
        return flags + settings

    def _xe_sessions(self, conn, runs, directory: str) -> list:
        out = []
        for name, running, filename in conn.execute(XE_SESSIONS).fetchall():
            observer = str(name)[len("concurbench_"):]
            if _observing(runs, observer):
                continue
            state = "running" if running else "stopped"
            out.append((Leftover(XE, str(name), f"{state}, left by a killed run; stopped and dropped"),
                        {"running": bool(running)}))
            if filename and not str(filename).startswith(directory):  # those in the data directory: _xel_files
                base = str(filename)[:-4] if str(filename).lower().endswith(".xel") else str(filename)
                out.append(_file(base + "_0_*.xel", f"the files of {name}"))
        return out

    def _traces(self, conn, runs) -> list:
        out = []
        for trace_id, status, path in conn.execute(TRACES).fetchall():
            m = _TRACE_FILE.search(str(path or ""))
            if not m or _observing(runs, m.group(1)):
                continue
            out.append((Leftover(TRACE, str(trace_id), f"{'running' if status == 1 else 'stopped'}, writing {path}; "
                                                       f"stopped and closed"), {"id": int(trace_id)}))
            out.append(_file(_trace_prefix(str(path)) + "*.trc", f"the files of trace {trace_id}"))
        return out

    def _databases(self, properties, sessions) -> list:
        out = []
        for database, name, value in properties:
            marker = owned.parse_marker(value) if name == owned.PROPERTY else None
            if marker is None or not marker.temporary:
                continue
            inside = [who for who, run in sessions if run.database == database]
            if inside:
                continue  # a run still uses it (or someone else: DROP DATABASE would fail anyway)
            out.append((Leftover(DATABASE, database, f"temporary database of a killed run ({value}); dropped"), {}))
        return out

    def _xel_files(self, conn, runs, directory: str) -> list:
        pattern = directory.rstrip("/\\") + _sep(directory) + "concurbench_*.xel"
        try:
            names = [str(r[0]) for r in conn.execute(XEL_FILES, pattern).fetchall()]
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: 25718 is "no such file"
            if odbc.error_number_from_pyodbc(exc) != NO_FILE:
                raise
            names = []
        live = [f"concurbench_{run.program[len(OBSERVER):].split(':')[0]}_" for run in runs
                if run.program.startswith(OBSERVER)]
        kept = [n for n in names if not any(re.split(r"[/\\]", n)[-1].startswith(prefix) for prefix in live)]
        return [_file(n, "a finished or killed run's events") for n in sorted(kept)]

    # -- removing ---------------------------------------------------------------------------------------
    def remove(self, leftover: Leftover) -> None:
        data = self.found.get((leftover.kind, leftover.name))
        if data is None:
            raise ProvisionError(f"{leftover.kind} {leftover.name} was not found by this gc; run gc again")
        if leftover.kind == DATABASE:
            self._drop_database(leftover.name)
            return
        conn = self.connect(data.get("database", "master"), "gc")
        try:
            for sql in self._removal(leftover, data):
                conn.execute(sql)
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(f"{odbc.first_line(exc)}") from None
        finally:
            conn.close()

    @staticmethod
    def _removal(leftover: Leftover, data: dict) -> list[str]:
        if leftover.kind == FLAG:
            off = [f"DBCC TRACEOFF({int(data['flag'])}, -1)"] if data["on"] else []
            return off + guards.unrecord(data["record"])
        if leftover.kind == SETTING:
            back = [f"EXEC sp_configure {mc.literal(data['option'])}, {int(data['old'])}", "RECONFIGURE"] \
                if data["restore"] else []
            return back + guards.unrecord(data["record"])
        if leftover.kind == XE:
            stop = [f"ALTER EVENT SESSION {quote_ident(leftover.name)} ON SERVER STATE = STOP"] if data["running"] else []
            return stop + [f"DROP EVENT SESSION {quote_ident(leftover.name)} ON SERVER"]
        if leftover.kind == TRACE:
            return [f"IF EXISTS (SELECT 1 FROM sys.traces WHERE id = {data['id']} AND status = 1) "
                    f"BEGIN EXEC sys.sp_trace_setstatus {data['id']}, 0 END",
                    f"EXEC sys.sp_trace_setstatus {data['id']}, 2"]
        raise ProvisionError(f"{leftover.kind} {leftover.name} cannot be removed from a client: {leftover.by_hand}")

    def _drop_database(self, database: str) -> None:
        conn = self.connect("master", "gc")
        try:
            others = guards.sessions_in(conn, database)
            if others:
                raise ProvisionError(f"{'; '.join(map(str, others))} connected to it since gc looked; left")
            conn.execute(mo.drop_sql(database))
        except ProvisionError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(odbc.first_line(exc)) from None
        finally:
            conn.close()


def _alive(runs: list[Run], pid: int, host: str) -> bool:
    """Whether the process that wrote a record still has a session of concurbench's on the server."""
    return any(run.pid == pid and run.host.split(".")[0].lower() == host.split(".")[0].lower() for run in runs)


def _observing(runs: list[Run], observer: str) -> bool:
    return any(run.program == OBSERVER + observer or run.program.startswith(f"{OBSERVER}{observer}:") for run in runs)


def _file(path: str, what: str) -> tuple[Leftover, dict]:
    """A file (or a pattern of files) on the server, which only an administrator there can delete."""
    windows = "\\" in path and "/" not in path
    command = f'del "{path}"' if windows else "rm -f -- " + "*".join(_shell_quote(p) for p in path.split("*"))
    return Leftover(FILE, path, f"{what}; SQL Server cannot delete a file for a client",
                    by_hand=f"on the server: {command}"), {}


def _shell_quote(part: str) -> str:
    return "" if not part else "'" + part.replace("'", "'\\''") + "'"


def _trace_prefix(path: str) -> str:
    """`/d/concurbench-x-20260101T000000123Z_3.trc` -> `/d/concurbench-x-20260101T000000123Z`."""
    return re.sub(r"(?:_\d+)?\.trc$", "", path, flags=re.I)


def _sep(directory: str) -> str:
    return "\\" if "\\" in directory and "/" not in directory else "/"


def _rows(cursor) -> list:
    """The rows of the first result set of a batch (none when the batch returned none)."""
    while cursor.description is None:
        if not cursor.nextset():
            return []
    return cursor.fetchall()


def _int(value) -> int | None:
    return None if value is None else int(value)
