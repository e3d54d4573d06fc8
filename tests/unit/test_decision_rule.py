"""The statistics behind every verdict, tested as a rule: simulated runs with known answers.

Each simulation draws many runs from a model whose truth is known (tests/unit/simulated.py: steady
windows, windows that stall for half their length, windows that decay; a drift shared by the arms of
a round and a spread of each run's own) and counts how often the rule gives a wrong verdict, and how
often it decides what is there. The seeds are fixed, so the figures are the same on every machine;
the rates are printed at the end of the test run. A rule that does not hold its level (a window's
spread standing in for the runs', a check that forgets its looks) fails these tests by a wide margin.
"""

from __future__ import annotations

import math
import random

import pytest

import simulated as sim
from concurbench import stats as S


def _tolerance(rate: float, sims: int) -> float:
    """Monte Carlo tolerance: a rate measured over `sims` simulations is within 3 standard errors of its truth."""
    return 3 * math.sqrt(rate * (1 - rate) / sims)


def _ar1(rng: random.Random, mean: float, sd: float, n: int, phi: float) -> list[float]:
    """A stationary AR(1) series: neighbouring intervals of a load are correlated."""
    out, e = [], rng.gauss(0, sd)
    for _ in range(n):
        e = phi * e + math.sqrt(1 - phi * phi) * rng.gauss(0, sd)
        out.append(mean + e)
    return out


# -- one window: what a single run's interval says ----------------------------------------------------

@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_a_windows_interval_covers_its_mean_on_correlated_series(phi):
    rng, sims = random.Random(100 + int(phi * 10)), 2000
    covered = 0
    for _ in range(sims):
        est = S.within_run(_ar1(rng, 1000, 100, 20, phi))
        covered += est.low <= 1000 <= est.high
    assert covered / sims >= 0.95 - _tolerance(0.05, sims)


def test_plain_batch_spread_would_not_cover_on_correlated_series():
    """The check above has teeth: ignoring the autocorrelation leaves the mean out far more than 5% of the time."""
    rng, sims = random.Random(7), 2000
    covered = sum(S.estimate(xs).low <= 1000 <= S.estimate(xs).high
                  for xs in (_ar1(rng, 1000, 100, 20, 0.8) for _ in range(sims)))
    assert covered / sims < 0.85


def test_a_mean_latency_interval_covers_its_truth():
    """Mean latency as sum / count per interval (the delta method)."""
    rng, sims, covered = random.Random(3), 2000, 0
    for _ in range(sims):
        counts = [max(1, int(c)) for c in _ar1(rng, 60, 8, 20, 0.5)]
        sums = [c * m for c, m in zip(counts, _ar1(rng, 2.0, 0.3, 20, 0.5))]
        est = S.within_run(sums, counts)
        covered += est.low <= 2.0 <= est.high
    assert covered / sims >= 0.95 - _tolerance(0.05, sims)


def test_steady_windows_pass_the_steadiness_test_and_stalls_steps_and_decays_do_not(simulated_rates):
    """A window is shown steady unless a part of it differs from the rest (docs/claims.md)."""
    rng, sims = random.Random(11), 1000
    rates = {}
    for shape in ("steady", "step", "decay"):
        for buckets in (20, 60):
            steady = sum(S.within_run(sim.window(rng, shape, 100.0, buckets)).steady for _ in range(sims))
            rates[(shape, buckets)] = steady / sims
            simulated_rates(f"steadiness: {shape} windows of {buckets} intervals shown steady in {steady / sims:.1%}")
    assert rates[("steady", 20)] >= 0.9 and rates[("steady", 60)] >= 0.95
    assert rates[("step", 20)] <= 0.01 and rates[("step", 60)] == 0
    assert rates[("decay", 20)] <= 0.1 and rates[("decay", 60)] == 0
    assert S.within_run([9000.0] * 30 + [0.0] * 30).shift == "the level changes 50% into the window (-100%)"
    assert S.within_run([100.0 - i for i in range(40)]).shift == "the level falls through the window (-39% over the window)"


