"""Ends many short measurement windows under row-lock contention and counts workers that never report.

Starts one embedded PostgreSQL with a table of a few hot rows, then runs the real LoadGenerator for
many short windows: each window has 16 sessions (two worker processes by default) updating the hot
rows in BEGIN ... COMMIT, so most sessions hold a row lock or wait for one when the window ends.
For every window it records whether each worker process sent its results, how long the end of
the window took (from the planned end until the pool returned, workers joined) and whether any
transaction of the pool was still open on the server afterwards.

    python benchmarks/window_end_stress.py [--windows 200] [--clients 16] [--rows 10] [--seconds 0.3]
                                           [--processes 2] [--starve N]

PostgreSQL drops a cancel that reaches a backend before it has read its statement, which on a busy
machine happens now and then; `--starve N` makes it happen in every window, to N backends (they are
stopped just before the end and resumed once the cancel is pending on them; this needs the right
to signal the server's processes). Prints one line per slow or failed window and a summary:
workers that failed to report, window end time (median, p99, max), sessions waiting on a row lock
at the end, and transactions left open. Not part of the test run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import threading
import time

import psycopg

from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.scenario.model import Pool, Statement
from concurbench.scenario.distributions import parse_distribution
from concurbench.workload.pool import LoadGenerator

APP = "concurbench:hot"


class WindowEnd:
    """A window listener: keeps the planned end, counts the pool's sessions waiting on a lock just before
    it and, with `starve`, stops that many backends that sit between two statements of a transaction.

    A stopped backend is resumed once a cancel's SIGINT is pending on it (or a second after the end):
    it then drops the cancel, as a backend that the CPU had not scheduled since its client sent the
    next statement does, and runs that statement after all."""

    def __init__(self, conninfo: str, starve: int = 0) -> None:
        self.conninfo = conninfo
        self.starve = starve
        self.planned_ns = 0
        self.waiting = 0
        self.stopped = 0
        self.dropped = 0  # stopped backends that were resumed with a cancel pending
        self._thread: threading.Thread | None = None

    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self.planned_ns = planned_end_ns or 0
        self._thread = threading.Thread(target=self._look, daemon=True)
        self._thread.start()

    def measurement_ended(self, end_ns: int) -> None:
        pass

    def finish(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _look(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            time.sleep(max(0.0, (self.planned_ns - time.perf_counter_ns()) / 1e9 - 0.02))
            rows = conn.execute("SELECT pid, wait_event_type = 'Lock', state FROM pg_stat_activity "
                                "WHERE application_name = %s", (APP,)).fetchall()
        self.waiting = sum(1 for _pid, waiting, _state in rows if waiting)
        between = [pid for pid, _waiting, state in rows if state == "idle in transaction"][: self.starve]
        for pid in between:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                self.stopped += 1
        give_up = time.monotonic() + (self.planned_ns - time.perf_counter_ns()) / 1e9 + 1.0
        while between:
            for pid in list(between):
                pending = _sigint_pending(pid)
                if pending or time.monotonic() > give_up:
                    self.dropped += bool(pending)
                    between.remove(pid)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            time.sleep(0.0005)


def _sigint_pending(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except FileNotFoundError:
        return False
    return any(int(fields[k].strip(), 16) & (1 << (signal.SIGINT - 1)) for k in ("ShdPnd", "SigPnd"))


def open_transactions(admin: psycopg.Connection, deadline_s: float) -> int:
    """Transactions of the pool's sessions still open on the server, polled until none or the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        count = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                              "AND xact_start IS NOT NULL", (APP,)).fetchone()[0]
        if count == 0 or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.3, help="length of each measurement window")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--starve", type=int, default=0, metavar="N",
                        help="stop N backends between two statements just before each window ends, and resume "
                             "each once a cancel is pending on it (so the server drops the cancel)")
    args = parser.parse_args()
    server = EmbeddedPostgres({"max_connections": str(args.clients + 20)})
    connection = server.start()
    pool = Pool("hot", args.clients, (Statement("update", "UPDATE hot SET v = v + 1 WHERE id = :id"),),
                params=(("id", parse_distribution(f"uniform(1, {args.rows})")),), atomic=True)
    ends: list[float] = []
    missing = workers = left_open = stopped = dropped = 0
    waiting: list[int] = []
    started = time.monotonic()
    try:
        with psycopg.connect(connection.conninfo, autocommit=True) as admin:
            admin.execute("CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL)")
            admin.execute("INSERT INTO hot SELECT g, 0 FROM generate_series(1, %s) g", (args.rows,))
            print(f"{args.windows} windows of {args.seconds:g} s, {args.clients} sessions over {args.rows} hot rows, "
                  f"{args.processes} worker processes, {os.cpu_count()} CPUs, PostgreSQL {server.version()}",
                  flush=True)
            for window in range(1, args.windows + 1):
                clock = WindowEnd(connection.conninfo, args.starve)
                load = LoadGenerator(connection.conninfo, [pool], warmup=0.0, duration=args.seconds,
                                     seed=window, processes=args.processes, listeners=[clock], tick=0.05)
                result = load.run()
                end_s = (time.perf_counter_ns() - clock.planned_ns) / 1e9
                clock.finish()
                stopped += clock.stopped
                dropped += clock.dropped
                reported = len(result.worker_wall_s)
                expected = load.processes
                workers += expected
                missing += expected - reported
                ends.append(end_s)
                still_open = open_transactions(admin, 5.0)
                left_open += still_open
                waiting.append(clock.waiting)
                if reported < expected or still_open or end_s > 5:
                    print(f"window {window}: {expected - reported} of {expected} workers did not report, "
                          f"end took {end_s:.2f} s, {still_open} transactions left open; "
                          f"{'; '.join(result.messages)}", flush=True)
                elif window % 25 == 0:
                    print(f"window {window}: ok so far, slowest end {max(ends):.2f} s", flush=True)
    finally:
        server.stop()
    print(f"\nworkers that failed to report: {missing} of {workers} ({args.windows} windows)")
    print(f"window end (planned end until every worker joined): median {statistics.median(ends):.2f} s, "
          f"p99 {percentile(ends, 99):.2f} s, max {max(ends):.2f} s")
    print(f"sessions waiting on a row lock at the window end: mean {statistics.mean(waiting):.1f}, "
          f"max {max(waiting)}, windows with none {waiting.count(0)}")
    if args.starve:
        print(f"backends stopped between two statements: {stopped}; resumed with a cancel pending (so the "
              f"cancel was dropped): {dropped}")
    print(f"transactions left open after a window: {left_open}")
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
