"""The statistics every verdict rests on: estimates with intervals, tests, and the decision rule.

One module serves claims (`expect`), repeats and `compare`, so a figure means the same everywhere.

Estimates. An `Estimate` is a mean with its standard error and degrees of freedom:
  - from repeats: the mean of the per-run values, Student-t with n - 1 degrees of freedom;
  - from one run (`within_run`): the window's per-interval series (100 ms intervals of throughput,
    or of latency sums and counts). Neighbouring intervals of a load are correlated, so the series'
    lag-1 autocorrelation, corrected for its small-sample bias, shrinks the number of intervals to
    an effective number of independent ones, which sets the standard error and the degrees of
    freedom (plain batch spreads understate the error several times on such series);
  - combined (`combine`): runs that each carry a within-run estimate, with the larger of the
    between-run and the pooled within-run variance;
  - exact: a number written in the scenario (no error at all).

Tests. A claim compares two sides, `L op R`; each side is `factor * estimate` or a number. The
difference is tested with Welch's t (Satterthwaite's degrees of freedom), on the log scale when
every value on both sides is positive (run-to-run noise is roughly proportional to the figure,
and a claim like `a > 3 * b` is a claim about a ratio), otherwise on the linear scale.

Decision. `decide` turns a test into PASS (the data support the claim), FAIL (they support the
opposite) or INCONCLUSIVE. `holm` corrects a family of claims at one look (Bonferroni-Holm, valid
whatever the dependence between claims), and `look_level` splits the error rate over the planned
looks of a sequential check (Bonferroni over looks), so the chance of any wrong verdict, over all
claims and all looks, stays at most `ALPHA`.

No SciPy: the t distribution comes from the regularized incomplete beta function (a continued
fraction, evaluated by Lentz's method), exact to about 1e-12 for the sizes used here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

ALPHA = 0.05  # the false-verdict rate a verdict is held to (95%)
MIN_POINTS = 5  # intervals a single run's series needs for a within-run estimate
MAX_POINTS = 200  # longer series are summed into this many groups first
MAX_RHO = 0.95

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


# Estimates --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Estimate:
    """A mean with its uncertainty: standard error `se` with `df` degrees of freedom.

    `n` is the number of observations behind it (repeats, or batches); `sd` their spread. `se` is
    None when there is nothing to say about the uncertainty (one repeat and no within-run estimate);
    0 with an infinite `df` for an exact number.
    """

    mean: float
    n: int
    sd: float | None = None
    se: float | None = None
    df: float | None = None
    method: str = "repeats"  # repeats | batch means | exact | single run
    values: tuple[float, ...] = field(default=(), compare=False)  # the per-run values (repeats only)

    @property
    def half(self) -> float | None:
        """Half-width of the two-sided 95% interval."""
        if self.se is None:
            return None
        if self.se == 0:
            return 0.0
        return t_quantile(1 - ALPHA / 2, self.df) * self.se

    @property
    def low(self) -> float | None:
        half = self.half
        return None if half is None else self.mean - half

    @property
    def high(self) -> float | None:
        half = self.half
        return None if half is None else self.mean + half

    @property
    def cv(self) -> float | None:
        """Coefficient of variation of the observations (sd / |mean|); None for one value or a zero mean."""
        if self.sd is None or self.mean == 0:
            return None
        return self.sd / abs(self.mean)

    @property
    def exact(self) -> bool:
        return self.se == 0

    def scaled(self, factor: float) -> "Estimate":
        return replace(self, mean=self.mean * factor, sd=None if self.sd is None else self.sd * abs(factor),
                       se=None if self.se is None else self.se * abs(factor),
                       values=tuple(v * factor for v in self.values))

    def as_dict(self) -> dict:
        return {"mean": self.mean, "n": self.n, "sd": self.sd, "se": self.se, "df": self.df,
                "ci95": self.half, "low": self.low, "high": self.high, "cv": self.cv, "method": self.method}


def exact(value: float) -> Estimate:
    """A number with no uncertainty (a constant of a claim)."""
    return Estimate(float(value), 1, 0.0, 0.0, math.inf, "exact")


def estimate(values) -> Estimate:
    """The mean of repeated runs with its Student-t standard error (none for one run)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        raise ValueError("no values")
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return Estimate(mean, 1, None, None, None, "single run", tuple(xs))
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Estimate(mean, n, sd, sd / math.sqrt(n), n - 1, "repeats", tuple(xs))


