"""SQL Server samplers of sys.dm_os_performance_counters: the counters the articles watched
(`mssql_counters`), lock waits by resource type (`mssql_lock_waits`), the version store
(`mssql_version_store`) and tempdb's allocation counters (`tempdb_allocation`).

Each reads its counters every `interval` (1 s by default). Per-second counters are cumulative, so a
row of samples holds the rate of one interval (`mssql_rows.counter_rates`; the first reading only
sets the baseline) and other counters their value. The summary has, for a cumulative counter
`<name>_per_s`: `<name>_total` (its growth from the first reading to the last), `<name>_per_s_mean`
(that growth over the seconds between them), `<name>_per_s_max` (the highest one-interval rate) and
`<name>_per_s_max_1s` (the highest rate over one-second buckets, as perfmon samples, whatever the
interval); for any other counter `<name>_last`, `<name>_max`, `<name>_mean` and `<name>_change`.

Sources (Microsoft Learn): sys.dm_os_performance_counters; the SQL Server performance objects
Access Methods (Skipped Ghosted Records/sec, Worktables Created/sec, Workfiles Created/sec,
Worktables From Cache Ratio), Locks (Lock Requests/sec, Lock Waits/sec, Lock Wait Time (ms), Lock
Timeouts/sec, Number of Deadlocks/sec; one instance per lock resource type: _Total, Application,
Key, Object, Page, RID, ...), SQL Statistics (Batch Requests/sec, SQL Compilations/sec, SQL
Re-Compilations/sec), General Statistics (Temp Tables Creation Rate, Temp Tables For Destruction)
and Transactions (Version Store Size (KB), Version Generation rate (KB/s), Version Cleanup rate
(KB/s), Version Store unit count / creation / truncation). Object names are `SQLServer:Locks` on a
default instance and `MSSQL$NAME:Locks` on a named one; counters are matched by the part after the
colon.
"""

from __future__ import annotations

import time
from typing import Callable

from ..engines.quoting import tsql_literal
from ..figures import Better, Figure, Kind
from .base import PERIODIC, Sampler
from .mssql_rows import RATE_TYPES, counter_key, counter_rates, counter_row_key, dict_rows, one_second_max

EVERY = "*"  # as the instance of a counter: every instance, the column suffixed by the instance's name


class CounterSampler(Sampler):
    """Reads COUNTERS, (column, object after the colon, counter, instance) tuples, every interval."""

    engine = "mssql"
    kind = PERIODIC
    options = ("interval",)
    default_interval = 1.0
    COUNTERS: tuple[tuple[str, str, str, str], ...] = ()
    BASES: tuple[str, ...] = ()  # base counters a ratio among COUNTERS is divided by
    WINDOW_RATIOS: tuple[str, ...] = ()  # ratios whose value and base count since start: taken over each interval

    def __init__(self, spec=None, *, clock: Callable[[], float] = time.perf_counter):
        super().__init__(spec)
        self.clock = clock
        self._reset()

    def _reset(self) -> None:
        self._previous: tuple[float, list[dict]] | None = None  # the last reading, for the next interval's rates
        self._points: dict[str, tuple[int, list[tuple[float, int]]]] = {}  # column -> (counter type, raw values)

    @classmethod
    def query(cls) -> str:
        counters = sorted({c[2] for c in cls.COUNTERS} | set(cls.BASES))
        instances = sorted({c[3] for c in cls.COUNTERS})
        where = f"WHERE counter_name IN ({', '.join(tsql_literal(c) for c in counters)})"
        if EVERY not in instances:
            where += f" AND instance_name IN ({', '.join(tsql_literal(i) for i in instances)})"
        return ("SELECT RTRIM(object_name) AS object_name, RTRIM(counter_name) AS counter_name, "
                "RTRIM(instance_name) AS instance_name, cntr_value, cntr_type "
                f"FROM sys.dm_os_performance_counters {where}")

    def columns(self, key: str) -> str | None:
        """The column of a counter key (`Locks/Lock Waits/sec/Key`), or None when not asked for."""
        for column, obj, counter, instance in self.COUNTERS:
            if instance == EVERY and key.startswith(f"{obj}/{counter}/"):
                return f"{column}.{key.rsplit('/', 1)[1].lower()}"
            if key == counter_key(obj, counter, instance):
                return column
        return None

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        self._reset()

    def read(self, conn):
        rows = dict_rows(conn.execute(self.query()))
        now = self.clock()
        previous, self._previous = self._previous, (now, rows)
        for r in rows:
            column = self.columns(counter_row_key(r))
            if column is not None:
                self._points.setdefault(column, (int(r["cntr_type"]), []))[1].append((now, r["cntr_value"]))
        if previous is None or now <= previous[0]:
            return []
        values = {}
        for key, value in counter_rates(previous[1], rows, now - previous[0], self.WINDOW_RATIOS).items():
            column = self.columns(key)
            if column is not None:
                values[column] = round(value, 3) if isinstance(value, float) else value
        return self.shape(values)

    def shape(self, values: dict) -> list[dict]:
        """One row of every column asked for (None where the server had no such counter)."""
        row = {column: None for column, *_ in self.COUNTERS if "." not in column}
        row.update(values)
        return [row]

    def summarize(self, before, after, rows, elapsed_s):
        out: dict = {"samples": len({r.get("t_s") for r in rows})}
        values: dict[str, list] = {}
        for row in rows:
            for column, value in row.items():
                if column != "t_s" and isinstance(value, (int, float)):
                    values.setdefault(self._row_column(row, column), []).append(value)
        for column in sorted(set(values) | set(self._points)):
            kind, points = self._points.get(column, (None, []))
            seen = values.get(column, [])
            base, _, instance = column.partition(".")
            suffix = f".{instance}" if instance else ""
            if kind in RATE_TYPES and base.endswith("_per_s"):
                span = points[-1][0] - points[0][0] if len(points) > 1 else 0.0
                total = points[-1][1] - points[0][1] if span > 0 else None
                out[base[: -len("_per_s")] + "_total" + suffix] = total
                out[f"{base}_mean{suffix}"] = round(total / span, 3) if total is not None else None
                out[f"{base}_max{suffix}"] = max(seen) if seen else None
                out[f"{base}_max_1s{suffix}"] = one_second_max(points)
            else:
                out[f"{base}_last{suffix}"] = seen[-1] if seen else None
                out[f"{base}_max{suffix}"] = max(seen) if seen else None
                out[f"{base}_mean{suffix}"] = round(sum(seen) / len(seen), 3) if seen else None
                out[f"{base}_change{suffix}"] = seen[-1] - seen[0] if len(seen) > 1 else None
        return out

    @staticmethod
    def _row_column(row: dict, column: str) -> str:
        return column


