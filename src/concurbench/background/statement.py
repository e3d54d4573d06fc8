"""A statement run at a set time in the measurement window, on a session of its own (PostgreSQL).

`kind: statement` with `at: 500ms` and `sql:` (one text or a list run in order; `SET lock_timeout =
'2s'; ALTER TABLE ...` works either way, since a session's SET holds for what follows). The session
connects before the window; at its time the SQL runs in autocommit on a thread, while another
connection reads the session's wait event from pg_stat_activity every `interval` and adds the time
since the last reading to that wait (`Lock:relation`; `CPU` when it waits on nothing). A statement
still running when the window ends is cancelled and recorded as cancelled; a statement that fails
records the server's error. `describe()` keeps the times and the waits, `events()` the timeline
events statement_start and statement_end or statement_failed.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..workload.events import Event
from ..engines import postgres as pg
from ..scenario.model import Background
from .base import close_quietly, closed_on_failure
from .recorder import Recorder, short

WAIT_SQL = ("SELECT wait_event_type, wait_event, state FROM pg_stat_activity WHERE pid = %s")
CANCEL_EVERY_S = 0.2  # the server drops a cancel that reaches a backend before it reads the statement
CANCEL_FOR_S = 5.0
CANCELLED = "cancelled at the end of the window"


class TimedStatement:
    ends_after_samplers = False

    def __init__(self, spec: Background, conninfo: str, *, clock: Callable[[], int] = time.perf_counter_ns,
                 engine=pg, interval: float = 0.05):
        self.spec = spec
        self.engine = engine
        self.conninfo = conninfo
        self.clock = clock
        self.interval = interval
        self.conn = None
        self.watch = None  # the connection that reads the statement's wait event
        self.pid: int | None = None
        self.recorder = Recorder(spec.name)
        self.waits: dict[str, float] = {}
        self.started_ns = self.ended_ns = 0
        self.server_error: str | None = None
        self.cancelled = False
        self.problems: list[str] = []
        self._measure_from = 0
        self._timer: threading.Timer | None = None
        self._end_timer: threading.Timer | None = None
        self._thread: threading.Thread | None = None
        self._sampler: threading.Thread | None = None
        self._done = threading.Event()

    def start(self) -> None:
        name = f"concurbench:background:{self.spec.name}"
        self.conn = self.engine.connect(self.conninfo, application_name=name)
        with closed_on_failure(self, f"background session {self.spec.name} failed to start", self.engine.error_text):
            self.pid = self.engine.session_id(self.conn)
            self.watch = self.engine.connect(self.conninfo, application_name=f"{name}:waits")

    # WindowListener ---------------------------------------------------------------
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self._measure_from = measure_from_ns
        delay = (measure_from_ns - self.clock()) / 1e9 + (self.spec.at or 0.0)
        self._timer = threading.Timer(max(0.0, delay), self._launch)
        self._timer.daemon = True
        self._timer.start()
        if planned_end_ns is not None:  # cancelled at the planned end, not when the load generator next looks
            self._end_timer = threading.Timer(max(0.0, (planned_end_ns - self.clock()) / 1e9), self._stop)
            self._end_timer.daemon = True
            self._end_timer.start()

    def _launch(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"concurbench-statement-{self.spec.name}", daemon=True)
        self._sampler = threading.Thread(target=self._sample, name="concurbench-statement-waits", daemon=True)
        self._thread.start()
        self._sampler.start()

    def _run(self) -> None:
        self.started_ns = self.clock()
        self.recorder.add(self.started_ns, "statement_start", short("; ".join(self.spec.sql)))
        try:
            for sql in self.spec.sql:
                self.engine.execute(self.conn, sql)
        except Exception as exc:  # noqa: BLE001 - the statement's own failure is a result, not the harness's
            self.server_error = CANCELLED if self.cancelled else self.engine.error_text(exc)
        finally:
            self.ended_ns = self.clock()
            self._done.set()
        waits = self.waits_text()
        if self.server_error is None:
            self.recorder.add(self.ended_ns, "statement_end", f"took {self.took_s:.3f} s" + (f"; {waits}" if waits else ""))
        else:
            self.recorder.add(self.ended_ns, "statement_failed", self.server_error + (f"; {waits}" if waits else ""))

    def _sample(self) -> None:
        """Read the statement's wait event until it ends; the time since the last reading goes to what is seen."""
        last = self.clock()
        while not self._done.wait(self.interval):
            try:
                row = self.watch.execute(WAIT_SQL, (self.pid,)).fetchone()
            except Exception as exc:  # noqa: BLE001 - the statement goes on; its waits are then partial
                self.problems.append(f"its wait events could not be read ({self.engine.error_text(exc)}); the "
                                     f"waits recorded are partial")
                return
            now = self.clock()
            if row is not None and row[2] == "active" and not self._done.is_set():
                wait = f"{row[0]}:{row[1]}" if row[0] else "CPU"
                self.waits[wait] = self.waits.get(wait, 0.0) + (now - last) / 1e9
            last = now

    @property
    def took_s(self) -> float:
        return (self.ended_ns - self.started_ns) / 1e9 if self.ended_ns else 0.0

    def waits_text(self) -> str:
        return "waited " + ", ".join(f"{w} {s:.2f} s" for w, s in self.ranked_waits()) if self.waits else ""

    def ranked_waits(self) -> list[tuple[str, float]]:
        return sorted(self.waits.items(), key=lambda kv: (-kv[1], kv[0]))

    def measurement_ended(self, end_ns: int) -> None:
        for timer in (self._timer, self._end_timer):
            if timer is not None:
                timer.cancel()
        if self._end_timer is not None and self._end_timer.is_alive() and \
                self._end_timer is not threading.current_thread():
            self._end_timer.join(timeout=CANCEL_FOR_S + 1)
        self._stop()

    def _stop(self) -> None:
        """Cancel a statement still running, again while it runs, for up to CANCEL_FOR_S."""
        if self._timer is not None:
            self._timer.join(timeout=CANCEL_FOR_S)  # a launch under way (it only starts threads) ends at once
        if self._thread is None:
            return
        if self._done.is_set():
            self._sampler.join(timeout=CANCEL_FOR_S)
            return
        self.cancelled = True
        deadline = time.monotonic() + CANCEL_FOR_S
        while not self._done.is_set() and time.monotonic() < deadline:
            try:
                self.conn.cancel_safe()
            except Exception:  # noqa: BLE001 - the connection is closed below anyway
                pass
            self._done.wait(CANCEL_EVERY_S)
        self._thread.join(timeout=CANCEL_EVERY_S)
        self._sampler.join(timeout=CANCEL_EVERY_S)
        if not self._done.is_set():
            self.problems.append(f"its statement did not end within {CANCEL_FOR_S:g} s of its cancel; its "
                                 f"connection was closed")

    def close(self) -> None:
        self.measurement_ended(0)
        if self.conn is not None and not getattr(self.conn, "closed", False) and self._done.is_set():
            try:  # SQL that opened a transaction (BEGIN without COMMIT) leaves nothing behind
                self.engine.execute(self.conn, "ROLLBACK")
            except Exception:  # noqa: BLE001 - closing ends it anyway
                pass
        close_quietly(self.conn)
        close_quietly(self.watch)
        self.conn = self.watch = None

    def describe(self) -> dict:
        def at(ns: int):
            return round((ns - self._measure_from) / 1e9, 4) if ns and self._measure_from else None

        outcome = "not run" if not self.started_ns else "cancelled" if self.cancelled else \
            "failed" if self.server_error else "finished" if self.ended_ns else "running"
        out = {"name": self.spec.name, "kind": self.spec.kind, "pid": self.pid, "at_s": self.spec.at,
               "started_at_s": at(self.started_ns), "ended_at_s": at(self.ended_ns), "outcome": outcome,
               "waits_s": {w: round(s, 3) for w, s in self.ranked_waits()}}
        if self.server_error and not self.cancelled:
            out["server_error"] = self.server_error
        if self.problems:
            out["error"] = "; ".join(self.problems)
        return out

    def timeline(self) -> list[Event]:
        return self.recorder.events(self._measure_from)
