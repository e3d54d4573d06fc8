"""Background sessions that sit beside the worker pools, such as an idle open transaction.

A held transaction begins before the pools start (so its snapshot is older than everything the
pools do), optionally commits partway through the measurement, and is always ended and its
connection closed when the variant ends, whatever happened. When its connection was lost on the
way (a terminated backend), `describe()` says so under `error`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..engines import postgres as pg
from ..scenario.model import Background
from .base import closed_on_failure


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
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._poller: threading.Thread | None = None
        self._stop_polling = threading.Event()
        self._measure_from = 0
        self.problems: list[str] = []

    def start(self) -> None:
        engine = self.engine
        self.conn = engine.connect(self.conninfo, application_name=f"concurbench:background:{self.spec.name}")
        with closed_on_failure(self, f"background session {self.spec.name} failed to start", engine.first_line):
            self.pid = engine.session_id(self.conn)
            engine.begin_isolated(self.conn, self.spec.isolation)
            for sql in self.spec.sql or ("SELECT 1",):
                engine.execute(self.conn, sql)

    # WindowListener ---------------------------------------------------------------
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self._measure_from = measure_from_ns
        if self.spec.release_after is not None:
            delay = (measure_from_ns - self.clock()) / 1e9 + self.spec.release_after
            self._timer = threading.Timer(max(0.0, delay), self.release)
            self._timer.daemon = True
            self._timer.start()

        if self.spec.release_when:
            self._stop_polling = threading.Event()
            self._poller = threading.Thread(target=self._poll, name="concurbench-release-when", daemon=True)
            self._poller.start()

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
            self.problems.append(f"release_when could not be polled ({self.engine.first_line(exc)}); the "
                                 f"transaction was held to the end")
            return

    def measurement_ended(self, end_ns: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._poller is not None:
            self._stop_polling.set()
            self._poller.join(timeout=5)

    def release(self) -> None:
        """End the transaction (commit) but keep nothing else open."""
        with self._lock:
            if self.conn is None or self.released_at_s is not None:
                return
            try:
                self.engine.execute(self.conn, "COMMIT")
            except Exception:  # noqa: BLE001 - close() below ends it anyway
                pass
            self.released_at_s = (self.clock() - self._measure_from) / 1e9 if self._measure_from else 0.0

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._stop_polling.set()
        with self._lock:
            if self.conn is None:
                return
            try:
                self.engine.execute(self.conn, "ROLLBACK")
            except Exception as exc:  # noqa: BLE001 - closing ends the transaction anyway; a lost one is reported
                if getattr(self.conn, "broken", False):
                    self.problems.append(f"its connection was lost before the variant run ended "
                                         f"({self.engine.first_line(exc)}), so the transaction was not held to "
                                         f"the end")
            try:
                self.conn.close()
            finally:
                self.conn = None

    def describe(self) -> dict:
        out = {"name": self.spec.name, "kind": self.spec.kind, "isolation": self.spec.isolation,
               "pid": self.pid, "released_at_s": self.released_at_s}
        if self.problems:
            out["error"] = "; ".join(self.problems)
        return out
