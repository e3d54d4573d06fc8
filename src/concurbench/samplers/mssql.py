"""SQL Server samplers: index physical statistics and snapshot transactions here; wait statistics
(`mssql_waits`), performance counters (`mssql_counters`), tempdb page latches (`mssql_latches`) and
running requests with their blocking chains (`mssql_requests`) in modules of their own; all of them
in MSSQL_SAMPLERS.

Each reads DMVs on a pyodbc connection in autocommit mode (`conn.execute(sql, *params)`); the
arithmetic lives in `mssql_rows` and is tested there. Sources (Microsoft Learn): the reference
pages of sys.dm_db_index_physical_stats and sys.dm_tran_active_snapshot_database_transactions.
"""

from __future__ import annotations

from ..engines.quoting import tsql_name
from ..errors import ConfigError, EngineError
from ..figures import Better, Figure, Kind
from .base import PERIODIC, SNAPSHOT, Sampler
from .mssql_counters import LockWaits, PerfCounters, TempdbAllocation, VersionStore
from .mssql_latches import TempdbLatches
from .mssql_rows import dict_rows
from .mssql_requests import Requests
from .mssql_waits import WaitStats


# -- index physical statistics -----------------------------------------------------------------------
def _object_name(table: str, database: str | None) -> str:
    parts = [p for p in table.split(".")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ConfigError(f"index_physical_stats: table must be `name` or `schema.name`, got {table!r}")
    quoted = [tsql_name(p) for p in parts]
    if database is None:
        return ".".join(quoted)
    return tsql_name(database) + "." + (quoted[0] + "." + quoted[1] if len(quoted) == 2 else "." + quoted[0])


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
    kind = SNAPSHOT
    options = ("table", "database", "index")
    description = ("sys.dm_db_index_physical_stats (DETAILED) of one table before and after: levels, leaf pages, "
                   "ghost and version ghost records")
    figures = (Figure("index_physical_stats.*space_used_pct", "%", Better.NEUTRAL, Kind.DIAGNOSTIC,
                      "how full the leaf pages are"),
               Figure("index_physical_stats.*", "", Better.NEUTRAL, Kind.SIZE, "levels, pages and records of the index"))
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
        sql = self.INDEXES_IN.format(database=tsql_name(self.database)) if self.database else self.INDEXES
        self.index_names = {int(i): n for i, n in conn.execute(sql, self.object_id).fetchall()}

    def read(self, conn):
        rows = dict_rows(conn.execute(self.QUERY, self.database_id, self.object_id))
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
    how many, in how many sessions, the oldest's age and the longest version chain walked.

    The view lists the whole instance's transactions and has no database column, so it is joined to
    sys.dm_exec_sessions, whose database_id is each session's current database: only the sessions in
    the sampler's own database (the run's) count, and not the sampler's own statement."""

    name = "snapshot_transactions"
    engine = "mssql"
    kind = PERIODIC
    options = ("interval",)
    description = ("active snapshot (row-versioning) transactions: count, sessions, oldest age (s), "
                   "longest version chain traversed")
    figures = (Figure("snapshot_transactions.*", "", Better.NEUTRAL, Kind.DIAGNOSTIC,
                      "snapshot transactions: how many, their age, the longest version chain"),)
    default_interval = 0.5
    QUERY = ("SELECT COUNT(*) AS active, COUNT(DISTINCT t.session_id) AS sessions, "
             "ISNULL(MAX(t.elapsed_time_seconds), 0) AS max_elapsed_s, "
             "ISNULL(MAX(t.max_version_chain_traversed), 0) AS max_version_chain "
             "FROM sys.dm_tran_active_snapshot_database_transactions AS t "
             "JOIN sys.dm_exec_sessions AS s ON s.session_id = t.session_id "
             "WHERE s.database_id = DB_ID() AND t.session_id <> @@SPID")
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


MSSQL_SAMPLERS = (WaitStats, PerfCounters, TempdbLatches, IndexPhysicalStats, SnapshotTransactions, Requests, LockWaits,
                  VersionStore, TempdbAllocation)
