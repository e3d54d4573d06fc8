"""How much one run's figure moves by chance: the scale a series is worked on, its run-to-run noise, and
what each run's own error adds (detect.py uses it; docs/history.md gives the reasons and the figures).

  - Scale. Positive figures that are not counts are worked on the log scale (noise roughly proportional
    to the figure, a change is a ratio); counts and figures with many ties on their own. A figure that
    ties often and whose values are whole multiples of its smallest one (failures per transaction: a
    count over the run's transactions) is a count in that unit.
  - Noise. The median absolute difference of neighbouring runs, robust to a step and to a wild run; a run
    whose neighbourhood (LOCAL runs either side) moves clearly more has that local noise instead, so
    noise that rose is not taken for a step. When
    many neighbours tie (a count of errors that is mostly 0, a size of two or three pages) the median
    difference is 0 and says nothing: the spread of the differences themselves is taken instead, and
    never less than the figure's resolution allows (a value that moves in whole units of r is uncertain
    by at least r / sqrt(12)).
  - Each run's own error. A run with repeats carries its standard error with the repeats' degrees of
    freedom; two or three repeats give a very uncertain one. Each is shrunk toward the series' pooled
    run error as if the pool were worth PRIOR_DF degrees of freedom, so a run whose repeats happened to
    agree is not taken as exact.
  - Rare events with their exposure (prepare_counts). A count of failures, retries or errors out of a
    run's scheduled transactions is a rate: each run's count is quasi-Poisson with its transactions as
    exposure, variance = dispersion x mean. The series is worked at its mean exposure (each run's count
    scaled to it), each run weighed by its own exposure, and the dispersion (at least 1, Poisson's) is
    estimated from neighbouring runs, so that a step or a wild run moves one or two of the differences
    and not the estimate: runs whose failures come in bursts (a busy night, a lock convoy) vary more
    than Poisson, and the tests widen by that much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ROBUST = 1.4826  # the median absolute deviation of a normal, in standard deviations
NOISE_FLOOR = 1e-6  # relative: a series that never moves still has this much noise
TIES = 0.25  # a series whose neighbouring runs tie this often is treated as discrete
PRIOR_DF = 10.0  # the weight of the pooled run error, in degrees of freedom, beside each run's own
CLIP = 3.0  # the spread of tied differences: each difference counts at most CLIP upper quartiles
LOCAL = 10  # a run's local noise: the neighbour differences this many runs either side of it
LOCAL_SLACK = 1.3  # a run's noise is its local noise where that is more than this times the series'
COUNT_SLACK = 0.1  # a share of a count: each value within 10% of a whole multiple of the smallest one
COUNT_MOST = 50  # ... and at most this many times it


@dataclass(frozen=True)
class Noise:
    """A series on its working scale, with each run's variance there."""

    y: np.ndarray
    log: bool
    discrete: bool  # counts, or a figure whose runs tie often: the local quiet of ties is no evidence
    counts: bool  # a count (as the caller says) in whole numbers of 0 or more: tested as counts (detect.py)
    sigma: float  # the run-to-run noise of the series
    var: np.ndarray  # each run's variance (the series' between-run part plus its own error)
    unit: float = 1.0  # y is the figure in this unit (a share of a count: its smallest step; else 1)
    exposure: np.ndarray | None = None  # counts: each run's exposure over the mean one (None: all alike)
    dispersion: float = 1.0  # counts: their variance over their mean (at least 1, Poisson's)


def prepare(x: np.ndarray, se=None, df=None, discrete: bool = False) -> Noise:
    """The working scale and noise of a series of positive or zero-or-more figures."""
    diffs = np.diff(x)
    counts = discrete and bool(np.all(x >= 0)) and bool(np.all(x == np.round(x)))
    tied = bool(len(diffs)) and float(np.mean(diffs == 0)) >= TIES
    unit = _count_unit(x) if tied and not counts else None
    if unit is not None:  # a share of a count (failures per transaction): counted in units of its smallest value
        x, counts = np.round(x / unit), True
    discrete = discrete or tied
    log = bool(np.all(x > 0)) and not discrete
    y = np.log(x) if log else x.astype(float)
    sigma = _scale(y, discrete, log)
    own = _own_variance(x, y, log, se, df)
    var = np.maximum(sigma, _local(y) / LOCAL_SLACK) ** 2
    known = np.isfinite(own)
    if known.any():
        between = np.maximum(var - float(np.median(own[known])), 0.0)
        var[known] = np.maximum(between[known] + own[known], (NOISE_FLOOR * _unit(y, log)) ** 2)
    return Noise(y, log, discrete, counts, sigma, var, 1.0 if unit is None else unit)


