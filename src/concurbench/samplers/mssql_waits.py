"""The `mssql_waits` sampler: wait statistics over the measurement window, server-wide and for the
load sessions alone.

Server-wide, sys.dm_os_wait_stats is cumulative since the server started (no DBCC SQLPERF CLEAR):
the difference between the first and the last reading is the window's share. It holds every task
of the server, so waits that grow with wall time whatever runs (XE_TIMER_EVENT, XE_DISPATCHER_WAIT,
the SQLTRACE_* sleeps) appear in every arm, the baseline included; the report compares each arm's
waits per second with the baseline arm's (report/waits.py).

Per session, sys.dm_exec_session_wait_stats (2016+) holds the waits of each session since it
connected, and loses them when the session closes. The pools' sessions (application name
`concurbench:<pool>`; the harness's own `admin`, `sampler`, `check`, `observer:*` and `background:*`
sessions are left out) are read every interval and the last reading of each session is kept, so
the sessions that close when the window ends still count. A session's waits are its last reading
less its first reading in the window (zero for a session that connected later): the warm-up's
waits are left out, as they are server-wide.

Sources (Microsoft Learn): sys.dm_os_wait_stats; sys.dm_exec_session_wait_stats (reset when the
session opens or is reset); sys.dm_exec_sessions (program_name, login_time).
"""

from __future__ import annotations

import time
from typing import Callable

from ..figures import Better, Figure, Kind
from .base import PERIODIC, NoReading, Sampler
from .mssql_rows import BENIGN_WAITS, OBSERVER_WAITS, dict_rows, is_observer_wait, pool_of, wait_deltas

_COLUMNS = ("waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")


class SessionWaits:
    """The waits of the load sessions over the window, from successive readings of
    sys.dm_exec_session_wait_stats joined to sys.dm_exec_sessions (rows with session_id, login_time,
    program_name, wait_type and the three counters)."""

    def __init__(self):
        self.readings = 0
        self.first: dict[tuple, dict[str, dict]] = {}  # (session, login time) -> wait -> counters at first sight
        self.last: dict[tuple, dict[str, dict]] = {}
        self.pool: dict[tuple, str] = {}

    def add(self, rows: list[dict]) -> None:
        first_reading = self.readings == 0
        self.readings += 1
        for row in rows:
            pool = pool_of(row.get("program_name"))
            if pool is None:
                continue
            key = (row["session_id"], str(row.get("login_time")))
            wait = str(row["wait_type"]).strip().upper()
            counters = {c: int(row.get(c) or 0) for c in _COLUMNS}
            self.pool[key] = pool
            self.last.setdefault(key, {})[wait] = counters
            if first_reading:
                self.first.setdefault(key, {})[wait] = counters

    def by_pool(self) -> dict[str, list[dict]]:
        """Per pool, the window's waits of its sessions as `wait_type` rows, as sys.dm_os_wait_stats has them."""
        totals: dict[str, dict[str, dict]] = {}
        for key, waits in self.last.items():
            mine = totals.setdefault(self.pool[key], {})
            for wait, counters in waits.items():
                start = self.first.get(key, {}).get(wait, {})
                acc = mine.setdefault(wait, dict.fromkeys(_COLUMNS, 0))
                for c in _COLUMNS:
                    acc[c] += counters[c] - start.get(c, 0)
        return {pool: [{"wait_type": w, **c} for w, c in waits.items()] for pool, waits in totals.items()}

    def sessions(self) -> int:
        return len(self.last)


