"""Naming the tempdb pages sessions wait on by their object, away from the sampling thread.

`tempdb_latches` sees PAGELATCH waits on tempdb pages. Allocation pages need no lookup: PFS, GAM and
SGAM sit at fixed page numbers (`mssql_rows.page_type`), so `2:F:N` is classified by arithmetic on
the sampling thread. Any other page is named with sys.dm_db_page_info, which reads the page's header
and so takes that page's latch: under 100 callers holding it exclusively in turn the lookup queues
like they do. Done inline it held up every sampler sharing the thread (the 100 ms cadence slipped
and fewer waiting tasks were sampled). So the pages are handed to a `PageNamer`: a thread and a
connection of its own, each lookup bounded by a query timeout (pyodbc's `Connection.timeout`,
SQLSTATE HYT00 when it passes), all of them by a time budget, at most `max_pages` pages; what is
not named within them says why. The sampling thread only queues pages and never waits.

Sources (Microsoft Learn): sys.dm_db_page_info (2019 and later; 'LIMITED' leaves the description
columns NULL; object_id, index_id, page_type), OBJECT_NAME (object_id, database_id); pyodbc's
Connection.timeout (applies to every cursor made afterwards).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

PAGE_INFO = ("SELECT p.object_id, OBJECT_NAME(p.object_id, p.database_id) AS object_name, p.index_id, "
             "p.page_type FROM sys.dm_db_page_info(2, ?, ?, 'LIMITED') AS p")
LOOKUP_TIMEOUT_S = 1  # per lookup (a whole number of seconds: ODBC's query timeout)
BUDGET_S = 5.0  # for all lookups of one variant run
_DONE = None  # the queue's end marker


def _words(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0][:200] if text else type(exc).__name__)


def describe(conn, file_id: int, page_id: int) -> dict:
    """The object, index and page type of one tempdb page; {} when the function returns no row."""
    row = conn.execute(PAGE_INFO, int(file_id), int(page_id)).fetchone()
    if row is None:
        return {}
    return {"object_id": row[0], "object": row[1] or (f"object_{row[0]}" if row[0] is not None else None),
            "index_id": row[2], "page_type": row[3]}


class PageNamer:
    """Names pages on a thread and connection of its own; `ask` only queues, `finish` waits (bounded)."""

    def __init__(self, connect: Callable[[], object], *, max_pages: int = 32, budget_s: float = BUDGET_S,
                 timeout_s: int = LOOKUP_TIMEOUT_S, clock: Callable[[], float] = time.monotonic):
        self.connect = connect
        self.max_pages = max_pages
        self.budget_s = budget_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.spent_s = 0.0
        self._asked: set[tuple[int, int]] = set()
        self._named: dict[tuple[int, int], dict] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="concurbench-page-namer", daemon=True)
        self._thread.start()

    def ask(self, pages) -> None:
        """Queue the pages not asked for yet (up to max_pages in all); never waits."""
        for page in pages:
            if len(self._asked) >= self.max_pages:
                return
            if page not in self._asked:
                self._asked.add(page)
                self._queue.put(page)

    def finish(self) -> None:
        """No more pages; wait for the lookups under way, at most the rest of the budget and one lookup's timeout."""
        self._queue.put(_DONE)
        self._thread.join(max(0.0, self.budget_s - self.spent_s) + self.timeout_s + 1.0)

    def names(self) -> dict[tuple[int, int], dict]:
        """What each asked page was found to be; a page without an answer says why in `error`."""
        with self._lock:
            named = dict(self._named)
        why = "not named: the lookups' time budget was spent, or the window ended first"
        return {page: named.get(page, {"error": why}) for page in self._asked}

    def _run(self) -> None:
        conn = None
        try:
            while True:
                page = self._queue.get()
                if page is _DONE:
                    return
                if self.spent_s >= self.budget_s:
                    self._note(page, {"error": f"not named: the {self.budget_s:g} s budget for naming pages was spent"})
                    continue
                started = self.clock()
                try:
                    if conn is None:
                        conn = self.connect()
                        conn.timeout = self.timeout_s  # pyodbc: the query timeout of every statement from now on
                    answer = describe(conn, *page)
                except Exception as exc:  # noqa: BLE001 - a page freed meanwhile, a timeout: naming is a nicety
                    answer = {"error": _words(exc)}
                self.spent_s += self.clock() - started
                self._note(page, answer)
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass

    def _note(self, page, answer: dict) -> None:
        with self._lock:
            self._named[page] = answer
