"""A server-side SQL Trace beside the pools, writing the Showplan XML Statistics Profile event to a file.

Sources (Microsoft Learn):
- sp_trace_create (@options 2 = TRACE_FILE_ROLLOVER; the server appends `.trc`; @stoptime datetime,
  "the date and time the trace will be stopped", which with TRACE_FILE_ROLLOVER stops it then; return
  codes 0 no error, 1 unknown error, 10 invalid options, 12 file not created, 13 out of memory, 14
  invalid stop time (already past), 15 invalid parameters; parameters are strictly typed: @maxfilesize
  bigint, @stoptime datetime, @on bit),
  sp_trace_setevent, sp_trace_setstatus (0 stop, 1 start, 2 close and delete the definition),
  sp_trace_setfilter (only on a stopped trace; @columnid, @logical_operator 0 AND, @comparison_operator 0
  equal, @value of the column's type: DatabaseID, column 3, is int; return codes 2 trace running, 4 column
  not valid, 5 column not filterable, 9 trace handle not valid, 16 not valid for this trace),
  sys.traces (event_count, dropped_event_count). The Showplan XML Statistics Profile event class
  is 146; its data columns are listed in SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS below.
- SQL Server on Linux: "Unsupported features and services" of SQL Server 2022 and 2025 on Linux
  does not list SQL Trace, and the Showplan XML Statistics Profile page applies to SQL Server on
  Linux 2017 and later, so the trace is not refused there.
"""

from __future__ import annotations

import time
from typing import Callable

from ..engines import mssql_names as names
from ..engines.quoting import tsql_like_prefix, tsql_literal
from ..util import first_line
from ..errors import ConfigError, EngineError, Unsupported
from ..scenario.model import BackgroundKind
from .base import closed_on_failure
from .mssql_common import GUEST_FILE_SIZE_MB, GUEST_FILES, ObserverScope, ServerObserver, join_path, last_row, \
    options_of, positive_int

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
MAX_FILES = 5  # trace files kept per trace by default (@filecount)
MAX_FILE_SIZE_MB = 100
DATABASE_ID_COLUMN = 3  # DatabaseID, int: the column a guest's trace is filtered on
TRACE_CREATE_CODES = {1: "unknown error", 10: "invalid options", 12: "file not created", 13: "out of memory",
                      14: "invalid stop time", 15: "invalid parameters"}
# SERVERPROPERTY('EngineEdition') values of Azure services without SQL Trace (SQL Database, Synapse,
# Synapse serverless, Fabric); sp_trace_create applies to SQL Server (and sys.traces to Managed Instance).
NO_TRACE_EDITIONS = {5: "Azure SQL Database", 6: "Azure Synapse Analytics", 11: "Azure Synapse serverless SQL pool",
                     12: "SQL database in Microsoft Fabric"}