class PerfCounters(CounterSampler):
    """The counters the articles watched: skipped ghosted records, lock requests, batch requests, temp
    tables created, SQL compilations and the version store's size."""

    name = "mssql_counters"
    description = ("performance counters per second: skipped ghosted records, lock requests (_Total), batch "
                   "requests, temp tables created, SQL compilations and re-compilations; version store size (KB)")
    figures = (Figure("mssql_counters.version_store_kb_*", "kB", Better.NEUTRAL, Kind.SIZE, "the version store's size"),
               Figure("mssql_counters.*_total*", "", Better.NEUTRAL, Kind.COUNT, "a counter's growth over the window"),
               Figure("mssql_counters.*", "1/s", Better.NEUTRAL, Kind.DIAGNOSTIC, "counter rates: mean and peaks"))
    COUNTERS = (
        ("skipped_ghosted_per_s", "Access Methods", "Skipped Ghosted Records/sec", ""),
        ("lock_requests_per_s", "Locks", "Lock Requests/sec", "_Total"),
        ("batch_requests_per_s", "SQL Statistics", "Batch Requests/sec", ""),
        ("sql_compilations_per_s", "SQL Statistics", "SQL Compilations/sec", ""),
        ("sql_recompilations_per_s", "SQL Statistics", "SQL Re-Compilations/sec", ""),
        ("temp_tables_created_per_s", "General Statistics", "Temp Tables Creation Rate", ""),
        ("version_store_kb", "Transactions", "Version Store Size (KB)", ""),
    )


