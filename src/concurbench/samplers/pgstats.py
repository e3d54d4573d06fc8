"""When PostgreSQL's cumulative statistics views (pg_stat_*) cover a moment.

A backend counts what it does in its own memory and hands the counts on later. From PostgreSQL 15
it adds them to shared memory at the end of a transaction at most once a second, 10 s after it went
idle, and when it exits. Before 15 it sends them over a socket to the statistics collector process
at the end of a transaction at most every 0.5 s, never while idle, and when it exits; the collector
writes them to a file, and a reader accepts a file up to 0.5 s old and keeps it for its
transaction. So a reading taken right after a window can miss the window's last work (on 14, all
of the work of a session that ran for less than half a second), and one taken right before can
miss what was sent just before it.

`settle` waits, never longer than its timeouts, until a reading covers:
- at the opening: everything sent before the call (before 15: a statistics file written after it);
- at the closing: all the work of the window's sessions. They have left the server (a backend
  hands on all it has as it exits), and two readings of the activity of user tables agree, taken
  after that and, before 15, from two statistics files written after it. The second reading covers
  a session whose counts reach the views a moment after it has left pg_stat_activity.
The clock and the sleep are injected, so the waits are tested without waiting.
"""

from __future__ import annotations

from typing import Callable, Sequence

SESSIONS_TIMEOUT_S = 10.0  # the window's sessions leave within this, or the reading goes ahead with a note
SETTLE_TIMEOUT_S = 5.0  # statistics files and agreeing readings come within this (a file takes 0.5 s)
STEP_S = 0.05
COLLECTOR_UNTIL = 150000  # server_version_num from which there is no statistics collector

LEFT = ("SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s) AND pid <> pg_backend_pid()")
NOW = "SELECT clock_timestamp()"
# the activity the window's sessions cause, with the time of the statistics file it comes from
# (NULL from 15 on); the sampler's own queries read no user table, so only others move these
ACTIVITY = ("SELECT pg_stat_get_snapshot_timestamp(), coalesce(sum(seq_scan), 0), coalesce(sum(seq_tup_read), 0), "
            "coalesce(sum(idx_scan), 0), coalesce(sum(idx_tup_fetch), 0), coalesce(sum(n_tup_ins), 0), "
            "coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables")


class _Waits:
    """A deadline on the injected clock (nanoseconds) and the sleep to poll with."""

    def __init__(self, clock: Callable[[], int], sleep: Callable[[float], None], timeout_s: float):
        self.clock = clock
        self.sleep = sleep
        self.deadline = clock() + int(timeout_s * 1e9)

    def over(self) -> bool:
        return self.clock() >= self.deadline


def settle(conn, version_num: int, *, closing: bool, sessions: Sequence[str] = (),
           clock: Callable[[], int], sleep: Callable[[float], None]) -> str | None:
    """Wait until a reading of the statistics views covers the moment (see the module's text); return
    a note saying what may be missing when a wait ran out, else None."""
    collector = version_num < COLLECTOR_UNTIL
    if closing and sessions:
        waits = _Waits(clock, sleep, SESSIONS_TIMEOUT_S)
        while _value(conn, LEFT, (list(sessions),)):
            if waits.over():
                return (f"the window's sessions were still connected {SESSIONS_TIMEOUT_S:g} s after it ended: "
                        f"statistics may miss their last work")
            sleep(STEP_S)
    waits = _Waits(clock, sleep, SETTLE_TIMEOUT_S)
    since = _value(conn, NOW) if collector else None
    first = _reading(conn, since, waits)
    if not closing or first is None:
        return None if first is not None else _late(waits)
    while True:
        sleep(STEP_S)
        second = _reading(conn, first[0] if collector else None, waits, newer=True)
        if second is None:
            return _late(waits)
        if second[1:] == first[1:]:
            return None
        if waits.over():
            return _late(waits)
        first = second


def _reading(conn, since, waits: _Waits, newer: bool = False) -> tuple | None:
    """The activity row, from a statistics file written at or after `since` (after it, when `newer`);
    any reading when `since` is None (no collector). None when no such file came in time."""
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = tuple(conn.execute(ACTIVITY).fetchone())
        if since is None or row[0] is not None and (row[0] > since if newer else row[0] >= since):
            return row
        if waits.over():
            return None
        waits.sleep(STEP_S)


def _late(waits: _Waits) -> str:
    return (f"the statistics views did not settle within {SETTLE_TIMEOUT_S:g} s: counts may miss work "
            f"reported late")


def _value(conn, sql: str, args=None):
    return conn.execute(sql, args).fetchone()[0]