class SqlTrace(ServerObserver):
    """A server-side SQL Trace writing to a file (deprecated in favour of Extended Events, still shipped).

    It traces the Showplan XML Statistics Profile event (146; `events: [146]`, the only event whose
    columns are listed here) with all of its data columns (or the `columns` named), with
    TRACE_FILE_ROLLOVER and files of `max_file_size_mb` (default 100) MB, at most `max_files`
    (default 5: sp_trace_create's @filecount, the server deletes the oldest file beyond it); on a
    server concurbench does not own 2 files of 20 MB, and a filter on DatabaseID (the run's database)
    set before the trace starts. `file` is the path prefix of the trace file without `.trc` (default
    `<server data directory>/concurbench-<run id>_<name>`); a UTC timestamp is appended, since
    sp_trace_create will not overwrite an existing file and every variant run needs a file of its
    own. A leftover trace of its own prefix (the same run's) is stopped and closed first. When the measurement ends the
    trace's event and dropped-event counts are read from sys.traces (they count every event, whatever
    files rolled over) and the trace is stopped; close() stops it if needed, deletes its definition
    (status 2), and removes the .trc files or lists them (`ServerObserver._release_files`). Its
    @stoptime, by the server's clock, is `stops_after_s` after its creation: a killed harness's trace
    stops by itself.
    """

    kind = BackgroundKind.SQL_TRACE
    LEFTOVERS = "SELECT id, status FROM sys.traces WHERE path LIKE ?"
    STATUS = "SELECT status, event_count, dropped_event_count FROM sys.traces WHERE id = ? AND path LIKE ?"

    def __init__(self, spec, conninfo, *, connect: Callable | None = None, clock: Callable[[], float] = time.time,
                 remove_files: Callable[[list[str]], None] | None = None, lifetime_s: float | None = None,
                 scope: ObserverScope | None = None):
        super().__init__(spec, conninfo, connect=connect, clock=clock, remove_files=remove_files,
                         lifetime_s=lifetime_s, scope=scope)
        opts = options_of(spec)
        self.prefix: str | None = opts.get("file")
        if self.prefix and self.prefix.lower().endswith(".trc"):
            self.prefix = self.prefix[:-4]  # the server appends .trc itself
        who = f"sql_trace {spec.name}"
        guest = self.scope.guest
        self.max_file_size_mb = positive_int(opts, "max_file_size_mb", who) or (
            GUEST_FILE_SIZE_MB if guest else MAX_FILE_SIZE_MB)
        self.max_files = positive_int(opts, "max_files", who, minimum=2) or (GUEST_FILES if guest else MAX_FILES)
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
        self.database_id: int | None = None  # a guest's trace keeps this database's events only
        self.running = False
        self.counts: dict = {}

    # SQL ----------------------------------------------------------------------------------------------
    def create_sql(self) -> str:
        return ("SET NOCOUNT ON; DECLARE @rc INT, @traceid INT, @maxfilesize BIGINT = "
                f"{int(self.max_file_size_mb)}, @stoptime DATETIME = DATEADD(SECOND, {self.stops_after_s}, GETDATE()); "
                f"EXEC @rc = sys.sp_trace_create @traceid OUTPUT, {TRACE_FILE_ROLLOVER}, "
                f"{tsql_literal(self.path)}, @maxfilesize, @stoptime, {int(self.max_files)}; "
                "SELECT @rc AS rc, @traceid AS trace_id")

    @staticmethod
    def setevent_sql(trace_id: int, event_id: int, column_id: int) -> str:
        return (f"SET NOCOUNT ON; DECLARE @rc INT, @on BIT = 1; "
                f"EXEC @rc = sys.sp_trace_setevent {int(trace_id)}, {int(event_id)}, {int(column_id)}, @on; "
                "SELECT @rc AS rc")

    @staticmethod
    def setfilter_sql(trace_id: int, database_id: int) -> str:
        """The filter that keeps the events of one database (DatabaseID = n; AND, equal; @value an int)."""
        return (f"SET NOCOUNT ON; DECLARE @rc INT, @database_id INT = {int(database_id)}; "
                f"EXEC @rc = sys.sp_trace_setfilter {int(trace_id)}, {DATABASE_ID_COLUMN}, 0, 0, @database_id; "
                "SELECT @rc AS rc")

    @staticmethod
    def setstatus_sql(trace_id: int, status: int) -> str:
        assert status in (0, 1, 2)
        return (f"SET NOCOUNT ON; DECLARE @rc INT; EXEC @rc = sys.sp_trace_setstatus {int(trace_id)}, {int(status)}; "
                "SELECT @rc AS rc")

    def _call(self, sql: str, what: str) -> int:
        row = last_row(self.conn.execute(sql))
        rc = int(row[0]) if row and row[0] is not None else None
        if rc != 0:
            raise EngineError(f"sql_trace {self.spec.name}: {what} returned {rc}")
        return rc

    # lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        with closed_on_failure(self, f"sql_trace {self.spec.name}: could not start the trace", first_line,
                               wrap_engine_errors=False):
            self._open()
            edition, version = self._query_one(self.SERVER)
            self.platform = "Linux" if "linux" in (version or "").lower() else "Windows"
            if edition in NO_TRACE_EDITIONS:
                raise Unsupported(f"sql_trace {self.spec.name}: server-side SQL Trace is not available on "
                                  f"{NO_TRACE_EDITIONS[edition]}; use an xevents observer instead")
            if self.scope.guest:
                self.database_id = self._database_id()
            prefix = self.prefix or join_path(self._data_dir(), names.trace_prefix(self.key))
            self._close_leftovers(prefix)
            now = self.clock()
            self.path = f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}{int(now * 1000) % 1000:03d}Z"
            row = last_row(self.conn.execute(self.create_sql()))
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
            if self.database_id is not None:  # while the trace is stopped, as sp_trace_setfilter needs
                self._call(self.setfilter_sql(self.trace_id, self.database_id),
                           f"sp_trace_setfilter DatabaseID = {self.database_id}")
            self._call(self.setstatus_sql(self.trace_id, 1), "sp_trace_setstatus 1 (start)")
            self.running = True

    def _close_leftovers(self, prefix: str) -> None:
        for trace_id, status in self.conn.execute(self.LEFTOVERS, tsql_like_prefix(prefix + "-")).fetchall():
            if status == 1:
                self._call(self.setstatus_sql(trace_id, 0), "sp_trace_setstatus 0 (leftover)")
            self._call(self.setstatus_sql(trace_id, 2), "sp_trace_setstatus 2 (leftover)")

    def _ours(self):
        """(status, event_count, dropped_event_count) of our trace, or None once it is gone."""
        return self._query_one(self.STATUS, self.trace_id, tsql_like_prefix(self.path))

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
                self.error = f"stopping: {first_line(exc)}"

    def written(self) -> list[str]:
        """`<path>.trc` and its rollover files `<path>_<n>.trc`."""
        return [f"{self.path}*.trc"] if self.trace_id is not None else []

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
               "max_files": self.max_files, "platform": self.platform, "stops_after_s": self.stops_after_s,
               "database_id": self.database_id}
        out.update(self.counts)
        out.update(self.files)
        if self.error:
            out["error"] = self.error
        return out