# -- one claim at one look --------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 5])
def test_repeats_on_the_log_scale_hold_their_level(n):
    """Skewed (log-normal) run-to-run noise, equal truth: each direction decided at most 2.5% of the time."""
    rng, sims = random.Random(n), 3000
    verdicts = []
    for _ in range(sims):
        a = S.Runs(tuple(math.exp(rng.gauss(0, 0.3)) for _ in range(n)), tuple(range(n)))
        b = S.Runs(tuple(math.exp(rng.gauss(0, 0.3)) for _ in range(n)), tuple(range(100, 100 + n)))
        test = S.test_runs(a, b)
        verdicts.append(S.decide(">", test, test.two_sided, S.ALPHA))
    for verdict in (S.PASS, S.FAIL):
        assert verdicts.count(verdict) / sims <= S.ALPHA / 2 + _tolerance(S.ALPHA / 2, sims)


@pytest.mark.parametrize("paired", [True, False])
def test_paired_and_unpaired_tests_hold_their_level_under_round_drift(paired):
    """Three rounds that drift by 20% and runs by 5% of their own, equal truth: `a > b` passes at most 2.5% of the
    time, paired by round or not."""
    rng, sims = random.Random(31 + paired), 3000
    passed = 0
    for _ in range(sims):
        drift = [math.exp(rng.gauss(0, 0.2)) for _ in range(3)]
        a, b = ([100 * d * math.exp(rng.gauss(0, 0.05)) for d in drift] for _ in range(2))
        test = S.test_runs(S.Runs(tuple(a), (1, 2, 3)), S.Runs(tuple(b), (1, 2, 3) if paired else (4, 5, 6)))
        assert test.paired == paired
        passed += S.decide(">", test, test.two_sided, S.ALPHA) == S.PASS
    assert passed / sims <= S.ALPHA / 2 + _tolerance(S.ALPHA / 2, sims)


# -- a whole check: claims at the boundary, over every look --------------------------------------------

BOUNDARY = [(0.0, 0.0, 1), (0.2, 0.05, 1), (0.0, 0.2, 1), (0.1, 0.1, 6)]


@pytest.mark.parametrize("shape", ["steady", "step", "decay"])
def test_no_wrong_verdict_in_a_check_of_claims_at_the_boundary(shape, simulated_rates):
    """Claims `a > b` where a equals b, looked at after 2, 3, 4 and 5 runs a side: any verdict is a false alarm
    (PASS is wrong; FAIL would fail a CI gate on a change that is not there). The chance of one or more over the
    whole check stays at most 5%, alone or among six such claims."""
    for drift, own, claims in BOUNDARY:
        rng, sims = random.Random(f"{shape}:{drift}:{own}:{claims}"), 1000
        wrong = sum(any(v is not None for v in sim.check(
            rng, (shape, shape), 1.0, 1.0, drift, own, claims=claims)) for _ in range(sims))
        simulated_rates(f"boundary: {shape} windows, drift {drift:.0%}, own spread {own:.0%}, {claims} claim(s): "
                        f"a wrong verdict in {wrong / sims:.1%} of {sims} checks")
        assert wrong / sims <= S.ALPHA + _tolerance(S.ALPHA, sims), (drift, own, claims)


def test_without_the_look_correction_the_family_would_err_more_often(simulated_rates):
    """The same checks at the full level at every look err well above 5%: the spending is what holds it."""
    rng, sims = random.Random(17), 1000
    wrong = sum(any(v is not None for v in sim.check(
        rng, ("steady", "steady"), 1.0, 1.0, 0.1, 0.1, claims=6, levels=(S.ALPHA,) * 4)) for _ in range(sims))
    simulated_rates(f"boundary without spending over looks: a wrong verdict in {wrong / sims:.1%} of {sims} checks")
    assert wrong / sims > 2 * S.ALPHA


# -- power: a 2x effect against a 1.5x claim ---------------------------------------------------------------

POWER_SHAPES = [(("steady", "steady"), 2.0), (("steady", "step"), 1.0), (("step", "step"), 2.0),
                (("decay", "decay"), 2.0)]  # steady against step: the stall halves the figure


