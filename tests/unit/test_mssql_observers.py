"""The SQL Server observers (Extended Events session, server-side SQL Trace) against a stand-in for
SQL Server that keeps the sessions and traces it is told to create and records every statement.

No SQL Server here. sqlglot's T-SQL dialect does not parse CREATE/ALTER/DROP EVENT SESSION (it
falls back to an opaque `Command`), so those three are checked with focused regular expressions;
every other generated statement must parse into real expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from concurbench.errors import ConfigError, EngineError
from concurbench.background.mssql import (SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS, SqlTrace, XEventSession)
from concurbench.background.kinds import make_background
from concurbench.background.xevents import ring_counts

sqlglot = pytest.importorskip("sqlglot")
from test_tsql_parses import check_tsql  # noqa: E402 - after the skip: it imports sqlglot
from mssql_dsn_standin import like  # noqa: E402

LINUX_VERSION = ("Microsoft SQL Server 2022 (RTM-CU15) (KB5041321) - 16.0.4145.4 (X64) \n\tDeveloper Edition "
                 "(64-bit) on Linux (Ubuntu 22.04.4 LTS) <X64>")
WINDOWS_VERSION = "Microsoft SQL Server 2019 (RTM-CU27) - 15.0.4375.4 (X64) Developer Edition on Windows Server 2022"


@dataclass(frozen=True)
class ObserverSpec:
    name: str
    kind: str
    options: dict = field(default_factory=dict)


class StandInError(Exception):
    pass


class StandInCursor:
    def __init__(self, rows=(), columns=("c",)):
        self._rows = list(rows)
        self.description = [(c,) for c in columns] if columns else None

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None

    def fetchall(self):
        rows, self._rows = self._rows, []
        return rows

    def nextset(self):
        return False


class StandInSqlServer:
    """Stand-in for SQL Server: event sessions (defined, running), traces, and a log of statements.

    `fail` maps a regex to an exception raised when a statement matching it runs (once).
    """

    def __init__(self, *, data_dir="/var/opt/mssql/data/", version=LINUX_VERSION, engine_edition=3,
                 trace_create_rc=0):
        self.data_dir = data_dir
        self.version = version
        self.engine_edition = engine_edition
        self.trace_create_rc = trace_create_rc
        self.defined: set[str] = set()
        self.running: set[str] = set()
        self.traces: dict[int, dict] = {}
        self.next_trace = 2  # trace 1 is the default trace
        self.log: list[str] = []
        self.fail: dict[str, Exception] = {}
        self.connections = 0
        self.ring = (17, 17, 0)
        self.file_events = 9
        self.oldest_file = None  # the oldest .xel file still on disk, as fn_xe_file_target_read_file names it

    def connect(self, conninfo, application_name=None):
        self.connections += 1
        self.last_application_name = application_name
        return StandInConnection(self)

    def statements(self, kind: str) -> list[str]:
        return [s for s in self.log if kind in s]

    def run(self, sql: str, params: tuple):
        self.log.append(sql)
        for pattern, exc in list(self.fail.items()):
            if re.search(pattern, sql):
                del self.fail[pattern]
                raise exc
        if "InstanceDefaultDataPath" in sql:
            return StandInCursor([(self.data_dir,)])
        if "FROM sys.server_event_sessions" in sql:
            return StandInCursor([(int(params[0] in self.defined),)])
        if "FROM sys.dm_xe_sessions WHERE name" in sql and "COUNT" in sql:
            return StandInCursor([(int(params[0] in self.running),)])
        if "dropped_event_count, dropped_buffer_count FROM sys.dm_xe_sessions" in sql:
            return StandInCursor([(0, 0)] if params[0] in self.running else [])
        if "t.target_name = N'event_file'" in sql:
            return StandInCursor([(f'<EventFileTarget truncated="0"><Buffers logged="0" dropped="0"/>'
                                   f'<File name="{self.data_dir}{params[0]}_0_134343910972710000.xel"/>'
                                   f'</EventFileTarget>',)])
        if "t.target_name = N'ring_buffer'" in sql:
            processed, in_buffer, dropped = self.ring
            head = (f'<RingBufferTarget truncated="0" processingTime="0" totalEventsProcessed="{processed}" '
                    f'eventCount="{in_buffer}" droppedCount="{dropped}" memoryUsed="4096"><event name="x"')
            return StandInCursor([(head,)] if params[0] in self.running else [])
        if "fn_xe_file_target_read_file" in sql:
            return StandInCursor([(self.file_events, self.oldest_file)])
        m = re.match(r"CREATE EVENT SESSION \[(\w+)\] ON SERVER", sql)
        if m:
            if m.group(1) in self.defined:
                raise StandInError(f"(25631) The event session, \"{m.group(1)}\", already exists.")
            self.defined.add(m.group(1))
            return StandInCursor(columns=None)
        m = re.match(r"ALTER EVENT SESSION \[(\w+)\] ON SERVER STATE = (START|STOP)$", sql)
        if m:
            name, state = m.groups()
            assert name in self.defined
            if state == "START":
                assert name not in self.running
                self.running.add(name)
            else:
                assert name in self.running, "STOP of a session that does not run is an error on SQL Server"
                self.running.discard(name)
            return StandInCursor(columns=None)
        m = re.match(r"DROP EVENT SESSION \[(\w+)\] ON SERVER$", sql)
        if m:
            assert m.group(1) in self.defined
            self.defined.discard(m.group(1))
            self.running.discard(m.group(1))
            return StandInCursor(columns=None)
        if "SERVERPROPERTY('EngineEdition')" in sql:
            return StandInCursor([(self.engine_edition, self.version)])
        if sql.startswith("SELECT id, status FROM sys.traces WHERE path LIKE"):
            rx = like(params[0])
            return StandInCursor([(i, t["status"]) for i, t in self.traces.items() if rx.match(t["path"])])
        if sql.startswith("SELECT status, event_count, dropped_event_count FROM sys.traces"):
            t = self.traces.get(params[0])
            ok = t is not None and like(params[1]).match(t["path"])
            return StandInCursor([(t["status"], 1234, 5)] if ok else [])
        m = re.search(r"sp_trace_create @traceid OUTPUT, 2, N'((?:[^']|'')*)', @maxfilesize", sql)
        if m:
            if self.trace_create_rc:
                return StandInCursor([(self.trace_create_rc, None)])
            trace_id, self.next_trace = self.next_trace, self.next_trace + 1
            stop = re.search(r"@stoptime DATETIME = DATEADD\(SECOND, (\d+), GETDATE\(\)\);.*, @stoptime, \d+;", sql)
            self.traces[trace_id] = {"path": m.group(1).replace("''", "'") + ".trc", "status": 0, "events": [],
                                     "stops_after_s": int(stop.group(1)) if stop else None}
            return StandInCursor([(0, trace_id)])
        m = re.search(r"sp_trace_setevent (\d+), (\d+), (\d+), @on", sql)
        if m:
            trace_id, event, column = map(int, m.groups())
            self.traces[trace_id]["events"].append((event, column))
            return StandInCursor([(0,)])
        m = re.search(r"sp_trace_setstatus (\d+), (\d)", sql)
        if m:
            trace_id, status = map(int, m.groups())
            trace = self.traces.get(trace_id)
            if trace is None:
                return StandInCursor([(9,)])
            if status == 2:
                assert trace["status"] == 0, "a trace is stopped before it is closed"
                del self.traces[trace_id]
            else:
                trace["status"] = status
            return StandInCursor([(0,)])
        raise AssertionError(f"stand-in for SQL Server does not know: {sql}")


class StandInConnection:
    def __init__(self, server: StandInSqlServer):
        self.server = server
        self.closed = False

    def execute(self, sql, *params):
        if self.closed:
            raise StandInError("connection is closed")
        return self.server.run(sql, params)

    def close(self):
        self.closed = True


def xevents(server, name="plans", **options):
    return XEventSession(ObserverSpec(name, "xevents", options), "conninfo", connect=server.connect)


def trace(server, name="plans", clock=lambda: 1_700_000_000.25, **options):
    return SqlTrace(ObserverSpec(name, "sql_trace", options), "conninfo", connect=server.connect, clock=clock)


def ddl(server) -> list[str]:
    """The event-session DDL run so far: `CREATE EVENT SESSION`, `ALTER EVENT SESSION START`, ..."""
    out = []
    for sql in server.log:
        m = re.match(r"(CREATE|ALTER|DROP) EVENT SESSION \[\w+\] ON SERVER(?: STATE = (START|STOP)$)?", sql)
        if m:
            out.append(f"{m.group(1)} EVENT SESSION" + (f" {m.group(2)}" if m.group(2) else ""))
    return out


# -- Extended Events ---------------------------------------------------------------------------------
def test_xevents_create_start_stop_drop_in_order():
    """Stand-in for SQL Server: ring_buffer session through a whole variant run."""
    server = StandInSqlServer()
    obs = xevents(server)
    obs.start()
    assert server.running == {"concurbench_plans"}
    assert server.last_application_name == "concurbench:observer:plans"
    obs.window_set(0, 10)
    obs.measurement_ended(10)
    assert server.running == set() and server.defined == {"concurbench_plans"}
    obs.close()
    assert ddl(server) == ["CREATE EVENT SESSION", "ALTER EVENT SESSION START", "ALTER EVENT SESSION STOP",
                           "DROP EVENT SESSION"]
    assert server.defined == set()
    described = obs.describe()
    assert described["events"] == 17 and described["session"] == "concurbench_plans"
    assert described["event_names"] == ["sqlserver.query_post_execution_showplan"] and "error" not in described


def test_xevents_leftover_session_is_dropped_first():
    """Stand-in for SQL Server where a killed run left the session defined and running."""
    server = StandInSqlServer()
    server.defined.add("concurbench_plans")
    server.running.add("concurbench_plans")
    obs = xevents(server)
    obs.start()
    assert ddl(server) == ["ALTER EVENT SESSION STOP", "DROP EVENT SESSION", "CREATE EVENT SESSION",
                           "ALTER EVENT SESSION START"]
    obs.close()
    assert server.defined == set() and server.running == set()


def test_xevents_close_after_failed_start_still_drops():
    """Stand-in for SQL Server whose STATE = START fails after CREATE succeeded."""
    server = StandInSqlServer()
    server.fail[r"STATE = START"] = StandInError("(25602) The target, \"event_file\", ... could not be started")
    obs = xevents(server, target="event_file")
    with pytest.raises(EngineError, match="could not start session concurbench_plans"):
        obs.start()
    assert server.defined == set() and server.running == set()
    assert ddl(server)[-1] == "DROP EVENT SESSION"
    obs.close()  # the runner closes it again: harmless
    assert ddl(server).count("DROP EVENT SESSION") == 1


def test_xevents_close_twice_is_harmless_and_close_reconnects_when_the_connection_died():
    """Stand-in for SQL Server: the observer's connection broke during the run."""
    server = StandInSqlServer()
    obs = xevents(server)
    obs.start()
    obs.conn.closed = True
    obs.close()
    assert server.defined == set() and server.connections == 2
    obs.close()
    assert server.connections == 2 and ddl(server).count("DROP EVENT SESSION") == 1


