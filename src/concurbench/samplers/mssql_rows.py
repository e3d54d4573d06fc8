"""Pure functions behind the SQL Server samplers: allocation page types, wait resources,
performance-counter arithmetic and wait-statistics deltas. No pyodbc, no server.

Sources:
- "Pages and extents architecture guide" (Microsoft Learn): page 0 is the file header, page 1 the
  first PFS page, page 2 the first GAM, page 3 the first SGAM; a PFS page covers 8,088 pages and a
  GAM/SGAM page about 64,000 extents (511,232 pages, i.e. 63,904 extents, is the interval SQL Server
  uses; the docs round it to "64,000 extents, almost 4 GB").
- KB 224453 (blocking, waitresource formats): a page reads `PAGE: 5:1:104` (database:file:page);
  sys.dm_os_waiting_tasks.resource_description for PAGELATCH_* waits is `5:1:104`. A trailing
  parenthesised description (`2:1:1 (PFS)`) is accepted too, but no Microsoft page confirmed it.
- sys.dm_os_performance_counters: values of per-second counters are cumulative; cntr_type 65792
  is the last observed value; 272696320 and 272696576 are per-second averages over the interval
  (difference / seconds); PERF_LARGE_RAW_FRACTION (537003264) over its PERF_LARGE_RAW_BASE
  (1073939712) is 100 * value / base; PERF_AVERAGE_BULK (1073874176) over its base is
  (value1 - value0) / (base1 - base0) (Windows counter-type reference). The page calls 537003264 a
  snapshot value, but some of these fractions are counts since the server started (Worktables From
  Cache Ratio over Worktables From Cache Base grow with every worktable): a sampler names those in
  `window_ratios`, and their ratio is taken over the interval's growth instead.
- sys.dm_os_wait_stats: cumulative since start (or since DBCC SQLPERF CLEAR); deltas need no clear.
"""

from __future__ import annotations

import re
from typing import Iterable

PFS_INTERVAL = 8088
GAM_INTERVAL = 511232

PERF_COUNTER_LARGE_RAWCOUNT = 65792
PERF_COUNTER_COUNTER = 272696320
PERF_COUNTER_BULK_COUNT = 272696576
PERF_LARGE_RAW_FRACTION = 537003264
PERF_AVERAGE_BULK = 1073874176
PERF_LARGE_RAW_BASE = 1073939712
RATE_TYPES = (PERF_COUNTER_COUNTER, PERF_COUNTER_BULK_COUNT)


