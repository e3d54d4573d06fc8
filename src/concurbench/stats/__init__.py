"""The statistics every verdict rests on: estimates with intervals, tests, and the decision rule.

One package serves claims (`expect`), repeats and `compare`, so a figure means the same everywhere:
  - estimates.py: a mean with its standard error, from repeats or from one window, and whether a
    window was steady; Yuen's trimmed mean of repeats (the side-by-side rounds);
  - testing.py: Welch's t, and runs of one figure tested against another, paired by round;
  - decisions.py: the Verdict (PASS, FAIL or INCONCLUSIVE, or NOT_EVALUATED for a claim never tested),
    Holm over claims, alpha spending over looks, and the runs that would decide an open claim;
  - tdist.py: Student's t and the normal distribution (SciPy's, imported on first use).
docs/claims.md says what the model assumes and when; tests/unit/test_decision_rule.py measures its
error rate and power on simulated runs.
"""

from .decisions import (FAIL, INCONCLUSIVE, MAX_RUNS_ESTIMATED, PASS, SPENDING_POWER, Verdict, decide, decide_family,
                        holm, look_levels, runs_to_decide, spent, step_down)
from .estimates import (ALPHA, MAX_POINTS, MAX_RHO, MIN_POINTS, STEADY_T, Estimate, estimate, exact, lag1,
                        level_shift, log_scale, within_run)
from .tdist import normal_cdf, normal_quantile, t_cdf, t_quantile
from .significance import Difference, Runs, Test, difference_test, test_runs, test_sides, welch, welch_df

__all__ = ["ALPHA", "FAIL", "INCONCLUSIVE", "MAX_POINTS", "MAX_RHO", "MAX_RUNS_ESTIMATED", "MIN_POINTS", "PASS",
           "SPENDING_POWER", "STEADY_T", "Difference", "Estimate", "Runs", "Test", "Verdict", "decide", "decide_family",
           "difference_test", "estimate", "exact", "holm", "lag1", "level_shift", "log_scale", "look_levels",
           "normal_cdf", "normal_quantile", "runs_to_decide", "spent", "step_down", "t_cdf", "t_quantile", "test_runs", "test_sides", "welch",
           "welch_df", "within_run"]