def within_run(totals, counts=None, *, max_points: int = MAX_POINTS) -> Estimate | None:
    """A single run's figure with its within-run standard error, from a per-interval series.

    `totals` are per-interval amounts in time order (transactions, or latency sums). Without
    `counts` the figure is the mean amount per interval (multiply by intervals per second for a
    rate); with `counts` it is the ratio sum(totals) / sum(counts), a mean latency, whose error
    comes from the residuals totals - ratio * counts (the delta method).

    Neighbouring intervals of a load are correlated (a lock convoy, a checkpoint), so the spread of
    n intervals overstates what they know: the series' lag-1 autocorrelation rho (corrected for
    its small-sample bias, and never taken below 0) gives the effective number of independent
    intervals, n (1 - rho) / (1 + rho), which sets both the standard error and the degrees of
    freedom. Long series are first summed into at most `max_points` consecutive groups.
    None with fewer than MIN_POINTS intervals, or no counts at all.
    """
    totals = [float(x) for x in totals]
    counts = None if counts is None else [float(c) for c in counts]
    if counts is not None and len(counts) != len(totals):
        raise ValueError("totals and counts differ in length")
    size = max(1, -(-len(totals) // max_points))
    if size > 1:
        totals = _sums(totals, size)
        counts = None if counts is None else _sums(counts, size)
    n = len(totals)
    if n < MIN_POINTS:
        return None
    if counts is None:
        mean = sum(totals) / n
        resid = [x - mean for x in totals]
    else:
        weight = sum(counts)
        if weight <= 0:
            return None
        mean = sum(totals) / weight
        resid = [t - mean * c for t, c in zip(totals, counts)]
    spread = math.sqrt(sum(r * r for r in resid) / (n - 1))
    r1 = lag1(resid)
    rho = min(MAX_RHO, max(0.0, r1 + (1 + 4 * r1) / n))
    n_eff = n * (1 - rho) / (1 + rho)
    df = max(1.0, n_eff - 1)
    if counts is None:  # per original interval
        return Estimate(mean / size, n, spread / size, spread / size / math.sqrt(n_eff), df, "within run")
    se = spread * n / math.sqrt(n_eff) / sum(counts)
    return Estimate(mean, n, None, se, df, "within run")


def _sums(xs: list[float], size: int) -> list[float]:
    """Consecutive groups of `size` summed (a shorter group at the end is dropped)."""
    return [sum(xs[i:i + size]) for i in range(0, len(xs) - size + 1, size)]


def lag1(xs: list[float]) -> float:
    """Lag-1 autocorrelation of a series (0 for a constant series)."""
    n = len(xs)
    if n < 3:
        return 0.0
    mean = sum(xs) / n
    dev = [x - mean for x in xs]
    denom = sum(d * d for d in dev)
    if denom == 0:
        return 0.0
    return sum(dev[i] * dev[i + 1] for i in range(n - 1)) / denom


def _sd(xs: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mean = sum(xs) / n
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))


def combine(runs: list[Estimate]) -> Estimate:
    """Repeats of a figure that each carry a within-run estimate (batch means) -> one estimate.

    The mean is the mean of the runs' figures. Its variance is the larger of two estimates: the
    spread between the runs (n - 1 degrees of freedom), which sees run-to-run effects, and the
    within-run variances pooled over the runs (their degrees of freedom summed, by Satterthwaite),
    which is sharper when runs agree as well as their windows say they should.
    """
    if len(runs) == 1:
        return runs[0]
    n = len(runs)
    between = estimate([r.mean for r in runs])
    if any(r.se is None or not r.df for r in runs):
        return between
    var = sum(r.se ** 2 for r in runs) / n ** 2
    parts = sum((r.se ** 2 / n ** 2) ** 2 / r.df for r in runs)
    if var <= between.se ** 2 or parts == 0:
        return replace(between, method="repeats")
    df = var ** 2 / parts
    return Estimate(between.mean, n, between.sd, math.sqrt(var), df, "repeats (within-run spread)", between.values)


def log_scale(est: Estimate) -> Estimate | None:
    """The estimate of log(mean): from the log of each repeat, or by the delta method; None unless positive."""
    if est.mean <= 0:
        return None
    if est.exact:
        return exact(math.log(est.mean))
    if est.method == "repeats" and est.values and all(v > 0 for v in est.values):
        logs = estimate([math.log(v) for v in est.values])
        return replace(logs, method="repeats (log)")
    if est.se is None:
        return replace(est, mean=math.log(est.mean), sd=None, values=())
    return replace(est, mean=math.log(est.mean), sd=None if est.sd is None else est.sd / est.mean,
                   se=est.se / est.mean, values=())


# Tests --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Test:
    """Left minus right: the difference, its standard error and df, and the one-sided p-values."""

    diff: float
    se: float | None
    df: float | None
    scale: str  # "log" or "linear"
    p_greater: float | None  # p-value of "left <= right" against "left > right"
    p_less: float | None

    @property
    def two_sided(self) -> float | None:
        if self.p_greater is None:
            return None
        return min(1.0, 2 * min(self.p_greater, self.p_less))


def test_sides(left: Estimate, right: Estimate) -> Test:
    """Welch's test of left against right, on the log scale when both are positive.

    A positive side against an exact zero is settled on that scale without a test: log 0 lies
    infinitely far below any positive figure, so every run having measured more than 0 decides
    `> 0` (a counter that moved, throughput that was there) however much the runs differ.
    """
    if _positive(left) and _zero(right):
        return Test(math.inf, 0.0, math.inf, "log", 0.0, 1.0)
    if _zero(left) and _positive(right):
        return Test(-math.inf, 0.0, math.inf, "log", 1.0, 0.0)
    logs = (log_scale(left), log_scale(right)) if _positive(left) and _positive(right) else (None, None)
    if logs[0] is not None and logs[1] is not None:
        return difference_test(*logs, scale="log")
    return difference_test(left, right)


def difference_test(a: Estimate, b: Estimate, scale: str = "linear") -> Test:
    """Welch's test of a against b as they are (paired differences are tested against an exact 0 so)."""
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


def _positive(est: Estimate) -> bool:
    return est.mean > 0 and (not est.values or all(v > 0 for v in est.values))


def _zero(est: Estimate) -> bool:
    return est.exact and est.mean == 0


def welch_df(a: Estimate, b: Estimate) -> float:
    """Satterthwaite's degrees of freedom of a difference of two estimates."""
    va, vb = a.se ** 2, b.se ** 2
    denom = (va ** 2 / a.df if va and a.df not in (None, math.inf) else 0.0) + \
        (vb ** 2 / b.df if vb and b.df not in (None, math.inf) else 0.0)
    if denom == 0:
        return math.inf
    return (va + vb) ** 2 / denom


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


# Decisions --------------------------------------------------------------------------------------------

def holm(p_values: list[float | None]) -> list[float | None]:
    """Bonferroni-Holm adjusted p-values of a family (None: a claim that could not be tested, left out).

    A claim is significant with the others at level `a` when its adjusted p-value is at most `a`;
    the chance of any false rejection in the family is then at most `a`, whatever the dependence.
    """
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    family = len(order)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (family - rank) * p))
        out[i] = running
    return out


