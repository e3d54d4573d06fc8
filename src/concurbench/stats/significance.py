"""Tests of one figure against another: Welch's t on two estimates, and the paired test of rounds.

A claim compares two sides, `L op R`. The runs are the unit: each run gives a side one value. Sides
measured in the same rounds of interleaved runs are paired (`test_runs`): the per-round ratio (or
difference) is tested, which takes out what the machine did between rounds. Otherwise the two sides'
means are compared with Welch's t (Satterthwaite's degrees of freedom). Both work on the log scale
when every value on both sides is positive (run-to-run noise is roughly proportional to the figure,
and `a > 3 * b` is a claim about a ratio), otherwise on the linear scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .estimates import ALPHA, Estimate, _satterthwaite, estimate, exact, log_scale, trimmed
from .tdist import t_cdf, t_quantile


@dataclass(frozen=True)
class Test:
    """Left minus right: the difference, its standard error and df, and the p-values of each direction.

    `paired` says whether rounds were paired, `rounds` how many runs a side the test rests on, and
    `note` what was done instead when rounds could not be paired.
    """

    diff: float
    se: float | None
    df: float | None
    scale: str  # "log" or "linear"
    p_greater: float | None  # p-value of "left <= right" against "left > right"
    p_less: float | None
    paired: bool = False
    rounds: int = 0  # runs a side behind the test (pairs, or the smaller side)
    note: str = ""

    @property
    def two_sided(self) -> float | None:
        if self.p_greater is None:
            return None
        return min(1.0, 2 * min(self.p_greater, self.p_less))

    def interval(self, alpha: float = ALPHA) -> tuple[float, float] | None:
        """The two-sided interval of the difference at confidence 1 - alpha (on the test's scale)."""
        if self.se is None or math.isinf(self.diff):
            return None
        if self.se == 0:
            return self.diff, self.diff
        half = t_quantile(1 - alpha / 2, self.df) * self.se
        return self.diff - half, self.diff + half


def difference_test(a: Estimate, b: Estimate, scale: str = "linear") -> Test:
    """Welch's test of a against b as they are (a paired difference is tested against an exact 0 so)."""
    diff = a.mean - b.mean
    if a.se is None or b.se is None:
        return Test(diff, None, None, scale, None, None)
    se2 = a.se ** 2 + b.se ** 2
    if se2 == 0:
        return Test(diff, 0.0, math.inf, scale, 0.0 if diff > 0 else 1.0, 0.0 if diff < 0 else 1.0)
    df = welch_df(a, b)
    t = diff / math.sqrt(se2)
    upper = 1 - t_cdf(t, df)  # P(T >= t)
    return Test(diff, math.sqrt(se2), df, scale, upper, 1 - upper)


def test_sides(left: Estimate, right: Estimate) -> Test:
    """Welch's test of left against right, on the log scale when both are positive.

    A positive side against an exact zero is settled on that scale without a test: log 0 lies
    infinitely far below any positive figure, so every run having measured more than 0 decides
    `> 0` (a counter that moved, throughput that was there) however much the runs differ.
    """
    settled = _against_zero(left, right)
    if settled is not None:
        return settled
    logs = (log_scale(left), log_scale(right)) if _positive(left) and _positive(right) else (None, None)
    if logs[0] is not None and logs[1] is not None:
        return difference_test(*logs, scale="log")
    return difference_test(left, right)


def _against_zero(left: Estimate, right: Estimate) -> Test | None:
    if _positive(left) and _zero(right):
        return Test(math.inf, 0.0, math.inf, "log", 0.0, 1.0)
    if _zero(left) and _positive(right):
        return Test(-math.inf, 0.0, math.inf, "log", 1.0, 0.0)
    return None


def _positive(est: Estimate) -> bool:
    return est.mean > 0 and (not est.values or all(v > 0 for v in est.values))


def _zero(est: Estimate) -> bool:
    return est.exact and est.mean == 0


def welch_df(a: Estimate, b: Estimate) -> float:
    """Satterthwaite's degrees of freedom of a difference of two estimates."""
    return _satterthwaite([(a.se ** 2, a.df), (b.se ** 2, b.df)])


# Runs of one figure, and the paired test ---------------------------------------------------------------

@dataclass(frozen=True)
class Runs:
    """One figure as measured by each run: its value, the round (repeat) the run belonged to, and the
    run's own within-window estimate where the figure has one (window figures)."""

    values: tuple[float, ...]
    rounds: tuple[int, ...]
    within: tuple[Estimate | None, ...] = ()

    def scaled(self, factor: float) -> "Runs":
        return Runs(tuple(v * factor for v in self.values), self.rounds,
                    tuple(None if w is None else w.scaled(factor) for w in self.within))

    @property
    def positive(self) -> bool:
        return bool(self.values) and all(v > 0 for v in self.values)

    @property
    def zero(self) -> bool:
        return bool(self.values) and all(v == 0 for v in self.values)

    def per_run(self) -> list[Estimate | None]:
        """Each run's window estimate centred on the reported value (the series' full intervals and the
        reported figure differ by the last partial one); None for a run figure."""
        out: list[Estimate | None] = []
        for i, value in enumerate(self.values):
            w = self.within[i] if i < len(self.within) else None
            if w is None or w.se is None:
                out.append(None)
            else:
                out.append(replace(w, mean=value, se=w.se * value / w.mean if w.mean else w.se, values=()))
        return out

    def estimate(self, log: bool = False) -> Estimate:
        """The figure over the runs, on the log scale when asked (all values positive)."""
        return estimate([math.log(v) for v in self.values] if log else self.values)


def test_runs(left: "Runs | float", right: "Runs | float", trim: float = 0.0) -> Test:
    """Left against right, each the runs of a figure or a number of the claim.

    Runs of two figures measured in the same rounds are paired: each round's ratio (log scale) or
    difference is one observation, and those are tested against 1 (or 0) with Student's t. Runs that
    did not line up (a round lost on one side, shards with other rounds) are compared unpaired, and
    the test's note says so. A side positive in every run against one that is 0 (in every run, or the
    number 0) is settled without a test. `trim` > 0: paired rounds are tested by their trimmed mean
    (estimates.trimmed: Yuen's test), so that a few rounds disturbed by something else weigh little.
    """
    settled = _against_zero(_summary(left), _summary(right))
    if settled is not None:
        return replace(settled, rounds=min(_count(left), _count(right)))
    log = _all_positive(left) and _all_positive(right)
    scale = "log" if log else "linear"
    if isinstance(left, Runs) and isinstance(right, Runs):
        lined_up = len(set(left.rounds)) == len(left.rounds) and sorted(left.rounds) == sorted(right.rounds)
        if lined_up and len(left.rounds) >= 2:
            return replace(_paired(left, right, log, trim), paired=True, rounds=len(left.rounds), scale=scale)
    a, b = _side(left, log), _side(right, log)
    test = replace(difference_test(a, b, scale), rounds=min(_count(left), _count(right)))
    if isinstance(left, Runs) and isinstance(right, Runs) and min(_count(left), _count(right)) >= 2:
        test = replace(test, note=f"unpaired: the sides ran in different rounds ({_rounds(left.rounds)} "
                                  f"against {_rounds(right.rounds)})")
    return test


def _paired(left: Runs, right: Runs, log: bool, trim: float = 0.0) -> Test:
    mine, theirs = dict(zip(left.rounds, left.values)), dict(zip(right.rounds, right.values))
    diffs = [math.log(mine[r]) - math.log(theirs[r]) if log else mine[r] - theirs[r] for r in sorted(mine)]
    return difference_test(trimmed(diffs, trim) if trim else estimate(diffs), exact(0.0))


def _side(side: "Runs | float", log: bool) -> Estimate:
    if isinstance(side, Runs):
        return side.estimate(log)
    return exact(math.log(side) if log else side)


def _count(side: "Runs | float") -> int:
    return len(side.values) if isinstance(side, Runs) else 0


def _all_positive(side: "Runs | float") -> bool:
    return side.positive if isinstance(side, Runs) else side > 0


def _summary(side: "Runs | float") -> Estimate:
    """Just enough of a side to settle `> 0` against a side that is 0 in every run."""
    if not isinstance(side, Runs):
        return exact(side)
    return exact(0.0) if side.zero else estimate(side.values)


def _rounds(rounds) -> str:
    return ", ".join(str(r) for r in sorted(rounds))


# compare: a difference on the linear scale -----------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    """Contender minus baseline, with Welch's two-sided test where both sides have an uncertainty."""

    diff: float
    half: float | None  # 95% interval half-width of the difference
    p_value: float | None
    df: float | None

    @property
    def significant(self) -> bool | None:
        return None if self.p_value is None else self.p_value < ALPHA


def welch(baseline: Estimate, contender: Estimate) -> Difference:
    """The difference of two estimates on the linear scale (what `compare` reports)."""
    diff = contender.mean - baseline.mean
    if baseline.se is None or contender.se is None:
        return Difference(diff, None, None, None)
    se2 = baseline.se ** 2 + contender.se ** 2
    if se2 == 0:
        return Difference(diff, 0.0, 1.0 if diff == 0 else 0.0, None)
    df = welch_df(baseline, contender)
    se = math.sqrt(se2)
    p = 2 * (1 - t_cdf(abs(diff) / se, df))
    return Difference(diff, t_quantile(1 - ALPHA / 2, df) * se, max(0.0, min(1.0, p)), df)
