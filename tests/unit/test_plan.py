"""The plan of a run and the progress display: run i of n, elapsed, time left, and a plan that grows.

The clock is injected (a list the test advances), so nothing here waits. That the plan's order is the
order the runner really takes is checked against a real run in tests/integration/test_reliability.py.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from concurbench.cli.progress import Progress
from concurbench.running.plan import FIXED_COUNT_GUESS_S, SERVER_START_S, PlanClock, PlannedRun, clock_text, \
    estimate_s, plan_runs, round_runs, without
from concurbench.running.progress_events import CheckLook, Planned, Provisioning, RunEnded, RunStarted, Stopping, \
    Tick, VariantDone, VariantStarted
from concurbench.results.shards import Plan, Shard
from concurbench.results.model import PoolResult, RunStatus, VariantRun
from concurbench.running.load import load_scenario
from figured import figured

SCENARIO = """name: p
engine: postgres
duration: 10s
warmup: 2s
sweep: [1, 4]
variants:
  a:
    pools:
      p: {clients: sweep, transaction: [SELECT 1]}
  b:
    setup: SELECT 1
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
"""


def variants(tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(SCENARIO)
    return list(load_scenario(path).variants)


def test_plan_follows_the_runners_order(tmp_path):
    vs = variants(tmp_path)
    one_by_one = plan_runs(vs, servers=2, repeats=[1])
    assert [(r.server, r.variant, r.point) for r in one_by_one] == [
        (0, "a", 1), (0, "a", 4), (0, "b", None), (1, "a", 1), (1, "a", 4), (1, "b", None)]
    together = plan_runs(vs, servers=2, repeats=[1, 2], together=True)
    assert [(r.repeat, r.variant, r.server, r.point) for r in together][:6] == [
        (1, "a", 0, 1), (1, "a", 0, 4), (1, "a", 1, 1), (1, "a", 1, 4), (1, "b", 0, None), (1, "b", 1, None)]
    assert len(together) == 12
    # the second round runs backwards (A B, then B A): each variant comes first in every other round
    assert [(r.repeat, r.variant, r.server, r.point) for r in together][6:] == [
        (2, "b", 1, None), (2, "b", 0, None), (2, "a", 1, 4), (2, "a", 1, 1), (2, "a", 0, 4), (2, "a", 0, 1)]


def test_estimates_come_from_durations_and_counts(tmp_path):
    a, b = variants(tmp_path)
    assert estimate_s(a, 4) > estimate_s(a, 1) > 12  # warm-up and window, plus connecting more sessions
    assert estimate_s(b, None) > estimate_s(a, 1)  # its setup step
    runs = plan_runs([a, b], servers=1)
    assert runs[0].estimate_s == round(estimate_s(a, 1) + SERVER_START_S, 2)  # the server starts first
    assert runs[1].estimate_s == round(estimate_s(a, 4), 2)


def test_a_skipped_variant_leaves_the_plan_but_finished_runs_stay(tmp_path):
    runs = plan_runs(variants(tmp_path), servers=2)
    left = without(runs, 1, "a", 0)
    assert left[0] == runs[0] and [(r.server, r.variant) for r in left[1:]] == [(0, "b"), (1, "a"), (1, "a"), (1, "b")]


def test_a_shard_plans_its_share_in_the_runners_order_and_starts_only_its_servers(tmp_path):
    vs = variants(tmp_path)
    plan = Plan.of(2, vs, 2)  # 2 servers x 2 repeats x (a@1, a@4, b) = 12 combinations
    for index in (1, 2, 3):
        share = {(c.server, c.repeat, c.variant, c.point) for c in Shard(index, 3).combinations(plan)}
        runs = plan_runs(vs, servers=2, repeats=[1, 2], together=True, share=share)
        assert {(r.server, r.repeat, r.variant, r.point) for r in runs} == share and len(runs) == 4
        whole = [r for r in plan_runs(vs, servers=2, repeats=[1, 2], together=True)
                 if (r.server, r.repeat, r.variant, r.point) in share]
        assert [(r.server, r.repeat, r.variant, r.point) for r in runs] == \
            [(r.server, r.repeat, r.variant, r.point) for r in whole]  # the order the runner takes them
    second = plan_runs(vs, servers=2, repeats=[1, 2], together=True,
                       share={(c.server, c.repeat, c.variant, c.point) for c in Shard(2, 2).combinations(plan)})
    assert {r.server for r in second} == {1}
    assert second[0].estimate_s == round(estimate_s(vs[0], 1) + SERVER_START_S, 2)  # server 2 starts first here


def test_a_check_round_is_planned_as_the_runner_runs_it_on_servers_already_up(tmp_path):
    a, b = variants(tmp_path)
    wanted = {("a", 4): {"16.4", "17.2"}, ("b", None): {"17.2"}}
    runs = round_runs([a, b], [(0, "16.4"), (1, "17.2")], wanted, repeat=3)
    assert [(r.variant, r.point, r.server, r.repeat) for r in runs] == [
        ("a", 4, 0, 3), ("a", 4, 1, 3), ("b", None, 1, 3)]
    assert [r.estimate_s for r in runs] == [round(estimate_s(a, 4), 2)] * 2 + [round(estimate_s(b, None), 2)]
    backwards = round_runs([a, b], [(0, "16.4"), (1, "17.2")], wanted, repeat=4)
    assert [(r.variant, r.point, r.server) for r in backwards] == [("b", None, 1), ("a", 4, 1), ("a", 4, 0)]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_time_left_corrects_itself_and_takes_a_longer_plan():
    clock = Clock()
    plan = PlanClock(clock)
    assert plan.left() is None and plan.total == 0
    plan.plan(runs(10.0, 3))
    assert (plan.current, plan.total, plan.left()) == (1, 3, 30.0)
    plan.run_started()
    clock.now += 5
    assert plan.left() == 25.0
    clock.now += 10  # the first run took 15 s, not 10: what is left is scaled by 1.5
    plan.run_finished()
    assert plan.ratio() == 1.5 and plan.left() == 30.0 and plan.current == 2
    plan.plan(runs(10.0, 5))  # two more runs: a sequential check asked for more repeats
    assert (plan.current, plan.total, plan.left()) == (2, 5, 60.0)
    plan.run_started()
    clock.now += 100  # a run far beyond its estimate counts as done, never as negative time
    assert plan.left() == 45.0
    assert 0 < plan.fraction() < 1


def test_the_ratio_is_bounded():
    clock = Clock()
    plan = PlanClock(clock)
    plan.plan(runs(1.0, 2))
    plan.run_started()
    clock.now += 60
    plan.run_finished()
    assert plan.ratio() == 4.0 and plan.left() == 4.0


def test_clock_text():
    assert (clock_text(None), clock_text(5), clock_text(65.4), clock_text(3725)) == ("?", "0:05", "1:05", "1:02:05")


def runs(estimate_s: float, count: int) -> tuple[PlannedRun, ...]:
    """`count` planned runs of `estimate_s` seconds each (the clock reads only the estimates)."""
    return tuple(PlannedRun("v", None, 0, 1, estimate_s) for _ in range(count))


def result(name: str) -> VariantRun:
    return figured(VariantRun(variant=name, group="main", point=None, elapsed_s=1.0,
                              pools={"p": PoolResult("p", True, 2)}), {"p": {"tps": 1234.0}})


def variant(name: str) -> VariantStarted:
    return VariantStarted(name, None, {"p": 2}, duration=10.0, warmup=2.0, fixed=False)


def test_plain_lines_say_which_run_of_how_many_and_what_is_left():
    clock = Clock()
    buffer = io.StringIO()
    progress = Progress(Console(file=buffer, width=200), clock=clock)
    progress.on_plan(Planned(runs(10.0, 3)))
    progress.on_provisioning(Provisioning("dsn", owns_server=False))
    progress.on_variant(variant("a"))
    clock.now += 20
    progress.on_variant_done(VariantDone(result("a")))
    progress.on_plan(Planned(runs(10.0, 5)))
    progress.on_variant(variant("b"))
    progress.on_tick(Tick("b", None, "measure", 1.0, 10, 10.0))
    progress.on_stopping(Stopping("dsn", owns_server=False))
    progress.close()
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "plan: 3 variant runs, about 0:30"
    assert lines[1] == "connecting to the dsn server"
    assert lines[2] == "variant a: clients p=2; warm-up 2 s, 10 s; run 1 of 3, 0:00 elapsed, about 0:30 left"
    assert lines[3] == "  done a in 1.0 s: p 1,234 tps"
    assert lines[4] == "plan: now 5 variant runs, about 1:20 left"
    assert lines[5] == "variant b: clients p=2; warm-up 2 s, 10 s; run 2 of 5, 0:20 elapsed, about 1:20 left"
    assert lines[6] == "  b: 1.0 s, 10 txns, 10 tps now"
    assert lines[7] == "leaving the dsn server (its settings as they were)"
    assert "starting" not in buffer.getvalue() and "stopping" not in buffer.getvalue()


def test_the_plan_says_a_shards_share_and_that_check_rounds_may_follow():
    def lines(*events) -> list[str]:
        buffer = io.StringIO()
        progress = Progress(Console(file=buffer, width=200), clock=Clock())
        for event in events:
            (progress.on_check if isinstance(event, CheckLook) else progress.on_plan)(event)
        return buffer.getvalue().splitlines()

    assert lines(Planned(runs(10.0, 3), shard="2/4", of=12)) == [
        "plan: 3 variant runs (shard 2/4 of a run of 12), about 0:30"]
    assert lines(Planned(runs(10.0, 3), check=True), CheckLook(look=1, of=4, open=2, runs=2),
                 Planned(runs(10.0, 5), check=True)) == [
        "plan: 3 variant runs, about 0:30; --check adds rounds while claims are open",
        "check: 2 claims open after 2 runs (look 1 of 4)",
        "plan: now 5 variant runs, about 0:50 left"]


def test_each_run_of_claims_gets_its_own_plan_and_clock():
    """`claims` runs one scenario after another with one display: the second plan is a plan, not a change."""
    clock = Clock()
    buffer = io.StringIO()
    progress = Progress(Console(file=buffer, width=200), clock=clock)
    for name, count in (("first", 3), ("second", 2)):
        progress.on_run_started(RunStarted(name))
        progress.on_plan(Planned(runs(10.0, count)))
        progress.on_variant(variant("a"))
        clock.now += 30
        progress.on_variant_done(VariantDone(result("a")))
        progress.on_run_ended(RunEnded(name, RunStatus.OK))
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "plan: 3 variant runs, about 0:30" and lines[3] == "plan: 2 variant runs, about 0:20"
    assert lines[4] == "variant a: clients p=2; warm-up 2 s, 10 s; run 1 of 2, 0:00 elapsed, about 0:20 left"


def test_a_terminal_gets_a_bar_of_the_whole_run():
    clock = Clock()
    buffer = io.StringIO()
    progress = Progress(Console(file=buffer, width=160, force_terminal=True, color_system=None), clock=clock)
    progress.on_plan(Planned(runs(10.0, 4)))
    progress.on_provisioning(Provisioning("embedded"))
    progress.on_variant(variant("a"))
    clock.now += 3
    progress.on_tick(Tick("a", None, "measure", 1.0, 10, 10.0))
    progress.bar.refresh()
    progress.close()
    text = buffer.getvalue()
    assert "starting the embedded server" in text
    assert "run 1/4 a" in text and "0:03 elapsed, about 0:37 left" in text and "10 tps now" in text


def test_a_fixed_count_is_estimated_by_a_guess_not_by_the_duration_that_bounds_it(tmp_path):
    path = tmp_path / "counted.yaml"
    path.write_text("name: counted\nengine: postgres\nduration: 1h\nwarmup: 0s\nvariants:\n  once:\n    pools:\n"
                    "      p: {clients: 1, transactions: 100, transaction: [SELECT 1]}\n")
    (counted,) = load_scenario(path).variants
    assert counted.fixed_count
    assert FIXED_COUNT_GUESS_S <= estimate_s(counted, None) < FIXED_COUNT_GUESS_S + 2  # not an hour

