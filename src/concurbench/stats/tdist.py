"""Student's t and the normal distribution, from SciPy.

`scipy.stats.t.cdf` and `.ppf` are `scipy.special.stdtr` and `stdtrit` (the normal's `ndtr` and
`ndtri`); these are called directly. SciPy is imported on the first call, not with this module:
`scipy.special` takes about 0.25 s to import and `scipy.stats` 0.8 s, and most commands (validate,
report, history add) never need a quantile or need it only once.
"""

from __future__ import annotations

import math
from functools import cache


@cache
def _special():
    import scipy.special  # noqa: PLC0415 - kept out of command start-up (see the module docstring)
    return scipy.special


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (df may be fractional, or infinite)."""
    if df is None or df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if math.isinf(df):
        return normal_cdf(t)
    return float(_special().stdtr(df, t))


def t_sf(t, df):
    """P(T > t), exact far into the tail (1 - t_cdf would round to 0 there); t and df may be numpy arrays."""
    return _special().stdtr(df, -t)


def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if df is None or df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(df):
        return normal_quantile(p)
    return float(_special().stdtrit(df, p))


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def normal_quantile(p: float) -> float:
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    return float(_special().ndtri(p))