def decide(op: str, test: Test, p_adjusted: float | None, level: float) -> str:
    """PASS, FAIL or INCONCLUSIVE for `left op right`, given the claim's (adjusted) two-sided p-value.

    A significant difference decides an inequality by its sign. Equality can only be shown exactly:
    `==` passes when both sides are exact (a number, or repeats that all agree) and equal, and fails
    when they differ significantly; `!=` the other way round.
    """
    if test.p_greater is None:
        return INCONCLUSIVE
    if test.se == 0 and test.diff == 0:
        return PASS if op in ("==", ">=", "<=") else FAIL
    if p_adjusted is None or p_adjusted > level:
        return INCONCLUSIVE
    greater = test.diff > 0
    if op in (">", ">="):
        return PASS if greater else FAIL
    if op in ("<", "<="):
        return FAIL if greater else PASS
    return FAIL if op == "==" else PASS


def decide_family(items: list[tuple[str, Test]], level: float) -> list[str]:
    """Verdicts of a family of claims `(op, test)` looked at together at `level` (Holm-corrected)."""
    adjusted = holm([test.two_sided for _, test in items])
    return [decide(op, test, p, level) for (op, test), p in zip(items, adjusted)]


def look_level(looks: int, alpha: float = ALPHA) -> float:
    """The level of one look when a check may look `looks` times (Bonferroni over looks)."""
    return alpha / max(1, looks)


# The t distribution -------------------------------------------------------------------------------------

def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (df may be fractional, or infinite)."""
    if df is None or df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(df):
        return 0.5 * math.erfc(-t / math.sqrt(2))
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p, by bisection on t_cdf."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h
