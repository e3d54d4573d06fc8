"""The `mssql_requests` sampler: what the running requests wait on, by wait type and resource type,
and who blocks whom (blocking chains and their head blockers), every `interval` (200 ms).

Each reading is sys.dm_exec_requests of the user sessions (the sampler's own left out), with the
sessions that block one of them although they run nothing (an idle session holding its
transaction's locks has no request). A request's `wait_resource` names the resource type first
(`KEY: 5:72057594044284928 (3300a4f361aa)`, `APPLICATION: 5:0:[accounts:42]:(...)`, `OBJECT: ...`,
`PAGE: 5:1:104`, `RID: ...`; a page latch's resource is `2:1:1`), so a lock wait on a row of an
index reads `LCK_M_U:KEY` and one on an application lock `LCK_M_X:APPLICATION`.

`blocking_session_id` is 0 or NULL for a request that is not blocked, and negative when the owner is
not a session (-2 an orphaned distributed transaction, -3 a deferred recovery transaction, -4 and
-5 a latch owner that cannot be or is not tracked): those count as blocked, with no head. A head
blocker blocks others and is not blocked itself; a chain's depth is the number of sessions from a
waiting request to its head.

Each sample is one row per `WAIT_TYPE:RESOURCE_TYPE` (`running` for requests not waiting) with the
number of requests, or a single `none` row. The summary: `requests.<key>` and `share.<key>` over
all samples, `lock_resource.<TYPE>` (lock waits, LCK_M_*, by resource type), `blocked_max`,
`blocked_mean`, `chain_depth_max`, `head_samples.<pool>` (samples in which a session of the pool
was a head blocker; `idle` in the name when it ran nothing) and `head_blockers`, the heads seen most.

Sources (Microsoft Learn): sys.dm_exec_requests (blocking_session_id, wait_type, wait_time,
wait_resource, command), sys.dm_exec_sessions (is_user_process, program_name), "Understand and
resolve SQL Server blocking problems" (wait resource formats, head blockers).
"""

from __future__ import annotations

import re
from collections import Counter

from ..figures import Better, Figure, Kind
from .base import PERIODIC, Sampler
from .mssql_rows import dict_rows, pool_of

_PAGE = re.compile(r"^\s*\d+:\d+:\d+")
_KIND = re.compile(r"^\s*([A-Za-z_]+)\s*:")


def resource_kind(wait_resource: str | None) -> str:
    """`KEY`, `APPLICATION`, `OBJECT`, `PAGE`, `RID`, ... from a wait resource; "" when there is none."""
    text = (wait_resource or "").strip()
    if not text:
        return ""
    if _PAGE.match(text):
        return "PAGE"
    m = _KIND.match(text)
    return m.group(1).upper() if m else "OTHER"


def wait_key(row: dict) -> str:
    wait = (row.get("wait_type") or "").strip().upper()
    if not wait:
        return "running"
    kind = resource_kind(row.get("wait_resource"))
    return f"{wait}:{kind}" if kind else wait


def blocking(rows: list[dict]) -> dict:
    """Blocking in one reading: how many requests are blocked, the head blockers (session id -> its row,
    None when it has no request) and the deepest chain. Rows: session_id, blocking_session_id (0/None
    when not blocked), and anything else the reading has."""
    by_session = {int(r["session_id"]): r for r in rows}
    blocker = {s: int(r.get("blocking_session_id") or 0) for s, r in by_session.items()}
    blocked = [s for s, b in blocker.items() if b != 0]
    heads = {b for b in blocker.values() if b > 0 and blocker.get(b, 0) == 0}

    def depth(session: int) -> int:
        seen, n = set(), 0
        while blocker.get(session, 0) > 0 and session not in seen:
            seen.add(session)
            session, n = blocker[session], n + 1
        return n

    return {"blocked": len(blocked), "heads": {h: by_session.get(h) for h in sorted(heads)},
            "depth": max((depth(s) for s in blocked), default=0)}


