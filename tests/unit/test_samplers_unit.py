"""SamplerDriver with a fake clock and fake samplers (no database), and the samplers' summarize methods.

The fake clock only moves when the fast periodic sampler reads, and stops after a set number of
reads; from then on the driver waits on its threading.Event (real time) until the test ends the
window, so each test takes a fraction of a second and the rows it collects are deterministic.
"""

from __future__ import annotations

import threading
import time


from concurbench.samplers.base import PERIODIC, SNAPSHOT, Sampler, SamplerDriver, SamplerFailure, numeric_delta
from concurbench.samplers.postgres import DatabaseCounters, MultiXact, WaitEvents, Wal
from concurbench.samplers.registry import SAMPLERS, build
from concurbench.scenario.model import SamplerSpec

NS = 1_000_000_000


class FakeClock:
    def __init__(self, start: int = 0):
        self.now = start

    def __call__(self) -> int:
        return self.now


class FakeConn:
    def __init__(self):
        self.rollbacks = 0
        self.closed = False

    def rollback(self):
        self.rollbacks += 1

    def close(self):
        self.closed = True


class Snapshot(Sampler):
    name = "snap"
    kind = SNAPSHOT

    def __init__(self, log, values):
        super().__init__()
        self.log = log
        self.values = list(values)

    def read(self, conn):
        self.log.append(self.name)
        return self.values.pop(0)

    def summarize(self, before, after, rows, elapsed_s):
        return numeric_delta(before, after)


class Ticker(Sampler):
    """Periodic; advances the fake clock by its interval on each of its first `moves` reads."""

    name = "ticker"
    kind = PERIODIC

    def __init__(self, log, clock, moves, interval=0.1, name=None, advance=True):
        super().__init__(SamplerSpec(name or self.name, (("interval", interval),)))
        if name:
            self.name = name
        self.log = log
        self.clock = clock
        self.moves = moves
        self.advance = advance
        self.reads = 0
        self.done = threading.Event()

    def read(self, conn):
        self.log.append(self.name)
        self.reads += 1
        if self.advance and self.reads <= self.moves:
            self.clock.now += int(self.interval * NS)
        if self.reads >= self.moves:
            self.done.set()
        return [{"reads": self.reads}]

    def summarize(self, before, after, rows, elapsed_s):
        return {"rows": len(rows)}


class Broken(Sampler):
    name = "broken"

    def __init__(self, kind):
        self.kind = kind
        super().__init__()
        self.calls = 0

    def read(self, conn):
        self.calls += 1
        raise RuntimeError("relation \"pg_nothing\" does not exist\nLINE 1: SELECT ...")

    def summarize(self, before, after, rows, elapsed_s):
        return {"unexpected": True}


def run_window(driver: SamplerDriver, until: threading.Event | None, measure_from: int = 0) -> None:
    driver.open()
    driver.window_set(measure_from, None)
    if until is not None:
        assert until.wait(5), "the sampler thread did not get going"
    driver.measurement_ended(0)
    assert driver._thread is not None and not driver._thread.is_alive()
    driver.close()


def test_snapshot_read_before_and_after_periodic_rows_in_between():
    clock, log = FakeClock(), []
    snap = Snapshot(log, [{"commits": 10, "name": "db"}, {"commits": 25, "name": "db"}])
    ticker = Ticker(log, clock, moves=5)
    conn = FakeConn()
    driver = SamplerDriver([snap, ticker], lambda: conn, 160000, clock=clock, sleep=lambda s: None)
    run_window(driver, ticker.done)

    assert log[0] == "snap" and log[-1] == "snap"
    assert log.count("snap") == 2
    assert set(log[1:-1]) == {"ticker"}
    assert driver.before == {"snap": {"commits": 10, "name": "db"}}
    assert driver.after == {"snap": {"commits": 25, "name": "db"}}
    # 5 reads while the clock moves (t = 0.0 .. 0.4), one more at 0.5, then it waits for the end
    assert driver.rows["ticker"] == [{"t_s": round(0.1 * i, 3), "reads": i + 1} for i in range(6)]
    assert driver.errors == []
    assert conn.closed and driver.conn is None
    assert driver.summaries(1.0) == ({"snap": {"commits": 15}, "ticker": {"rows": 6}}, [])


