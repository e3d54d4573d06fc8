"""The side-by-side decision itself (check/across.py's AcrossServers) on rounds made here, no server started: how
many looks a run to the cap takes and which the verdict names, what it decides of a clear step and of two
releases alike, and the trimmed rounds it tests by. The runs that start servers are in
tests/integration/test_side_by_side_releases.py."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from concurbench.check import CheckPolicy
from concurbench.check.across import AcrossServers, Comparison
from concurbench.check.sides import MIN_RUNS
from concurbench.figures import Better, Place, Scope
from concurbench.results.model import PoolResult, VariantRun
from concurbench.running.load import load_scenario
from concurbench.scenario.claims import Ref
from concurbench.stats import Verdict

SCENARIO = Path(__file__).resolve().parents[1] / "integration" / "scenarios" / "side-by-side.yaml"
COMPARISONS = (Comparison(Ref("update", None, "writers", "tps"), Better.HIGHER, 0.02),
               Comparison(Ref("update", None, "writers", "latency.mean_ms"), Better.LOWER, 0.02))


def made(server: str, repeat: int, figures: dict) -> VariantRun:
    """One variant run of the update pool with these figures, as records."""
    return VariantRun("update", "update", None, server, repeat, pools={"writers": PoolResult("writers", True, 2)},
                      metrics=Place("update", "writers", 2, server, repeat).records(figures, Scope.POOL))


def decide(step: float, cap: int, spread: float, seed: int) -> tuple[AcrossServers, list]:
    """A side-by-side run as the runner drives it (next_round until it stops, then final), each round's new over
    old drawn with this spread around 1 - step."""
    rng = random.Random(seed)
    d = AcrossServers(load_scenario(SCENARIO), CheckPolicy(max_repeats=cap), first=MIN_RUNS, old="16.14",
                      new="16.15", comparisons=COMPARISONS)
    runs: list[VariantRun] = []

    def one_round(repeat: int) -> None:
        factor = (1 - step) * math.exp(rng.gauss(0, spread))
        for server, f in (("16.14", 1.0), ("16.15", factor)):
            runs.append(made(server, repeat, {"tps": 1000 * f, "transactions": 500, "latency.mean_ms": 2 / f}))
    for repeat in range(1, MIN_RUNS + 1):  # the rounds every point gets before the first look
        one_round(repeat)
    while True:
        nxt = d.next_round(runs, skipped={}, busy=False, servers=["16.14", "16.15"], running={"update"})
        if nxt.stop is not None:
            return d, d.final(runs, {})
        one_round(nxt.repeat)


def test_a_run_that_reaches_the_cap_takes_the_looks_it_planned_and_names_the_last():
    d, verdicts = decide(0.0, cap=10, spread=0.2, seed=3)  # wide rounds: nothing decided
    assert d.schedule() == (4, 8, 10)  # every 4th round and the last
    assert d.repeat == 10 and d.looks_taken == d.looks == 3
    assert all(v.verdict is Verdict.INCONCLUSIVE for v in verdicts)
    assert all("look 3 of 3" in v.reason for v in verdicts), [v.reason for v in verdicts]


def test_the_looks_spend_the_whole_error_rate_over_the_schedule():
    d, _ = decide(0.0, cap=24, spread=0.2, seed=3)
    levels = [d.level(d.look(i), 4) for i in range(1, d.looks + 1)]
    assert len(levels) == 6 and sum(levels) == pytest.approx(0.02 / 4)
    assert levels[-1] == pytest.approx(0.02 / 4 * (1 - (20 / 24) ** 4))  # the last look: 52% of it


def test_a_clear_step_is_confirmed_and_two_releases_alike_are_not():
    d, verdicts = decide(0.2, cap=10, spread=0.02, seed=1)
    assert verdicts[0].verdict is Verdict.FAIL and d.repeat < 10
    assert verdicts[0].ratio.high < 0.98
    for seed in range(5):
        _, verdicts = decide(0.0, cap=10, spread=0.02, seed=seed)
        assert all(v.verdict is not Verdict.FAIL for v in verdicts)


def test_the_trimmed_mean_leaves_out_a_fifth_at_each_end_with_yuens_standard_error():
    from concurbench.stats.estimates import estimate, trimmed

    values = [-0.10, -0.09, -0.08, -0.08, -0.07, -0.06, -0.05, -0.04, 0.30, 0.35]  # two disturbed rounds
    t = trimmed(values, 0.2)
    assert t.mean == pytest.approx(sum([-0.08, -0.08, -0.07, -0.06, -0.05, -0.04]) / 6)
    wins = [-0.08] * 3 + [-0.08, -0.07, -0.06, -0.05] + [-0.04] * 3
    mean = sum(wins) / 10
    var = sum((x - mean) ** 2 for x in wins) / 9
    assert t.se == pytest.approx(math.sqrt(9 * var / (6 * 5))) and t.df == 5
    assert trimmed(values[:4], 0.2) == estimate(values[:4])  # nothing to leave out


def test_a_step_with_a_few_disturbed_rounds_is_confirmed_by_the_trimmed_rounds():
    """Rounds of a 10% step where two of twelve were disturbed the other way (something else ran on the
    machine): the trimmed mean confirms it; the plain mean of the same rounds cannot tell."""
    logs = [-0.10, -0.11, -0.09, -0.12, 0.25, -0.10, -0.08, -0.11, -0.10, 0.30, -0.09, -0.10]
    verdicts = {}
    for trim in (0.0, 0.2):
        d = AcrossServers(load_scenario(SCENARIO), CheckPolicy(max_repeats=12), first=MIN_RUNS, old="16.14",
                          new="16.15", comparisons=COMPARISONS[:1], trim=trim)
        runs = []
        for repeat, x in enumerate(logs, 1):
            for server, f in (("16.14", 1.0), ("16.15", math.exp(x))):
                runs.append(made(server, repeat, {"tps": 1000 * f, "transactions": 500}))
        d.looks_taken = d.looks - 1  # the last planned look (12 rounds: after the 12th)
        verdicts[trim] = d.judge(runs)[0]
    assert verdicts[0.2].verdict is Verdict.FAIL and "20% trimmed" in verdicts[0.2].reason
    assert verdicts[0.0].verdict is Verdict.INCONCLUSIVE


def test_the_servers_restart_at_even_steps_of_the_most_rounds_and_the_verdict_counts_the_starts():
    d, verdicts = decide(0.0, cap=24, spread=0.2, seed=3)  # undecided: all 24 rounds
    assert [r for r in range(1, 33) if d.renews(r)] == [9, 17, 25]  # 24 rounds on 3 instances of each server
    assert (d.starts(8), d.starts(9), d.starts(24)) == (1, 2, 3)
    assert all("3 starts of each server" in v.reason for v in verdicts), [v.reason for v in verdicts]
    busy = AcrossServers(load_scenario(SCENARIO), CheckPolicy(max_repeats=24, busy_max_repeats=32), first=MIN_RUNS,
                         old="16.14", new="16.15", comparisons=COMPARISONS, busy=True)
    assert [r for r in range(1, 33) if busy.renews(r)] == [12, 23]  # 32 rounds: 11, 11 and 10 on each instance
    one = AcrossServers(load_scenario(SCENARIO), CheckPolicy(max_repeats=24), first=MIN_RUNS, old="16.14",
                        new="16.15", comparisons=COMPARISONS, instances=1)
    assert not any(one.renews(r) for r in range(1, 33)) and one.starts(24) == 1