@pytest.mark.parametrize("shapes,ratio", POWER_SHAPES, ids=["steady", "stall", "step", "decay"])
def test_a_2x_effect_passes_a_1_5x_claim_within_five_runs_a_side(shapes, ratio, simulated_rates):
    """Rounds drift by 5 to 20% (shared by both arms) and each run by 5% of its own: the claim passes by the fifth
    run a side in at least 95% of checks, and never fails."""
    for drift in (0.05, 0.1, 0.2):
        rng, sims = random.Random(f"{shapes}:{drift}"), 400
        outcomes = [sim.check(rng, shapes, ratio, 1.5, drift, 0.05)[0] for _ in range(sims)]
        passed, wrong, runs = sim.rates(outcomes, S.PASS)
        simulated_rates(f"power: {shapes[0]} against {shapes[1]} windows, drift {drift:.0%}, own spread 5%: passes in "
                        f"{passed:.1%} of {sims} checks, after {runs:.1f} runs a side on average")
        assert passed >= 0.95 and wrong == 0, drift


def test_power_falls_with_each_runs_own_spread_and_never_turns_wrong(simulated_rates):
    """What the machine adds to every run on its own cannot be paired away. At 20% a side no test at 5% could
    reach 95% in five runs: a z test that knew the spread exactly, at the full 5% in one look, would pass 63% of
    the time (docs/claims.md)."""
    for own in (0.1, 0.2):
        rng, sims = random.Random(int(own * 100)), 400
        outcomes = [sim.check(rng, ("steady", "steady"), 2.0, 1.5, 0.1, own)[0] for _ in range(sims)]
        passed, wrong, runs = sim.rates(outcomes, S.PASS)
        simulated_rates(f"power: steady windows, drift 10%, own spread {own:.0%}: passes in {passed:.1%} of {sims} "
                        f"checks within five runs a side")
        assert wrong == 0
        assert passed >= (0.75 if own == 0.1 else 0.25)


def test_pairing_by_round_takes_out_the_machines_drift(simulated_rates):
    rng, sims = random.Random(41), 400
    rates = {}
    for paired in (True, False):
        outcomes = [sim.check(rng, ("steady", "steady"), 2.0, 1.5, 0.2, 0.05, paired=paired)[0] for _ in range(sims)]
        rates[paired] = sim.rates(outcomes, S.PASS)[0]
        simulated_rates(f"power: drift 20%, own spread 5%, {'paired by round' if paired else 'unpaired'}: passes in "
                        f"{rates[paired]:.1%} of {sims} checks")
    assert rates[True] >= 0.95 and rates[False] < 0.6


def test_overwhelming_effects_are_decided_early_and_the_right_way(simulated_rates):
    rng, sims = random.Random(23), 300
    for ratio, want in ((3.0, S.PASS), (0.5, S.FAIL)):
        outcomes = [sim.check(rng, ("steady", "steady"), ratio, 1.0, 0.1, 0.05)[0] for _ in range(sims)]
        right, wrong, runs = sim.rates(outcomes, want)
        simulated_rates(f"power: a {ratio}x effect against `a > b`: {want} in {right:.1%} of {sims} checks, "
                        f"after {runs:.1f} runs a side on average")
        assert right == 1.0 and runs <= 3.5


# -- the spending and the estimate of runs needed ---------------------------------------------------------

def test_the_looks_spend_five_percent_in_all_and_most_at_the_last():
    levels = S.look_levels(2, 5)
    assert sum(levels) == pytest.approx(S.ALPHA)
    assert list(levels) == sorted(levels) and levels[-1] > S.ALPHA / 2
    assert S.look_levels(5, 5) == (S.ALPHA,) and S.look_levels(7, 5) == (S.ALPHA,)


def test_runs_to_decide_grows_as_the_difference_shrinks():
    big = S.Test(0.5, 0.2, 2, "log", 0.02, 0.98, paired=True, rounds=3)
    small = S.Test(0.1, 0.2, 2, "log", 0.3, 0.7, paired=True, rounds=3)
    assert 3 < S.runs_to_decide(big, 0.05) < S.runs_to_decide(small, 0.05) < S.MAX_RUNS_ESTIMATED
    assert S.runs_to_decide(S.Test(0.001, 0.2, 2, "log", 0.49, 0.51, rounds=3), 0.05) is None
    per_run = 0.2 * math.sqrt(3)  # the rule: the first n at which the difference clears the (two-sided) level
    n = S.runs_to_decide(big, 0.05)
    assert 0.5 / (per_run / math.sqrt(n)) >= S.t_quantile(0.975, n - 1)
    assert 0.5 / (per_run / math.sqrt(n - 1)) < S.t_quantile(0.975, n - 2)


