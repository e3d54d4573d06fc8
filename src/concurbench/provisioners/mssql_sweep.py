"""What killed runs left on a SQL Server concurbench does not own, for `concurbench gc --target dsn`
(housekeeping/remote.py's Sweeper: `leftovers`, then `remove` one by one), and for a run starting on that
server (`of_dead_runs`: what a killed run of the same machine left, which it removes before anything else).

A run cleans up as it ends, also after an error, Ctrl-C, SIGTERM or SIGHUP; a SIGKILL, a lost connection
or a crashed machine leaves what it had made:

- sp_configure options it set (and, for runs before issue 45, a global trace flag it turned on): found by
  their records, the extended properties `concurbench_configure:<name>` and `concurbench_trace_flag_<n>`
  of the run's database (engines/mssql_guards.py); an option is put back to its value before the run when
  it still has the run's value (one changed since is left as it is), a flag is turned off;
- Extended Events sessions `concurbench_<run id>_<observer>` (engines/mssql_names.py): stopped and dropped
  (on SQL Server 2025 they have stopped themselves, MAX_DURATION; on 2019 and 2022 they run until then);
- SQL Traces writing to `concurbench-<run id>_<observer>-<time>.trc`: stopped and closed (they also stop
  themselves at their @stoptime);
- the run's record `concurbench_run_<run id>` in a database that stays (a kept or named one): removed;
- its temporary database (the marker says temporary): dropped, once no session is in it and it holds no
  record of a change not yet put back (the record goes first; a database whose record could not be undone
  stays, and says why);
- .xel and .trc files in the server's data directory. SQL Server offers a client no documented way to
  delete a file (xp_cmdshell would have to be turned on, a server-wide change concurbench does not
  make). When the server runs on this machine (a loopback DSN) and a file the server names is there,
  gc removes it itself; otherwise each is listed with the command an administrator runs on the server.
  The .xel files are found with sys.fn_xe_file_target_read_file (which lists the files holding events);
  the .trc files of a trace gc closes are named by the trace's path; those of traces already closed
  cannot be listed from a client, and docs/targets.md says where to look.

Only what is concurbench's by name or record and what no live run uses is listed. Whether a run lives is
told by its sessions (sys.dm_exec_sessions): an observer's session is named `concurbench:observer:<key>`,
and a record names the process (host and pid) that wrote it. A login without VIEW SERVER STATE sees no
other session, so it cannot tell, and gc refuses to look for it. Each thing found knows the run that left it
(`Owner`: from its record, from the run record its run id names, or from its database's marker), so that a
starting run removes only what a dead run of its own machine left, never a live run's and never one whose
maker it cannot name.

Sources (Microsoft Learn): sys.dm_exec_sessions (program_name, host_name, host_process_id, database_id);
sys.server_event_sessions, sys.dm_xe_sessions, sys.server_event_session_fields (the event_file target's
filename); ALTER/DROP EVENT SESSION; sys.traces (path, status), sp_trace_setstatus (0 stop, 2 close);
DBCC TRACESTATUS, DBCC TRACEOFF; sys.extended_properties, sp_dropextendedproperty; STRING_AGG (2017+),
QUOTENAME, sp_executesql; sys.fn_xe_file_target_read_file (VIEW SERVER STATE; error 25718 when no file
matches); DROP DATABASE (error 3702 while it is in use); xp_cmdshell (off by default).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from typing import Callable

from ..engines import mssql_config as mc
from ..engines import mssql_guards as guards
from ..engines import mssql_names as names
from ..engines import odbc
from ..engines.quoting import tsql_literal, tsql_name
from ..errors import ConfigError, ProvisionError
from . import mssql_owned as mo
from . import owned
from .base import Leftover, LeftoverKind

OBSERVER = names.OBSERVER_PROGRAM  # the program name of an observer's sessions (background/mssql_common.py)
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
_MAKER = re.compile(r"(?:made|marked) by [^@\s]*@(\S+) pid (\d+)")  # owned.marker_text's "user@host pid N"
CONFIGURATION = "SELECT CAST(value_in_use AS bigint) FROM sys.configurations WHERE name = ?"
DATABASE, XE, TRACE, FLAG = LeftoverKind.DATABASE, LeftoverKind.XE_SESSION, LeftoverKind.TRACE, LeftoverKind.TRACE_FLAG
SETTING, FILE, RUN = LeftoverKind.SETTING, LeftoverKind.FILE, LeftoverKind.RUN_RECORD


@dataclass(frozen=True)
class LiveSession:
    """A live session of concurbench's, as sys.dm_exec_sessions shows it."""

    program: str
    host: str
    pid: int | None
    database: str | None