class Requests(Sampler):
    """Running requests by wait type and resource type, blocking chains and head blockers."""

    name = "mssql_requests"
    engine = "mssql"
    kind = PERIODIC
    options = ("interval",)
    description = ("sys.dm_exec_requests: requests by wait type and resource type (KEY, APPLICATION, PAGE, ...), "
                   "blocking chains and their head blockers")
    figures = (Figure("mssql_requests.share.*", "share", Better.NEUTRAL, Kind.SHARE, "share of waiting requests"),
               Figure("mssql_requests.blocked_*", "requests", Better.NEUTRAL, Kind.DIAGNOSTIC, "blocked requests"),
               Figure("mssql_requests.chain_depth_max", "sessions", Better.NEUTRAL, Kind.DIAGNOSTIC,
                      "the deepest blocking chain"),
               Figure("mssql_requests.*", "", Better.NEUTRAL, Kind.COUNT, "request samples by wait and resource"))
    default_interval = 0.2
    QUERY = ("SELECT s.session_id, s.program_name, r.blocking_session_id, r.wait_type, r.wait_time, "
             "r.wait_resource, r.command "
             "FROM sys.dm_exec_sessions AS s LEFT JOIN sys.dm_exec_requests AS r ON r.session_id = s.session_id "
             "WHERE s.is_user_process = 1 AND s.session_id <> @@SPID AND (r.session_id IS NOT NULL "
             "OR EXISTS (SELECT 1 FROM sys.dm_exec_requests AS w WHERE w.blocking_session_id = s.session_id))")
    NONE = "none"

    def __init__(self, spec=None):
        super().__init__(spec)
        self._reset()

    def _reset(self) -> None:
        self.readings = 0
        self.blocked: list[int] = []
        self.depth_max = 0
        self.head_sessions: Counter = Counter()  # (session, label) -> samples as head
        self.head_pools: Counter = Counter()

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        self._reset()

    def read(self, conn):
        rows = dict_rows(conn.execute(self.QUERY))
        self.observe(rows)
        counts = Counter(wait_key(r) for r in rows if r.get("command") is not None)
        if not counts:
            return [{"wait": self.NONE, "requests": 0}]
        return [{"wait": key, "requests": n} for key, n in sorted(counts.items())]

    def observe(self, rows: list[dict]) -> None:
        """Keep what one reading says about blocking (the rows themselves are not kept)."""
        self.readings += 1
        found = blocking(rows)
        self.blocked.append(found["blocked"])
        self.depth_max = max(self.depth_max, found["depth"])
        for session, row in found["heads"].items():
            program = (row or {}).get("program_name")
            idle = row is None or row.get("command") is None
            label = (pool_of(program) or (program or "unknown").strip() or "unknown") + (" idle" if idle else "")
            self.head_sessions[(session, label)] += 1
            self.head_pools[label] += 1

    def summarize(self, before, after, rows, elapsed_s):
        requests: Counter = Counter()
        for row in rows:
            if row["wait"] != self.NONE:
                requests[row["wait"]] += row["requests"]
        waiting = sum(n for key, n in requests.items() if key != "running")
        out: dict = {"samples": len({r["t_s"] for r in rows}), "request_samples": sum(requests.values())}
        locks: Counter = Counter()
        for key, n in requests.most_common():
            out[f"requests.{key}"] = n
            out[f"share.{key}"] = round(n / waiting, 4) if waiting and key != "running" else None
            wait, _, kind = key.partition(":")
            if wait.startswith("LCK_M_"):
                locks[kind or "unknown"] += n
        for kind, n in locks.most_common():
            out[f"lock_resource.{kind}"] = n
        out["blocked_max"] = max(self.blocked) if self.blocked else None
        out["blocked_mean"] = round(sum(self.blocked) / len(self.blocked), 3) if self.blocked else None
        out["chain_depth_max"] = self.depth_max
        for label, n in self.head_pools.most_common():
            out[f"head_samples.{label.replace(' ', '_')}"] = n
        out["head_blockers"] = [{"session_id": s, "who": label, "samples": n}
                                for (s, label), n in self.head_sessions.most_common(5)]
        return out
