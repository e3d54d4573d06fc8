"""The `tempdb_latches` sampler: which tempdb pages the sessions queue on (PFS, GAM, SGAM, or the
object a page belongs to), and how much page-latch waiting the server did in the window.

Two views, because each misses what the other sees:
- sys.dm_os_waiting_tasks every `interval` (100 ms): the tasks waiting on PAGELATCH_* for a tempdb
  page, whose resource `2:1:1` (database:file:page) says by its page number whether it is an
  allocation page (`mssql_rows.page_type`). Polling misses waits shorter than the interval, so the
  shares are given only when at least `min_task_samples` (20) waiting tasks were seen; below that
  they are None (and a claim on them fails as "no value" instead of holding over nothing).
  `gam_floor_share` is the GAM tasks over the samples seen or `min_task_samples`, whichever is more:
  it has a value in every window, so a claim that the GAM is (almost) never waited for holds when
  there are almost no waiting tasks at all, which is what SQL Server 2022's latch-free GAM updates
  should give.
- sys.dm_os_wait_stats, read with every poll and compared first to last: the PAGELATCH_* waits of
  the whole server by wait type (`waits.PAGELATCH_UP`, `wait_ms.PAGELATCH_UP`, `pagelatch_wait_ms`),
  sub-millisecond ones included; the view does not say which database or page.

A page that is not an allocation page is named, the first time it is seen (at most 32 pages), with
sys.dm_db_page_info (SQL Server 2019 and later; `resolve_pages: false` turns it off): its object
(for the article's 2019 arm, tempdb's system table sysallocunits), index and page type. The
function reads the page header, so it queues for that page's latch like the sessions it watches:
the lookups run on a thread and connection of their own, within a time budget (`mssql_pages`), and
the sampling thread, which the other samplers share, never waits for them. `pages_named` and
`pages_not_named` count how that went.

Sources (Microsoft Learn): sys.dm_os_waiting_tasks (resource_description), sys.dm_os_wait_stats.
"""

from __future__ import annotations

from collections import Counter

from ..figures import Better, Figure, Kind
from .base import PERIODIC, Sampler
from .mssql_rows import TEMPDB_ID, dict_rows, latch_page_counts, other_page_counts, wait_deltas
from .mssql_pages import PageNamer

SQL_SERVER_2019 = 15_000_000