@dataclass(frozen=True)
class Owner:
    """The process, on a machine, that made something a killed run left."""

    pid: int
    host: str

    def on(self, host: str) -> bool:
        return _short(self.host) == _short(host)


class Sweep:
    """The Sweeper of one SQL Server (`connect(database, purpose)` opens a connection as the provisioner does;
    `local`: the server runs on this machine, so the files it names may be reachable here)."""

    def __init__(self, connect, where: str, safe: str, local: bool = False):
        self.connect = connect
        self.where = where
        self.safe = safe
        self.local = local
        self.found: dict[tuple[str, str], dict] = {}  # what leftovers() learnt of each, for remove()

    # -- finding ----------------------------------------------------------------------------------------
    def leftovers(self) -> list[Leftover]:
        conn = self.connect("master", "gc")
        try:
            if not guards.sees_all_sessions(conn):
                raise ConfigError(f"gc --target dsn needs a login that sees every session on {self.where} (VIEW "
                                  f"SERVER STATE, or VIEW SERVER PERFORMANCE STATE from 2022): without it a live "
                                  f"run's sessions look like a killed run's leftovers; nothing was listed or removed")
            sessions = [(str(r[1] or ""), LiveSession(str(r[3] or ""), str(r[2] or ""), _int(r[4]), r[5]))
                        for r in conn.execute(LIVE).fetchall()]
            runs = [run for _, run in sessions if run.program.startswith(guards.OURS)]
            properties = [(str(r[0]), str(r[1]), r[2]) for r in _rows(conn.execute(PROPERTIES))]
            owners = _run_owners(properties)
            directory = str((conn.execute(DATA_DIR).fetchone() or [None])[0] or "/var/opt/mssql/data/")
            found = [*self._records(conn, properties, runs), *self._xe_sessions(conn, runs, directory, owners),
                     *self._traces(conn, runs, owners), *self._run_records(properties, runs),
                     *self._databases(properties, sessions), *self._xel_files(conn, runs, directory, owners)]
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(f"cannot look for what killed runs left on {self.where}: "
                                 f"{odbc.error_text(exc)}") from None
        finally:
            conn.close()
        self.found = {(item.kind, item.name): data for item, data in found}
        return [item for item, _ in found]

    def of_dead_runs(self, host: str, alive: Callable[[int], bool]) -> list[Leftover]:
        """What `leftovers` finds (as gc decides) that a run of `host` left whose process is gone (`alive(pid)`
        false, a check of this machine's own): what a starting run removes (files only an administrator can remove
        carry `by_hand`, for the run to say); anything whose maker is not known is left to gc."""
        out = []
        for item in self.leftovers():
            owner = self.found[(item.kind, item.name)].get("owner")
            if owner is None or not owner.on(host) or alive(owner.pid):
                continue
            out.append(item)
        return out

    def _records(self, conn, properties, runs) -> list:
        """The server-wide changes whose record a killed run left: trace flags, then sp_configure options (`show
        advanced options` last, as a run puts them back)."""
        on = set(mc.global_trace_flags(conn) or [])
        flags, settings = [], []
        for database, name, value in properties:
            note = guards.parse_note(value)
            if note is None or _alive(runs, note[0], note[1]):
                continue
            owner = Owner(note[0], note[1])
            if name.startswith(guards.FLAG_PROPERTY):
                flag = int(name[len(guards.FLAG_PROPERTY):])
                state = "on" if flag in on else "already off (only its record goes)"
                flags.append((Leftover(FLAG, f"{flag} ({database})", f"{state}; {value}, and that run is gone"),
                              {"flag": flag, "on": flag in on, "database": database, "record": name, "owner": owner}))
            elif name.startswith(guards.CONFIGURE_PROPERTY) and guards.parse_setting(value):
                option, (old, new) = name[len(guards.CONFIGURE_PROPERTY):], guards.parse_setting(value)
                row = conn.execute(CONFIGURATION, option).fetchone()
                now = None if row is None else int(row[0])
                state = (f"{now}, as a run that is gone set it ({value}); put back to {old}" if now == new else
                         f"{now} now, not the {new} a run that is gone set ({value}): left as it is, only its "
                         f"record goes")
                settings.append((Leftover(SETTING, f"{option} ({database})", state),
                                 {"option": option, "old": old, "restore": now == new, "database": database,
                                  "record": name, "owner": owner}))
        settings.sort(key=lambda found: found[1]["option"] == mc.ADVANCED)
        return flags + settings

    def _xe_sessions(self, conn, runs, directory: str, owners: dict) -> list:
        out = []
        for name, running, filename in conn.execute(XE_SESSIONS).fetchall():
            key = str(name)[len(names.XE_PREFIX):]
            if _observing(runs, key):
                continue
            owner = owners.get(names.run_of(key))
            state = "running" if running else "stopped"
            out.append((Leftover(XE, str(name), f"{state}, left by a killed run; stopped and dropped"),
                        {"running": bool(running), "owner": owner}))
            if filename and not str(filename).startswith(directory):  # those in the data directory: _xel_files
                base = str(filename)[:-4] if str(filename).lower().endswith(".xel") else str(filename)
                out.append(self._file(base + "_0_*.xel", f"the files of {name}", owner))
        return out

    def _traces(self, conn, runs, owners: dict) -> list:
        out = []
        for trace_id, status, path in conn.execute(TRACES).fetchall():
            m = _TRACE_FILE.search(str(path or ""))
            if not m or _observing(runs, m.group(1)):
                continue
            owner = owners.get(names.run_of(m.group(1)))
            out.append((Leftover(TRACE, str(trace_id), f"{'running' if status == 1 else 'stopped'}, writing {path}; "
                                                       f"stopped and closed"), {"id": int(trace_id), "owner": owner}))
            out.append(self._file(_trace_prefix(str(path)) + "*.trc", f"the files of trace {trace_id}", owner))
        return out

    def _run_records(self, properties, runs) -> list:
        """The records of runs that are gone, in databases that stay (a temporary database goes with its own)."""
        temporary = {database for database, name, value in properties
                     if name == owned.PROPERTY and (owned.parse_marker(value) or owned.Marker(False, "")).temporary}
        out = []
        for database, name, value in properties:
            note = guards.parse_note(value) if names.run_of_property(name) else None
            if note is None or database in temporary or _alive(runs, note[0], note[1]):
                continue
            out.append((Leftover(RUN, f"{names.run_of_property(name)} ({database})",
                                 f"{value}, and that run is gone; its record goes"),
                        {"database": database, "record": name, "owner": Owner(note[0], note[1])}))
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
            maker = _MAKER.search(marker.text)
            owner = Owner(int(maker.group(2)), maker.group(1)) if maker else None
            out.append((Leftover(DATABASE, database, f"temporary database of a killed run ({value}); dropped"),
                        {"owner": owner}))
        return out

    def _xel_files(self, conn, runs, directory: str, owners: dict) -> list:
        pattern = directory.rstrip("/\\") + _sep(directory) + names.XE_PREFIX + "*.xel"
        try:
            found = [str(r[0]) for r in conn.execute(XEL_FILES, pattern).fetchall()]
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: 25718 is "no such file"
            if odbc.error_number_from_pyodbc(exc) != NO_FILE:
                raise
            found = []
        live = [names.xe_session(run.program[len(OBSERVER):].split(':')[0]) + "_" for run in runs
                if run.program.startswith(OBSERVER)]
        out = []
        for path in sorted(found):
            base = re.split(r"[/\\]", path)[-1]
            if any(base.startswith(prefix) for prefix in live):
                continue
            owner = owners.get(names.run_of(base[len(names.XE_PREFIX):]))
            out.append(self._file(path, "a finished or killed run's events", owner))
        return out

    def _file(self, path: str, what: str, owner: Owner | None) -> tuple[Leftover, dict]:
        """A file (or a pattern of files) on the server: removed from here when the server runs on this machine and
        the file is here, else listed with the command an administrator runs on the server."""
        here = sorted(glob.glob(path)) if self.local else []
        if here:
            return Leftover(FILE, path, f"{what}; on this machine, where the server runs: deleted from here"), \
                {"paths": here, "owner": owner}
        windows = "\\" in path and "/" not in path
        command = f'del "{path}"' if windows else "rm -f -- " + "*".join(_shell_quote(p) for p in path.split("*"))
        return Leftover(FILE, path, f"{what}; SQL Server cannot delete a file for a client",
                        by_hand=f"on the server: {command}"), {"owner": owner}

    # -- removing ---------------------------------------------------------------------------------------
    def remove(self, leftover: Leftover) -> None:
        data = self.found.get((leftover.kind, leftover.name))
        if data is None:
            raise ProvisionError(f"{leftover.kind} {leftover.name} was not found by this gc; run gc again")
        if leftover.kind is DATABASE:
            self._drop_database(leftover.name)
            return
        if leftover.kind is FILE:
            self._delete_files(data.get("paths") or [], leftover)
            return
        conn = self.connect(data.get("database", "master"), "gc")
        try:
            for sql in self._removal(leftover, data):
                conn.execute(sql)
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(f"{odbc.error_text(exc)}") from None
        finally:
            conn.close()

    @staticmethod
    def _removal(leftover: Leftover, data: dict) -> list[str]:
        if leftover.kind is FLAG:
            off = [f"DBCC TRACEOFF({int(data['flag'])}, -1)"] if data["on"] else []
            return off + guards.unrecord(data["record"])
        if leftover.kind is SETTING:
            back = [f"EXEC sp_configure {tsql_literal(data['option'])}, {int(data['old'])}", "RECONFIGURE"] \
                if data["restore"] else []
            return back + guards.unrecord(data["record"])
        if leftover.kind is RUN:
            return guards.unrecord(data["record"])
        if leftover.kind is XE:
            stop = [f"ALTER EVENT SESSION {tsql_name(leftover.name)} ON SERVER STATE = STOP"] if data["running"] else []
            return stop + [f"DROP EVENT SESSION {tsql_name(leftover.name)} ON SERVER"]
        if leftover.kind is TRACE:
            return [f"IF EXISTS (SELECT 1 FROM sys.traces WHERE id = {data['id']} AND status = 1) "
                    f"BEGIN EXEC sys.sp_trace_setstatus {data['id']}, 0 END",
                    f"EXEC sys.sp_trace_setstatus {data['id']}, 2"]
        raise ProvisionError(f"{leftover.kind} {leftover.name} cannot be removed from a client: {leftover.by_hand}")

    @staticmethod
    def _delete_files(paths: list[str], leftover: Leftover) -> None:
        if not paths:
            raise ProvisionError(f"{leftover.name} cannot be removed from here: {leftover.by_hand}")
        for path in paths:
            try:
                os.remove(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ProvisionError(f"cannot delete {path} ({exc.strerror}); on the server: rm -f -- "
                                     f"{_shell_quote(path)}") from None

    def _drop_database(self, database: str) -> None:
        inside = self.connect(database, "gc")
        try:
            records = guards.records_in(inside)
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(odbc.error_text(exc)) from None
        finally:
            inside.close()
        if records:
            raise ProvisionError(f"it holds the record of a server change not put back ({'; '.join(n for n, _ in records)}), "
                                 f"which goes only with the change: left")
        conn = self.connect("master", "gc")
        try:
            others = guards.sessions_in(conn, database)
            if others:
                raise ProvisionError(f"{'; '.join(map(str, others))} connected to it since gc looked; left")
            conn.execute(mo.drop_sql(database))
        except ProvisionError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyodbc errors: the server's words
            raise ProvisionError(odbc.error_text(exc)) from None
        finally:
            conn.close()


def _run_owners(properties) -> dict[str, Owner]:
    """Run id -> the process that ran it, from the run records of every database."""
    out = {}
    for _database, name, value in properties:
        run_id, note = names.run_of_property(name), guards.parse_note(value)
        if run_id and note:
            out[run_id] = Owner(note[0], note[1])
    return out


def _short(host: str) -> str:
    return host.split(".")[0].lower()


def _alive(runs: list[LiveSession], pid: int, host: str) -> bool:
    """Whether the process that wrote a record still has a session of concurbench's on the server."""
    return any(run.pid == pid and _short(run.host) == _short(host) for run in runs)


def _observing(runs: list[LiveSession], key: str) -> bool:
    return any(run.program == OBSERVER + key or run.program.startswith(f"{OBSERVER}{key}:") for run in runs)


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
