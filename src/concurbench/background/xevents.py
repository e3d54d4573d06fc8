"""An Extended Events session beside the pools, with a ring_buffer or an event_file target.

Sources (Microsoft Learn):
- CREATE EVENT SESSION: `ON SERVER { <event_definition> [ ,...n ] [ <event_target_definition>
  [ ,...n ] ] [ WITH ( <event_session_options> [ ,...n ] ) ] }`, i.e. `ADD EVENT package.event`
  clauses separated by commas (the page's example: `ADD EVENT sqlos.async_io_requested, ADD EVENT
  sqlserver.lock_acquired ADD TARGET ...`), then `ADD TARGET package0.ring_buffer` or
  `package0.event_file (SET filename = N'...')`, then `WITH (MAX_MEMORY = n KB,
  EVENT_RETENTION_MODE = { ALLOW_SINGLE_EVENT_LOSS | ALLOW_MULTIPLE_EVENT_LOSS | NO_EVENT_LOSS },
  STARTUP_STATE = OFF)`; ALTER EVENT SESSION ... STATE = START | STOP; DROP EVENT SESSION ... ON SERVER.
- sys.server_event_sessions (defined sessions), sys.dm_xe_sessions (running ones: dropped_event_count,
  dropped_buffer_count), sys.dm_xe_session_targets (target_data: `<RingBufferTarget ...
  totalEventsProcessed="n" eventCount="n" droppedCount="n">`, `<EventFileTarget><File name="..."/>`),
  sys.fn_xe_file_target_read_file. The event_file target names its files `<name>_0_<ticks>.xel`.
- Event file target: `max_file_size` (MB; without it a file grows until the disk is full) and
  `max_rollover_files` (how many files are kept; the oldest goes first).
- sys.dm_xe_session_targets: target_data is nvarchar(max), and a large ring buffer's XML can come
  back cut short, so it is not cast to xml: the counts are the attributes of its first element,
  read from the first characters.
- MAX_DISPATCH_LATENCY = { seconds SECONDS | INFINITE }: how long events wait in the buffers before
  they reach the targets, 30 seconds by default; the ring buffer's counts are read before the session
  stops, so it is 1 second there.
- MAX_DURATION = { n SECONDS | ... | UNLIMITED } (SQL Server 2025 and later, Azure SQL): the session
  "stops automatically after the specified time elapses after the session start"; at most 2,147,483
  seconds. SQL Server 2019 and 2022 have no such option.
- `ADD EVENT package.event ( WHERE <predicate> )`: "If the predicate expression is false, the event is
  dropped by the session before being processed by the actions and targets"; the global predicate
  source `sqlserver.database_id` (written `[sqlserver].[database_id]`) is the id of the database the
  event came from.
- ring_buffer target: `max_events_limit`, the most events the buffer keeps (the article's session set
  1000).
- Query Profiling Infrastructure: a session with query_post_execution_showplan turns on the standard
  profiling of every query of the server (sys.dm_exec_query_profiles then holds all sessions) while it
  runs, whatever its predicate keeps (mssql_common.py says what follows from it).
"""

from __future__ import annotations

import re
import time
from typing import Callable

from ..engines import mssql_names as names
from ..engines.quoting import tsql_literal, tsql_name
from ..util import first_line
from ..errors import ConfigError, EngineError
from ..scenario.model import BackgroundKind, XeTarget
from .base import closed_on_failure
from .mssql_common import GUEST_FILE_SIZE_MB, GUEST_FILES, ObserverScope, ServerObserver, join_path, major_of, \
    options_of, positive_int