def dict_rows(cursor) -> list[dict]:
    """The rows of a DB-API cursor as dicts keyed by column name."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


# -- pages -------------------------------------------------------------------------------------------
def page_type(page_id: int) -> str:
    """"PFS", "GAM", "SGAM" or "other" for a page number of a data file.

    Order of the tests: the fixed pages 1, 2, 3 first (page 1 also satisfies the SGAM rule
    (page - 1) % 511232 == 0, and must stay PFS); then GAM and SGAM interval heads; then PFS
    multiples. Page 0 (the file header) is "other", although 0 % 8088 == 0.
    """
    if page_id < 0:
        raise ValueError(f"page id {page_id} is negative")
    if page_id == 1:
        return "PFS"
    if page_id == 2:
        return "GAM"
    if page_id == 3:
        return "SGAM"
    if page_id == 0:
        return "other"
    if page_id % GAM_INTERVAL == 0:
        return "GAM"
    if (page_id - 1) % GAM_INTERVAL == 0:
        return "SGAM"
    if page_id % PFS_INTERVAL == 0:
        return "PFS"
    return "other"


_PAGE_RESOURCE = re.compile(r"^\s*(?:PAGE\s*:\s*)?(\d+):(\d+):(\d+)(?:\s*\([^)]*\))?\s*$", re.IGNORECASE)


def parse_pagelatch_resource(text: str) -> tuple[int, int, int]:
    """(database id, file id, page id) from `2:1:511232`, `PAGE: 2:1:104` or `2:1:1 (PFS)`."""
    m = _PAGE_RESOURCE.match(text or "")
    if not m:
        raise ValueError(f"not a page resource: {text!r} (expected db:file:page, e.g. 2:1:1)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


# -- performance counters ----------------------------------------------------------------------------
def _object(name: str) -> str:
    """`SQLServer:Locks` and `MSSQL$NAME:Locks` both become `Locks`."""
    name = (name or "").strip()
    return name.split(":", 1)[1].strip() if ":" in name else name


def _key(row: dict) -> tuple[str, str, str]:
    return _object(row["object_name"]), (row["counter_name"] or "").strip(), (row.get("instance_name") or "").strip()


def counter_key(obj: str, counter: str, instance: str) -> str:
    """`Locks/Lock Requests/sec/_Total`; counters without an instance end at the counter name."""
    return f"{obj}/{counter}/{instance}" if instance else f"{obj}/{counter}"


def counter_row_key(row: dict) -> str:
    """The `counter_key` of a sys.dm_os_performance_counters row (named-instance prefix dropped)."""
    return counter_key(*_key(row))


def _base_names(counter: str) -> list[str]:
    low = counter.lower()
    plain = re.sub(r"\s*\([^)]*\)\s*$", "", low)  # "Average Wait Time (ms)" -> "average wait time"
    names = [low + " base", plain + " base"]
    if plain.endswith(" ratio"):
        names.append(plain[: -len(" ratio")] + " base")  # "Worktables From Cache Ratio" -> "... Base"
    return names


def counter_rates(before: list[dict], after: list[dict], seconds: float,
                  window_ratios: Iterable[str] = ()) -> dict[str, float | None]:
    """Counter values over an interval, keyed like `Locks/Lock Requests/sec/_Total`.

    Per-second counters: (after - before) / seconds. Raw counts: the after value. Fractions:
    100 * value / base on the after reading, or, for the counters named in `window_ratios` (whose
    value and base count since the server started), 100 * delta value / delta base. Averages: delta
    value / delta base. A zero base (or no growth of it) gives None. Rows present in one reading only
    are skipped where a delta is needed.
    """
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    old = {_key(r): r for r in before}
    new = {_key(r): r for r in after}
    bases = {(k[0], k[1].lower(), k[2]): r for k, r in new.items() if int(r["cntr_type"]) == PERF_LARGE_RAW_BASE}
    windowed = {name.lower() for name in window_ratios}
    out: dict[str, float | None] = {}
    for key, row in new.items():
        kind = int(row["cntr_type"])
        value = row["cntr_value"]
        name = counter_key(*key)
        if kind == PERF_COUNTER_LARGE_RAWCOUNT:
            out[name] = value
        elif kind in RATE_TYPES:
            if key in old:
                out[name] = (value - old[key]["cntr_value"]) / seconds
        elif kind in (PERF_LARGE_RAW_FRACTION, PERF_AVERAGE_BULK):
            base = next((bases[(key[0], b, key[2])] for b in _base_names(key[1]) if (key[0], b, key[2]) in bases),
                        None)
            if base is None:
                continue
            if kind == PERF_LARGE_RAW_FRACTION and key[1].lower() not in windowed:
                out[name] = 100.0 * value / base["cntr_value"] if base["cntr_value"] else None
                continue
            base_key = _key(base)
            if key not in old or base_key not in old:
                continue
            d_base = base["cntr_value"] - old[base_key]["cntr_value"]
            ratio = (value - old[key]["cntr_value"]) / d_base if d_base > 0 else None
            out[name] = ratio if ratio is None or kind == PERF_AVERAGE_BULK else 100.0 * ratio
    return out


def one_second_max(points: list[tuple[float, int]], bucket: float = 1.0) -> float | None:
    """The highest rate of a cumulative counter over buckets of at least `bucket` seconds, from its
    (time, value) readings: each bucket runs from one edge reading to the first reading `bucket`
    seconds or more later (with readings every 250 ms, four intervals; every second, one), as perfmon
    samples once a second. None with fewer than two readings `bucket` seconds apart."""
    best = None
    if not points:
        return None
    edge_t, edge_v = points[0]
    for t, v in points[1:]:
        if t - edge_t >= bucket * 0.999:
            rate = (v - edge_v) / (t - edge_t)
            best = rate if best is None else max(best, rate)
            edge_t, edge_v = t, v
    return None if best is None else round(best, 3)


# -- wait statistics ---------------------------------------------------------------------------------
# Waits of idle background tasks: they grow with wall time whatever the workload does. The list is
# the usual community "benign waits" filter (background queues, sleeps and timers), not a list
# Microsoft publishes as such; check a wait's entry in the sys.dm_os_wait_stats page before adding.
BENIGN_WAITS = frozenset({
    "BROKER_EVENTHANDLER", "BROKER_RECEIVE_WAITFOR", "BROKER_TASK_STOP", "BROKER_TO_FLUSH", "BROKER_TRANSMITTER",
    "CHECKPOINT_QUEUE", "CHKPT", "CLR_AUTO_EVENT", "CLR_MANUAL_EVENT", "CLR_SEMAPHORE",
    "DBMIRROR_DBM_EVENT", "DBMIRROR_EVENTS_QUEUE", "DBMIRROR_WORKER_QUEUE", "DBMIRRORING_CMD",
    "DIRTY_PAGE_POLL", "DISPATCHER_QUEUE_SEMAPHORE", "FSAGENT", "FT_IFTS_SCHEDULER_IDLE_WAIT", "FT_IFTSHC_MUTEX",
    "HADR_CLUSAPI_CALL", "HADR_FILESTREAM_IOMGR_IOCOMPLETION", "HADR_LOGCAPTURE_WAIT",
    "HADR_NOTIFICATION_DEQUEUE", "HADR_TIMER_TASK", "HADR_WORK_QUEUE", "KSOURCE_WAKEUP", "LAZYWRITER_SLEEP",
    "LOGMGR_QUEUE", "MEMORY_ALLOCATION_EXT", "ONDEMAND_TASK_QUEUE", "PREEMPTIVE_XE_GETTARGETSTATE",
    "PWAIT_ALL_COMPONENTS_INITIALIZED", "PWAIT_DIRECTLOGCONSUMER_GETNEXT", "QDS_ASYNC_QUEUE",
    "QDS_CLEANUP_STALE_QUERIES_TASK_MAIN_LOOP_SLEEP", "QDS_PERSIST_TASK_MAIN_LOOP_SLEEP", "QDS_SHUTDOWN_QUEUE",
    "REDO_THREAD_PENDING_WORK", "REQUEST_FOR_DEADLOCK_SEARCH", "RESOURCE_QUEUE", "SERVER_IDLE_CHECK",
    "SLEEP_BPOOL_FLUSH", "SLEEP_DBSTARTUP", "SLEEP_DCOMSTARTUP", "SLEEP_MASTERDBREADY", "SLEEP_MASTERMDREADY",
    "SLEEP_MASTERUPGRADED", "SLEEP_MSDBSTARTUP", "SLEEP_SYSTEMTASK", "SLEEP_TASK", "SLEEP_TEMPDBSTARTUP",
    "SNI_HTTP_ACCEPT", "SOS_WORK_DISPATCHER", "SP_SERVER_DIAGNOSTICS_SLEEP", "SQLTRACE_BUFFER_FLUSH",
    "SQLTRACE_INCREMENTAL_FLUSH_SLEEP", "SQLTRACE_WAIT_ENTRIES", "WAIT_FOR_RESULTS", "WAITFOR",
    "WAITFOR_TASKSHUTDOWN", "WAIT_XTP_HOST_WAIT", "WAIT_XTP_OFFLINE_CKPT_NEW_LOG", "WAIT_XTP_CKPT_CLOSE",
    "WAIT_XTP_RECOVERY", "XE_DISPATCHER_JOIN", "XE_DISPATCHER_WAIT", "XE_LIVE_TARGET_TVF", "XE_TIMER_EVENT",
})
# Waits that tracing and Extended Events leave behind: the observer-overhead experiment (seed 003)
# compares exactly these, so keep them there (`keep=OBSERVER_WAITS`) even though some are benign.
OBSERVER_WAITS = frozenset({
    "SQLTRACE_INCREMENTAL_FLUSH_SLEEP", "SQLTRACE_WAIT_ENTRIES", "SQLTRACE_BUFFER_FLUSH", "SQLTRACE_FILE_BUFFER",
    "TRACEWRITE", "XE_TIMER_EVENT", "XE_DISPATCHER_WAIT", "XE_BUFFERMGR_FREEBUF_EVENT", "XE_LIVE_TARGET_TVF",
})
# The families of wait types sys.dm_os_wait_stats documents for Extended Events and SQL Trace: what an observer
# would show in the waits, if it showed there (mssql_waits' `observer_share`).
OBSERVER_PREFIXES = ("XE_", "PREEMPTIVE_XE_", "SQLTRACE_")


def is_observer_wait(wait_type: str) -> bool:
    """Whether a wait type is one an Extended Events session or a SQL Trace leaves (TRACEWRITE: a rowset trace)."""
    name = wait_type.strip().upper()
    return name in OBSERVER_WAITS or name.startswith(OBSERVER_PREFIXES)

_WAIT_COLUMNS = ("waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")


def wait_deltas(before_rows: list[dict], after_rows: list[dict], top: int | None = 10,
                exclude: Iterable[str] = BENIGN_WAITS, keep: Iterable[str] = ()) -> list[dict]:
    """The waits that grew between two readings of sys.dm_os_wait_stats, longest first.

    `exclude` drops benign waits (pass `()` to keep every wait); `keep` rescues named ones from
    it (e.g. `keep=OBSERVER_WAITS`). Each row: wait_type, waiting_tasks_count, wait_time_ms,
    signal_wait_time_ms, resource_wait_time_ms and share (of the listed waits' total wait time,
    before `top` is applied). Wait types absent from `before` count from zero.
    """
    dropped = {w.upper() for w in exclude} - {w.upper() for w in keep}
    old = {r["wait_type"].strip().upper(): r for r in before_rows}
    rows = []
    for row in after_rows:
        name = row["wait_type"].strip().upper()
        if name in dropped:
            continue
        prev = old.get(name, {})
        delta = {c: (row.get(c) or 0) - (prev.get(c) or 0) for c in _WAIT_COLUMNS}
        if delta["wait_time_ms"] <= 0 and delta["waiting_tasks_count"] <= 0:
            continue
        delta["resource_wait_time_ms"] = delta["wait_time_ms"] - delta["signal_wait_time_ms"]
        rows.append({"wait_type": name, **delta})
    total = sum(r["wait_time_ms"] for r in rows)
    for r in rows:
        r["share"] = r["wait_time_ms"] / total if total > 0 else 0.0
    rows.sort(key=lambda r: (-r["wait_time_ms"], -r["waiting_tasks_count"], r["wait_type"]))
    return rows if top is None else rows[:top]


# -- sessions ----------------------------------------------------------------------------------------
# The harness's own sessions (application names concurbench:admin, :sampler, :check, :observer:<name>,
# :background:<name>); a pool's sessions are concurbench:<pool>.
HARNESS_SESSIONS = ("admin", "sampler", "check")
HARNESS_PREFIXES = ("observer:", "background:")


def pool_of(program_name: str | None) -> str | None:
    """The pool a session belongs to, from its application name (`concurbench:readers` -> `readers`);
    None for anything else, the harness's own sessions included."""
    name = (program_name or "").strip()
    if not name.startswith("concurbench:"):
        return None
    rest = name[len("concurbench:"):]
    if not rest or rest in HARNESS_SESSIONS or rest.startswith(HARNESS_PREFIXES):
        return None
    return rest


