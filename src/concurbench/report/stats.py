"""Small statistics for repeated runs: means with Student-t confidence intervals, Welch's test.

No SciPy: the t distribution comes from the regularized incomplete beta function (a continued
fraction, evaluated by Lentz's method), which is exact to about 1e-12 for the sizes we use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """The mean of n repeats with the half-width of its confidence interval (None when n < 2)."""

    mean: float
    n: int
    sd: float | None
    half: float | None

    @property
    def low(self) -> float | None:
        return None if self.half is None else self.mean - self.half

    @property
    def high(self) -> float | None:
        return None if self.half is None else self.mean + self.half

    @property
    def cv(self) -> float | None:
        """Coefficient of variation (sd / |mean|); None for one value or a zero mean."""
        if self.sd is None or self.mean == 0:
            return None
        return self.sd / abs(self.mean)

    def as_dict(self) -> dict:
        return {"mean": self.mean, "n": self.n, "sd": self.sd, "ci95": self.half, "cv": self.cv}


def estimate(values, confidence: float = 0.95) -> Estimate:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        raise ValueError("no values")
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return Estimate(mean, n, None, None)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Estimate(mean, n, sd, t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n))


@dataclass(frozen=True)
class Difference:
    """Contender minus baseline, with Welch's two-sided test where both sides have repeats."""

    diff: float
    half: float | None  # 95% interval half-width of the difference
    p_value: float | None
    df: float | None

    @property
    def significant(self) -> bool | None:
        return None if self.p_value is None else self.p_value < 0.05


def welch(baseline: Estimate, contender: Estimate, confidence: float = 0.95) -> Difference:
    diff = contender.mean - baseline.mean
    if baseline.sd is None or contender.sd is None:
        return Difference(diff, None, None, None)
    va = baseline.sd ** 2 / baseline.n
    vb = contender.sd ** 2 / contender.n
    se2 = va + vb
    if se2 == 0:
        return Difference(diff, 0.0, 1.0 if diff == 0 else 0.0, None)
    df = se2 ** 2 / ((va ** 2 / (baseline.n - 1) if va else 0.0) + (vb ** 2 / (contender.n - 1) if vb else 0.0))
    se = math.sqrt(se2)
    t = abs(diff) / se
    p = 2 * (1 - t_cdf(t, df))
    return Difference(diff, t_quantile(0.5 + confidence / 2, df) * se, max(0.0, min(1.0, p)), df)


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (df may be fractional, as in Welch's test)."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
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