def _count_unit(x: np.ndarray) -> float | None:
    """For a figure of 0 or more whose runs tie often, some of them at 0: the smallest positive value, when
    every value is a whole multiple of it (at most COUNT_MOST) to within COUNT_SLACK (a count divided by a
    run's transactions, which vary a little from run to run); None otherwise."""
    if np.any(x < 0) or not np.any(x == 0):
        return None
    positive = x[x > 0]
    if not len(positive) or positive.max() > COUNT_MOST * positive.min():
        return None
    unit = float(positive.min())
    ratio = x / unit
    return unit if bool(np.all(np.abs(ratio - np.round(ratio)) <= COUNT_SLACK * np.maximum(np.round(ratio), 1))) \
        else None


def _unit(y: np.ndarray, log: bool) -> float:
    return 1.0 if log else max(float(np.median(np.abs(y))), 1e-12)


def _scale(y: np.ndarray, discrete: bool, log: bool) -> float:
    d = np.diff(y)
    sigma = ROBUST * float(np.median(np.abs(d))) / math.sqrt(2) if len(d) else 0.0
    if discrete and len(d):
        cap = CLIP * max(float(np.quantile(np.abs(d), 0.75)), resolution(y))
        sigma = max(sigma, math.sqrt(float(np.mean(np.clip(d, -cap, cap) ** 2)) / 2), resolution(y) / math.sqrt(12))
    return max(sigma, NOISE_FLOOR * _unit(y, log))


def _local(y: np.ndarray) -> np.ndarray:
    """Each run's noise from the neighbour differences within LOCAL runs of it (the median absolute one):
    where the noise rose, the runs there are known to move more."""
    d = np.abs(np.diff(y))
    n = len(y)
    if len(d) < 2 * LOCAL:
        return np.zeros(n)
    padded = np.concatenate([np.full(LOCAL, np.nan), d, np.full(LOCAL, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * LOCAL)[:n]
    return ROBUST * np.nanmedian(windows, axis=1) / math.sqrt(2)


def resolution(y: np.ndarray) -> float:
    """The smallest step between two different values of the series (0 when they are all the same)."""
    distinct = np.unique(y)
    return float(np.min(np.diff(distinct))) if len(distinct) > 1 else 0.0


def _own_variance(x: np.ndarray, y: np.ndarray, log: bool, se, df) -> np.ndarray:
    """Each run's own variance on the working scale, shrunk toward the pooled one by its degrees of freedom
    (NaN where a run has no error of its own)."""
    n = len(x)
    own = np.full(n, np.nan) if se is None else np.array([np.nan if v is None else v for v in se], dtype=float)
    if log:
        own = own / x
    own = own * own
    known = np.isfinite(own)
    if not known.any():
        return own
    dof = np.full(n, PRIOR_DF) if df is None else np.array([np.nan if v is None else v for v in df], dtype=float)
    dof = np.where(np.isfinite(dof) & (dof > 0), dof, PRIOR_DF)
    pooled = float(np.sum(dof[known] * own[known]) / np.sum(dof[known]))
    return np.where(known, (dof * own + PRIOR_DF * pooled) / (dof + PRIOR_DF), np.nan)


def prepare_counts(k: np.ndarray, exposure: np.ndarray) -> Noise | None:
    """A series of rare-event counts `k`, each out of its run's `exposure` (scheduled transactions), worked
    at the mean exposure: y is each run's count scaled to it, its variance dispersion x mean x (mean
    exposure / the run's). None when no run counted anything (nothing can have moved)."""
    k, exposure = np.asarray(k, dtype=float), np.asarray(exposure, dtype=float)
    rel = exposure / float(np.mean(exposure))
    y = k / rel
    mu = float(np.sum(k) / np.sum(rel))  # the pooled rate at the mean exposure
    if mu <= 0:
        return None
    dispersion = _dispersion(y, rel, mu)
    var = dispersion * mu / rel
    return Noise(y, False, True, True, math.sqrt(dispersion * mu), var, 1.0, rel, dispersion)


def _dispersion(y: np.ndarray, rel: np.ndarray, mu: float) -> float:
    """Counts' variance over their mean, from neighbouring runs: each difference's square over what Poisson
    gives it, each clipped at CLIP upper quartiles (a step or a wild run moves one or two of them), averaged;
    at least 1."""
    if len(y) < 3:
        return 1.0
    d = np.diff(y)
    expected = mu * (1 / rel[:-1] + 1 / rel[1:])
    cap = CLIP * max(float(np.quantile(np.abs(d), 0.75)), resolution(y), math.sqrt(mu))
    return max(1.0, float(np.mean(np.clip(d, -cap, cap) ** 2 / expected)))