def test_periodic_samplers_follow_their_own_intervals():
    clock, log = FakeClock(), []
    fast = Ticker(log, clock, moves=6, interval=0.1, name="fast")
    slow = Ticker(log, clock, moves=10 ** 6, interval=0.3, name="slow", advance=False)
    driver = SamplerDriver([fast, slow], FakeConn, 160000, clock=clock)
    run_window(driver, fast.done)
    assert [r["t_s"] for r in driver.rows["fast"]] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert [r["t_s"] for r in driver.rows["slow"]] == [0.0, 0.3, 0.6]


def test_t_s_is_relative_to_the_start_of_the_measurement():
    clock, log = FakeClock(start=50 * NS), []
    ticker = Ticker(log, clock, moves=3, interval=0.25)
    driver = SamplerDriver([ticker], FakeConn, 160000, clock=clock)
    run_window(driver, ticker.done, measure_from=48 * NS)  # the window started 2 s before the clock
    assert [r["t_s"] for r in driver.rows["ticker"]] == [2.0, 2.25, 2.5, 2.75]


def test_a_failing_sampler_is_recorded_and_does_not_stop_the_others():
    clock, log = FakeClock(), []
    snap = Snapshot(log, [{"n": 1}, {"n": 4}])
    bad_snapshot, bad_periodic = Broken("snapshot"), Broken("periodic")
    bad_periodic.name = "broken_periodic"
    ticker = Ticker(log, clock, moves=4)
    conn = FakeConn()
    driver = SamplerDriver([bad_snapshot, snap, bad_periodic, ticker], lambda: conn, 160000, clock=clock)
    driver.rows["broken_periodic"] = []
    run_window(driver, ticker.done)

    assert len(driver.rows["ticker"]) == 5  # the others went on
    assert driver.before["snap"] == {"n": 1} and driver.after["snap"] == {"n": 4}
    assert driver.before["broken"] is None and driver.after["broken"] is None
    assert bad_snapshot.calls == 2
    assert bad_periodic.calls == 5  # read on the same schedule as the ticker, each time failing
    assert driver.errors.count('sampler broken: relation "pg_nothing" does not exist') == 2
    assert driver.errors.count('sampler broken_periodic: relation "pg_nothing" does not exist') == 5
    assert len(driver.errors) == 7
    assert conn.rollbacks == 7  # after each failure, so the connection is usable again
    summaries, failures = driver.summaries(1.0)
    assert "broken" not in summaries and failures == [SamplerFailure("broken", "no reading")]
    assert summaries["snap"] == {"n": 3}
    assert summaries["ticker"] == {"rows": 5}


def test_a_failing_summarize_becomes_a_typed_failure():
    class BadSummary(Ticker):
        def summarize(self, before, after, rows, elapsed_s):
            raise ZeroDivisionError("division by zero")

    clock = FakeClock()
    ticker = BadSummary([], clock, moves=1)
    driver = SamplerDriver([ticker], FakeConn, 160000, clock=clock)
    run_window(driver, ticker.done)
    assert driver.summaries(1.0) == ({}, [SamplerFailure("ticker", "division by zero")])


def test_window_ended_before_it_started_reads_nothing():
    clock, log = FakeClock(), []
    snap = Snapshot(log, [{"n": 1}, {"n": 2}])
    driver = SamplerDriver([snap], FakeConn, 160000, clock=clock)
    driver.open()
    driver.window_set(3600 * NS, None)  # an hour away on the fake clock: the driver waits on its event
    driver.measurement_ended(0)
    assert log == []
    assert driver.summaries(0.0) == ({}, [SamplerFailure("snap", "no reading")])