def test_xevents_close_never_raises():
    """Stand-in for SQL Server that refuses every statement and every new connection at cleanup."""
    server = StandInSqlServer()
    obs = xevents(server)
    obs.start()
    obs.conn.closed = True

    def refuse(*args, **kwargs):
        raise StandInError("server gone")

    obs._connect = refuse
    obs.close()
    assert "cleanup" in obs.describe()["error"]


def test_xevents_no_event_loss_only_when_asked():
    server = StandInSqlServer()
    plain = xevents(server).create_sql()
    strict = xevents(server, no_event_loss=True, max_memory_kb=8192).create_sql()
    sized = xevents(server, target="event_file", file="/x/y.xel", max_file_size_mb=50).create_sql()
    assert "SET filename = N'/x/y.xel', max_file_size = 50, max_rollover_files = 5)" in sized
    assert "NO_EVENT_LOSS" not in plain and "EVENT_RETENTION_MODE = ALLOW_SINGLE_EVENT_LOSS" in plain
    assert "EVENT_RETENTION_MODE = NO_EVENT_LOSS" in strict and "MAX_MEMORY = 8192 KB" in strict


def test_xevents_event_file_default_path_count_and_pattern():
    """Stand-in for SQL Server on Linux: event_file in the default data directory."""
    server = StandInSqlServer()
    obs = xevents(server, target="event_file", events=["sqlserver.query_post_execution_showplan",
                                                       "sqlserver.sql_batch_completed"])
    obs.start()
    assert obs.file == "/var/opt/mssql/data/concurbench_plans.xel"
    create = server.statements("CREATE EVENT SESSION")[0]
    assert ("ADD TARGET package0.event_file (SET filename = N'/var/opt/mssql/data/concurbench_plans.xel', "
            "max_file_size = 100, max_rollover_files = 5)") in create
    assert "ADD EVENT sqlserver.sql_batch_completed" in create
    obs.measurement_ended(1)
    assert obs.describe()["events"] == 9
    # counted after the stop (which flushes the buffers), over this run's files only
    stop_at = server.log.index(server.statements("STATE = STOP")[0])
    count_at = server.log.index(server.statements("fn_xe_file_target_read_file")[0])
    assert stop_at < count_at
    assert obs.file_pattern() == "/var/opt/mssql/data/concurbench_plans*.xel"
    assert obs.first_file.endswith("concurbench_plans_0_134343910972710000.xel")
    obs.close()
    assert server.defined == set()