class WaitStats(Sampler):
    """Wait statistics of the window: server-wide (sys.dm_os_wait_stats) and of the load sessions
    (sys.dm_exec_session_wait_stats), longest waits first.

    `exclude_benign` (default true) drops the idle and background waits of `mssql_rows.BENIGN_WAITS`,
    which hold XE_TIMER_EVENT and the SQLTRACE_* sleeps that an Extended Events session with an
    event_file target (or a server-side trace) leaves behind: to see them, set `exclude_benign:
    false`, or keep them by name (`keep: [XE_TIMER_EVENT]`; `keep: observer` keeps every wait of
    `mssql_rows.OBSERVER_WAITS`). `top` (10) waits get metrics of their own: `wait_ms.<WAIT>`,
    `tasks.<WAIT>`, `signal_ms.<WAIT>` server-wide, `sessions.wait_ms.<WAIT>` for all load sessions
    and `pool.<pool>.wait_ms.<WAIT>` per pool. `waits` (every wait type's milliseconds) and
    `window_s` (the seconds between the first and the last reading) let the report compare arms.
    `sessions.observer_share` is the share of the load sessions' wait time in wait types an observer
    leaves (mssql_rows.is_observer_wait: XE_*, PREEMPTIVE_XE_*, SQLTRACE_*, TRACEWRITE), counted whether
    or not `exclude_benign` drops them from the tables; 0 when the sessions did not wait at all (the
    observer-overhead article's point: an observer that costs throughput need not show in the waits).
    `observer_share` is the same over the server's waits (benign waits left out, as above).
    """

    name = "mssql_waits"
    engine = "mssql"
    kind = PERIODIC
    options = ("exclude_benign", "keep", "top", "interval")
    description = ("wait statistics over the window, server-wide (sys.dm_os_wait_stats) and of the load sessions "
                   "(sys.dm_exec_session_wait_stats): top waits by wait time, tasks and signal wait")
    figures = (Figure("mssql_waits.window_s", "s", Better.NEUTRAL, Kind.DIAGNOSTIC, "seconds between the readings"),
               Figure("mssql_waits.*tasks*", "tasks", Better.NEUTRAL, Kind.COUNT, "tasks that waited"),
               Figure("mssql_waits.wait_types", "types", Better.NEUTRAL, Kind.COUNT, "wait types seen"),
               Figure("mssql_waits.sessions.count", "sessions", Better.NEUTRAL, Kind.COUNT, "load sessions read"),
               Figure("mssql_waits.*observer_share", "share", Better.LOWER, Kind.SHARE,
                      "share of the wait time in wait types an observer leaves (XE_*, SQLTRACE_*, TRACEWRITE)"),
               Figure("mssql_waits.*", "ms", Better.LOWER, Kind.DIAGNOSTIC, "time waited (total, by wait type)"))
    default_interval = 1.0
    QUERY = ("SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms "
             "FROM sys.dm_os_wait_stats")
    SESSIONS = ("SELECT w.session_id, CONVERT(nvarchar(30), s.login_time, 126) AS login_time, s.program_name, "
                "w.wait_type, w.waiting_tasks_count, w.wait_time_ms, w.signal_wait_time_ms "
                "FROM sys.dm_exec_session_wait_stats AS w "
                "JOIN sys.dm_exec_sessions AS s ON s.session_id = w.session_id "
                "WHERE s.program_name LIKE N'concurbench:%'")
    BENIGN = BENIGN_WAITS  # the filter applied with exclude_benign (XE_TIMER_EVENT is in it)

    def __init__(self, spec=None, *, clock: Callable[[], float] = time.perf_counter):
        super().__init__(spec)
        self.clock = clock
        self.exclude_benign = bool(self.spec.option("exclude_benign", True))
        keep = self.spec.option("keep") or ()
        if isinstance(keep, str):
            keep = OBSERVER_WAITS if keep.strip().lower() == "observer" else (keep,)
        self.keep = frozenset(str(k).strip().upper() for k in keep)
        self.top = int(self.spec.option("top", 10))
        self._first: tuple[float, list[dict]] | None = None
        self._last: tuple[float, list[dict]] | None = None
        self._sessions = SessionWaits()

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        self._first = self._last = None
        self._sessions = SessionWaits()

    def read(self, conn):
        server = dict_rows(conn.execute(self.QUERY))
        now = self.clock()
        self._last = (now, server)
        if self._first is None:
            self._first = self._last
        self._sessions.add(dict_rows(conn.execute(self.SESSIONS)))
        return []

    def _exclude(self):
        return self.BENIGN if self.exclude_benign else ()

    def _exclude_but_observers(self):
        """The benign waits left out of a share, less those an observer leaves (which the share counts)."""
        return [w for w in self._exclude() if not is_observer_wait(w) and w not in self.keep]

    def summarize(self, before, after, rows, elapsed_s):
        if self._first is None or self._last is None:
            raise NoReading("no reading")
        waits = wait_deltas(self._first[1], self._last[1], top=None, exclude=self._exclude(), keep=self.keep)
        out: dict = {
            "window_s": round(self._last[0] - self._first[0], 3),
            "total_wait_ms": sum(w["wait_time_ms"] for w in waits),
            "total_signal_wait_ms": sum(w["signal_wait_time_ms"] for w in waits),
            "wait_types": len(waits),
            "exclude_benign": self.exclude_benign,
            "top": [_rounded(w) for w in waits[: self.top]],
            "waits": {w["wait_type"]: w["wait_time_ms"] for w in waits},
        }
        for w in waits[: self.top]:
            out[f"wait_ms.{w['wait_type']}"] = w["wait_time_ms"]
            out[f"tasks.{w['wait_type']}"] = w["waiting_tasks_count"]
            out[f"signal_ms.{w['wait_type']}"] = w["signal_wait_time_ms"]
        out["observer_share"] = observer_share(wait_deltas(self._first[1], self._last[1], top=None,
                                                           exclude=self._exclude_but_observers()))
        out.update(self._session_summary())
        return out

    def _session_summary(self) -> dict:
        pools = {pool: wait_deltas([], rows, top=None, exclude=self._exclude(), keep=self.keep)
                 for pool, rows in sorted(self._sessions.by_pool().items())}
        merged = _merge([w for rows in pools.values() for w in rows])
        out: dict = {"sessions.count": self._sessions.sessions(),
                     "sessions.total_wait_ms": sum(w["wait_time_ms"] for w in merged),
                     "sessions.top": [_rounded(w) for w in merged[: self.top]],
                     "sessions.waits": {w["wait_type"]: w["wait_time_ms"] for w in merged}}
        for w in merged[: self.top]:
            out[f"sessions.wait_ms.{w['wait_type']}"] = w["wait_time_ms"]
            out[f"sessions.tasks.{w['wait_type']}"] = w["waiting_tasks_count"]
        for pool, rows in pools.items():
            for w in rows[: self.top]:
                out[f"pool.{pool}.wait_ms.{w['wait_type']}"] = w["wait_time_ms"]
        out["sessions.observer_share"] = observer_share(
            [w for rows in self._sessions.by_pool().values()
             for w in wait_deltas([], rows, top=None, exclude=self._exclude_but_observers())])
        return out