# -- the edge cases a verdict must get right -----------------------------------------------------------

def test_two_exact_equal_sides_decide_equality_and_non_strict_inequality():
    same = S.test_sides(S.estimate([0, 0]), S.exact(0))
    assert S.decide("==", same, same.two_sided, S.ALPHA) == S.PASS
    assert S.decide(">=", same, same.two_sided, S.ALPHA) == S.PASS
    assert S.decide(">", same, same.two_sided, S.ALPHA) == S.FAIL
    assert S.decide("!=", same, same.two_sided, S.ALPHA) == S.FAIL


def test_equality_of_noisy_figures_is_never_shown():
    rng = random.Random(5)
    a = S.estimate([rng.gauss(100, 5) for _ in range(5)])
    b = S.estimate([rng.gauss(100, 5) for _ in range(5)])
    test = S.test_sides(a, b)
    assert S.decide("==", test, test.two_sided, S.ALPHA) == S.INCONCLUSIVE


def test_one_run_decides_nothing():
    test = S.test_sides(S.estimate([56000.0]), S.exact(20000))
    assert test.p_greater is None
    assert S.decide(">", test, None, S.ALPHA) == S.INCONCLUSIVE


def test_a_clear_difference_in_either_direction():
    a, b = S.Runs((300.0, 310.0, 305.0), (1, 2, 3)), S.Runs((100.0, 98.0, 103.0), (1, 2, 3))
    test = S.test_runs(a, b)
    assert test.scale == "log" and test.paired and test.rounds == 3
    assert S.decide(">", test, test.two_sided, S.ALPHA) == S.PASS
    assert S.decide("<", test, test.two_sided, S.ALPHA) == S.FAIL
    assert S.decide("!=", test, test.two_sided, S.ALPHA) == S.PASS


def test_rounds_that_do_not_line_up_are_compared_unpaired_and_say_so():
    test = S.test_runs(S.Runs((300.0, 310.0, 305.0), (1, 2, 3)), S.Runs((100.0, 98.0), (1, 3)))
    assert not test.paired and "unpaired" in test.note and "1, 2, 3 against 1, 3" in test.note


def test_zero_values_use_the_linear_scale():
    test = S.test_runs(S.Runs((0.0, 3.0, 1.0), (1, 2, 3)), 0.0)
    assert test.scale == "linear"


def test_positive_against_zero_is_settled_without_a_test():
    test = S.test_runs(S.Runs((3.0, 4000.0), (1, 2)), S.Runs((0.0, 0.0), (1, 2)))
    assert math.isinf(test.diff) and test.two_sided == 0.0


def test_holm_steps_down_and_leaves_untested_claims_out():
    steps = S.step_down([0.01, 0.04, None, 0.012], lambda m: S.ALPHA / m)
    assert steps[2] == (False, None)
    assert steps[0] == (True, pytest.approx(S.ALPHA / 3))
    assert steps[3] == (True, pytest.approx(S.ALPHA / 2))
    assert steps[1] == (True, pytest.approx(S.ALPHA))
    assert S.step_down([0.03, 0.04], lambda m: S.ALPHA / m) == [(False, S.ALPHA / 2), (False, S.ALPHA)]


def test_within_run_needs_enough_intervals_and_counts():
    assert S.within_run([10, 12, 11]) is None
    assert S.within_run([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]) is None
    est = S.within_run([5.0] * 40)
    assert est.mean == 5.0 and est.se == 0.0 and est.steady


def test_long_series_are_grouped_before_the_estimate():
    est = S.within_run([float(i % 7) for i in range(1000)], max_points=100)
    assert est.n == 100
    assert est.mean == pytest.approx(sum(i % 7 for i in range(1000)) / 1000, rel=0.01)