def test_xevents_windows_data_path_and_quoted_file():
    """Stand-in for SQL Server on Windows; a path with a quote is doubled inside the literal."""
    server = StandInSqlServer(data_dir="C:\\Program Files\\MSSQL16.MSSQLSERVER\\MSSQL\\DATA\\",
                              version=WINDOWS_VERSION)
    obs = xevents(server, target="event_file")
    obs.start()
    assert obs.file == "C:\\Program Files\\MSSQL16.MSSQLSERVER\\MSSQL\\DATA\\concurbench_plans.xel"
    obs.close()
    odd = xevents(server, target="event_file", file="/tmp/o'brien.xel")
    assert "SET filename = N'/tmp/o''brien.xel'" in odd.create_sql()


def test_xevents_counting_failure_is_recorded_and_close_still_drops():
    """Stand-in for SQL Server whose target_data read fails at the end of the measurement."""
    server = StandInSqlServer()
    server.fail[r"N'ring_buffer'"] = StandInError("(6355) conversion failed")
    obs = xevents(server)
    obs.start()
    obs.measurement_ended(1)
    assert "counting events" in obs.describe()["error"]
    obs.close()
    assert server.defined == set() and server.running == set()


def test_xevents_rejects_bad_options():
    server = StandInSqlServer()
    with pytest.raises(ConfigError, match="target"):
        xevents(server, target="etw_classic_sync_target")
    with pytest.raises(ConfigError, match="package.event"):
        xevents(server, events=["query_post_execution_showplan; DROP TABLE x"])
    with pytest.raises(ConfigError, match="observer name"):
        xevents(server, name="bad-name")
    with pytest.raises(ConfigError, match="max_memory_kb"):
        xevents(server, max_memory_kb="4MB")


