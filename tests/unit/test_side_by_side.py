"""`history check --side-by-side` where no server is started: a budget that runs out, a release that cannot be
had, a target that cannot start another release, a boundary with nothing suspected (compared all the same), a finding not at a release
boundary, and the store keeping confirming runs out of every series. The stores are made here night by night
(history_nights.py's records, with the scenario file a side-by-side run would load); the runs that start
servers are in tests/integration/test_side_by_side_releases.py."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from concurbench import sidebyside
from concurbench.history import gate, gate_report
from concurbench.history.analysis import analyse
from concurbench.history.confirm import Confirmation, ConfirmState, cleared
from concurbench.history.findings import FindingState
from concurbench.history.gatefile import GateSpec
from concurbench.history.records import CONFIRMING, NO_POINT, PointRecord, RunKind, SeriesKey, read_run
from concurbench.history.store import open_store

from history_nights import run_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "integration" / "scenarios" / "side-by-side.yaml"
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn"
SHA = hashlib.sha256(SCENARIO.read_bytes()).hexdigest()
TPS, LATENCY = 2000.0, 1.0


class Store:
    """A store of nights of the side-by-side scenario's one location: tps and mean latency, 2% spread."""

    def __init__(self, path: Path, target: str = "binaries", took_s: float = 2.0):
        self.path, self.target, self.took_s, self.night = path, target, took_s, 0
        self.noise = [0.0, 0.012, -0.015, 0.008, -0.004, 0.017, -0.011, 0.003, -0.019, 0.01, -0.007, 0.014]

    def add(self, server: str, factor: float = 1.0, kind: RunKind = RunKind.MEASURED, busy: bool = False) -> str:
        rec = run_record(self.night, server, busy=busy)
        started = datetime.fromisoformat(rec.started)
        rec = replace(rec, scenario="side-by-side", scenario_sha256=SHA, scenario_file=str(SCENARIO),
                      target=self.target, ended=(started + timedelta(seconds=self.took_s)).isoformat(), kind=kind)
        wiggle = 1 + self.noise[self.night % len(self.noise)]
        points = [PointRecord(rec.run_id, SeriesKey("side-by-side", "update", "writers", 2, NO_POINT, server, metric),
                              "ok", value, None, None, None, None, 1, (value,))
                  for metric, value in (("tps", TPS * factor * wiggle), ("latency.mean_ms", LATENCY / factor / wiggle))]
        with open_store(self.path, create=True) as s:
            s.add(rec, points)
        self.night += 1
        return rec.run_id

    def check(self, run_id: str, **options) -> sidebyside.Night:
        with open_store(self.path) as s:
            runs = {r.id for r in s.runs() if r.record.run_id == run_id}
            result = gate.check(s, GateSpec(), runs=runs, checked=[run_id])
            return sidebyside.confirm_night(s, result, runs=runs, out_dir=self.path.parent / "ab", **options)


def test_a_budget_that_runs_out_lists_the_boundary_runs_nothing_and_the_gate_answers_from_the_history(tmp_path):
    """The checked run's variant runs took ten minutes: two rounds of them on two servers do not fit in ten.
    Tonight's run was made on a busy machine (a line of its own): still the new release's first run on its
    track, judged against the quiet runs of the release before."""
    store = Store(tmp_path / "h.db", took_s=600)
    for _ in range(6):
        store.add("16.14")
    night = store.check(store.add("16.15", factor=0.6, busy=True), budget_s=600)
    (done,) = night.done
    assert done.boundary.line == "16 (busy 50%)" and done.boundary.old == "16.14"
    assert done.run_dir is None and not (tmp_path / "ab").exists()
    states = {s.key.metric: c for s, c in done.confirmations}
    assert set(states) == {"tps", "latency.mean_ms"}
    assert all(c.state is ConfirmState.OVER_BUDGET for c in states.values())
    assert "needs about 40.2 min for its first two rounds, 10.0 min of the budget left" in states["tps"].why
    text = night.summary()
    assert "Left by the budget: side-by-side on 16 (busy 50%): 16.15 after 16.14" in text
    assert not night.result.regression  # one run of 16.15: the history alone has no finding yet
    with open_store(store.path) as s:
        assert not s.findings() and [r.record.kind for r in s.runs()].count(RunKind.CONFIRMATION) == 0


def test_a_release_that_cannot_be_had_leaves_the_finding_as_the_history_judged_it_with_why(tmp_path):
    """13.4 -> 13.5 on the binaries target, which has 14 to 18: the history's finding (three nights of the new
    release after six) stays red, its confirmation unavailable with the reason; the summary says it."""
    store = Store(tmp_path / "h.db")
    for _ in range(6):
        store.add("13.4")
    store.add("13.5", factor=0.6)
    store.add("13.5", factor=0.6)
    night = store.check(store.add("13.5", factor=0.6))
    assert night.result.regression  # red as the history judged it
    assert {f.key.metric for f in night.result.red} == {"tps", "latency.mean_ms"}
    (done,) = night.done
    assert done.boundary.old == "13.4" and done.boundary.new == "13.5" and done.run_dir is None
    for s, c in done.confirmations:
        assert s.finding is not None and c.state is ConfirmState.UNAVAILABLE
        assert "the binaries target has PostgreSQL 14 to 18" in c.why and "13.4" in c.why
    with open_store(store.path) as s:
        kept = s.findings()
    assert all(Confirmation.of(f.confirmation).state is ConfirmState.UNAVAILABLE for f in kept)
    assert all(f.state is FindingState.NEW and not cleared(f) for f in kept)
    assert "side-by-side on 13: 13.5 after 13.4, first run 20261201T060000Z-night: unavailable: the releases " \
           "cannot both be had here: --server-version 13.4: the binaries target has PostgreSQL 14 to 18" \
           in night.summary()


