"""Student's t and the normal distribution, without SciPy.

The t distribution comes from the regularized incomplete beta function (a continued fraction,
evaluated by Lentz's method), exact to about 1e-12 for the sizes used here; quantiles by Newton's
method inside a bracket.
"""

from __future__ import annotations

import math


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (df may be fractional, or infinite)."""
    if df is None or df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if math.isinf(df):
        return normal_cdf(t)
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p: the closed forms for 1 and 2 degrees of freedom, otherwise Newton's
    method on the upper tail from a Cornish-Fisher start, kept inside a bracket (bisection when it strays)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if p == 0.5:
        return 0.0
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    if math.isinf(df):
        return _normal_quantile(p)
    tail = 1 - p  # worked on the upper tail, which keeps its precision far out
    z = _normal_quantile(p)  # Cornish-Fisher start
    t = z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df) \
        + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    lo, hi = 0.0, math.inf
    for _ in range(200):
        err = tail - _upper(t, df)  # > 0: t is too far out
        if err > 0:
            hi = t
        else:
            lo = t
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = t - err / density if density > 0 else math.nan
        if not lo < step < hi:
            step = t * 2 if math.isinf(hi) else (lo + hi) / 2
        if abs(step - t) <= 1e-12 * max(1.0, t):
            return step
        t = step
    return t


def _upper(t: float, df: float) -> float:
    """P(T > t) for t >= 0."""
    return 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))


def _normal_quantile(p: float) -> float:
    """The standard normal quantile: Newton's method on erfc from a rational start (Acklam's tail form)."""
    if p < 0.5:
        return -_normal_quantile(1 - p)
    if p == 0.5:
        return 0.0
    q = math.sqrt(-2 * math.log(1 - p))
    z = q - (2.515517 + 0.802853 * q + 0.010328 * q * q) / (1 + 1.432788 * q + 0.189269 * q * q + 0.001308 * q ** 3)
    for _ in range(50):
        err = normal_cdf(z) - p
        density = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        if density == 0:
            break
        step = err / density
        z -= step
        if abs(step) < 1e-13 * max(1.0, abs(z)):
            break
    return z


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def normal_quantile(p: float) -> float:
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    return _normal_quantile(p)


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