def test_xevents_ddl_matches_the_documented_grammar():
    """sqlglot keeps CREATE/ALTER/DROP EVENT SESSION as an unparsed Command: checked by regex instead."""
    server = StandInSqlServer()
    for obs in (xevents(server), xevents(server, target="event_file", file="/x/y.xel", no_event_loss=True,
                                         max_memory_kb=4096, max_file_size_mb=64,
                                         events=["sqlserver.lock_acquired", "sqlos.wait_info"])):
        create = obs.create_sql()
        assert isinstance(sqlglot.parse_one(create, read="tsql"), sqlglot.exp.Command)
        assert re.fullmatch(
            r"CREATE EVENT SESSION \[concurbench_\w+\] ON SERVER"
            r" ADD EVENT \w+\.\w+(, ADD EVENT \w+\.\w+)*"
            r" ADD TARGET package0\.(ring_buffer|event_file \(SET filename = N'(?:[^']|'')*',"
            r" max_file_size = \d+, max_rollover_files = \d+\))"
            r" WITH \((MAX_MEMORY = \d+ KB, )?EVENT_RETENTION_MODE = (NO_EVENT_LOSS|ALLOW_SINGLE_EVENT_LOSS),"
            r"( MAX_DISPATCH_LATENCY = \d+ SECONDS,)? STARTUP_STATE = OFF(, MAX_DURATION = \d+ SECONDS)?\)", create)
        for state in ("START", "STOP"):
            assert re.fullmatch(r"ALTER EVENT SESSION \[\w+\] ON SERVER STATE = (START|STOP)", obs.state_sql(state))
        assert re.fullmatch(r"DROP EVENT SESSION \[\w+\] ON SERVER", obs.drop_sql())