def test_a_run_on_a_dsn_target_says_confirming_needs_a_target_that_can_start_another_release(tmp_path):
    store = Store(tmp_path / "h.db", target="dsn")
    for _ in range(6):
        store.add("16.14")
    night = store.check(store.add("16.15", factor=0.6))
    (done,) = night.done
    (why,) = {c.why for _, c in done.confirmations}
    assert "ran on the dsn target, which cannot start another release of the server; confirming needs a target " \
           "that can (binaries or docker)" in why
    assert not night.result.regression


def test_a_first_run_of_a_new_release_that_moved_nothing_its_worse_way_is_compared_all_the_same(tmp_path):
    """A release's first run faster than the old level: the history suspects nothing, and one run cannot convince
    it either way, so its gated series are planned side by side all the same, marked not suspected, after a
    boundary with a suspicion (here the budget of one second lets neither run: no server starts)."""
    store = Store(tmp_path / "h.db")
    for _ in range(6):
        store.add("16.14")
    night = store.check(store.add("16.15", factor=1.2), budget_s=1)
    (done,) = night.done
    assert {s.key.metric: s.suspected for s in done.boundary.suspicions} == {"tps": False, "latency.mean_ms": False}
    assert all(c.state is ConfirmState.OVER_BUDGET for _, c in done.confirmations)
    assert "2 clients tps (+18.3%, not suspected in the history)" in night.summary()  # against the old level
    assert not night.result.regression


def test_a_finding_not_at_a_release_boundary_is_judged_by_the_history_alone_and_says_so(tmp_path):
    store = Store(tmp_path / "h.db")
    for _ in range(6):
        store.add("16.14")
    for _ in range(2):
        store.add("16.14", factor=0.6)
    night = store.check(store.add("16.14", factor=0.6))
    assert night.result.regression and not night.done
    text = night.summary()
    assert "tps: not at a release boundary: judged by the history alone." in text


def test_the_store_keeps_confirming_runs_out_of_every_series(tmp_path):
    """A confirming run's figures (here ten times lower) are in the store and in no series' level: the gate and
    the detector see only the runs of the series; a run directory marked CONFIRMING is added as one."""
    store = Store(tmp_path / "h.db")
    for _ in range(8):
        store.add("16.14")
    wild = store.add("16.14", factor=0.1, kind=RunKind.CONFIRMATION)
    for _ in range(3):
        last = store.add("16.14")
    with open_store(store.path) as s:
        assert any(r.record.run_id == wild and r.record.kind is RunKind.CONFIRMATION for r in s.runs())
        a = analyse(s)
        assert all(p.run.record.run_id != wild for series in a.series for p in series.points)
        assert not any(series.changes for series in a.series)
        result = gate.check(s, GateSpec(), runs={r.id for r in s.runs() if r.record.run_id == last}, checked=[last])
    assert not result.regression and not result.made
    marked = tmp_path / "marked"
    shutil.copytree(FIXTURE_RUN, marked)
    assert read_run(marked)[0].kind is RunKind.MEASURED
    (marked / CONFIRMING).write_text(json.dumps({"confirms": last}))
    assert read_run(marked)[0].kind is RunKind.CONFIRMATION
    done = CliRunner().invoke(_history(), ["add", str(marked), "--store", str(store.path)])
    assert done.exit_code == 0, done.output
    with open_store(store.path) as s:
        kinds = {r.record.run_id: r.record.kind for r in s.runs()}
        assert kinds["marked"] is RunKind.CONFIRMATION
        assert "marked" not in {r.record.run_id for r in analyse(s).runs}


def test_a_not_confirmed_finding_is_not_red_and_a_confirmed_one_names_its_ratio(tmp_path):
    """What a side-by-side run decided, kept with a finding, is what later checks go by: decided not worse is not
    red (the history's suspicion shown as such); confirmed names new over old in its cause's line and JUnit."""
    store = Store(tmp_path / "h.db")
    for _ in range(6):
        store.add("16.14")
    store.add("16.15", factor=0.6)
    store.add("16.15", factor=0.6)
    last = store.add("16.15", factor=0.6)
    with open_store(store.path) as s:
        runs = {r.id for r in s.runs() if r.record.run_id == last}
        found = gate.check(s, GateSpec(), runs=runs, checked=[last])
        assert found.regression
        tps, latency = sorted(found.red, key=lambda f: f.key.metric != "tps")
        base = dict(old="16.14", new="16.15", run="20261201T0900Z-ab", minutes=1.5, rounds=5)
        yes = Confirmation(ConfirmState.CONFIRMED, "worse", metric="tps", ratio=0.61, low=0.6, high=0.62,
                           decided=True, **base)
        no = Confirmation(ConfirmState.NOT_CONFIRMED, "not worse", metric="latency.mean_ms", ratio=1.0, low=0.99,
                          high=1.01, decided=True, **base)
        s.save_findings([], [replace(tps, confirmation=yes.as_dict()), replace(latency, confirmation=no.as_dict())])
        again = gate.check(s, GateSpec(), runs=runs, checked=[last])
    assert [f.key.metric for f in again.red] == ["tps"]
    (cause,) = again.causes
    assert f"Confirmed side by side: {tps.name} 16.15/16.14 tps 0.610 [0.600, 0.620] (A/B run 20261201T0900Z-ab)" \
        in gate_report.cause_line(cause)
    assert "16.15/16.14 tps 0.610" in gate_report.junit(again)


def _history():
    from concurbench.cli.history import history

    return history