_EVENT = re.compile(r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$")
_TAG = re.compile(r"<File\s+name=\"([^\"]+)\"")
_RING = re.compile(r"<RingBufferTarget\b([^>]*)>")
RING_ATTRIBUTES = {"totalEventsProcessed": "events", "eventCount": "events_in_buffer", "droppedCount": "ring_dropped"}
MAX_FILE_SIZE_MB = 100  # event_file defaults: at most 5 files of 100 MB per session
MAX_ROLLOVER_FILES = 5
MAX_DURATION_FROM = 17  # SQL Server 2025: CREATE EVENT SESSION ... WITH (MAX_DURATION = n SECONDS)
MAX_DURATION_S = 2_147_483
RING_DISPATCH_LATENCY_S = 1
UNBOUNDED_XE_FIX = ("run it with --target docker (a container concurbench runs, which gc removes with everything in "
                    "it), on SQL Server 2025 (MAX_DURATION stops the session by itself), or add "
                    "--allow-xe-without-max-duration to accept that a killed run leaves the session running, capturing "
                    "in the run's database only, until the next run from this machine or `concurbench gc --target "
                    "dsn --yes` drops it")


def ring_counts(head: str | None) -> dict:
    """The counts of a ring_buffer target from the start of its target_data (`<RingBufferTarget
    totalEventsProcessed="n" eventCount="n" droppedCount="n" ...>`); {} when it is not there."""
    m = _RING.search(head or "")
    if not m:
        return {}
    attributes = dict(re.findall(r"(\w+)=\"(\d+)\"", m.group(1)))
    return {key: int(attributes[name]) for name, key in RING_ATTRIBUTES.items() if name in attributes}


class XEventSession(ServerObserver):
    """An Extended Events session `concurbench_<run id>_<name>` with a ring_buffer or event_file target.

    Options: `target` (ring_buffer | event_file, default ring_buffer), `no_event_loss` (bool:
    EVENT_RETENTION_MODE = NO_EVENT_LOSS, else ALLOW_SINGLE_EVENT_LOSS), `events` (package.event
    names, default sqlserver.query_post_execution_showplan), `file` (event_file path, default
    `<server data directory>/concurbench_<run id>_<name>.xel`), `max_file_size_mb` and
    `max_rollover_files` (event_file: at most that many files of that many MB, default 5 of 100, and
    2 of 20 on a server concurbench does not own), `max_events_limit` (ring_buffer: the most events
    it keeps), `max_memory_kb` (the session's MAX_MEMORY).

    A leftover session of its own name (the same run's) is stopped and dropped first; another run's
    session has another name. On a server concurbench does not own every event carries the predicate
    `[sqlserver].[database_id] = <the run's database>`. When the measurement ends the events captured
    are counted (ring_buffer: the target's totalEventsProcessed, read while the session runs;
    event_file: the files' events, counted after the session is stopped, which flushes its buffers; a
    lower bound once the oldest file has rolled over) and the session is stopped. A ring_buffer session
    dispatches its events within a second (MAX_DISPATCH_LATENCY), so the count read before the stop
    misses none waiting in the buffers. On SQL Server 2025 the session stops by itself `stops_after_s`
    after it started (MAX_DURATION); 2019 and 2022 have no such limit, so on a server concurbench does
    not own the session is refused at start (UNBOUNDED_XE_FIX) unless the scope allows it.
    """

    kind = BackgroundKind.XEVENTS
    DEFAULT_EVENTS = ("sqlserver.query_post_execution_showplan",)
    DEFINED = "SELECT COUNT(*) AS n FROM sys.server_event_sessions WHERE name = ?"
    RUNNING = "SELECT COUNT(*) AS n FROM sys.dm_xe_sessions WHERE name = ?"
    SESSION_STATS = ("SELECT dropped_event_count, dropped_buffer_count FROM sys.dm_xe_sessions WHERE name = ?")
    TARGET_DATA = ("SELECT CAST(t.target_data AS nvarchar(max)) AS target_data FROM sys.dm_xe_session_targets AS t "
                   "JOIN sys.dm_xe_sessions AS s ON s.address = t.event_session_address "
                   "WHERE s.name = ? AND t.target_name = N'event_file'")
    RING_HEAD = ("SELECT LEFT(t.target_data, 2000) AS head FROM sys.dm_xe_session_targets AS t "
                 "JOIN sys.dm_xe_sessions AS s ON s.address = t.event_session_address "
                 "WHERE s.name = ? AND t.target_name = N'ring_buffer'")
    FILE_COUNT = ("SELECT COUNT(*) AS n, MIN(file_name) AS oldest "
                  "FROM sys.fn_xe_file_target_read_file(?, NULL, NULL, NULL) WHERE file_name >= ?")

    def __init__(self, spec, conninfo, *, connect: Callable | None = None, clock: Callable[[], float] = time.time,
                 remove_files: Callable[[list[str]], None] | None = None, lifetime_s: float | None = None,
                 scope: ObserverScope | None = None):
        super().__init__(spec, conninfo, connect=connect, clock=clock, remove_files=remove_files,
                         lifetime_s=lifetime_s, scope=scope)
        opts = options_of(spec)
        self.major: int | None = None  # the server's major version, read at start (MAX_DURATION from 17)
        self.database_id: int | None = None  # a guest's session captures this database only (read at start)
        self.session = names.xe_session(self.key)
        written = str(opts.get("target", XeTarget.RING_BUFFER.value))
        try:
            self.target = XeTarget(written)
        except ValueError:
            raise ConfigError(f"xevents {spec.name}: target must be {' or '.join(XeTarget)}, got {written!r}") from None
        self.no_event_loss = bool(opts.get("no_event_loss", False))
        events = opts.get("events") or list(self.DEFAULT_EVENTS)
        if isinstance(events, str):
            events = [events]
        bad = [e for e in events if not isinstance(e, str) or not _EVENT.match(e)]
        if bad:
            raise ConfigError(f"xevents {spec.name}: events must be package.event names "
                              f"(e.g. sqlserver.query_post_execution_showplan), got {bad}")
        self.events = list(events)
        guest = self.scope.guest
        self.max_memory_kb = positive_int(opts, "max_memory_kb", f"xevents {spec.name}")
        self.max_events_limit = positive_int(opts, "max_events_limit", f"xevents {spec.name}")
        self.max_file_size_mb = positive_int(opts, "max_file_size_mb", f"xevents {spec.name}") or (
            GUEST_FILE_SIZE_MB if guest else MAX_FILE_SIZE_MB)
        self.max_rollover_files = positive_int(opts, "max_rollover_files", f"xevents {spec.name}") or (
            GUEST_FILES if guest else MAX_ROLLOVER_FILES)
        self.file: str | None = opts.get("file")
        self.first_file: str | None = None
        self.started = False
        self.stopped = False
        self.counts: dict = {}

    # SQL ----------------------------------------------------------------------------------------------
    def create_sql(self) -> str:
        where = "" if self.database_id is None else f" (WHERE ([sqlserver].[database_id] = ({int(self.database_id)})))"
        events = ", ".join(f"ADD EVENT {e}{where}" for e in self.events)  # event definitions are comma-separated
        if self.target is XeTarget.RING_BUFFER:
            target = "ADD TARGET package0.ring_buffer"
            if self.max_events_limit:
                target += f" (SET max_events_limit = {int(self.max_events_limit)})"
        else:
            target = (f"ADD TARGET package0.event_file (SET filename = {tsql_literal(self.file)}, "
                      f"max_file_size = {int(self.max_file_size_mb)}, max_rollover_files = {int(self.max_rollover_files)})")
        options = []
        if self.max_memory_kb:
            options.append(f"MAX_MEMORY = {int(self.max_memory_kb)} KB")
        retention = "NO_EVENT_LOSS" if self.no_event_loss else "ALLOW_SINGLE_EVENT_LOSS"
        options.append(f"EVENT_RETENTION_MODE = {retention}")
        if self.target is XeTarget.RING_BUFFER:  # its counts are read before STOP: events must not wait 30 s to arrive
            options.append(f"MAX_DISPATCH_LATENCY = {RING_DISPATCH_LATENCY_S} SECONDS")
        options.append("STARTUP_STATE = OFF")
        if self.bounded:  # stops by itself if the harness is killed
            options.append(f"MAX_DURATION = {min(self.stops_after_s, MAX_DURATION_S)} SECONDS")
        return (f"CREATE EVENT SESSION {tsql_name(self.session)} ON SERVER {events} {target} "
                f"WITH ({', '.join(options)})")

    @property
    def bounded(self) -> bool:
        """Whether the server stops the session by itself (MAX_DURATION, from SQL Server 2025); known once started."""
        return self.major is not None and self.major >= MAX_DURATION_FROM

    def state_sql(self, state: str) -> str:
        assert state in ("START", "STOP")
        return f"ALTER EVENT SESSION {tsql_name(self.session)} ON SERVER STATE = {state}"

    def drop_sql(self) -> str:
        return f"DROP EVENT SESSION {tsql_name(self.session)} ON SERVER"

    def file_pattern(self) -> str:
        """`/dir/concurbench_x.xel` -> `/dir/concurbench_x*.xel`: every file the target writes."""
        return self._base() + "*.xel"

    def _base(self) -> str:
        return self.file[:-4] if self.file.lower().endswith(".xel") else self.file

    def written(self) -> list[str]:
        """The event_file target's files, `<base>_0_<ticks>.xel`."""
        return [self._base() + "_0_*.xel"] if self.target is XeTarget.EVENT_FILE and self.started else []

    # lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        with closed_on_failure(self, f"xevents {self.spec.name}: could not start session {self.session}",
                               first_line):
            self._open()
            row = self._query_one(self.SERVER)
            self.major = major_of(row[1] if row else None)
            if self.scope.guest:
                if not self.bounded and not self.scope.unbounded_xe:
                    raise EngineError(f"xevents {self.spec.name}: SQL Server {self.major or '?'} has no MAX_DURATION, "
                                      f"so a session on a server concurbench does not own would keep running if the "
                                      f"run were killed; {UNBOUNDED_XE_FIX}")
                self.database_id = self._database_id()
            if self.target is XeTarget.EVENT_FILE and not self.file:
                self.file = join_path(self._data_dir(), f"{self.session}.xel")
            self._teardown()  # a leftover session of the same name
            self.conn.execute(self.create_sql())
            self.conn.execute(self.state_sql("START"))
            self.started = True
            if self.target is XeTarget.EVENT_FILE:
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
                if self.target is XeTarget.RING_BUFFER:
                    row = self._query_one(self.RING_HEAD, self.session)
                    self.counts.update(ring_counts(row[0] if row else None))
                self.conn.execute(self.state_sql("STOP"))
                self.stopped = True
                if self.target is XeTarget.EVENT_FILE:
                    self._count_files()
            except Exception as exc:  # noqa: BLE001 - counting is a nicety; close() still drops
                self.error = f"counting events: {first_line(exc)}"

    def _count_files(self) -> None:
        row = self._query_one(self.FILE_COUNT, self.file_pattern(), self.first_file or "")
        self.counts["events"] = row[0] if row else None
        oldest = row[1] if row else None
        if self.first_file is None:  # could not tell this run's first file from earlier ones
            self.counts["events_note"] = f"counted over every file matching {self.file_pattern()}"
        elif oldest is not None and oldest > self.first_file:
            self.counts["events_note"] = (f"a lower bound: the oldest files rolled over (at most "
                                          f"{self.max_rollover_files} files of {self.max_file_size_mb} MB are kept)")

    def _teardown(self) -> None:
        """Stop the session if it runs, drop it if it is defined."""
        if self._query_one(self.RUNNING, self.session)[0]:
            self.conn.execute(self.state_sql("STOP"))
        if self._query_one(self.DEFINED, self.session)[0]:
            self.conn.execute(self.drop_sql())

    def describe(self) -> dict:
        out = {"name": self.spec.name, "kind": self.kind, "session": self.session, "target": self.target,
               "event_names": list(self.events), "no_event_loss": self.no_event_loss,
               "max_memory_kb": self.max_memory_kb, "file": self.file if self.target is XeTarget.EVENT_FILE else None,
               "database_id": self.database_id, "stops_by_itself_after_s": self.stops_after_s if self.bounded else None}
        if self.target is XeTarget.EVENT_FILE:
            out.update(max_file_size_mb=self.max_file_size_mb, max_rollover_files=self.max_rollover_files)
        elif self.max_events_limit:
            out["max_events_limit"] = self.max_events_limit
        out.update(self.counts)
        out.update(self.files)
        if self.error:
            out["error"] = self.error
        return out
