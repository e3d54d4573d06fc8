"""The statistics behind every verdict, tested as a rule: simulated runs with known answers.

Each simulation draws many runs from a model whose truth is known and checks how often the rule
gives a wrong verdict. The seeds are fixed, so the figures are the same on every machine; a rule
that does not hold its level (an estimator that ignores autocorrelation, a check that forgets the
extra looks) fails these tests by a wide margin.
"""

from __future__ import annotations

import math
import random

import pytest

from concurbench import stats as S

# Monte Carlo tolerance: a rate measured over N simulations is within 3 standard errors of its truth.
def _tolerance(rate: float, sims: int) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / sims)


def _ar1(rng: random.Random, mean: float, sd: float, n: int, phi: float) -> list[float]:
    """A stationary AR(1) series: neighbouring intervals of a load are correlated."""
    out, e = [], rng.gauss(0, sd)
    for _ in range(n):
        e = phi * e + math.sqrt(1 - phi * phi) * rng.gauss(0, sd)
        out.append(mean + e)
    return out


def _rates(verdicts: list[str]) -> tuple[float, float]:
    n = len(verdicts)
    return verdicts.count(S.PASS) / n, verdicts.count(S.FAIL) / n


# -- single claims at the boundary: wrong verdicts at the stated level --------------------------

@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_within_run_estimate_holds_its_level_on_correlated_series(phi):
    """Two windows of the same load: a claim `a > b` must pass (or fail) at most 2.5% of the time each."""
    rng, sims = random.Random(100 + int(phi * 10)), 2000
    verdicts = []
    for _ in range(sims):
        a = S.within_run(_ar1(rng, 1000, 100, 20, phi))
        b = S.within_run(_ar1(rng, 1000, 100, 20, phi))
        test = S.test_sides(a, b)
        verdicts.append(S.decide(">", test, test.two_sided, S.ALPHA))
    false_pass, false_fail = _rates(verdicts)
    assert false_pass <= 0.025 + _tolerance(0.025, sims)
    assert false_fail <= 0.025 + _tolerance(0.025, sims)


def test_plain_batch_spread_would_not_hold_on_correlated_series():
    """The check above has teeth: ignoring the autocorrelation gives several times the stated rate."""
    rng, sims, wrong = random.Random(7), 2000, 0
    for _ in range(sims):
        sides = []
        for _ in range(2):
            xs = _ar1(rng, 1000, 100, 20, 0.8)
            naive = S.estimate(xs)
            sides.append(naive)
        test = S.test_sides(*sides)
        wrong += S.decide(">", test, test.two_sided, S.ALPHA) != S.INCONCLUSIVE
    assert wrong / sims > 0.15


def test_ratio_estimate_holds_its_level():
    """Mean latency as sum / count per interval: equal loads give wrong verdicts at most 2.5% each way."""
    rng, sims = random.Random(3), 2000
    verdicts = []
    for _ in range(sims):
        sides = []
        for _ in range(2):
            counts = [max(1, int(c)) for c in _ar1(rng, 60, 8, 20, 0.5)]
            sums = [c * m for c, m in zip(counts, _ar1(rng, 2.0, 0.3, 20, 0.5))]
            sides.append(S.within_run(sums, counts))
        test = S.test_sides(*sides)
        verdicts.append(S.decide("<", test, test.two_sided, S.ALPHA))
    false_pass, false_fail = _rates(verdicts)
    assert false_pass <= 0.025 + _tolerance(0.025, sims)
    assert false_fail <= 0.025 + _tolerance(0.025, sims)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_repeats_on_the_log_scale_hold_their_level(n):
    """Skewed (log-normal) run-to-run noise, equal truth: at most 2.5% wrong each way."""
    rng, sims = random.Random(n), 3000
    verdicts = []
    for _ in range(sims):
        a = S.estimate([math.exp(rng.gauss(0, 0.3)) for _ in range(n)])
        b = S.estimate([math.exp(rng.gauss(0, 0.3)) for _ in range(n)])
        test = S.test_sides(a, b)
        verdicts.append(S.decide(">", test, test.two_sided, S.ALPHA))
    false_pass, false_fail = _rates(verdicts)
    assert false_pass <= 0.025 + _tolerance(0.025, sims)
    assert false_fail <= 0.025 + _tolerance(0.025, sims)


@pytest.mark.parametrize("tau", [0.05, 0.3])
def test_combining_runs_keeps_the_level_when_runs_differ(tau):
    """Runs that differ by more than their windows show (a run effect of CV tau): still at most 2.5% each way."""
    rng, sims = random.Random(int(tau * 100)), 2000
    verdicts = []
    for _ in range(sims):
        sides = []
        for _ in range(2):
            runs = [S.within_run(_ar1(rng, 1000 * math.exp(rng.gauss(0, tau)), 100, 20, 0.3)) for _ in range(3)]
            sides.append(S.combine(runs))
        test = S.test_sides(*sides)
        verdicts.append(S.decide(">", test, test.two_sided, S.ALPHA))
    false_pass, false_fail = _rates(verdicts)
    assert false_pass <= 0.025 + _tolerance(0.025, sims)
    assert false_fail <= 0.025 + _tolerance(0.025, sims)


# -- a family of claims over repeated looks -------------------------------------------------------

