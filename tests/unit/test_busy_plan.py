"""The busy machine's plan (up to 8 runs a side instead of 5), simulated with the decision rule's own checks
(simulated.py): the error rate over the longer plan stays within 5%, and a small effect whose runs spread more
is decided more often. The rule and its figures in test_decision_rule.py are the same; only the plan is longer."""

from __future__ import annotations

import random

import simulated as sim
from concurbench import stats as S
from concurbench.check.plan import BUSY_MAX_REPEATS, DEFAULT_MAX_REPEATS
from test_decision_rule import _tolerance


def test_six_claims_at_the_boundary_err_within_five_percent_over_eight_runs_a_side(simulated_rates):
    rng, sims = random.Random("busy boundary"), 1000
    wrong = sum(any(v is not None for v in sim.check(rng, ("steady", "steady"), 1.0, 1.0, 0.1, 0.1, claims=6,
                                                     max_runs=BUSY_MAX_REPEATS)) for _ in range(sims))
    simulated_rates(f"busy plan (looks after 2 to {BUSY_MAX_REPEATS} runs a side): six claims at the boundary, "
                    f"drift 10%, own spread 10%: a wrong verdict in {wrong / sims:.1%} of {sims} checks")
    assert wrong / sims <= S.ALPHA + _tolerance(S.ALPHA, sims)


def test_a_small_effect_with_spread_runs_is_decided_more_often_with_the_busy_plan(simulated_rates):
    """A 1.3x effect against `a > b`, drift 10% and 15% of each run's own, as bystanders beside lockers measure
    on a busy two-core machine: the longer plan passes it more often and never fails it."""
    outcomes = {}
    for runs in (DEFAULT_MAX_REPEATS, BUSY_MAX_REPEATS):
        rng, sims = random.Random("busy power"), 400
        outcomes[runs] = sim.rates([sim.check(rng, ("steady", "steady"), 1.3, 1.0, 0.1, 0.15, max_runs=runs)[0]
                                    for _ in range(sims)], "pass")
        simulated_rates(f"1.3x against a > b, drift 10%, own spread 15%, up to {runs} runs a side: passes in "
                        f"{outcomes[runs][0]:.1%} of {sims} checks, fails in {outcomes[runs][1]:.1%}")
    (quiet, quiet_wrong, _), (busy, busy_wrong, _) = outcomes[DEFAULT_MAX_REPEATS], outcomes[BUSY_MAX_REPEATS]
    assert busy > quiet + 0.15 and quiet_wrong == busy_wrong == 0