def test_xevents_two_events_are_separated_by_a_comma():
    """The T-SQL generated for two events: CREATE EVENT SESSION's grammar is `<event_definition> [ ,...n ]`
    (Microsoft's example: `ADD EVENT sqlos.async_io_requested, ADD EVENT sqlserver.lock_acquired ADD TARGET`);
    events joined by spaces are a syntax error on SQL Server."""
    obs = xevents(StandInSqlServer(), events=["sqlserver.lock_acquired", "sqlos.wait_info"])
    assert obs.create_sql() == (
        "CREATE EVENT SESSION [concurbench_plans] ON SERVER ADD EVENT sqlserver.lock_acquired, "
        "ADD EVENT sqlos.wait_info ADD TARGET package0.ring_buffer "
        "WITH (EVENT_RETENTION_MODE = ALLOW_SINGLE_EVENT_LOSS, MAX_DISPATCH_LATENCY = 1 SECONDS, STARTUP_STATE = OFF)")


def test_xevents_queries_parse_as_tsql():
    for sql in (XEventSession.DEFINED, XEventSession.RUNNING, XEventSession.SESSION_STATS, XEventSession.TARGET_DATA,
                XEventSession.RING_HEAD, XEventSession.FILE_COUNT, XEventSession.DATA_DIR):
        tree = sqlglot.parse_one(sql, read="tsql")
        assert isinstance(tree, sqlglot.exp.Select), sql


# -- SQL Trace ---------------------------------------------------------------------------------------
def test_trace_create_events_start_stop_close_in_order():
    """Stand-in for SQL Server on Linux: the trace file goes to the data directory, stamped."""
    server = StandInSqlServer()
    obs = trace(server)
    obs.start()
    (trace_id,) = server.traces
    t = server.traces[trace_id]
    assert t["path"] == "/var/opt/mssql/data/concurbench-plans-20231114T221320250Z.trc"
    assert t["status"] == 1 and obs.describe()["platform"] == "Linux"
    assert t["events"] == [(146, c) for c in SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS.values()]
    assert (146, 1) in t["events"] and (146, 12) in t["events"]  # TextData, SPID
    obs.measurement_ended(1)
    assert server.traces[trace_id]["status"] == 0
    obs.close()
    assert server.traces == {}
    kinds = [re.search(r"sp_trace_(\w+)", s).group(1) + (re.search(r"setstatus \d+, (\d)", s).group(1)
                                                          if "setstatus" in s else "")
             for s in server.log if "sp_trace_" in s]
    assert kinds[0] == "create" and set(kinds[1:-3]) == {"setevent"}
    assert kinds[-3:] == ["setstatus1", "setstatus0", "setstatus2"]
    described = obs.describe()
    assert described["events"] == 1234 and described["dropped_events"] == 5
    assert described["file"].endswith("Z.trc")


def test_trace_create_uses_rollover_max_size_and_strict_types():
    server = StandInSqlServer()
    obs = trace(server, file="/var/opt/mssql/log/mytrace.trc", max_file_size_mb=20, max_files=4, events=[146])
    obs.start()
    create = server.statements("sp_trace_create")[0]
    assert "@maxfilesize BIGINT = 20" in create and "N'/var/opt/mssql/log/mytrace-" in create
    assert re.search(r"sp_trace_create @traceid OUTPUT, 2, N'[^']+', @maxfilesize, @stoptime, 4;", create)
    assert "@stoptime DATETIME = DATEADD(SECOND, " in create
    assert ".trc'" not in create  # the server appends .trc
    assert all("@on BIT = 1" in s for s in server.statements("sp_trace_setevent"))
    obs.close()


