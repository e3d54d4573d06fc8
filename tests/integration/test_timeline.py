"""Background sessions on a timeline, on a real PostgreSQL: a held transaction that begins late and
commits at stop_after, and `kind: statement` run at a time — waiting on a lock, failing on its own
lock_timeout, cancelled at the window's end — with the events each records.

The windows are 1-1.5 s with one client; times are checked to within 0.25 s, since a timer thread
and the server's lock queue add milliseconds, not tenths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from concurbench.workload.events import merged
from concurbench.background.kinds import background_events, make_background
from concurbench.engines import postgres as pg
from concurbench.running.runner import Runner
from concurbench.scenario.model import Background, Pool, Statement
from concurbench.running.load import load_scenario
from concurbench.workload.pool import LoadGenerator
from waiting import wait_until

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "timeline.yaml"
SLACK = 0.25


@pytest.fixture()
def table(admin):
    admin.execute("DROP TABLE IF EXISTS timed")
    admin.execute("CREATE TABLE timed (id int)")
    admin.execute("INSERT INTO timed SELECT g FROM generate_series(1, 10) g")
    yield "timed"
    admin.execute("DROP TABLE IF EXISTS timed")


def run_with(server, specs, *, duration=1.0):
    """One reader pool for `duration` with the background sessions of `specs`; returns (pool stats, sessions)."""
    conninfo = server[1].conninfo
    sessions = [make_background(spec, conninfo, pg) for spec in specs]
    pool = Pool("readers", 1, (Statement("count", "SELECT count(*) FROM timed"),))
    try:
        for bg in sessions:
            bg.start()
        outcome = LoadGenerator(conninfo, [pool], warmup=0.1, duration=duration, listeners=sessions,
                                loop="python").run()
    finally:
        for bg in sessions:
            bg.close()
    return outcome.pools["readers"], sessions


def only(events, kind):
    found = [e for e in events if e.kind == kind]
    assert len(found) == 1, events
    return found[0]


def leftover_sessions(admin) -> list[str]:
    """The harness's sessions still on the server, once closed connections have had 2 s to end their backends."""
    def left():
        return [row[0] for row in admin.execute("SELECT application_name FROM pg_stat_activity "
                                                "WHERE application_name LIKE 'concurbench:%%'")]
    wait_until(lambda: not left(), timeout=2.0)
    return left()


def test_hold_starts_late_and_commits_at_stop_after(server, admin, table):
    # the held transaction takes the table's lock from 0.3 s to 0.8 s: the reader completes nothing then
    spec = Background("late", "hold_transaction", "read committed", ("LOCK TABLE timed IN ACCESS EXCLUSIVE MODE",),
                      release_after=0.8, start_after=0.3)
    stats, (hold,) = run_with(server, [spec], duration=1.2)
    events = hold.timeline()
    assert [e.kind for e in events] == ["start", "release"]
    assert only(events, "start").t_s == pytest.approx(0.3, abs=SLACK)
    assert only(events, "release").t_s == pytest.approx(0.8, abs=SLACK)
    assert hold.describe()["released_at_s"] == pytest.approx(0.8, abs=SLACK)
    counts = stats.series.count
    assert counts[:2].sum() > 0, "the reader ran before the lock was taken"
    assert counts[5:7].sum() == 0, "the reader completed nothing while the late transaction held the lock"
    assert counts[10:12].sum() > 0, "the reader ran again after the commit"
    assert leftover_sessions(admin) == []


def test_hold_without_stop_is_held_to_the_window_end(server, admin, table):
    spec = Background("held", "hold_transaction", "read committed", ("SELECT 1",), start_after=0.2)
    _, (hold,) = run_with(server, [spec], duration=0.6)
    kinds = [(e.kind, e.t_s) for e in hold.timeline()]
    assert [k for k, _ in kinds] == ["start", "stop"]
    assert kinds[1][1] == pytest.approx(0.6, abs=SLACK)
    assert hold.describe()["released_at_s"] is None
    assert leftover_sessions(admin) == []


@pytest.fixture(scope="module")
def queued(server, running_server, tmp_path_factory):
    """The timeline scenario through the runner: its stored run directory."""
    scenario = load_scenario(SCENARIO)
    outcome = Runner(scenario, running_server(server[1]), out_dir=tmp_path_factory.mktemp("runs")).run()
    assert outcome.error is None, outcome.error
    return outcome


def test_statement_waits_behind_the_held_transaction_and_records_it(queued):
    result = queued.results[0]
    ddl = next(b for b in result.background if b["name"] == "ddl")
    assert ddl["outcome"] == "finished"
    assert ddl["started_at_s"] == pytest.approx(0.5, abs=SLACK)
    assert ddl["ended_at_s"] == pytest.approx(1.0, abs=SLACK), "it ends once the reader commits"
    assert ddl["waits_s"]["Lock:relation"] == pytest.approx(0.5, abs=SLACK)
    # the events of both sessions, merged in time order, as summary.json keeps them
    kinds = [(e.source, e.kind) for e in result.events]
    assert kinds == [("background:reader", "start"), ("background:ddl", "statement_start"),
                     ("background:reader", "release"), ("background:ddl", "statement_end")]
    assert result.events[0].t_s < 0, "the reader's transaction began in the warm-up"
    assert "Lock:relation" in result.events[-1].detail
    stored = json.loads((queued.run_dir / "summary.json").read_text())["results"][0]["events"]
    assert stored == [e.as_dict() for e in result.events]


def test_timeline_is_in_the_report(queued):
    report = (queued.run_dir / "report.md").read_text()
    assert "Timeline" in report
    assert "statement_end" in report and "background:ddl" in report


def test_statement_fails_on_its_own_lock_timeout_with_the_server_error(server, admin, table):
    hold = Background("reader", "hold_transaction", "read committed", ("SELECT count(*) FROM timed",))
    ddl = Background("ddl", "statement", "read committed",
                     ("SET lock_timeout = '300ms'; ALTER TABLE timed ADD COLUMN c int",), at=0.3)
    _, sessions = run_with(server, [hold, ddl], duration=1.0)
    statement = sessions[1].describe()
    assert statement["outcome"] == "failed"
    assert "lock timeout" in statement["server_error"]
    assert statement["ended_at_s"] - statement["started_at_s"] == pytest.approx(0.3, abs=SLACK)
    failed = only(merged(background_events(sessions)), "statement_failed")
    assert failed.source == "background:ddl" and "lock timeout" in failed.detail
    assert "Lock:relation" in failed.detail
    columns = admin.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'timed'").fetchone()
    assert columns[0] == 1, "the ALTER TABLE did not happen"
    assert leftover_sessions(admin) == []


def test_statement_still_running_at_the_window_end_is_cancelled(server, admin, table):
    hold = Background("reader", "hold_transaction", "read committed", ("SELECT count(*) FROM timed",))
    ddl = Background("ddl", "statement", "read committed", ("ALTER TABLE timed ADD COLUMN c int",), at=0.2)
    _, sessions = run_with(server, [hold, ddl], duration=0.6)
    statement = sessions[1].describe()
    assert statement["outcome"] == "cancelled"
    assert "server_error" not in statement and "error" not in statement
    failed = only(sessions[1].timeline(), "statement_failed")
    assert failed.detail.startswith("cancelled at the end of the window")
    assert failed.t_s == pytest.approx(0.6, abs=SLACK)
    assert leftover_sessions(admin) == []