class TempdbLatches(Sampler):
    """Tasks waiting on PAGELATCH_* for tempdb pages by wait type and page type, page-latch wait
    statistics of the window, and the objects of the other pages waited on.

    Each sample is one row per `WAIT_TYPE:PAGE_TYPE` with the number of waiting tasks, or a single
    `none` row with 0 when no task waits (so the number of samples is known). The summary gives
    `pfs_share`, `gam_share`, `sgam_share`, `other_share` (and `<wait type>_share`, lower case) of the
    waiting-task samples, with the counts under `*_tasks`; `object.<name>_tasks` per named object and
    `other_pages`, the pages named, most waited on first.
    """

    name = "tempdb_latches"
    engine = "mssql"
    kind = PERIODIC
    options = ("interval", "min_task_samples", "resolve_pages")
    description = ("PAGELATCH waits on tempdb pages from sys.dm_os_waiting_tasks by PFS/GAM/SGAM/object, and "
                   "PAGELATCH_* wait statistics of the window")
    figures = (Figure("tempdb_latches.*_share", "share", Better.NEUTRAL, Kind.SHARE, "share of waiting-task samples"),
               Figure("tempdb_latches.pagelatch_wait_ms", "ms", Better.LOWER, Kind.DIAGNOSTIC, "PAGELATCH wait time"),
               Figure("tempdb_latches.wait_ms.*", "ms", Better.LOWER, Kind.DIAGNOSTIC, "wait time by PAGELATCH type"),
               Figure("tempdb_latches.*_waiting", "tasks", Better.NEUTRAL, Kind.DIAGNOSTIC, "tasks waiting per sample"),
               Figure("tempdb_latches.*", "", Better.NEUTRAL, Kind.COUNT, "samples and waiting tasks"))
    default_interval = 0.1
    QUERY = ("SELECT wait_type, resource_description, COUNT(*) AS tasks FROM sys.dm_os_waiting_tasks "
             "WHERE wait_type LIKE N'PAGELATCH[_]%' AND resource_description LIKE N'2:%' "
             "GROUP BY wait_type, resource_description")
    WAIT_STATS = ("SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms "
                  "FROM sys.dm_os_wait_stats WHERE wait_type LIKE N'PAGELATCH[_]%'")
    NONE = "none"
    MAX_PAGES = 32

    def __init__(self, spec=None):
        super().__init__(spec)
        self.min_task_samples = int(self.spec.option("min_task_samples", 20))
        self.resolve_pages = bool(self.spec.option("resolve_pages", True))
        self.version_num = 0  # until prepare() says which server it is
        self.namer: PageNamer | None = None  # names the other pages, once the driver attached it
        self._reset()

    def _reset(self) -> None:
        self._stats_first: list[dict] | None = None
        self._stats_last: list[dict] | None = None
        self.pages: Counter = Counter()  # (file, page) -> waiting tasks seen

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        self._reset()

    def attach(self, connect):
        if self.resolve_pages and self.version_num >= SQL_SERVER_2019 and self.namer is None:
            self.namer = PageNamer(connect, max_pages=self.MAX_PAGES)

    def detach(self):
        if self.namer is not None:
            self.namer.finish()

    def read(self, conn):
        found = [(r[0], r[1], r[2]) for r in conn.execute(self.QUERY).fetchall()]
        counts = latch_page_counts(found)
        self.pages.update(other_page_counts(found))
        if self.namer is not None:
            self.namer.ask(self.pages)  # queued for the namer's thread; nothing here waits on a page
        self._stats_last = dict_rows(conn.execute(self.WAIT_STATS))
        if self._stats_first is None:
            self._stats_first = self._stats_last
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
        enough = total >= self.min_task_samples and total > 0
        out: dict = {"samples": samples, "task_samples": total, "min_task_samples": self.min_task_samples,
                     "mean_waiting": round(total / samples, 3) if samples else None,
                     "max_waiting": max(per_sample.values()) if per_sample else None}
        pages = ["PFS", "GAM", "SGAM", "other"] + (["unknown"] if "unknown" in by_page else [])
        for page in pages:
            out[f"{page.lower()}_tasks"] = by_page.get(page, 0)
            out[f"{page.lower()}_share"] = round(by_page.get(page, 0) / total, 4) if enough else None
        out["gam_floor_share"] = round(by_page.get("GAM", 0) / max(total, self.min_task_samples, 1), 4)
        for wait, n in by_wait.most_common():
            out[f"{wait.lower()}_tasks"] = n
            out[f"{wait.lower()}_share"] = round(n / total, 4) if enough else None
        out.update(self._wait_statistics())
        out.update(self._objects())
        return out

    def _wait_statistics(self) -> dict:
        if self._stats_first is None or self._stats_last is None:
            return {}
        waits = wait_deltas(self._stats_first, self._stats_last, top=None, exclude=())
        out: dict = {"pagelatch_wait_ms": sum(w["wait_time_ms"] for w in waits),
                     "pagelatch_waits": sum(w["waiting_tasks_count"] for w in waits)}
        for w in waits:
            out[f"wait_ms.{w['wait_type']}"] = w["wait_time_ms"]
            out[f"waits.{w['wait_type']}"] = w["waiting_tasks_count"]
        return out

    def _objects(self) -> dict:
        named = []
        by_object: Counter = Counter()
        page_info = self.namer.names() if self.namer is not None else {}
        for (file_id, page_id), tasks in self.pages.most_common():
            info = page_info.get((file_id, page_id), {})
            named.append({"page": f"{TEMPDB_ID}:{file_id}:{page_id}", "tasks": tasks, **info})
            if info.get("object"):
                by_object[info["object"]] += tasks
        out: dict = {"other_pages": named[:10]}
        if self.namer is not None:
            out["pages_named"] = sum(1 for info in page_info.values() if "error" not in info)
            out["pages_not_named"] = sum(1 for info in page_info.values() if "error" in info)
        for obj, tasks in by_object.most_common():
            out[f"object.{obj}_tasks"] = tasks
        return out