def observer_share(rows: list[dict]) -> float:
    """The share of these waits' time in wait types an observer leaves; 0 when nothing was waited for."""
    total = sum(r["wait_time_ms"] for r in rows)
    mine = sum(r["wait_time_ms"] for r in rows if is_observer_wait(r["wait_type"]))
    return round(mine / total, 4) if total > 0 else 0.0


def _merge(rows: list[dict]) -> list[dict]:
    """Rows of the same wait type (from several pools) added up, longest first, with their shares."""
    acc: dict[str, dict] = {}
    for r in rows:
        a = acc.setdefault(r["wait_type"], {"wait_type": r["wait_type"], **dict.fromkeys(_COLUMNS, 0),
                                            "resource_wait_time_ms": 0})
        for c in (*_COLUMNS, "resource_wait_time_ms"):
            a[c] += r.get(c, 0)
    total = sum(a["wait_time_ms"] for a in acc.values())
    for a in acc.values():
        a["share"] = a["wait_time_ms"] / total if total > 0 else 0.0
    return sorted(acc.values(), key=lambda a: (-a["wait_time_ms"], -a["waiting_tasks_count"], a["wait_type"]))


def _rounded(w: dict) -> dict:
    return {k: (round(v, 4) if k == "share" else v) for k, v in w.items()}
