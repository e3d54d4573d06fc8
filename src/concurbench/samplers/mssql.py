"""SQL Server samplers: wait statistics, performance counters, tempdb allocation latches, index
physical statistics and snapshot transactions.

Each reads DMVs on a pyodbc connection in autocommit mode (`conn.execute(sql, *params)`); the
arithmetic lives in `mssql_logic` and is tested there. Sources (Microsoft Learn): the reference
pages of sys.dm_os_wait_stats, sys.dm_os_performance_counters, sys.dm_os_waiting_tasks,
sys.dm_db_index_physical_stats and sys.dm_tran_active_snapshot_database_transactions.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable

from ..errors import ConfigError, EngineError
from .base import Sampler
from .mssql_logic import (BENIGN_WAITS, OBSERVER_WAITS, counter_key, counter_rates, counter_totals,
                          latch_page_counts, quote_ident, quote_literal, wait_deltas)


def _rows(cur) -> list[dict]:
    """The rows of a pyodbc cursor as dicts keyed by column name."""
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


# -- wait statistics ---------------------------------------------------------------------------------
class WaitStats(Sampler):
    """sys.dm_os_wait_stats read before and after the window; the difference, longest waits first.

    No DBCC SQLPERF CLEAR: the view is cumulative since the server started, and the delta of two
    readings is the window's share. `exclude_benign` (default true) drops the idle and background
    waits of `mssql_logic.BENIGN_WAITS`. That list holds XE_TIMER_EVENT and the SQLTRACE_* sleeps,
    which are exactly what an Extended Events session with an event_file target (or a server-side
    trace) leaves behind: to see them, set `exclude_benign: false`, or keep them by name with
    `keep: [XE_TIMER_EVENT]` (`keep: observer` keeps every wait of `mssql_logic.OBSERVER_WAITS`).
    """

    name = "mssql_waits"
    engine = "mssql"
    kind = "snapshot"
    options = ("exclude_benign", "keep", "top")
    description = "sys.dm_os_wait_stats deltas over the window: top waits by wait time, tasks and signal wait"
    QUERY = ("SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms "
             "FROM sys.dm_os_wait_stats")
    BENIGN = BENIGN_WAITS  # the filter applied with exclude_benign (XE_TIMER_EVENT is in it)

    def __init__(self, spec=None):
        super().__init__(spec)
        self.exclude_benign = bool(self.spec.option("exclude_benign", True))
        keep = self.spec.option("keep") or ()
        if isinstance(keep, str):
            keep = OBSERVER_WAITS if keep.strip().lower() == "observer" else (keep,)
        self.keep = frozenset(str(k).strip().upper() for k in keep)
        self.top = int(self.spec.option("top", 10))

    def read(self, conn):
        return _rows(conn.execute(self.QUERY))

    def summarize(self, before, after, rows, elapsed_s):
        waits = wait_deltas(before, after, top=None, exclude=self.BENIGN if self.exclude_benign else (),
                            keep=self.keep)
        top = waits[: self.top]
        out: dict = {
            "total_wait_ms": sum(w["wait_time_ms"] for w in waits),
            "total_signal_wait_ms": sum(w["signal_wait_time_ms"] for w in waits),
            "wait_types": len(waits),
            "exclude_benign": self.exclude_benign,
            "top": [{k: (round(v, 4) if k == "share" else v) for k, v in w.items()} for w in top],
        }
        for w in top:
            out[f"wait_ms.{w['wait_type']}"] = w["wait_time_ms"]
            out[f"tasks.{w['wait_type']}"] = w["waiting_tasks_count"]
            out[f"signal_ms.{w['wait_type']}"] = w["signal_wait_time_ms"]
        return out


# -- performance counters ----------------------------------------------------------------------------
# (column in the samples, object name after the colon, counter name, instance name or "").
# Columns ending in _per_s are cumulative per-second counters; version_store_kb is a current value.
COUNTERS = (
    ("skipped_ghosted_per_s", "Access Methods", "Skipped Ghosted Records/sec", ""),
    ("lock_requests_per_s", "Locks", "Lock Requests/sec", "_Total"),
    ("batch_requests_per_s", "SQL Statistics", "Batch Requests/sec", ""),
    ("temp_tables_created_per_s", "General Statistics", "Temp Tables Creation Rate", ""),
    ("version_store_kb", "Transactions", "Version Store Size (KB)", ""),
)


class PerfCounters(Sampler):
    """A few sys.dm_os_performance_counters values each second.

    Per-second counters are cumulative: a rate is the difference of two consecutive readings over
    the seconds between them (`mssql_logic.counter_rates`), so the first reading only sets the
    baseline and yields no row. Version Store Size (KB) is an instantaneous value. The object name
    is `SQLServer:Locks` on a default instance and `MSSQL$NAME:Locks` on a named one; counters are
    matched by the part after the colon. The summary has, per rate, `<name>_total` (e.g.
    `skipped_ghosted_total`: the counter's growth from the first reading to the last, i.e. over the
    window less at most one interval at its end), `<column>_mean` (that total over the seconds
    between those readings) and `<column>_max` (the highest one-interval rate). The clock is
    injectable.
    """

    name = "mssql_counters"
    engine = "mssql"
    kind = "periodic"
    options = ("interval",)
    description = ("performance counters per second: skipped ghosted records, lock requests (_Total), "
                   "batch requests, temp tables created; version store size (KB)")
    default_interval = 1.0
    QUERY = ("SELECT RTRIM(object_name) AS object_name, RTRIM(counter_name) AS counter_name, "
             "RTRIM(instance_name) AS instance_name, cntr_value, cntr_type "
             "FROM sys.dm_os_performance_counters "
             "WHERE counter_name IN (" + ", ".join(quote_literal(c[2]) for c in COUNTERS) + ") "
             "AND instance_name IN (N'', N'_Total')")
    KEYS = {counter_key(obj, counter, instance): column for column, obj, counter, instance in COUNTERS}

    def __init__(self, spec=None, *, clock: Callable[[], float] = time.perf_counter):
        super().__init__(spec)
        self.clock = clock
        self._prev: tuple[float, list[dict]] | None = None
        self._first: tuple[float, list[dict]] | None = None

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        self._prev = self._first = None

    def read(self, conn):
        rows = _rows(conn.execute(self.QUERY))
        now = self.clock()
        prev, self._prev = self._prev, (now, rows)
        if self._first is None:
            self._first = (now, rows)
        if prev is None or now <= prev[0]:
            return []
        values = counter_rates(prev[1], rows, now - prev[0])
        row = {column: None for column in self.KEYS.values()}
        for key, value in values.items():
            if key in self.KEYS:
                row[self.KEYS[key]] = round(value, 3) if isinstance(value, float) else value
        return [row]

    def summarize(self, before, after, rows, elapsed_s):
        out: dict = {"samples": len(rows)}
        first, last = self._first, self._prev
        span = last[0] - first[0] if first and last else 0.0
        grown = counter_totals(first[1], last[1]) if span > 0 else {}
        for key, column in self.KEYS.items():
            values = [r[column] for r in rows if r.get(column) is not None]
            if column.endswith("_per_s"):
                total = grown.get(key)
                out[column[: -len("_per_s")] + "_total"] = total
                out[f"{column}_mean"] = round(total / span, 3) if total is not None else None
                out[f"{column}_max"] = max(values) if values else None
            else:
                out[f"{column}_last"] = values[-1] if values else None
                out[f"{column}_max"] = max(values) if values else None
        return out


# -- tempdb allocation-page latches ------------------------------------------------------------------
class TempdbLatches(Sampler):
    """Tasks waiting on PAGELATCH_* for tempdb pages, by wait type and page type (PFS, GAM, SGAM, other).

    sys.dm_os_waiting_tasks shows a page latch's resource as `2:1:1` (database:file:page); the page
    number alone says whether it is an allocation page (`mssql_logic.page_type`). Each sample is one
    row per `WAIT_TYPE:PAGE_TYPE` with the number of waiting tasks, or a single `none` row with 0
    when no task waits (so the number of samples is known). The summary gives, over all samples,
    `pfs_share`, `gam_share`, `sgam_share`, `other_share` (and `<wait type>_share`, lower case) of
    the waiting-task samples, with the counts under `*_tasks`. sys.dm_db_page_info (2019+) could name
    the object of an "other" page, but it reads the page header, i.e. it queues for the very
    latch being measured; it is not used.
    """

    name = "tempdb_latches"
    engine = "mssql"
    kind = "periodic"
    options = ("interval",)
    description = "PAGELATCH waits on tempdb pages from sys.dm_os_waiting_tasks, by wait type and PFS/GAM/SGAM/other"
    default_interval = 0.1
    QUERY = ("SELECT wait_type, resource_description, COUNT(*) AS tasks FROM sys.dm_os_waiting_tasks "
             "WHERE wait_type LIKE N'PAGELATCH[_]%' AND resource_description LIKE N'2:%' "
             "GROUP BY wait_type, resource_description")
    NONE = "none"

    def read(self, conn):
        rows = conn.execute(self.QUERY).fetchall()
        counts = latch_page_counts((r[0], r[1], r[2]) for r in rows)
        if not counts:
            return [{"latch": self.NONE, "tasks": 0}]
        return [{"latch": f"{wait}:{page}", "tasks": n} for (wait, page), n in sorted(counts.items())]

    def summarize(self, before, after, rows, elapsed_s):
        per_sample: Counter = Counter()
        by_page: Counter = Counter()
        by_wait: Counter = Counter()
        for row in rows:
            per_sample[row["t_s"]] += row["tasks"]
            if row["latch"] == self.NONE:
                continue
            wait, _, page = row["latch"].rpartition(":")
            by_page[page] += row["tasks"]
            by_wait[wait] += row["tasks"]
        total = sum(by_page.values())
        samples = len(per_sample)
        out: dict = {"samples": samples, "task_samples": total,
                     "mean_waiting": round(total / samples, 3) if samples else None,
                     "max_waiting": max(per_sample.values()) if per_sample else None}
        pages = ["PFS", "GAM", "SGAM", "other"] + (["unknown"] if "unknown" in by_page else [])
        for page in pages:
            out[f"{page.lower()}_tasks"] = by_page.get(page, 0)
            out[f"{page.lower()}_share"] = round(by_page.get(page, 0) / total, 4) if total else None
        for wait, n in by_wait.most_common():
            out[f"{wait.lower()}_tasks"] = n
            out[f"{wait.lower()}_share"] = round(n / total, 4) if total else None
        return out


# -- index physical statistics -----------------------------------------------------------------------
def _object_name(table: str, database: str | None) -> str:
    parts = [p for p in table.split(".")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ConfigError(f"index_physical_stats: table must be `name` or `schema.name`, got {table!r}")
    quoted = [quote_ident(p) for p in parts]
    if database is None:
        return ".".join(quoted)
    return quote_ident(database) + "." + (quoted[0] + "." + quoted[1] if len(quoted) == 2 else "." + quoted[0])


def aggregate_levels(rows: list[dict]) -> list[dict]:
    """Per (index_id, index_level) over partitions: pages, records and ghosts summed, space used
    weighted by pages. Sorted by index id, leaf (level 0) first."""
    acc: dict[tuple[int, int], dict] = {}
    for r in rows:
        key = (int(r["index_id"]), int(r["index_level"]))
        a = acc.setdefault(key, {"index_id": key[0], "index_name": r.get("index_name"), "index_level": key[1],
                                 "page_count": 0, "record_count": 0, "ghost_record_count": 0,
                                 "version_ghost_record_count": 0, "_space": 0.0})
        pages = int(r.get("page_count") or 0)
        a["page_count"] += pages
        for col in ("record_count", "ghost_record_count", "version_ghost_record_count"):
            a[col] += int(r.get(col) or 0)
        a["_space"] += float(r.get("avg_page_space_used_in_percent") or 0.0) * pages
    out = []
    for key in sorted(acc):
        a = acc[key]
        space = a.pop("_space")
        a["avg_page_space_used_in_percent"] = round(space / a["page_count"], 2) if a["page_count"] else None
        out.append(a)
    return out


def index_summary(levels: list[dict], index: str | None = None) -> dict:
    """Headline figures of one index: the named one, else the clustered index (1), else the heap (0),
    else the lowest index id. Leaf figures come from level 0."""
    if not levels:
        return {}
    ids = sorted({lv["index_id"] for lv in levels})
    chosen = None
    if index is not None:
        chosen = next((lv["index_id"] for lv in levels if (lv.get("index_name") or "").lower() == index.lower()), None)
        if chosen is None:
            raise EngineError(f"index_physical_stats: no index named {index!r} (indexes: "
                              f"{', '.join(sorted({str(lv.get('index_name')) for lv in levels}))})")
    if chosen is None:
        chosen = 1 if 1 in ids else (0 if 0 in ids else ids[0])
    mine = [lv for lv in levels if lv["index_id"] == chosen]
    leaf = next(lv for lv in mine if lv["index_level"] == 0) if any(lv["index_level"] == 0 for lv in mine) else {}
    return {"index_id": chosen, "index_name": mine[0].get("index_name"),
            "levels": max(lv["index_level"] for lv in mine) + 1,
            "leaf_pages": leaf.get("page_count"), "leaf_records": leaf.get("record_count"),
            "leaf_ghosts": leaf.get("ghost_record_count"),
            "leaf_version_ghosts": leaf.get("version_ghost_record_count"),
            "leaf_space_used_pct": leaf.get("avg_page_space_used_in_percent")}


HEADLINE = ("levels", "leaf_pages", "leaf_records", "leaf_ghosts", "leaf_version_ghosts", "leaf_space_used_pct")


class IndexPhysicalStats(Sampler):
    """sys.dm_db_index_physical_stats in DETAILED mode for one table, before and after the window.

    Per index and level (partitions summed, in-row data only): pages, records, ghost records and
    version ghost records (ghosts kept for an open snapshot). The summary's headline is the
    clustered index (or the heap, or the index named by `index`) as read after the window, with
    the reading before it under `before.*`. DETAILED reads every page of the table: keep the table
    small, and mind that the reading itself runs inside the window's edges.
    """

    name = "index_physical_stats"
    engine = "mssql"
    kind = "snapshot"
    options = ("table", "database", "index")
    description = ("sys.dm_db_index_physical_stats (DETAILED) of one table before and after: levels, leaf pages, "
                   "ghost and version ghost records")
    # No NULL parameter: pyodbc declares None as a varchar of length 1, and ISNULL(?, DB_NAME()) takes
    # the type of its first argument, so DB_NAME() would be cut to one character.
    RESOLVE = "SELECT DB_ID() AS database_id, OBJECT_ID(?) AS object_id"
    RESOLVE_IN = "SELECT DB_ID(?) AS database_id, OBJECT_ID(?) AS object_id"  # `database` given
    INDEXES = "SELECT index_id, name FROM sys.indexes WHERE object_id = ?"
    INDEXES_IN = "SELECT index_id, name FROM {database}.sys.indexes WHERE object_id = ?"  # `database` given
    QUERY = ("SELECT index_id, partition_number, index_level, page_count, record_count, ghost_record_count, "
             "version_ghost_record_count, avg_page_space_used_in_percent "
             "FROM sys.dm_db_index_physical_stats(?, ?, NULL, NULL, 'DETAILED') "
             "WHERE alloc_unit_type_desc = N'IN_ROW_DATA'")

    def __init__(self, spec=None):
        super().__init__(spec)
        table = self.spec.option("table")
        if not table or not isinstance(table, str):
            raise ConfigError("index_physical_stats needs the option `table` (e.g. table: dbo.accounts)")
        self.table = table
        self.database = self.spec.option("database")
        self.index = self.spec.option("index")
        self.object_name = _object_name(table, self.database)
        self.database_id: int | None = None
        self.object_id: int | None = None
        self.index_names: dict[int, str | None] = {}

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        if self.database is None:
            database_id, object_id = conn.execute(self.RESOLVE, self.object_name).fetchone()
        else:
            database_id, object_id = conn.execute(self.RESOLVE_IN, self.database, self.object_name).fetchone()
        if database_id is None:
            raise EngineError(f"index_physical_stats: no database named {self.database!r}")
        if object_id is None:
            raise EngineError(f"index_physical_stats: no table {self.table!r}"
                              + (f" in database {self.database!r}" if self.database else ""))
        self.database_id, self.object_id = int(database_id), int(object_id)
        sql = self.INDEXES_IN.format(database=quote_ident(self.database)) if self.database else self.INDEXES
        self.index_names = {int(i): n for i, n in conn.execute(sql, self.object_id).fetchall()}

    def read(self, conn):
        rows = _rows(conn.execute(self.QUERY, self.database_id, self.object_id))
        for r in rows:
            r["index_name"] = self.index_names.get(int(r["index_id"]))
        return aggregate_levels(rows)

    def summarize(self, before, after, rows, elapsed_s):
        head = index_summary(after, self.index)
        out = dict(head)
        chosen = head.get("index_id")
        old = index_summary([lv for lv in before if lv["index_id"] == chosen]) if chosen is not None else {}
        for key in HEADLINE:
            out[f"before.{key}"] = old.get(key)
        if isinstance(out.get("leaf_pages"), int) and isinstance(old.get("leaf_pages"), int):
            out["leaf_pages_growth"] = out["leaf_pages"] - old["leaf_pages"]
        out["indexes"] = {"before": before, "after": after}
        return out


# -- snapshot transactions ---------------------------------------------------------------------------
class SnapshotTransactions(Sampler):
    """Transactions holding or generating row versions (sys.dm_tran_active_snapshot_database_transactions):
    how many, in how many sessions, the oldest's age and the longest version chain walked."""

    name = "snapshot_transactions"
    engine = "mssql"
    kind = "periodic"
    options = ("interval",)
    description = ("active snapshot (row-versioning) transactions: count, sessions, oldest age (s), "
                   "longest version chain traversed")
    default_interval = 0.5
    QUERY = ("SELECT COUNT(*) AS active, COUNT(DISTINCT session_id) AS sessions, "
             "ISNULL(MAX(elapsed_time_seconds), 0) AS max_elapsed_s, "
             "ISNULL(MAX(max_version_chain_traversed), 0) AS max_version_chain "
             "FROM sys.dm_tran_active_snapshot_database_transactions")
    KEYS = ("active", "sessions", "max_elapsed_s", "max_version_chain")

    def read(self, conn):
        row = conn.execute(self.QUERY).fetchone()
        return [{k: int(v or 0) for k, v in zip(self.KEYS, row)}]

    def summarize(self, before, after, rows, elapsed_s):
        if not rows:
            return {"samples": 0}
        n = len(rows)
        return {"samples": n,
                "max_active": max(r["active"] for r in rows),
                "mean_active": round(sum(r["active"] for r in rows) / n, 3),
                "max_sessions": max(r["sessions"] for r in rows),
                "max_elapsed_s": max(r["max_elapsed_s"] for r in rows),
                "max_version_chain": max(r["max_version_chain"] for r in rows)}


MSSQL_SAMPLERS = (WaitStats, PerfCounters, TempdbLatches, IndexPhysicalStats, SnapshotTransactions)
