"""SQL Server observers: an Extended Events session and a server-side SQL Trace beside the pools.

Both are created before the measurement, stopped when it ends, and stopped and dropped by
`close()`, which never raises and also runs after a failed start or an interrupted run. Both leave
their files on the server (concurbench cannot delete server files); `describe()` names them.

Sources (Microsoft Learn):
- CREATE EVENT SESSION: `ADD EVENT package.event`, `ADD TARGET package0.ring_buffer` or
  `package0.event_file (SET filename = N'...')`, `WITH (MAX_MEMORY = n KB, EVENT_RETENTION_MODE =
  { ALLOW_SINGLE_EVENT_LOSS | ALLOW_MULTIPLE_EVENT_LOSS | NO_EVENT_LOSS }, STARTUP_STATE = OFF)`;
  ALTER EVENT SESSION ... STATE = START | STOP; DROP EVENT SESSION ... ON SERVER.
- sys.server_event_sessions (defined sessions), sys.dm_xe_sessions (running ones: dropped_event_count,
  dropped_buffer_count), sys.dm_xe_session_targets (target_data: `<RingBufferTarget ...
  totalEventsProcessed="n" eventCount="n" droppedCount="n">`, `<EventFileTarget><File name="..."/>`),
  sys.fn_xe_file_target_read_file. The event_file target names its files `<name>_0_<ticks>.xel`.
- sp_trace_create (@options 2 = TRACE_FILE_ROLLOVER; the server appends `.trc`; return codes 0 no
  error, 1 unknown error, 10 invalid options, 12 file not created, 13 out of memory, 14 invalid stop
  time, 15 invalid parameters; parameters are strictly typed: @maxfilesize bigint, @on bit),
  sp_trace_setevent, sp_trace_setstatus (0 stop, 1 start, 2 close and delete the definition),
  sys.traces (event_count, dropped_event_count). The Showplan XML Statistics Profile event class
  is 146; its data columns are listed in SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS below.
- SQL Server on Linux: "Unsupported features and services" of SQL Server 2022 and 2025 on Linux
  does not list SQL Trace, and the Showplan XML Statistics Profile page applies to SQL Server on
  Linux 2017 and later, so the trace is not refused there.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable

from ..errors import ConfigError, EngineError, Unsupported
from ..samplers.mssql_logic import check_name, like_prefix, quote_ident, quote_literal
from .base import close_quietly, closed_on_failure

LINUX_DATA_DIR = "/var/opt/mssql/data/"
_EVENT = re.compile(r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$")
_TAG = re.compile(r"<File\s+name=\"([^\"]+)\"")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _default_connect(conninfo, application_name: str):
    from ..engines import sqlserver

    return sqlserver.connect(conninfo, application_name=application_name)


def _last_row(cur):
    """The first row of the first result set a batch returns (skipping row counts and empty sets)."""
    while True:
        if cur.description:
            return cur.fetchone()
        if not cur.nextset():
            return None


def _join(directory: str, name: str) -> str:
    """`directory` + `name` with the directory's own separator (a Windows data path uses backslashes)."""
    sep = "\\" if ("\\" in directory and "/" not in directory) else "/"
    return directory.rstrip("/\\") + sep + name


def _options(spec) -> dict:
    return dict(getattr(spec, "options", None) or {})


def _positive_int(opts: dict, key: str, who: str, minimum: int = 1) -> int | None:
    value = opts.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{who}: {key} must be an integer of at least {minimum}, got {value!r}")
    return value