# -- tempdb allocation latches -----------------------------------------------------------------------
TEMPDB_ID = 2


def latch_page_counts(rows: Iterable[tuple[str, str, int]], database_id: int = TEMPDB_ID) -> dict[tuple[str, str], int]:
    """Waiting tasks by (wait type, page type) from (wait_type, resource_description, tasks) rows.

    Rows of another database are skipped; a resource that does not read as db:file:page counts
    under page type "unknown" (so a format change shows up instead of vanishing).
    """
    out: dict[tuple[str, str], int] = {}
    for wait_type, resource, tasks in rows:
        try:
            db, _file, page = parse_pagelatch_resource(resource)
        except ValueError:
            kind = "unknown"
        else:
            if db != database_id:
                continue
            kind = page_type(page)
        key = ((wait_type or "").strip().upper(), kind)
        out[key] = out.get(key, 0) + int(tasks or 0)
    return out


def other_page_counts(rows: Iterable[tuple[str, str, int]], database_id: int = TEMPDB_ID) -> dict[tuple[int, int], int]:
    """Waiting tasks by (file, page) for the pages of `database_id` that are not allocation pages (PFS,
    GAM, SGAM), from (wait_type, resource_description, tasks) rows: the pages to name by their object."""
    out: dict[tuple[int, int], int] = {}
    for _wait, resource, tasks in rows:
        try:
            db, file_id, page = parse_pagelatch_resource(resource)
        except ValueError:
            continue
        if db == database_id and page_type(page) == "other":
            out[(file_id, page)] = out.get((file_id, page), 0) + int(tasks or 0)
    return out