def test_trace_failed_create_raises_a_clear_engine_error_and_leaves_nothing():
    """Stand-in for SQL Server whose sp_trace_create returns 12 (file not created)."""
    server = StandInSqlServer(trace_create_rc=12)
    obs = trace(server)
    with pytest.raises(EngineError, match=r"sp_trace_create returned 12 \(file not created\) for "
                                          r"/var/opt/mssql/data/concurbench-plans-\d{8}T\d{9}Z\.trc on Linux"):
        obs.start()
    assert server.traces == {} and obs.conn is None
    obs.close()


def test_trace_close_after_a_failed_start_still_closes_the_trace():
    """Stand-in for SQL Server where sp_trace_setstatus 1 fails after the trace was defined."""
    server = StandInSqlServer()
    server.fail[r"sp_trace_setstatus \d+, 1"] = StandInError("(19070) The default trace cannot be started")
    obs = trace(server)
    with pytest.raises(EngineError, match="could not start the trace"):
        obs.start()
    assert server.traces == {}
    obs.close()
    obs.close()


def test_trace_leftover_of_the_same_prefix_is_closed_first():
    """Stand-in for SQL Server with a running trace a killed run left behind, and an unrelated one."""
    server = StandInSqlServer()
    server.traces[7] = {"path": "/var/opt/mssql/data/concurbench-plans-20231114T000000000Z_3.trc", "status": 1,
                        "events": []}
    server.traces[8] = {"path": "/var/opt/mssql/data/concurbench-plans_other-20231114T000000000Z.trc",
                        "status": 1, "events": []}
    obs = trace(server)
    obs.start()
    assert 7 not in server.traces and server.traces[8]["status"] == 1
    obs.close()
    assert list(server.traces) == [8]


def test_trace_close_does_not_touch_a_reused_trace_id():
    """Stand-in for SQL Server: our trace vanished and its id now belongs to someone else's trace."""
    server = StandInSqlServer()
    obs = trace(server)
    obs.start()
    (trace_id,) = server.traces
    server.traces[trace_id] = {"path": "/somewhere/else.trc", "status": 1, "events": []}
    obs.close()
    assert server.traces[trace_id]["status"] == 1


def test_trace_on_windows_and_refused_on_azure_sql_database():
    """Stand-ins for SQL Server on Windows and for Azure SQL Database (EngineEdition 5)."""
    server = StandInSqlServer(data_dir="D:\\Data\\", version=WINDOWS_VERSION)
    obs = trace(server)
    obs.start()
    assert obs.describe()["file"].startswith("D:\\Data\\concurbench-plans-")
    assert obs.describe()["platform"] == "Windows"
    obs.close()
    azure = StandInSqlServer(engine_edition=5, version="Microsoft SQL Azure (RTM) - 12.0.2000.8")
    with pytest.raises(EngineError, match="not available on Azure SQL Database"):
        trace(azure).start()
    assert azure.statements("sp_trace_create") == []


def test_trace_rejects_bad_options():
    server = StandInSqlServer()
    with pytest.raises(ConfigError, match="unknown columns"):
        trace(server, columns=["TextData", "Duration"])
    with pytest.raises(ConfigError, match="max_file_size_mb"):
        trace(server, max_file_size_mb=0)
    with pytest.raises(ConfigError, match="events must be"):
        trace(server, events=[10, 12])
    with pytest.raises(ConfigError, match="max_files"):
        trace(server, max_files=1)


def test_trace_statements_parse_as_tsql():
    server = StandInSqlServer()
    obs = trace(server, max_files=3)
    obs.path = "/var/opt/mssql/data/concurbench-plans-20231114T221320250Z"
    batches = [obs.create_sql(), SqlTrace.setevent_sql(2, 146, 1), SqlTrace.setstatus_sql(2, 0),
               SqlTrace.setstatus_sql(2, 2), SqlTrace.SERVER, SqlTrace.LEFTOVERS, SqlTrace.STATUS]
    for batch in batches:
        trees = sqlglot.parse(batch, read="tsql")
        assert trees and not any(isinstance(t, sqlglot.exp.Command) for t in trees), batch
        assert isinstance(trees[-1], sqlglot.exp.Select), batch


