"""Waiting for PostgreSQL's statistics to settle (samplers/pgstats.py), and the driver's use of it,
against a stand-in connection and an injected clock: no server, no real waiting. The behaviour of
real servers (14 to 18) is tested in tests/integration/test_statistics_versions.py."""

from __future__ import annotations

import pytest

from concurbench.samplers import pgstats
from concurbench.samplers.base import SNAPSHOT, Sampler, SamplerDriver
from concurbench.samplers.postgres import Io, TableStats
from concurbench.scenario.model import SamplerSpec

NS = 1_000_000_000


class Clock:
    """Time moves only when the code under test sleeps."""

    def __init__(self):
        self.now = 0
        self.sleeps = 0

    def __call__(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += int(seconds * NS)


class Cursor:
    def __init__(self, row):
        self.row = row

    def fetchone(self):
        return self.row


class StatsServer:
    """Answers the settle queries as a server would at the clock's time.

    `sessions_until`: the window's sessions are connected until then (seconds). `counts(t)`: the
    user-table activity the views hold at t. `collector`: before 15, a reader gets a file written
    at the last multiple of `file_every` (as if written on request, up to that old).
    """

    def __init__(self, clock: Clock, *, sessions_until=0.0, counts=lambda t: 7, collector=False, file_every=0.5):
        self.clock, self.sessions_until, self.counts = clock, sessions_until, counts
        self.collector, self.file_every = collector, file_every
        self.queries: list[str] = []

    def execute(self, sql, args=None):
        t = self.clock() / NS
        self.queries.append(sql.split()[1] if sql.startswith("SELECT") else sql)
        if sql == pgstats.LEFT:
            return Cursor((2 if t < self.sessions_until else 0,))
        if sql == pgstats.NOW:
            return Cursor((t,))
        if sql == pgstats.ACTIVITY:
            if not self.collector:
                return Cursor((None, self.counts(t), 0, 0, 0, 0, 0, 0))
            written = int(t / self.file_every) * self.file_every
            return Cursor((written, self.counts(written), 0, 0, 0, 0, 0, 0))
        return Cursor((None,))

    def rollback(self):
        pass


def settle(server: StatsServer, clock: Clock, version_num: int, closing: bool, sessions=("concurbench:p",)):
    return pgstats.settle(server, version_num, closing=closing, sessions=sessions, clock=clock, sleep=clock.sleep)


def test_from_15_the_opening_reading_does_not_wait():
    clock = Clock()
    server = StatsServer(clock)
    assert settle(server, clock, 180006, closing=False) is None
    assert clock.sleeps == 0


def test_before_15_the_opening_waits_for_a_statistics_file_written_after_it():
    clock = Clock()
    clock.now = int(1.2 * NS)  # the newest file was written at 1.0 s: too old
    server = StatsServer(clock, collector=True)
    assert settle(server, clock, 140023, closing=False) is None
    assert 1.5 * NS <= clock.now < 1.6 * NS  # the file of 1.5 s, after the opening at 1.2 s


def test_the_closing_waits_for_the_sessions_to_leave_then_for_counts_to_agree():
    clock = Clock()
    # the sessions leave at 0.3 s; the last counts reach the views a moment after that
    server = StatsServer(clock, sessions_until=0.3, counts=lambda t: 100 if t < 0.32 else 180)
    assert settle(server, clock, 170002, closing=True) is None
    assert 0.4 * NS <= clock.now < 0.45 * NS  # readings at 0.30 (100), 0.35 (180) and 0.40 (180)
    assert server.queries.count("count(*)") >= 6


def test_before_15_the_closing_readings_come_from_two_files_written_after_the_sessions_left():
    clock = Clock()
    server = StatsServer(clock, sessions_until=0.3, collector=True, counts=lambda t: 100 if t < 0.6 else 180)
    assert settle(server, clock, 140023, closing=True) is None
    # files at 0.5 (100: the last report is still on its way), 1.0 (180), 1.5 (180): settled at 1.5 s
    assert 1.5 * NS <= clock.now < 1.6 * NS


def test_sessions_that_never_leave_end_the_wait_with_a_note():
    clock = Clock()
    server = StatsServer(clock, sessions_until=1e9)
    note = settle(server, clock, 160000, closing=True)
    assert "still connected 10 s after it ended" in note
    assert pgstats.SESSIONS_TIMEOUT_S * NS <= clock.now < (pgstats.SESSIONS_TIMEOUT_S + 0.1) * NS


@pytest.mark.parametrize("version_num, collector", [(140023, True), (180006, False)])
def test_counts_that_never_stop_moving_end_the_wait_with_a_note(version_num, collector):
    clock = Clock()
    server = StatsServer(clock, collector=collector, counts=lambda t: int(t * 1000))
    note = settle(server, clock, version_num, closing=True)
    assert "did not settle within 5 s" in note
    assert clock.now < (pgstats.SETTLE_TIMEOUT_S + 0.6) * NS


def test_a_collector_that_writes_no_file_ends_the_opening_wait_with_a_note():
    clock = Clock()
    clock.now = int(1.2 * NS)
    server = StatsServer(clock, collector=True, file_every=1e9)  # the only file is from 0 s
    assert "did not settle" in settle(server, clock, 140023, closing=False)
    assert clock.now < (1.2 + pgstats.SETTLE_TIMEOUT_S + 0.1) * NS


class Recorder(Sampler):
    """A stand-in snapshot sampler that logs its settles and readings."""

    name = "recorder"
    kind = SNAPSHOT
    early_opening = True

    def __init__(self, log, name="recorder"):
        super().__init__(SamplerSpec(name))
        self.name = name
        self.log = log

    def settle(self, conn, *, closing, sessions, clock, sleep):
        self.log.append(("settle", closing, tuple(sessions)))
        return "late" if closing else None

    def read(self, conn):
        self.log.append(("read", self.name))
        return {"n": len(self.log)}

    def summarize(self, before, after, rows, elapsed_s):
        return {"n": after["n"] - before["n"]}


class OnTime(Recorder):
    """One whose figures do not arrive late: its opening reading waits for the window."""

    early_opening = False

    def settle(self, conn, *, closing, sessions, clock, sleep):
        self.log.append(("on time", closing))


def test_without_warm_up_the_opening_reading_is_taken_before_the_sessions_connect():
    log: list = []
    driver = SamplerDriver([Recorder(log, "a"), Recorder(log, "b")], lambda: object(), 140023,
                           sessions=["concurbench:p"], warmup=0.0)
    driver.open()
    assert log == [("settle", False, ("concurbench:p",)), ("read", "a"), ("read", "b")]  # one settle for both
    assert set(driver.before) == {"a", "b"}
    driver.window_set(0, None)
    driver.measurement_ended(0)
    assert log[3:] == [("settle", True, ("concurbench:p",)), ("read", "a"), ("read", "b")]
    assert driver.errors == ["sampler a: closing reading: late"]
    assert driver.summaries(1.0) == ({"a": {"n": 3}, "b": {"n": 3}}, [])


def test_only_samplers_whose_figures_arrive_late_read_before_the_sessions_connect():
    log: list = []
    driver = SamplerDriver([OnTime(log, "a"), Recorder(log, "b")], lambda: object(), 170000, warmup=0.0)
    driver.open()
    assert log == [("settle", False, ()), ("read", "b")]
    driver.window_set(0, None)
    driver.measurement_ended(0)
    assert log[2:] == [("read", "a"), ("on time", True), ("settle", True, ()), ("read", "a"), ("read", "b")]


def test_with_warm_up_the_opening_reading_is_taken_at_once_when_the_measurement_starts():
    log: list = []
    driver = SamplerDriver([Recorder(log)], lambda: object(), 160000, warmup=1.0)
    driver.open()
    assert log == []
    driver.window_set(0, None)
    driver.measurement_ended(0)
    assert [entry[0] for entry in log] == ["read", "settle", "read"]


class Prepared:
    """A connection on which prepare() can run its checks."""

    def execute(self, sql, args=None):
        return Cursor((0,))

    def rollback(self):
        pass


def test_figures_a_major_cannot_give_are_recorded_as_unavailable():
    driver = SamplerDriver([Io(), TableStats()], Prepared, 140023, warmup=1.0)
    driver.open()
    assert driver.unavailable == {f"io.{k}": "not available on PostgreSQL 14 (pg_stat_io is new in 16)"
                                  for k in Io.KEYS}
    newer = SamplerDriver([Io()], Prepared, 160004, warmup=1.0)
    newer.open()
    assert newer.unavailable == {}
