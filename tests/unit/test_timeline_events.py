"""Timeline events without a server: recording and merging, summary.json round trip (and older files
without events), the report's timeline tables, and the over-time charts marking every event."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from concurbench.background.recorder import Recorder
from concurbench.workload.events import Event, merged
from concurbench.background.hold import HeldTransaction
from concurbench.report.overtime import over_time_frame, over_time_tables
from concurbench.report.render import markdown
from concurbench.report.tables import build_report
from concurbench.results.model import FormatProblem, VariantRun
from concurbench.results.store import load_run
from concurbench.scenario.model import Background

FIXTURE = Path(__file__).parent / "fixtures" / "run_rowlock"
EVENTS = [Event.at(-0.5, "background:reader", "start", "began a read committed transaction"),
          Event.at(0.4, "background:ddl", "statement_start", "ALTER TABLE t ADD COLUMN c int"),
          Event.at(0.7, "pool:readers", "phase", "rate 500"),
          Event.at(1.0, "background:reader", "release", "committed at its release time"),
          Event.at(1.05, "background:ddl", "statement_end", "took 0.650 s; waited Lock:relation 0.60 s")]


def test_recorder_times_events_from_the_window_start():
    rec = Recorder("reader")
    rec.add(1_000_000_000, "start", "began")
    rec.add(3_500_000_000, "release", "committed")
    assert rec.events(0) == [], "no window: no times to give"
    assert rec.events(2_000_000_000) == [Event.at(-1.0, "background:reader", "start", "began"),
                                         Event.at(1.5, "background:reader", "release", "committed")]


def test_merged_orders_pool_and_background_events_by_time():
    pools = [Event.at(0.7, "pool:readers", "phase", "rate 500")]
    background = [e for e in EVENTS if e.source != "pool:readers"]
    assert merged(pools, background) == EVENTS
    assert merged([], []) == []


class FakeEngine:
    """Records the SQL a held transaction sends."""

    def __init__(self):
        self.sent = []

    def begin_isolated(self, conn, isolation):
        self.sent.append(f"BEGIN {isolation}")

    def execute(self, conn, sql):
        self.sent.append(sql)


def test_hold_with_start_after_begins_only_when_its_timer_fires():
    engine, now = FakeEngine(), [0]
    spec = Background("late", "hold_transaction", "repeatable read", ("SELECT 1",), release_after=2.0, start_after=1.0)
    hold = HeldTransaction(spec, "", engine=engine, clock=lambda: now[0])
    hold.conn, hold._measure_from = object(), 10_000_000_000
    hold.release()  # a release before the begin commits nothing
    assert engine.sent == [] and hold.released_at_s is None
    now[0] = 11_000_000_000
    hold._begin_late()
    hold._timer.cancel()
    now[0] = 12_000_000_000
    hold.release()
    assert engine.sent == ["BEGIN repeatable read", "SELECT 1", "COMMIT"]
    assert [(e.kind, e.t_s) for e in hold.timeline()] == [("start", 1.0), ("release", 2.0)]
    hold.measurement_ended(13_000_000_000)
    assert [e.kind for e in hold.timeline()] == ["start", "release"], "released: no stop event"


def test_events_round_trip_through_summary_json_and_older_results_have_none():
    data = json.loads((FIXTURE / "summary.json").read_text())["results"][0]
    assert "events" not in data
    old = VariantRun.from_dict(data, "results[0]")
    assert old.events == [] and "events" not in old.as_dict(), "no events: the key is not written"
    new = VariantRun.from_dict({**data, "events": [e.as_dict() for e in EVENTS]}, "results[0]")
    assert new.events == EVENTS
    assert VariantRun.from_dict(json.loads(json.dumps(new.as_dict())), "r").events == EVENTS


@pytest.mark.parametrize("bad, where", [("soon", "results[0].events"),
                                        ([{"t_s": 1.0, "kind": "start"}], "results[0].events[0]")])
def test_malformed_events_name_where(bad, where):
    data = json.loads((FIXTURE / "summary.json").read_text())["results"][0]
    with pytest.raises(FormatProblem) as info:
        VariantRun.from_dict({**data, "events": bad}, "results[0]")
    assert info.value.where == where


@pytest.fixture()
def timed_run(tmp_path):
    """The row-lock fixture run with a per-100 ms series and timeline events on its first variant run."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    first = summary["results"][0]
    first["elapsed_s"] = 1.5
    first["events"] = [e.as_dict() for e in EVENTS]
    pool = next(iter(first["pools"].values()))
    pool["stats"] = {**(pool.get("stats") or {}), "series": {
        "bucket_ns": 100_000_000, "count": [10] * 4 + [0] * 6 + [30] * 6, "txn_ns": [10 * 5_000_000] * 4 + [0] * 6
        + [30 * 2_000_000] * 6, "statement_ns": {}, "failed": [0] * 16}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return load_run(run_dir)


def test_report_has_a_timeline_table_per_run_with_events(timed_run):
    report = build_report(timed_run)
    timelines = [t for t in report.tables if t.title.startswith("Timeline:")]
    assert len(timelines) == 1
    assert timelines[0].title == "Timeline: for_update @ 4 clients (18.6)"
    assert timelines[0].rows[0] == ["-0.500", "background:reader", "start", "began a read committed transaction"]
    assert [row[2] for row in timelines[0].rows] == [e.kind for e in EVENTS]
    assert "## Timeline: for_update @ 4 clients (18.6)" in markdown(report)


def test_over_time_frame_is_per_100ms_and_cut_at_the_window_end(timed_run):
    frame = over_time_frame(timed_run.variant_runs[0])
    assert len(frame) == 15, "16 intervals kept, the one past 1.5 s is cut"
    assert frame["tps"].tolist()[:5] == [100.0] * 4 + [0.0]
    assert frame["mean_ms"].iloc[0] == pytest.approx(5.0) and frame["mean_ms"].iloc[4] != frame["mean_ms"].iloc[4]
    assert frame["mean_ms"].iloc[12] == pytest.approx(2.0)
    (stem, table), = over_time_tables(timed_run)
    assert stem == "over-time-locks-4clients" and set(table["variant"]) == {"for_update"}


def test_over_time_chart_marks_every_event_in_the_window(timed_run):
    from concurbench.report.plots import figures

    plt = pytest.importorskip("matplotlib.pyplot", reason="plots need matplotlib")
    charts = dict(figures(plt, timed_run))
    try:
        fig = charts["over-time-locks-4clients"]
        tps_ax, lat_ax = fig.axes[:2]
        inside = [e.t_s for e in EVENTS if e.t_s >= 0]
        for ax in (tps_ax, lat_ax):
            verticals = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
            assert verticals == pytest.approx(inside), "a dashed line at each event of the window, none before it"
        labels = [t.get_text().strip() for t in tps_ax.texts]
        assert labels == ["ddl statement start", "readers phase", "reader release", "ddl statement end"]
        assert not lat_ax.texts, "labels only on the throughput panel"
        steps = [line for line in tps_ax.get_lines() if line.get_linestyle() != "--"]
        assert len(steps) == 1 and list(steps[0].get_ydata()[:5]) == [100.0] * 4 + [0.0]
    finally:
        for fig in charts.values():
            plt.close(fig)


def test_an_observer_whose_attributes_share_a_name_gives_no_timeline():
    """An Extended Events session keeps its event names in `events`: the runner asks background sessions for their
    timeline by a name no observer uses (a stand-in session, as SQL Server cannot run here)."""
    from concurbench.background.kinds import background_events
    from concurbench.background.xevents import XEventSession
    from concurbench.scenario.model import Background

    spec = Background(name="xe", kind="xevents", isolation="", sql=(),
                      options={"events": ["sqlserver.sql_batch_completed"], "target": "ring_buffer"})
    session = XEventSession(spec, "DRIVER=x", connect=lambda *a, **k: None)
    assert session.events == ["sqlserver.sql_batch_completed"]
    assert background_events([session]) == []


def test_events_close_in_time_share_one_chart_label():
    from concurbench.report.overtime import label_groups
    groups = label_groups(list(reversed(EVENTS)), close=0.1)
    assert groups == [(-0.5, "reader start"), (0.4, "ddl statement start"), (0.7, "readers phase"),
                      (1.0, "reader release; ddl statement end")]
    assert [t for t, _ in label_groups(EVENTS, close=0.0)] == [-0.5, 0.4, 0.7, 1.0, 1.05]