# -- files on the server's disk (issue 22) ----------------------------------------------------------------
class FileRemover:
    """Stand-in for the docker target's `remove_files` (a `rm` inside the container); can refuse."""

    def __init__(self, refuse: str | None = None):
        self.removed: list[list[str]] = []
        self.refuse = refuse

    def __call__(self, patterns):
        if self.refuse:
            raise RuntimeError(self.refuse)
        self.removed.append(list(patterns))


def test_event_file_is_bounded_and_removed_at_the_end_on_a_server_concurbench_owns():
    """Stand-in for SQL Server in a container concurbench runs. The old event_file target had no
    max_file_size (a file grew until the disk was full) and its .xel files stayed."""
    server, remover = StandInSqlServer(), FileRemover()
    obs = XEventSession(ObserverSpec("plans", "xevents", {"target": "event_file"}), "conninfo",
                        connect=server.connect, remove_files=remover)
    obs.start()
    assert "max_file_size = 100, max_rollover_files = 5)" in server.statements("CREATE EVENT SESSION")[0]
    obs.measurement_ended(1)
    obs.close()
    assert server.defined == set()
    assert remover.removed == [["/var/opt/mssql/data/concurbench_plans_0_*.xel"]]
    described = obs.describe()
    assert described["files_removed"] is True and "note" not in described
    assert described["max_file_size_mb"] == 100 and described["max_rollover_files"] == 5


def test_files_on_a_server_concurbench_does_not_own_are_listed_for_the_user():
    """Stand-in for SQL Server reached through the dsn target (no way to remove its files)."""
    server = StandInSqlServer()
    obs = xevents(server, target="event_file", max_file_size_mb=20, max_rollover_files=2)
    obs.start()
    assert "max_file_size = 20, max_rollover_files = 2)" in server.statements("CREATE EVENT SESSION")[0]
    obs.close()
    described = obs.describe()
    assert described["files_removed"] is False
    assert "/var/opt/mssql/data/concurbench_plans_0_*.xel" in described["note"] and "delete" in described["note"]


def test_a_file_removal_that_fails_is_recorded_and_the_files_listed():
    server = StandInSqlServer()
    obs = trace(server)
    obs.remove_files = FileRemover(refuse="no such container")
    obs.start()
    obs.close()  # never raises
    described = obs.describe()
    assert "removing files: no such container" in described["error"]
    assert described["note"].startswith("left /var/opt/mssql/data/concurbench-plans-20231114T221320250Z*.trc")


def test_ring_buffer_only_sends_no_files_to_remove():
    server, remover = StandInSqlServer(), FileRemover()
    obs = XEventSession(ObserverSpec("plans", "xevents", {}), "conninfo", connect=server.connect, remove_files=remover)
    obs.start()
    obs.close()
    assert remover.removed == [] and "files_removed" not in obs.describe()


def test_sql_trace_keeps_five_files_by_default_and_removes_them_on_a_server_concurbench_owns():
    """Stand-in for SQL Server. The old trace had no @filecount: rollover files without a limit, left
    on the server's disk on purpose."""
    server, remover = StandInSqlServer(), FileRemover()
    obs = SqlTrace(ObserverSpec("plans", "sql_trace", {}), "conninfo", connect=server.connect,
                   clock=lambda: 1_700_000_000.25, remove_files=remover)
    obs.start()
    assert re.search(r"@maxfilesize, @stoptime, 5; SELECT", server.statements("sp_trace_create")[0])
    obs.measurement_ended(1)
    obs.close()
    assert server.traces == {}
    assert remover.removed == [["/var/opt/mssql/data/concurbench-plans-20231114T221320250Z*.trc"]]
    assert obs.describe()["max_files"] == 5 and obs.describe()["files_removed"] is True


