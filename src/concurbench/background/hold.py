"""Background sessions that sit beside the worker pools, such as an idle open transaction.

A held transaction begins before the pools start (so its snapshot is older than everything the
pools do), or `start_after` seconds into the measurement; it commits at `release_after` (also
spelt `stop_after`, the name every timed part of a variant shares) or once `release_when` is
true, or is held to the window's end; and it is always ended and its connection closed when the
variant ends, whatever happened. Its connection is opened before the window either way, so a late
start costs no connect. Each of these moments is a timeline event (workload/events.py, recorded by recorder.py). When
its connection was lost on the way (a terminated backend), `describe()` says so under `error`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..workload.events import Event
from ..engines import postgres as pg
from ..scenario.model import Background
from .base import closed_on_failure
from .recorder import Recorder


class HeldTransaction:
    ends_after_samplers = False  # it ends before the samplers' last reading

    def __init__(self, spec: Background, conninfo: str, *, clock: Callable[[], int] = time.perf_counter_ns,
                 engine=pg):
        self.spec = spec
        self.engine = engine
        self.conninfo = conninfo
        self.clock = clock
        self.conn = None
        self.pid: int | None = None
        self.released_at_s: float | None = None
        self.began = False
        self.recorder = Recorder(spec.name)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._poller: threading.Thread | None = None
        self._stop_polling = threading.Event()
        self._measure_from = 0
        self.problems: list[str] = []
        self._begin_timer: threading.Timer | None = None

    def start(self) -> None:
        engine = self.engine
        self.conn = engine.connect(self.conninfo, application_name=f"concurbench:background:{self.spec.name}")
        with closed_on_failure(self, f"background session {self.spec.name} failed to start", engine.error_text):
            self.pid = engine.session_id(self.conn)
            if self.spec.start_after is None:
                self._begin()

    def _begin(self) -> None:
        """BEGIN at the isolation level and run the session's SQL (raises when it fails)."""
        self.engine.begin_isolated(self.conn, self.spec.isolation)
        for sql in self.spec.sql or ("SELECT 1",):
            self.engine.execute(self.conn, sql)
        self.began = True
        self.recorder.add(self.clock(), "start", f"began a {self.spec.isolation} transaction")

    def _begin_late(self) -> None:
        """The deferred start (`start_after`): a failure is the session's error, and the transaction is not held."""
        with self._lock:
            if self.conn is None:
                return
            try:
                self._begin()
            except Exception as exc:  # noqa: BLE001 - a timer thread: reported in describe()
                self.problems.append(f"its transaction could not begin at start_after "
                                     f"({self.engine.error_text(exc)})")
                return
        self._after_begin()

    def _after_begin(self) -> None:
        """Arm what ends the transaction: the release time, or the release_when poller."""
        if self.spec.release_after is not None:
            delay = (self._measure_from - self.clock()) / 1e9 + self.spec.release_after
            self._timer = threading.Timer(max(0.0, delay), self.release)
            self._timer.daemon = True
            self._timer.start()
        if self.spec.release_when:
            self._poller = threading.Thread(target=self._poll, name="concurbench-release-when", daemon=True)
            self._poller.start()

    # WindowListener ---------------------------------------------------------------
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self._measure_from = measure_from_ns
        self._stop_polling = threading.Event()
        if self.spec.start_after is None:
            self._after_begin()
            return
        delay = (measure_from_ns - self.clock()) / 1e9 + self.spec.start_after
        self._begin_timer = threading.Timer(max(0.0, delay), self._begin_late)
        self._begin_timer.daemon = True
        self._begin_timer.start()

    def _poll(self, interval: float = 0.05) -> None:
        """Commit the held transaction once `release_when` (run on a connection of its own) is true."""
        try:
            conn = self.engine.connect(self.conninfo, application_name=f"concurbench:background:{self.spec.name}:poll")
            try:
                while not self._stop_polling.wait(interval):
                    if self.engine.scalar(conn, self.spec.release_when):
                        self.release()
                        return
            finally:
                conn.close()
        except Exception as exc:  # noqa: BLE001 - the transaction is then held to the end, as without the condition
            self.problems.append(f"release_when could not be polled ({self.engine.error_text(exc)}); the "
                                 f"transaction was held to the end")
            return

    def measurement_ended(self, end_ns: int) -> None:
        for timer in (self._begin_timer, self._timer):
            if timer is not None:
                timer.cancel()
        if self._poller is not None:
            self._stop_polling.set()
            self._poller.join(timeout=5)
        if self.began and self.released_at_s is None:  # a release racing this one is after the end anyway
            self.recorder.add(end_ns, "stop", "held to the end of the window (rolled back after it)")

    def release(self) -> None:
        """End the transaction (commit) but keep nothing else open."""
        with self._lock:
            if self.conn is None or self.released_at_s is not None or not self.began:
                return
            try:
                self.engine.execute(self.conn, "COMMIT")
            except Exception:  # noqa: BLE001 - close() below ends it anyway
                pass
            now = self.clock()
            self.released_at_s = (now - self._measure_from) / 1e9 if self._measure_from else 0.0
            self.recorder.add(now, "release", "committed once release_when was true" if self.spec.release_when
                              else "committed at its release time")

    def close(self) -> None:
        for timer in (self._begin_timer, self._timer):
            if timer is not None:
                timer.cancel()
        self._stop_polling.set()
        with self._lock:
            if self.conn is None:
                return
            try:
                self.engine.execute(self.conn, "ROLLBACK")
            except Exception as exc:  # noqa: BLE001 - closing ends the transaction anyway; a lost one is reported
                if getattr(self.conn, "broken", False):
                    self.problems.append(f"its connection was lost before the variant run ended "
                                         f"({self.engine.error_text(exc)}), so the transaction was not held to "
                                         f"the end")
            try:
                self.conn.close()
            finally:
                self.conn = None

    def describe(self) -> dict:
        out = {"name": self.spec.name, "kind": self.spec.kind, "isolation": self.spec.isolation,
               "pid": self.pid, "released_at_s": self.released_at_s}
        if self.spec.start_after is not None:
            out["start_after_s"] = self.spec.start_after
        if self.problems:
            out["error"] = "; ".join(self.problems)
        return out

    def timeline(self) -> list[Event]:
        """Its timeline events (begin, release, held to the end), in window times."""
        return self.recorder.events(self._measure_from)