def test_window_in_the_near_future_is_waited_for():
    clock, log = FakeClock(), []
    ticker = Ticker(log, clock, moves=1)
    read_at = []
    original = ticker.read
    ticker.read = lambda conn: (read_at.append(time.monotonic()), original(conn))[1]
    driver = SamplerDriver([ticker], FakeConn, 160000, clock=clock)
    driver.open()
    started = time.monotonic()
    driver.window_set(NS // 20, None)  # 50 ms ahead on a clock that stands still: a real 50 ms wait
    assert ticker.done.wait(5)
    driver.measurement_ended(0)
    assert read_at[0] - started >= 0.045


def test_with_snapshot_samplers_only_the_first_reading_is_at_the_window_start():
    clock, ends = FakeClock(), []
    snap = Snapshot([], [{"n": 1}, {"n": 2}])
    driver = SamplerDriver([snap], FakeConn, 160000, clock=clock)
    snap.read = lambda conn, values=iter([{"n": 1}, {"n": 2}]): (ends.append(driver._end.is_set()), next(values))[1]
    driver.open()
    driver.window_set(0, None)
    driver._thread.join(timeout=0.2)
    driver.measurement_ended(0)
    assert ends[0] is False


def test_with_snapshot_samplers_only_the_after_reading_waits_for_the_end():
    clock, ends = FakeClock(), []
    snap = Snapshot([], [])
    driver = SamplerDriver([snap], FakeConn, 160000, clock=clock)
    snap.read = lambda conn, values=iter([{"n": 1}, {"n": 2}]): (ends.append(driver._end.is_set()), next(values))[1]
    driver.open()
    driver.window_set(0, None)
    driver._thread.join(timeout=0.2)  # the measurement is still running
    driver.measurement_ended(0)
    assert ends == [False, True]


def test_open_prepares_every_sampler_and_nothing_happens_without_samplers():
    prepared = []

    class Prepared(Snapshot):
        def prepare(self, conn, version_num):
            super().prepare(conn, version_num)
            prepared.append((conn, version_num))

    conn = FakeConn()
    driver = SamplerDriver([Prepared([], [])], lambda: conn, 150007)
    driver.open()
    assert prepared == [(conn, 150007)]
    driver.close()
    assert conn.closed

    def no_connection():
        raise AssertionError("connect must not be called without samplers")

    empty = SamplerDriver([], no_connection, 160000)
    empty.open()
    empty.window_set(0, None)
    empty.measurement_ended(0)
    assert empty.summaries(1.0) == ({}, []) and empty.errors == []


def test_close_swallows_errors_of_a_broken_connection():
    class Bad(FakeConn):
        def close(self):
            raise OSError("already gone")

    driver = SamplerDriver([Snapshot([], [])], Bad, 160000)
    driver.open()
    driver.close()
    assert driver.conn is None


def test_interval_option_and_default():
    assert WaitEvents().interval == WaitEvents.default_interval == 0.1
    assert WaitEvents(SamplerSpec("wait_events", (("interval", 0.5),))).interval == 0.5
    postgres = {n for n, cls in SAMPLERS.items() if cls.engine == "postgres"}
    mssql = {n for n, cls in SAMPLERS.items() if cls.engine == "mssql"}
    assert postgres == {"wait_events", "database", "wal", "multixact", "table_stats", "io", "checkpointer"}
    assert mssql == {"mssql_waits", "mssql_counters", "tempdb_latches", "index_physical_stats", "snapshot_transactions",
                     "mssql_requests", "mssql_lock_waits", "mssql_version_store", "tempdb_allocation"}
    built = build([SamplerSpec("wal"), SamplerSpec("wait_events", (("interval", 0.2),))])
    assert [type(s) for s in built] == [Wal, WaitEvents]
    assert built[1].interval == 0.2


# -- numeric_delta and summarize ---------------------------------------------------

def test_numeric_delta():
    before = {"a": 10, "b": 1.5, "c": "x", "d": 3, "only_before": 7}
    after = {"a": 15, "b": 4.0, "c": "y", "d": None, "only_after": 9}
    assert numeric_delta(before, after) == {"a": 5, "b": 2.5}
    assert numeric_delta({}, {"a": 1}) == {}


def test_wait_events_summarize():
    rows = [
        {"t_s": 0.0, "wait": "Lock:transactionid", "sessions": 3},
        {"t_s": 0.0, "wait": "CPU", "sessions": 1},
        {"t_s": 0.1, "wait": "Lock:transactionid", "sessions": 2},
        {"t_s": 0.2, "wait": "LWLock:WALWrite", "sessions": 2},
    ]
    out = WaitEvents().summarize(None, None, rows, 1.0)
    assert out["samples"] == 3
    assert out["session_samples"] == 8
    assert out["counts"] == {"Lock:transactionid": 5, "LWLock:WALWrite": 2, "CPU": 1}
    assert list(out["share"]) == ["Lock:transactionid", "LWLock:WALWrite", "CPU"]  # most common first
    assert out["share"] == {"Lock:transactionid": 0.625, "LWLock:WALWrite": 0.25, "CPU": 0.125}


def test_wait_events_summarize_without_rows():
    assert WaitEvents().summarize(None, None, [], 1.0) == {"samples": 0, "session_samples": 0, "share": {},
                                                           "counts": {}}


def test_multixact_summarize():
    before = {"mxid_age": 100, "offset_zeroed": 1, "offset_hit": 10, "member_zeroed": 2, "member_hit": 20,
              "disk_bytes": 8192}
    after = {"mxid_age": 350, "offset_zeroed": 3, "offset_hit": 40, "member_zeroed": 7, "member_hit": 90,
             "disk_bytes": 24576}
    out = MultiXact().summarize(before, after, [], 1.0)
    assert out == {"created": 250, "slru_offset_zeroed": 2, "slru_offset_hit": 30, "slru_member_zeroed": 5,
                   "slru_member_hit": 70, "disk_bytes_after": 24576, "disk_bytes_growth": 16384}


def test_multixact_summarize_without_disk_size():
    out = MultiXact().summarize({"mxid_age": 5}, {"mxid_age": 5}, [], 1.0)
    assert out == {"created": 0}


def test_wal_and_database_summarize():
    wal = Wal().summarize({"lsn_bytes": 1000, "records": 10, "fpi": 1}, {"lsn_bytes": 5096, "records": 60, "fpi": 4},
                          [], 1.0)
    assert wal == {"bytes": 4096, "records": 50, "fpi": 3, "buffers_full": None}
    assert Wal().summarize({"lsn_bytes": 0}, {"lsn_bytes": 10}, [], 1.0) == {"bytes": 10, "records": None,
                                                                            "fpi": None, "buffers_full": None}
    db = DatabaseCounters().summarize({"xact_commit": 5, "deadlocks": 0}, {"xact_commit": 105, "deadlocks": 2},
                                      [], 1.0)
    assert db == {"xact_commit": 100, "deadlocks": 2}


def test_a_last_reading_when_the_window_ends_between_two_readings():
    """A rate needs two readings: a window that ends mid-interval still gets one at its end."""
    clock, log = FakeClock(), []
    fast = Ticker(log, clock, moves=4, interval=0.1, name="fast")
    slow = Ticker(log, clock, moves=10 ** 6, interval=0.3, name="slow", advance=False)
    driver = SamplerDriver([fast, slow], FakeConn, 160000, clock=clock)
    run_window(driver, fast.done)
    assert [r["t_s"] for r in driver.rows["slow"]] == [0.0, 0.3, 0.4]
    assert [r["t_s"] for r in driver.rows["fast"]] == [0.0, 0.1, 0.2, 0.3, 0.4]  # the last was just taken