class LockWaits(CounterSampler):
    """Lock waits by lock resource type (the Locks object's instances: Key, Application, Object, Page,
    RID, ..., and _Total): waits, time waited, requests, timeouts and deadlocks. Rows of samples are one
    per resource type and interval; the summary names them `waits_total.key`,
    `wait_ms_total.application`, `waits_per_s_mean._total`, ... and `wait_ms_per_wait.<type>`."""

    name = "mssql_lock_waits"
    description = ("Lock Waits/sec, Lock Wait Time (ms), Lock Requests/sec, Lock Timeouts/sec and deadlocks per "
                   "lock resource type (Key, Application, Object, Page, ..., _Total)")
    figures = (Figure("mssql_lock_waits.deadlocks_total*", "deadlocks", Better.LOWER, Kind.COUNT, "deadlocks"),
               Figure("mssql_lock_waits.timeouts_total*", "timeouts", Better.LOWER, Kind.COUNT, "lock timeouts"),
               Figure("mssql_lock_waits.deadlocks_*", "1/s", Better.LOWER, Kind.DIAGNOSTIC, "deadlocks per second"),
               Figure("mssql_lock_waits.timeouts_*", "1/s", Better.LOWER, Kind.DIAGNOSTIC, "lock timeouts per second"),
               Figure("mssql_lock_waits.wait_ms_per_wait.*", "ms", Better.LOWER, Kind.DIAGNOSTIC, "mean lock wait"),
               Figure("mssql_lock_waits.*_total*", "", Better.NEUTRAL, Kind.COUNT, "lock waits, requests, time waited"),
               Figure("mssql_lock_waits.*", "1/s", Better.NEUTRAL, Kind.DIAGNOSTIC, "lock counter rates"))
    COUNTERS = (
        ("waits_per_s", "Locks", "Lock Waits/sec", EVERY),
        ("wait_ms_per_s", "Locks", "Lock Wait Time (ms)", EVERY),
        ("requests_per_s", "Locks", "Lock Requests/sec", EVERY),
        ("timeouts_per_s", "Locks", "Lock Timeouts/sec", EVERY),
        ("deadlocks_per_s", "Locks", "Number of Deadlocks/sec", EVERY),
    )

    def shape(self, values: dict) -> list[dict]:
        by_resource: dict[str, dict] = {}
        for column, value in values.items():
            base, _, resource = column.partition(".")
            by_resource.setdefault(resource, {"resource": resource})[base] = value
        return [by_resource[r] for r in sorted(by_resource)]

    @staticmethod
    def _row_column(row: dict, column: str) -> str:
        return column if column == "resource" else f"{column}.{row.get('resource')}"

    def summarize(self, before, after, rows, elapsed_s):
        out = super().summarize(before, after, rows, elapsed_s)
        for key in [k for k in out if k.startswith("waits_total.")]:
            resource = key.split(".", 1)[1]
            waits, waited = out[key], out.get(f"wait_ms_total.{resource}")
            out[f"wait_ms_per_wait.{resource}"] = round(waited / waits, 3) if waits and waited is not None else None
        return out


class VersionStore(CounterSampler):
    """The row version store in tempdb: its size, how fast versions are added and cleaned up, and its
    allocation units (active, created, truncated)."""

    name = "mssql_version_store"
    description = "version store size (KB), generation and cleanup rates (KB/s), units active, created and truncated"
    figures = (Figure("mssql_version_store.size_kb_*", "kB", Better.NEUTRAL, Kind.SIZE, "the version store's size"),
               Figure("mssql_version_store.*", "", Better.NEUTRAL, Kind.DIAGNOSTIC, "version store rates and units"))
    COUNTERS = (
        ("size_kb", "Transactions", "Version Store Size (KB)", ""),
        ("generation_kb_per_s", "Transactions", "Version Generation rate (KB/s)", ""),
        ("cleanup_kb_per_s", "Transactions", "Version Cleanup rate (KB/s)", ""),
        ("units", "Transactions", "Version Store unit count", ""),
        ("units_created", "Transactions", "Version Store unit creation", ""),
        ("units_truncated", "Transactions", "Version Store unit truncation", ""),
    )


class TempdbAllocation(CounterSampler):
    """tempdb's allocation counters: temp tables created and waiting to be destroyed, worktables and
    workfiles created, and the share of worktables served from the cache in each interval (its
    counters count since the server started, so the share is of their growth)."""

    name = "tempdb_allocation"
    description = ("Temp Tables Creation Rate, Temp Tables For Destruction, Worktables Created/sec, Workfiles "
                   "Created/sec, Worktables From Cache Ratio")
    figures = (Figure("tempdb_allocation.*_total*", "", Better.NEUTRAL, Kind.COUNT, "objects created in the window"),
               Figure("tempdb_allocation.*", "", Better.NEUTRAL, Kind.DIAGNOSTIC, "tempdb allocation rates and ratios"))
    COUNTERS = (
        ("temp_tables_created_per_s", "General Statistics", "Temp Tables Creation Rate", ""),
        ("temp_tables_for_destruction", "General Statistics", "Temp Tables For Destruction", ""),
        ("worktables_created_per_s", "Access Methods", "Worktables Created/sec", ""),
        ("workfiles_created_per_s", "Access Methods", "Workfiles Created/sec", ""),
        ("worktables_from_cache_pct", "Access Methods", "Worktables From Cache Ratio", ""),
    )
    BASES = ("Worktables From Cache Base",)
    WINDOW_RATIOS = ("Worktables From Cache Ratio",)