class _Observer:
    """Connection, lock and close-once bookkeeping shared by both observers."""

    kind = ""
    DATA_DIR = "SELECT CAST(SERVERPROPERTY('InstanceDefaultDataPath') AS nvarchar(4000)) AS data_dir"

    def __init__(self, spec, conninfo, *, connect: Callable | None = None,
                 clock: Callable[[], float] = time.time):
        self.spec = spec
        self.conninfo = conninfo
        self._connect = connect or _default_connect
        self.clock = clock
        self.conn = None
        self.error: str | None = None
        self.closed = False
        self._touched = False  # we reached the server: close() must look for what to drop
        self._lock = threading.Lock()
        try:
            check_name(spec.name, "observer name")
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    def _open(self):
        self.conn = self._connect(self.conninfo, application_name=f"concurbench:observer:{self.spec.name}")
        self._touched = True
        return self.conn

    def _query_one(self, sql: str, *params):
        return self.conn.execute(sql, *params).fetchone()

    def _data_dir(self) -> str:
        row = self._query_one(self.DATA_DIR)
        path = row[0] if row else None
        return path or LINUX_DATA_DIR

    def close(self) -> None:
        """Stop and drop whatever this observer made; never raises; a second call does nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._touched:
                failure = None
                for attempt in (0, 1):  # the second time on a fresh connection (ours may have died)
                    try:
                        if attempt == 1 or self.conn is None:
                            self._reconnect()
                        self._teardown()
                        failure = None
                        break
                    except Exception as exc:  # noqa: BLE001 - close must not raise
                        failure = exc
                if failure is not None:
                    self.error = "; ".join(filter(None, (self.error, f"cleanup: {_first_line(failure)}")))
            close_quietly(self.conn)
            self.conn = None

    def _reconnect(self) -> None:
        close_quietly(self.conn)
        self.conn = None
        self.conn = self._connect(self.conninfo, application_name=f"concurbench:observer:{self.spec.name}:cleanup")

    def _teardown(self) -> None:
        raise NotImplementedError

    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        pass


# -- Extended Events ---------------------------------------------------------------------------------
class XEventSession(_Observer):
    """An Extended Events session `concurbench_<name>` with a ring_buffer or event_file target.

    Options: `target` (ring_buffer | event_file, default ring_buffer), `no_event_loss` (bool:
    EVENT_RETENTION_MODE = NO_EVENT_LOSS, else ALLOW_SINGLE_EVENT_LOSS), `events` (package.event
    names, default sqlserver.query_post_execution_showplan), `file` (event_file path, default
    `<server data directory>/concurbench_<name>.xel`), `max_file_size_mb` (event_file: the
    target's max_file_size, in MB), `max_memory_kb` (the session's MAX_MEMORY).

    A leftover session of the same name (from a run that was killed) is stopped and dropped
    first. When the measurement ends the events captured are counted (ring_buffer: the target's
    totalEventsProcessed, read while the session runs; event_file: the files' events, counted
    after the session is stopped, which flushes its buffers) and the session is stopped.
    """

    kind = "xevents"
    TARGETS = ("ring_buffer", "event_file")
    DEFAULT_EVENTS = ("sqlserver.query_post_execution_showplan",)
    DEFINED = "SELECT COUNT(*) AS n FROM sys.server_event_sessions WHERE name = ?"
    RUNNING = "SELECT COUNT(*) AS n FROM sys.dm_xe_sessions WHERE name = ?"
    SESSION_STATS = ("SELECT dropped_event_count, dropped_buffer_count FROM sys.dm_xe_sessions WHERE name = ?")
    TARGET_DATA = ("SELECT CAST(t.target_data AS nvarchar(max)) AS target_data FROM sys.dm_xe_session_targets AS t "
                   "JOIN sys.dm_xe_sessions AS s ON s.address = t.event_session_address "
                   "WHERE s.name = ? AND t.target_name = N'event_file'")
    RING_COUNTS = ("SELECT x.d.value('(RingBufferTarget/@totalEventsProcessed)[1]', 'bigint') AS processed, "
                   "x.d.value('(RingBufferTarget/@eventCount)[1]', 'bigint') AS in_buffer, "
                   "x.d.value('(RingBufferTarget/@droppedCount)[1]', 'bigint') AS dropped "
                   "FROM (SELECT CAST(t.target_data AS xml) AS d FROM sys.dm_xe_session_targets AS t "
                   "JOIN sys.dm_xe_sessions AS s ON s.address = t.event_session_address "
                   "WHERE s.name = ? AND t.target_name = N'ring_buffer') AS x")
    FILE_COUNT = ("SELECT COUNT(*) AS n FROM sys.fn_xe_file_target_read_file(?, NULL, NULL, NULL) "
                  "WHERE file_name >= ?")

    def __init__(self, spec, conninfo, *, connect: Callable | None = None, clock: Callable[[], float] = time.time):
        super().__init__(spec, conninfo, connect=connect, clock=clock)
        opts = _options(spec)
        self.session = f"concurbench_{spec.name}"
        self.target = str(opts.get("target", "ring_buffer"))
        if self.target not in self.TARGETS:
            raise ConfigError(f"xevents {spec.name}: target must be ring_buffer or event_file, got {self.target!r}")
        self.no_event_loss = bool(opts.get("no_event_loss", False))
        events = opts.get("events") or list(self.DEFAULT_EVENTS)
        if isinstance(events, str):
            events = [events]
        bad = [e for e in events if not isinstance(e, str) or not _EVENT.match(e)]
        if bad:
            raise ConfigError(f"xevents {spec.name}: events must be package.event names "
                              f"(e.g. sqlserver.query_post_execution_showplan), got {bad}")
        self.events = list(events)
        self.max_memory_kb = _positive_int(opts, "max_memory_kb", f"xevents {spec.name}")
        self.max_file_size_mb = _positive_int(opts, "max_file_size_mb", f"xevents {spec.name}")
        self.file: str | None = opts.get("file")
        self.first_file: str | None = None
        self.started = False
        self.stopped = False
        self.counts: dict = {}

    # SQL ----------------------------------------------------------------------------------------------
    def create_sql(self) -> str:
        events = " ".join(f"ADD EVENT {e}" for e in self.events)
        if self.target == "ring_buffer":
            target = "ADD TARGET package0.ring_buffer"
        else:
            size = f", max_file_size = {int(self.max_file_size_mb)}" if self.max_file_size_mb else ""
            target = f"ADD TARGET package0.event_file (SET filename = {quote_literal(self.file)}{size})"
        options = []
        if self.max_memory_kb:
            options.append(f"MAX_MEMORY = {int(self.max_memory_kb)} KB")
        retention = "NO_EVENT_LOSS" if self.no_event_loss else "ALLOW_SINGLE_EVENT_LOSS"
        options.append(f"EVENT_RETENTION_MODE = {retention}")
        options.append("STARTUP_STATE = OFF")
        return (f"CREATE EVENT SESSION {quote_ident(self.session)} ON SERVER {events} {target} "
                f"WITH ({', '.join(options)})")

    def state_sql(self, state: str) -> str:
        assert state in ("START", "STOP")
        return f"ALTER EVENT SESSION {quote_ident(self.session)} ON SERVER STATE = {state}"

    def drop_sql(self) -> str:
        return f"DROP EVENT SESSION {quote_ident(self.session)} ON SERVER"

    def file_pattern(self) -> str:
        """`/dir/concurbench_x.xel` -> `/dir/concurbench_x*.xel`: every file the target writes."""
        base = self.file[:-4] if self.file.lower().endswith(".xel") else self.file
        return base + "*.xel"

    # lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        with closed_on_failure(self, f"xevents {self.spec.name}: could not start session {self.session}",
                               _first_line):
            self._open()
            if self.target == "event_file" and not self.file:
                self.file = _join(self._data_dir(), f"{self.session}.xel")
            self._teardown()  # a leftover session of the same name
            self.conn.execute(self.create_sql())
            self.conn.execute(self.state_sql("START"))
            self.started = True
            if self.target == "event_file":
                self.first_file = self._current_file()

    def _current_file(self) -> str | None:
        try:
            row = self._query_one(self.TARGET_DATA, self.session)
        except Exception:  # noqa: BLE001 - only narrows the count later
            return None
        m = _TAG.search(row[0]) if row and row[0] else None
        return m.group(1) if m else None

    def measurement_ended(self, end_ns: int) -> None:
        """Count what was captured, then stop the session (guarded: a failure is recorded, not raised)."""
        with self._lock:
            if self.closed or not self.started or self.stopped:
                return
            try:
                row = self._query_one(self.SESSION_STATS, self.session)
                if row:
                    self.counts.update(dropped_events=row[0], dropped_buffers=row[1])
                if self.target == "ring_buffer":
                    row = self._query_one(self.RING_COUNTS, self.session)
                    if row:
                        self.counts.update(events=row[0], events_in_buffer=row[1], ring_dropped=row[2])
                self.conn.execute(self.state_sql("STOP"))
                self.stopped = True
                if self.target == "event_file":
                    row = self._query_one(self.FILE_COUNT, self.file_pattern(), self.first_file or "")
                    self.counts["events"] = row[0] if row else None
                    if self.first_file is None:  # could not tell this run's first file from earlier ones
                        self.counts["events_note"] = f"counted over every file matching {self.file_pattern()}"
            except Exception as exc:  # noqa: BLE001 - counting is a nicety; close() still drops
                self.error = f"counting events: {_first_line(exc)}"

    def _teardown(self) -> None:
        """Stop the session if it runs, drop it if it is defined."""
        if self._query_one(self.RUNNING, self.session)[0]:
            self.conn.execute(self.state_sql("STOP"))
        if self._query_one(self.DEFINED, self.session)[0]:
            self.conn.execute(self.drop_sql())

    def describe(self) -> dict:
        out = {"name": self.spec.name, "kind": self.kind, "session": self.session, "target": self.target,
               "event_names": list(self.events), "no_event_loss": self.no_event_loss,
               "max_memory_kb": self.max_memory_kb, "file": self.file if self.target == "event_file" else None}
        out.update(self.counts)
        if self.error:
            out["error"] = self.error
        return out


# -- SQL Trace ---------------------------------------------------------------------------------------
SHOWPLAN_XML_STATISTICS_PROFILE = 146
# Data columns of the Showplan XML Statistics Profile event class (column id), from its Learn page.
SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS = {
    "TextData": 1, "BinaryData": 2, "DatabaseID": 3, "TransactionID": 4, "LineNumber": 5, "NTDomainName": 7,
    "HostName": 8, "ClientProcessID": 9, "ApplicationName": 10, "LoginName": 11, "SPID": 12, "StartTime": 14,
    "ObjectID": 22, "IntegerData": 25, "ServerName": 26, "EventClass": 27, "ObjectType": 28, "NestLevel": 29,
    "ObjectName": 34, "DatabaseName": 35, "LoginSID": 41, "RequestID": 49, "XactSequence": 50,
    "EventSequence": 51, "IsSystem": 60, "SessionLoginName": 64, "GroupID": 66,
}
TRACE_FILE_ROLLOVER = 2
TRACE_CREATE_CODES = {1: "unknown error", 10: "invalid options", 12: "file not created", 13: "out of memory",
                      14: "invalid stop time", 15: "invalid parameters"}
# SERVERPROPERTY('EngineEdition') values of Azure services without SQL Trace (SQL Database, Synapse,
# Synapse serverless, Fabric); sp_trace_create applies to SQL Server (and sys.traces to Managed Instance).
NO_TRACE_EDITIONS = {5: "Azure SQL Database", 6: "Azure Synapse Analytics", 11: "Azure Synapse serverless SQL pool",
                     12: "SQL database in Microsoft Fabric"}


class SqlTrace(_Observer):
    """A server-side SQL Trace writing to a file (deprecated in favour of Extended Events, still shipped).

    It traces the Showplan XML Statistics Profile event (146; `events: [146]`, the only event whose
    columns are listed here) with all of its data columns (or the `columns` named), with
    TRACE_FILE_ROLLOVER and files of `max_file_size_mb` (default 100) MB, at most `max_files`.
    `file` is the path prefix of the trace file without `.trc` (default `<server data
    directory>/concurbench-<name>`); a UTC timestamp is appended, since sp_trace_create will not
    overwrite an existing file and every variant run needs a file of its own. A leftover trace of
    the same prefix (a killed run) is stopped and closed first. When the measurement ends the
    trace's event and dropped-event counts are read from sys.traces and the trace is stopped;
    close() stops it if needed and deletes its definition (status 2). The .trc files stay.
    """

    kind = "sql_trace"
    SERVER = ("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition, "
              "CAST(@@VERSION AS nvarchar(4000)) AS version")
    LEFTOVERS = "SELECT id, status FROM sys.traces WHERE path LIKE ?"
    STATUS = "SELECT status, event_count, dropped_event_count FROM sys.traces WHERE id = ? AND path LIKE ?"

    def __init__(self, spec, conninfo, *, connect: Callable | None = None, clock: Callable[[], float] = time.time):
        super().__init__(spec, conninfo, connect=connect, clock=clock)
        opts = _options(spec)
        self.prefix: str | None = opts.get("file")
        if self.prefix and self.prefix.lower().endswith(".trc"):
            self.prefix = self.prefix[:-4]  # the server appends .trc itself
        who = f"sql_trace {spec.name}"
        self.max_file_size_mb = _positive_int(opts, "max_file_size_mb", who) or 100
        self.max_files = _positive_int(opts, "max_files", who, minimum=2)
        events = opts.get("events") or [SHOWPLAN_XML_STATISTICS_PROFILE]
        if list(events) != [SHOWPLAN_XML_STATISTICS_PROFILE]:
            raise ConfigError(f"{who}: events must be [{SHOWPLAN_XML_STATISTICS_PROFILE}] (Showplan XML Statistics "
                              f"Profile), the only event class whose columns concurbench knows; got {events!r}")
        names = opts.get("columns") or list(SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS)
        unknown = [n for n in names if n not in SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS]
        if unknown:
            raise ConfigError(f"sql_trace {spec.name}: unknown columns {unknown}; the Showplan XML Statistics Profile "
                              f"event has {', '.join(SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS)}")
        self.columns = [SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS[n] for n in names]
        self.path: str | None = None  # without .trc
        self.trace_id: int | None = None
        self.platform: str | None = None
        self.running = False
        self.counts: dict = {}

    # SQL ----------------------------------------------------------------------------------------------
    def create_sql(self) -> str:
        filecount = f", {int(self.max_files)}" if self.max_files else ""
        return ("SET NOCOUNT ON; DECLARE @rc INT, @traceid INT, @maxfilesize BIGINT = "
                f"{int(self.max_file_size_mb)}; EXEC @rc = sys.sp_trace_create @traceid OUTPUT, {TRACE_FILE_ROLLOVER}, "
                f"{quote_literal(self.path)}, @maxfilesize, NULL{filecount}; SELECT @rc AS rc, @traceid AS trace_id")

    @staticmethod
    def setevent_sql(trace_id: int, event_id: int, column_id: int) -> str:
        return (f"SET NOCOUNT ON; DECLARE @rc INT, @on BIT = 1; "
                f"EXEC @rc = sys.sp_trace_setevent {int(trace_id)}, {int(event_id)}, {int(column_id)}, @on; "
                "SELECT @rc AS rc")

    @staticmethod
    def setstatus_sql(trace_id: int, status: int) -> str:
        assert status in (0, 1, 2)
        return (f"SET NOCOUNT ON; DECLARE @rc INT; EXEC @rc = sys.sp_trace_setstatus {int(trace_id)}, {int(status)}; "
                "SELECT @rc AS rc")

    def _call(self, sql: str, what: str) -> int:
        row = _last_row(self.conn.execute(sql))
        rc = int(row[0]) if row and row[0] is not None else None
        if rc != 0:
            raise EngineError(f"sql_trace {self.spec.name}: {what} returned {rc}")
        return rc

    # lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        with closed_on_failure(self, f"sql_trace {self.spec.name}: could not start the trace", _first_line,
                               wrap_engine_errors=False):
            self._open()
            edition, version = self._query_one(self.SERVER)
            self.platform = "Linux" if "linux" in (version or "").lower() else "Windows"
            if edition in NO_TRACE_EDITIONS:
                raise Unsupported(f"sql_trace {self.spec.name}: server-side SQL Trace is not available on "
                                  f"{NO_TRACE_EDITIONS[edition]}; use an xevents observer instead")
            prefix = self.prefix or _join(self._data_dir(), f"concurbench-{self.spec.name}")
            self._close_leftovers(prefix)
            now = self.clock()
            self.path = f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}{int(now * 1000) % 1000:03d}Z"
            row = _last_row(self.conn.execute(self.create_sql()))
            rc, trace_id = (int(row[0]), row[1]) if row else (None, None)
            if rc != 0:
                meaning = TRACE_CREATE_CODES.get(rc, "no result") if rc is not None else "no result"
                hint = (" (the server's service account must be able to write to that directory, and the file "
                        "must not exist yet)" if rc == 12 else "")
                raise EngineError(f"sql_trace {self.spec.name}: sp_trace_create returned {rc} ({meaning}) for "
                                  f"{self.path}.trc on {self.platform}{hint}")
            self.trace_id = int(trace_id)
            for column in self.columns:
                self._call(self.setevent_sql(self.trace_id, SHOWPLAN_XML_STATISTICS_PROFILE, column),
                           f"sp_trace_setevent {SHOWPLAN_XML_STATISTICS_PROFILE}, column {column}")
            self._call(self.setstatus_sql(self.trace_id, 1), "sp_trace_setstatus 1 (start)")
            self.running = True

    def _close_leftovers(self, prefix: str) -> None:
        for trace_id, status in self.conn.execute(self.LEFTOVERS, like_prefix(prefix + "-")).fetchall():
            if status == 1:
                self._call(self.setstatus_sql(trace_id, 0), "sp_trace_setstatus 0 (leftover)")
            self._call(self.setstatus_sql(trace_id, 2), "sp_trace_setstatus 2 (leftover)")

    def _ours(self):
        """(status, event_count, dropped_event_count) of our trace, or None once it is gone."""
        return self._query_one(self.STATUS, self.trace_id, like_prefix(self.path))

    def measurement_ended(self, end_ns: int) -> None:
        with self._lock:
            if self.closed or not self.running:
                return
            try:
                row = self._ours()
                if row:
                    self.counts.update(events=row[1], dropped_events=row[2])
                self._call(self.setstatus_sql(self.trace_id, 0), "sp_trace_setstatus 0 (stop)")
                self.running = False
            except Exception as exc:  # noqa: BLE001 - close() still stops and deletes it
                self.error = f"stopping: {_first_line(exc)}"

    def _teardown(self) -> None:
        if self.trace_id is None:
            return
        row = self._ours()
        if row is None:
            return
        if row[0] == 1:
            self._call(self.setstatus_sql(self.trace_id, 0), "sp_trace_setstatus 0 (stop)")
        self.running = False
        self._call(self.setstatus_sql(self.trace_id, 2), "sp_trace_setstatus 2 (close)")

    def describe(self) -> dict:
        out = {"name": self.spec.name, "kind": self.kind, "trace_id": self.trace_id,
               "event": SHOWPLAN_XML_STATISTICS_PROFILE, "columns": list(self.columns),
               "file": f"{self.path}.trc" if self.path else None, "max_file_size_mb": self.max_file_size_mb,
               "platform": self.platform}
        out.update(self.counts)
        if self.error:
            out["error"] = self.error
        return out


OBSERVERS = {XEventSession.kind: XEventSession, SqlTrace.kind: SqlTrace}