def _sequential(rng: random.Random, effects: list[float], tau: float, looks: int) -> list[tuple[str, int] | None]:
    """Claims `variant_k > reference_k`; one more interleaved run per look, from 2 runs up; first verdict stands."""
    verdicts: list[tuple[str, int] | None] = [None] * len(effects)
    data = [([], []) for _ in effects]
    for n in range(1, looks + 2):
        for k, effect in enumerate(effects):
            for side, scale in ((0, effect), (1, 1.0)):
                mean = 1000 * scale * math.exp(rng.gauss(0, tau))
                data[k][side].append(S.within_run(_ar1(rng, mean, mean * 0.1, 20, 0.5)))
        if n < 2:
            continue  # a verdict needs two runs of each side
        items = [(">", S.test_sides(S.combine(a), S.combine(b))) for a, b in data]
        for k, verdict in enumerate(S.decide_family(items, S.look_level(looks))):
            if verdicts[k] is None and verdict != S.INCONCLUSIVE:
                verdicts[k] = (verdict, n)
        if all(verdicts):
            break
    return verdicts


@pytest.mark.parametrize("tau", [0.1, 0.3])
def test_no_verdict_at_all_for_six_claims_at_the_boundary_over_five_looks(tau):
    """Six claims that are all exactly at the boundary, five looks: any verdict is wrong, in at most 5% of checks."""
    rng, sims = random.Random(int(tau * 1000)), 400
    wrong = sum(any(v is not None for v in _sequential(rng, [1.0] * 6, tau, looks=5)) for _ in range(sims))
    assert wrong / sims <= S.ALPHA + _tolerance(S.ALPHA, sims)


def test_without_the_look_correction_the_family_would_err_more_often():
    """The same checks at the full level on every look err well above 5%: the correction is what holds it."""
    rng, sims, wrong = random.Random(17), 300, 0
    for _ in range(sims):
        data = [([], []) for _ in range(6)]
        decided = False
        for n in range(1, 7):
            for a, b in data:
                for side in (a, b):
                    mean = 1000 * math.exp(rng.gauss(0, 0.1))
                    side.append(S.within_run(_ar1(rng, mean, mean * 0.1, 20, 0.5)))
            if n < 2:
                continue
            tests = [S.test_sides(S.combine(a), S.combine(b)) for a, b in data]
            decided |= any(t.two_sided <= S.ALPHA for t in tests)
        wrong += decided
    assert wrong / sims > 2 * S.ALPHA


def test_large_effects_are_decided_within_a_few_runs_and_the_right_way():
    """Power: a 2x gain passes and a halving fails, mostly by the third or fourth run; small effects may stay open."""
    rng, sims = random.Random(23), 200
    effects = [2.0, 3.0, 0.5, 1.02]
    outcomes = [_sequential(rng, effects, 0.1, looks=5) for _ in range(sims)]
    for k, (effect, want) in enumerate(zip(effects[:3], (S.PASS, S.PASS, S.FAIL))):
        got = [o[k] for o in outcomes]
        assert sum(1 for v in got if v and v[0] == want) / sims > 0.95
        assert sum(1 for v in got if v and v[0] != want) == 0
        assert sum(v[1] for v in got if v) / sum(1 for v in got if v) <= 4.5
    tiny = [o[3] for o in outcomes]
    assert sum(1 for v in tiny if v and v[0] == S.FAIL) / sims <= S.ALPHA


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


def test_one_run_without_a_within_run_estimate_decides_nothing():
    test = S.test_sides(S.estimate([56000.0]), S.exact(20000))
    assert test.p_greater is None
    assert S.decide(">", test, None, S.ALPHA) == S.INCONCLUSIVE


def test_a_clear_difference_in_either_direction():
    a, b = S.estimate([300, 310, 305]), S.estimate([100, 98, 103])
    test = S.test_sides(a, b)
    assert test.scale == "log"
    assert S.decide(">", test, test.two_sided, S.ALPHA) == S.PASS
    assert S.decide("<", test, test.two_sided, S.ALPHA) == S.FAIL
    assert S.decide("!=", test, test.two_sided, S.ALPHA) == S.PASS


def test_zero_values_use_the_linear_scale():
    test = S.test_sides(S.estimate([0, 3, 1]), S.exact(0))
    assert test.scale == "linear"


def test_holm_adjusts_in_order_and_leaves_untested_claims_out():
    adjusted = S.holm([0.01, 0.04, None, 0.03])
    assert adjusted[2] is None
    assert adjusted[0] == pytest.approx(0.03)  # 3 tested: 3 x 0.01
    assert adjusted[3] == pytest.approx(0.06)  # 2 x 0.03
    assert adjusted[1] == pytest.approx(0.06)  # max(0.06, 1 x 0.04)


def test_within_run_needs_enough_intervals_and_counts():
    assert S.within_run([10, 12, 11]) is None
    assert S.within_run([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]) is None
    est = S.within_run([5.0] * 40)
    assert est.mean == 5.0 and est.se == 0.0


def test_long_series_are_grouped_before_the_estimate():
    est = S.within_run([float(i % 7) for i in range(1000)], max_points=100)
    assert est.n == 100
    assert est.mean == pytest.approx(sum(i % 7 for i in range(1000)) / 1000, rel=0.01)
