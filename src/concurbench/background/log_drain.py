"""A slow log destination: the server logs into a FIFO that a helper process drains at a set rate.

How it throttles (PostgreSQL with `logging_collector = on`, which needs a restart, so it belongs in
the variant's or the scenario's `server: settings`):

* Backends never write the log file themselves: each message goes, in chunks of at most 512 bytes,
  into a pipe read by the logger process (syslogger), and the logger writes it to the current log
  file. The pipe is blocking: once its buffer (64 kB on Linux) is full, a backend that logs sits in
  write() until the logger catches up. No message is dropped, and the backend shows no wait event
  (state 'active', wait_event NULL), so `pg_stat_activity` calls it CPU.
* The logger opens its file with fopen(..., "a"). When the file is a FIFO, that open blocks until a
  reader exists, and every write blocks while the FIFO's buffer (64 kB) is full. ftell() fails on a
  FIFO, so size-based rotation never triggers.
* So: create a FIFO in a private directory, start a drain process that opens it (and keeps a write
  end of its own, so it never sees end-of-file between writers) and reads at most `rate` bytes a
  second, then point `log_directory`/`log_filename` at the FIFO with ALTER SYSTEM and a reload
  (both take effect on reload; the logger rotates to the new file when they change, and
  `pg_current_logfile()` tells when it has). From then on everything the server logs passes
  through the FIFO at the drain's pace, and backends block once about 128 kB are in flight.

Ending it, whatever happened: the drain is told to read at full speed once the measurement window
is over (so the pools' last statements and the samplers' last reads finish quickly), the two
settings are restored and reloaded, and once the logger has moved to a regular file again the
FIFO is unlinked and then the drain stopped. The server cannot hang on a FIFO nobody reads:
* a FIFO path exists only while a reader holds it open, so the logger's open() (at a reload or a
  restart) never waits for a reader that will not come;
* when the drain is gone, the logger's writes fail with EPIPE (it ignores SIGPIPE and carries on)
  instead of blocking;
* if the drain died while the server was switched to the FIFO, close() reads it at full speed
  itself until the settings are restored (the logger may be stuck in open(), and the postmaster
  behind a full log pipe).
The drain runs in a session of its own (a Ctrl-C at the terminal reaches the harness, which then
stops it) and exits by itself, removing the FIFO, when the harness dies.

The drain is a program of its own (background/drain_process.py): `python -m concurbench.background.drain_process FIFO RATE
[MARKER]`.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable

from psycopg import sql

from ..workload.events import Event
from ..engines import postgres as pg
from ..errors import EngineError
from ..scenario.model import Background
from .base import closed_on_failure


FIFO_NAME = "postgresql.fifo"
DIR_PREFIX = "concurbench-logdrain-"
SETTINGS = ("log_directory", "log_filename")


class LogDrain:
    """Background kind `log_drain`: the server logs to a FIFO drained at `spec.rate` bytes a second."""

    ends_after_samplers = False  # unthrottled first: the samplers' last reading queues behind the log

    def __init__(self, spec: Background, conninfo: str, *, switch_timeout: float = 15.0,
                 restore_timeout: float = 30.0, temp_dir: str | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns):
        self.spec = spec
        self.conninfo = conninfo
        self.clock = clock
        self.switch_timeout = switch_timeout
        self.restore_timeout = restore_timeout
        self.temp_dir = temp_dir
        self.conn = None
        self.dir: str | None = None
        self.fifo: str | None = None
        self.proc: subprocess.Popen | None = None
        self.redirected = False
        self.previous: dict[str, str | None] = {}
        self.stats: dict = {}
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.marker = f"concurbench log_drain marker {uuid.uuid4().hex}"

    # -- start ----------------------------------------------------------------
    def start(self) -> None:

        with closed_on_failure(self, f"background {self.spec.name} (log_drain) failed to start", pg.error_text,
                               wrap_engine_errors=False):
            self.conn = pg.connect(self.conninfo, application_name=f"concurbench:background:{self.spec.name}")
            # our own statements must not queue behind the log they throttle
            for statement in ("SET log_statement = 'none'", "SET log_min_duration_statement = -1",
                        "SET log_min_duration_sample = -1", "SET log_duration = off"):
                self.conn.execute(statement)
            if self._setting("logging_collector") != "on":
                raise EngineError(f"background {self.spec.name} (log_drain) needs logging_collector = on in the "
                                  f"server settings (it is applied with a restart); the server has it off")
            self.previous = dict(self.conn.execute(
                "SELECT name, setting FROM pg_file_settings WHERE name = ANY(%s) AND applied "
                "AND sourcefile LIKE '%%postgresql.auto.conf'", (list(SETTINGS),)).fetchall())
            self._make_fifo()
            self._start_drain()
            self._alter({"log_directory": self.dir, "log_filename": FIFO_NAME})
            self.redirected = True
            if not self._wait_logfile(lambda f: f == self.fifo, self.switch_timeout):
                why = "the drain process had ended" if self.proc.poll() is not None else \
                    "a log_drain needs the server on this machine"
                raise EngineError(f"background {self.spec.name}: the server did not switch its log to {self.fifo} "
                                  f"within {self.switch_timeout:.0f} s ({why}); it logs to {self._current_logfile()}")
            # the same path may name another file for a server elsewhere (a container): prove the way
            self.conn.execute(f"DO $$BEGIN RAISE LOG '{self.marker}'; END$$")
            if self._drain_says(self.switch_timeout) != "marker":
                raise EngineError(f"background {self.spec.name}: a message the server logged did not come through "
                                  f"{self.fifo} within {self.switch_timeout:.0f} s (a log_drain needs the server on "
                                  f"this machine, writing to the same /tmp)")

    def _setting(self, name: str) -> str:
        return self.conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]

    def _current_logfile(self) -> str | None:
        return self.conn.execute("SELECT pg_current_logfile()").fetchone()[0]

    def _make_fifo(self) -> None:
        self.dir = tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self.temp_dir)
        os.chmod(self.dir, 0o711)  # the server may run as another (unprivileged) user
        self.fifo = os.path.join(self.dir, FIFO_NAME)
        os.mkfifo(self.fifo)
        os.chmod(self.fifo, 0o622)  # it may write, only we read

    def _start_drain(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "concurbench.background.drain_process", self.fifo, str(self.spec.rate), self.marker],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        line = self._drain_says(15.0)
        if line != "ready":
            raise EngineError(f"background {self.spec.name}: the log drain did not start "
                              f"({(line or self._drain_stderr()).strip() or 'no answer within 15 s'})")

    def _drain_says(self, timeout: float) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline().strip() if ready else ""

    def _drain_stderr(self) -> str:
        if self.proc is None or self.proc.poll() is None:
            return ""
        return (self.proc.stderr.read() or "").strip()[-300:]

    def _alter(self, values: dict[str, str | None]) -> None:

        for name, value in values.items():
            if value is None:
                self.conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
            else:
                self.conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        self.conn.execute("SELECT pg_reload_conf()")

    def _wait_logfile(self, done, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            current = self._current_logfile()
            if current and done(os.path.normpath(current)):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    # -- WindowListener -----------------------------------------------------------
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        # once the window is over, the pools' last statements and the samplers' final reads (queued
        # behind the log like everything else) go through at full speed
        if planned_end_ns is not None:
            self._timer = threading.Timer(max(0.0, (planned_end_ns - self.clock()) / 1e9), self._unthrottle)
            self._timer.daemon = True
            self._timer.start()

    def measurement_ended(self, end_ns: int) -> None:
        self._unthrottle()

    def _unthrottle(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGUSR1)
            except ProcessLookupError:
                pass

    # -- end ---------------------------------------------------------------------
    def close(self) -> None:
        """Restore the log settings, remove the FIFO, stop the drain; each step runs whatever failed before."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            rescue = None
            if self.redirected and self.proc is not None and self.proc.poll() is not None:
                self.notes.append(f"the drain had ended early (exit code {self.proc.returncode})")
                rescue = self._rescue_reader()
            self._unthrottle()
            if self.redirected and self.conn is not None:
                try:
                    self._reconnect_if_lost()
                    self._alter({name: self.previous.get(name) for name in SETTINGS})
                    if not self._wait_logfile(lambda f: f != self.fifo, self.restore_timeout):
                        self.notes.append(f"the server still logged to the FIFO {self.restore_timeout:.0f} s after "
                                          f"the settings were restored; the drain was stopped anyway")
                    self.redirected = False
                except Exception as exc:  # noqa: BLE001 - the drain is stopped and the FIFO removed regardless
                    self.notes.append(f"restoring {', '.join(SETTINGS)} failed: {str(exc).strip()[:200]}")
            # unlinked while a reader still holds it: no later open() by the server can find a FIFO
            # without a reader (that open would block the logger, and at a restart the postmaster)
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
            self._stop_drain()
            if rescue is not None:
                rescue()
            if self.conn is not None:
                try:
                    self.conn.close()
                except Exception:  # noqa: BLE001
                    pass
                self.conn = None

    def _reconnect_if_lost(self) -> None:
        """The log settings must be put back even when this session's backend was terminated: connect again."""
        try:
            self.conn.execute("SELECT 1")
            return
        except Exception as exc:  # noqa: BLE001 - any failure: try a new connection
            lost = pg.error_text(exc)
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass
        self.conn = pg.connect(self.conninfo, application_name=f"concurbench:background:{self.spec.name}")
        self.notes.append(f"its connection was lost ({lost}) and made again to restore the log settings")

    def _rescue_reader(self) -> Callable[[], None]:
        """Read the FIFO at full speed in a thread while the settings are restored (the drain is gone,
        and the logger may be blocked opening the FIFO or the postmaster behind a full log pipe)."""
        fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        done = threading.Event()

        def run() -> None:
            while not done.is_set():
                ready, _, _ = select.select([fd], [], [], 0.1)
                try:
                    if ready and not os.read(fd, 1 << 20):
                        done.wait(0.05)  # no writer at the moment
                except BlockingIOError:
                    pass

        thread = threading.Thread(target=run, name="concurbench-log-rescue", daemon=True)
        thread.start()

        def stop() -> None:
            done.set()
            thread.join(timeout=2)
            os.close(fd)

        return stop

    def _stop_drain(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=5)
        for line in reversed((out or "").splitlines()):
            if line.startswith("{"):
                try:
                    self.stats = json.loads(line)
                except ValueError:
                    pass
                break
        if proc.returncode not in (0, None) and not self.stats and not self.notes:
            self.notes.append(f"the drain ended with exit code {proc.returncode}: {(err or '').strip()[-200:]}")

    def timeline(self) -> list[Event]:
        return []  # it records no events of its own

    def describe(self) -> dict:
        out = {"name": self.spec.name, "kind": self.spec.kind, "rate_bytes_s": self.spec.rate,
               "fifo": self.fifo, **{f"drain_{k}": v for k, v in self.stats.items()}}
        if self.notes:
            out["notes"] = list(self.notes)
        return out
