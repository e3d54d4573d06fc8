"""A busy machine: its figures, the line a run's report shows, the plan a check makes, an open claim's reason."""

from __future__ import annotations

import pytest

from concurbench import stats
from concurbench.check import CheckPolicy, Sequential, with_machine
from concurbench.report.tables import build_report
from concurbench.results.machine import MachineLoad
from concurbench.results.model import Run, ScenarioInfo, VariantRun
from concurbench.workload.cpu_wait import cpus_in_use

from test_check_evaluate import _scenario, judge, run

QUIET = MachineLoad(2, load_average=0.4, others_cpus=[0.02, 0.04, 0.0], cpu_wait=0.78, waited_in="a@90, round 1")


def test_a_quiet_machine_is_not_busy_though_the_server_beside_the_workers_makes_them_wait():
    assert not QUIET.busy and not QUIET.contended and QUIET.line() is None


def test_what_others_used_at_the_pauses_makes_the_machine_busy_and_the_line_names_it():
    machine = MachineLoad(2, 0.5, [1.0, 0.98, 0.02])
    assert machine.busy and machine.contended  # the check plans on what it measured now
    assert machine.line().startswith("Busy machine: other processes kept 0.98 of its 2 CPUs busy")
    assert MachineLoad.from_dict(machine.as_dict()) == machine


def test_a_quiet_run_a_minute_after_another_is_not_busy_and_the_load_average_is_never_in_the_line():
    """The load average lags: a minute after a 90-client run on two cores it reads 4.8 on a quiet machine. The old
    line called that run's machine busy ("its load average was 4.8 on 2 CPUs"); only others' CPUs name it now."""
    after_another = MachineLoad(2, 4.8, [0.03, 0.01])
    assert not after_another.busy and not after_another.contended and after_another.line() is None
    assert after_another.reasons() == [] and after_another.load_average == 4.8  # kept with the run all the same
    assert MachineLoad.from_dict(after_another.as_dict()) == after_another
    beside_a_neighbour = MachineLoad(2, 4.8, [1.01, 0.99])
    assert beside_a_neighbour.busy and "load average" not in beside_a_neighbour.line()
    assert "load average" not in beside_a_neighbour.short()


def test_the_busy_line_gives_the_workers_wait_too():
    busy = MachineLoad(2, 0.5, [1.0], 0.62, "a@4, round 2")
    assert "; the load generator's processes waited for a CPU up to 62% of their load loop (a@4, round 2)." \
        in busy.line()


def test_the_workers_waits_come_from_the_variant_run_whose_workers_waited_most():
    runs = [VariantRun("a", "g", 4, repeat=1, worker_wait_s=[0.5, 0.7], worker_wall_s=[2.0, 2.0]),
            VariantRun("b", "g", 90, repeat=2, worker_wait_s=[1.3, 1.1], worker_wall_s=[2.0, 2.0]),
            VariantRun("c", "g", None, repeat=1, worker_wait_s=[None], worker_wall_s=[2.0]),
            VariantRun("d", "g", None, repeat=1)]  # stored before the waits were kept
    machine = MachineLoad(2).with_waits(runs)
    assert machine.cpu_wait == pytest.approx(0.6) and machine.waited_in == "b@90, round 2"
    assert MachineLoad(2).with_waits(runs[2:]).cpu_wait is None


def test_cpus_in_use_over_a_pause():
    ticks = iter([(100, 1000), (150, 1100)])  # 50 busy ticks of 100 on two CPUs
    assert cpus_in_use(2, 0.25, sleep=lambda s: None, read=lambda: next(ticks)) == 1.0
    assert cpus_in_use(2, 0.25, sleep=lambda s: None, read=lambda: None) is None


def test_a_busy_machine_gives_the_check_more_runs_planned_before_the_first_look(tmp_path):
    from concurbench.running.load import load_scenario

    scenario = load_scenario(_scenario(tmp_path), quick=True)
    quiet = Sequential(scenario, CheckPolicy(max_repeats=5, busy_max_repeats=8), first=1)
    assert not quiet.plan(False) and quiet.looks == 4
    busy = Sequential(scenario, CheckPolicy(max_repeats=5, busy_max_repeats=8), first=1)
    assert busy.plan(True) and busy.max_repeats == 8 and busy.looks == 7
    # the error rate is spent over the looks planned: all of it, as on a quiet machine
    assert sum(busy.look(k).level_for(1) for k in range(1, 8)) == pytest.approx(stats.ALPHA)
    busy.judge([run("a", r, point=32) for r in (1, 2)] + [run("b", r, point=32) for r in (1, 2)])
    assert not busy.plan(False) and busy.max_repeats == 8  # after the first look the plan stands
    given = Sequential(scenario, CheckPolicy(max_repeats=5), first=1)  # --max-repeats given: no more than it
    assert not given.plan(True) and given.max_repeats == 5


def test_an_open_claim_on_a_busy_machine_says_what_would_likely_decide_it():
    runs = [run("a", r, tps=t) for r, t in ((1, 1090), (2, 1040), (3, 1190))] + \
        [run("b", r, tps=t) for r, t in ((1, 1000), (2, 1030), (3, 1040))]
    (v,) = judge(["a: tps > b: tps"], runs)
    assert v.verdict == "inconclusive" and v.runs_needed is not None and f"--max-repeats {v.runs_needed})" in v.reason
    busy = MachineLoad(2, 0.3, [1.02])
    (said,) = with_machine([v], busy)
    assert said.reason.startswith(v.reason)
    assert said.reason.endswith(f"; the machine was busy (other processes kept 1.02 of its 2 CPUs busy while the "
                                f"run's load paused): a quieter machine or --max-repeats {v.runs_needed} would "
                                f"likely decide it")
    assert with_machine([v], QUIET) == [v]
    (thin,) = judge(["a: tps > b: tps"], runs[:1] + runs[3:4])  # one run a side: no test, nothing to add
    assert with_machine([thin], busy) == [thin]


def test_the_report_of_a_run_on_a_busy_machine_has_the_line():
    scenario = ScenarioInfo(name="s", title="t", quick=True)
    busy = MachineLoad(2, 0.3, [1.02])
    assert busy.line() in build_report(Run(scenario=scenario, machine=busy)).lines
    quiet = build_report(Run(scenario=scenario, machine=QUIET)).lines
    assert not any(line.startswith("Busy machine") for line in quiet)