def test_ring_buffer_counts_are_read_from_the_start_of_target_data_without_an_xml_cast():
    """A large ring buffer's target_data can fail to convert to xml (the old query cast it); its counts
    are the first element's attributes, which the first characters hold even when the rest is cut."""
    assert "AS xml" not in XEventSession.RING_HEAD and "LEFT(t.target_data" in XEventSession.RING_HEAD
    cut = ('<RingBufferTarget truncated="1" processingTime="3" totalEventsProcessed="120345" eventCount="812" '
           'droppedCount="7" memoryUsed="4190000"><event name="query_post_execution_showplan" package="sqlserver" '
           'timestamp="2024-')
    assert ring_counts(cut) == {"events": 120345, "events_in_buffer": 812, "ring_dropped": 7}
    assert ring_counts(None) == {} and ring_counts("<RingBuffer") == {}
    server = StandInSqlServer()
    server.ring = (120345, 812, 7)
    obs = xevents(server)
    obs.start()
    obs.measurement_ended(1)
    assert obs.describe()["events"] == 120345 and obs.describe()["ring_dropped"] == 7
    obs.close()


def test_event_file_count_is_a_lower_bound_once_the_first_file_rolled_over():
    server = StandInSqlServer()
    server.oldest_file = "/var/opt/mssql/data/concurbench_plans_0_134343910999990000.xel"
    obs = xevents(server, target="event_file")
    obs.start()
    obs.measurement_ended(1)
    obs.close()
    assert "a lower bound" in obs.describe()["events_note"]


def test_new_observer_statements_parse_strictly_as_tsql():
    obs = trace(StandInSqlServer())
    obs.path = "/var/opt/mssql/data/concurbench-plans-20231114T221320250Z"
    for where, sql in (("RING_HEAD", XEventSession.RING_HEAD), ("FILE_COUNT", XEventSession.FILE_COUNT),
                       ("sp_trace_create", obs.create_sql())):
        check_tsql(sql.replace("?", "N'x'"), where)


# -- the dead-man switch (issue 38) ------------------------------------------------------------------------
VERSION_2025 = "Microsoft SQL Server 2025 (RTM) - 17.0.1000.7 (X64) \n\tDeveloper Edition (64-bit) on Linux"


def test_standin_a_killed_harness_trace_stops_by_itself_at_the_windows_end_plus_a_margin():
    """Stand-in for SQL Server keeping each trace's stop time. The old trace had none (@stoptime NULL): a harness
    killed during the arm left showplan capture running until the server restarted."""
    server = StandInSqlServer()
    obs = SqlTrace(ObserverSpec("plans", "sql_trace", {}), "conninfo", connect=server.connect,
                   clock=lambda: 1_700_000_000.25, lifetime_s=70)
    obs.start()
    (created,) = server.traces.values()
    assert created["stops_after_s"] == 370 and obs.describe()["stops_after_s"] == 370  # 70 s and a 300 s margin
    obs.close()


@pytest.mark.parametrize("version, target, options", [
    (VERSION_2025, "ring_buffer", "MAX_DISPATCH_LATENCY = 1 SECONDS, STARTUP_STATE = OFF, MAX_DURATION = 370 SECONDS"),
    (VERSION_2025, "event_file", "STARTUP_STATE = OFF, MAX_DURATION = 370 SECONDS"),
    (LINUX_VERSION, "ring_buffer", "MAX_DISPATCH_LATENCY = 1 SECONDS, STARTUP_STATE = OFF)"),
])
def test_standin_xe_sessions_stop_by_themselves_where_the_server_can_and_the_ring_buffer_dispatches_at_once(
        version, target, options):
    """Stand-in for SQL Server 2025 (MAX_DURATION) and 2022 (none: gc drops what a killed run left). The old
    sessions had no limit, and the ring buffer kept events up to 30 s (the default dispatch latency) past the
    count read before STOP."""
    server = StandInSqlServer(version=version)
    obs = XEventSession(ObserverSpec("plans", "xevents", {"target": target}), "conninfo", connect=server.connect,
                        lifetime_s=70)
    obs.start()
    assert options in server.statements("CREATE EVENT SESSION")[0]
    obs.close()


def test_make_background_gives_an_observer_the_windows_planned_length():
    observer = make_background(ObserverSpec("plans", "sql_trace", {}), "conninfo", None, lifetime_s=65.0)
    assert observer.lifetime_s == 65.0 and observer.stops_after_s == 65 + 300
