"""Change points in one series of runs: where a metric moved beyond its noise, and how sure that is.

The method (docs/history.md gives the reasons and the simulated error and power):

  1. Scale and noise (noise.py). Positive figures on the log scale, counts and figures that tie often on
     their own; the noise of one run from the whole series, robustly (the median absolute difference of
     neighbouring runs; the spread of the differences where many tie, never below the resolution); a run
     that carries its own standard error adds it, shrunk by its degrees of freedom.
  2. Where. E-divisive means (Matteson and James) splits each window of `window` runs where the
     energy distance between the two parts is largest, and splits the parts again while the split
     is significant; windows overlap by half, as Hunter does. It looks at a copy of the series in
     which a run more than three noise units from the medians of both its left and its right
     neighbours is replaced by the nearer median (a Hampel filter that leaves steps alone), so one
     wild run cannot attract a split. The mean-shift statistic then moves each split by up to
     REFINE runs to where a step fits best, first in its window, then between its final neighbours.
     The newest runs are tested as a side of their own besides (the newest `min_after` to TRUST - 1
     of them against the runs before, back to the previous change point): a step the nightly job has
     seen twice or three times is judged by that test, whatever the energy made of it.
  3. Whether. Each split is tested: the Huber means (a wild run weighs as if it were HUBER_C noise
     units out) of up to `window` runs on each side, their difference over its standard error,
     against Student's t (with DF_SHARE of the runs' degrees of freedom: what a winsorized scale is
     worth, so that small p-values keep their meaning). The standard error scales the series' noise by what the sides' own
     residuals show (winsorized): pooled, or each side its own when both have TRUST runs or more
     (Welch) when both have WELCH runs or more, so a stretch whose noise rose is not taken for a step
     (nor, by the local noise of noise.py, a few runs at its end). Counts (whole numbers of 0 or
     more) are tested exactly instead: given the two sides' total, one side's count is binomial with
     that side's share of the exposure (quasi-Poisson: widened by the series' overdispersion). A rare
     event's count out of each run's transactions (`counts` and `exposure`) is such a count: its rate is
     judged whatever the number of transactions did from run to run. The p-value is calibrated to the search
     (calibrate.py): a split placed where the statistic is largest is only as sure as the largest of
     the splits the search could have made would be by chance. Splits are dropped, weakest first,
     until every one left has a calibrated p <= alpha and moves the metric by at least `min_change`.
     A stretch between two splits shorter than `confirm` runs drops its weaker end, and a side
     shorter than TRUST runs is believed only when each of its runs lies beyond the other side's
     level by BAND_Z of its noise: two wild runs among three are not a level, and a run back at the
     old level is no evidence of a new one.
  4. How final. A change with `confirm` or more runs after it is confirmed; one seen only in the
     newest runs (at least `min_after` of them) is a candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..stats.tdist import t_quantile, t_sf
from .calibrate import END_FACTOR, search_factor
from .level import Level
from .noise import Noise, prepare, prepare_counts

HUBER_C = 2.0  # Huber's constant, in noise units
WINSOR_VAR = 0.9195  # E[min(Z^2, HUBER_C^2)] for a standard normal Z: winsorized residuals' variance
MIN_SCALE = 0.05  # the residuals may show at most this much less noise than the series (variance ratio)
DF_SHARE = 0.8  # a winsorized scale is worth this share of its runs' degrees of freedom (its efficiency)
HUBER_STEPS = 12  # iterations of the Huber mean at most (it settles in 3-6 on these sizes)
HUBER_TOL = 5e-5  # settled: no mean moved by more than this share of a run's room (1e-4 noise units)
SPLIT_FACTOR = 3  # a window is split where p <= alpha * SPLIT_FACTOR; the pruning then holds alpha
SETTLE_ROUNDS = 3  # times the change points left are placed again and pruned again
REFINE = 3  # runs either side of the energy's split that the mean-shift statistic may move it
HAMPEL_T = 3.0  # how far (noise units) a run may sit from its neighbours' median when splits are placed
BAND_Z = 1.0  # each run of a short side lies beyond the other side's level by this many of its noise units
TRUST = 5  # a side with fewer runs than this is believed only run by run (see _believable)
NEWEST = 7  # the newest-runs test takes the newest min_after to NEWEST - 1 runs as a side of their own
WELCH = 10  # with this many runs on both sides, each side's noise is its own (Welch's form)
QUIET_T = 3.5  # a series whose largest plain t over all splits stays below this cannot pass the gate's bar
PLACE_LR = 6.0  # the runs a change could start at: where the mean-shift statistic squared is within this of its top


@dataclass(frozen=True)
class Method:
    """The detector's settings; the defaults are those the simulations of docs/history.md measured."""

    window: int = 30
    alpha: float = 0.01
    min_change: float = 0.02
    confirm: int = 3
    min_after: int = 2

    def __post_init__(self):
        if self.window < 6:
            raise ValueError("window must be at least 6 runs")
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be between 0 and 1")
        if not 1 <= self.min_after <= self.confirm:
            raise ValueError("min_after must be between 1 and confirm")


@dataclass(frozen=True)
class Change:
    """A change point: `index` is the first run after it; `p` is two-sided, calibrated to the search."""

    index: int
    before: Level
    after: Level
    change: float | None  # after / before - 1; None when the level before is 0
    p: float
    confirmed: bool
    low: int = -1  # the runs the change could start at (the first run after it): the earliest ...
    high: int = -1  # ... and the latest (-1: index alone)

    @property
    def status(self) -> str:
        return "confirmed" if self.confirmed else "candidate"

    @property
    def starts(self) -> tuple[int, int]:
        """The places the change could start at, the earliest and the latest."""
        return (self.index if self.low < 0 else self.low, self.index if self.high < 0 else self.high)


@dataclass
class _Series:
    y: np.ndarray  # on the working scale
    log: bool  # the working scale is the log of the values
    w: np.ndarray  # each run's weight: 1 / its variance on that scale
    room: np.ndarray  # how far a run may sit from a mean at full weight (HUBER_C of its noise)
    located: np.ndarray  # y with wild runs pulled in (where splits are placed)
    discrete: bool  # ties are no evidence of quiet: the residuals may not show less noise than the series
    counts: bool  # whole numbers of 0 or more, tested exactly
    dispersion: float  # counts: their variance over their mean (at least 1, Poisson's)
    exposure: np.ndarray  # counts: each run's exposure over the mean one (all 1 without exposures)


@dataclass(frozen=True)
class _Tests:
    """Splits (a, tau, b) tested at once: p (not yet calibrated), the means on each side, the information
    on each side."""

    p: np.ndarray
    before: np.ndarray
    after: np.ndarray
    info_before: np.ndarray
    info_after: np.ndarray


def detect(values, se=None, method: Method = Method(), *, df=None, discrete: bool = False, counts=None,
           exposure=None) -> list[Change]:
    """The change points of a series in run order; `se` gives each run's own standard error and `df` its
    degrees of freedom (None or NaN where unknown); `discrete`: the figure is a count; `counts` and
    `exposure` (both, for every run): a rare event's count out of each run's transactions, tested as a rate
    with that exposure."""
    x = np.asarray(values, dtype=float)
    if len(x) < method.min_after + 2 or not np.all(np.isfinite(x)):
        return []
    if _has_exposure(counts, exposure, len(x)):
        noise = prepare_counts(np.asarray(counts, dtype=float), np.asarray(exposure, dtype=float))
        if noise is None:  # nothing was ever counted: nothing moved
            return []
        s = _series(noise)
    else:
        s = _prepare(x, se, df, discrete)
    cuts = _prune(s, _settle(s, _locate(s, method), method), method)
    for _ in range(SETTLE_ROUNDS):  # placed again between the change points that are left, and pruned again
        settled = _settle(s, cuts, method)
        if settled == cuts:
            break
        cuts = _prune(s, settled, method)
    return _finish(x, s, _newest(s, cuts, method), method)


# 1. scale and noise -----------------------------------------------------------------------------------

def _has_exposure(counts, exposure, n: int) -> bool:
    """Every run has a count of 0 or more and an exposure above 0."""
    if counts is None or exposure is None or len(counts) != n or len(exposure) != n:
        return False
    if any(c is None for c in counts) or any(e is None for e in exposure):
        return False
    k, e = np.asarray(counts, dtype=float), np.asarray(exposure, dtype=float)
    return bool(np.all(np.isfinite(k)) and np.all(k >= 0) and np.all(np.isfinite(e)) and np.all(e > 0))


def _prepare(x: np.ndarray, se, df, discrete: bool) -> _Series:
    noise = prepare(x, se, df, discrete)
    dispersion = 1.0
    if noise.counts and float(np.mean(noise.y)) > 0:
        dispersion = max(1.0, noise.sigma ** 2 / float(np.mean(noise.y)))
    return _series(noise, dispersion)


def _series(noise: Noise, dispersion: float | None = None) -> _Series:
    exposure = noise.exposure if noise.exposure is not None else np.ones(len(noise.y))
    return _Series(noise.y, noise.log, 1 / noise.var, HUBER_C * np.sqrt(noise.var), _hampel(noise.y, noise.sigma),
                   noise.discrete, noise.counts, noise.dispersion if dispersion is None else dispersion, exposure)


def _hampel(y: np.ndarray, sigma: float) -> np.ndarray:
    """y with each run that sits more than HAMPEL_T noise units from both its left and its right neighbours'
    medians replaced by the nearer median: a wild run is taken out, a run at a step (near the neighbours
    on its own side) is left alone. (With two neighbours a side, a side's median is their mean.)"""
    left, right = _side_median(y, 1), _side_median(y, -1)
    gap_l = np.where(np.isfinite(left), np.abs(y - left), np.inf)
    gap_r = np.where(np.isfinite(right), np.abs(y - right), np.inf)
    near = np.where(gap_l <= gap_r, left, right)
    far = np.minimum(gap_l, gap_r) > HAMPEL_T * sigma
    far &= np.isfinite(left) & np.isfinite(right)  # an end run has one side only: it may start a new level
    return np.where(far, near, y)


def _side_median(y: np.ndarray, side: int) -> np.ndarray:
    """The median of each run's two neighbours on one side (1: before it, -1: after it); NaN with none."""
    n = len(y)
    first, second = np.full(n, np.nan), np.full(n, np.nan)
    if side > 0:
        first[1:], second[2:] = y[:-1], y[:-2]
    else:
        first[:-1], second[:-2] = y[1:], y[2:]
    return np.where(np.isfinite(second), (first + second) / 2, first)


# 2. where: windowed e-divisive ------------------------------------------------------------------------

def _locate(s: _Series, method: Method) -> list[int]:
    """Splits of every window, found at once for the windows' first split, one segment at a time below."""
    n, size = len(s.y), method.window
    starts = list(range(0, max(1, n - size), max(1, size // 2)))
    if n > size and starts[-1] != n - size:
        starts.append(n - size)
    found: set[int] = set()
    segments = [(a, min(n, a + size)) for a in starts]
    while segments:
        taus, p = _best_splits(s, segments, method)
        kept = p <= min(0.5, method.alpha * SPLIT_FACTOR)
        found.update(int(t) for t in taus[kept])
        segments = [half for (a, b), t in zip(np.array(segments)[kept], taus[kept])
                    for half in ((int(a), int(t)), (int(t), int(b)))]
        segments = [seg for seg in segments if seg[1] - seg[0] >= _low(seg[0], method) + _high(seg[1], n, method)]
    return sorted(found)


def _low(a: int, method: Method) -> int:
    return 2 if a > 0 else method.min_after  # the first and the newest runs may form a shorter end


def _high(b: int, n: int, method: Method) -> int:
    return 2 if b < n else method.min_after


def _best_splits(s: _Series, segments: list[tuple[int, int]], method: Method) -> tuple[np.ndarray, np.ndarray]:
    """For each segment [a, b): where e-divisive splits it (refined, see _refine), and that split's p."""
    n = len(s.y)
    a = np.array([seg[0] for seg in segments])
    b = np.array([seg[1] for seg in segments])
    length = b - a
    size = int(length.max())
    cols = np.arange(size)
    valid = cols[None, :] < length[:, None]
    idx = np.minimum(a[:, None] + cols[None, :], n - 1)
    z = np.where(valid, s.located[idx], 0.0)
    w = np.where(valid, s.w[idx], 0.0)
    t = np.arange(size + 1)[None, :]
    low = np.array([_low(x, method) for x in a])[:, None]
    high = (length - np.array([_high(x, n, method) for x in b]))[:, None]
    allowed = (t >= low) & (t <= high)
    q = np.where(allowed, _energy(z, valid, length), -np.inf)
    first = np.argmax(q, axis=1)[:, None]
    near = allowed & (np.abs(t - first) <= REFINE)
    stat = np.where(near, _shift_statistic(z, w, length), -np.inf)
    taus = a + np.argmax(stat, axis=1)
    return taus, np.minimum(1.0, _tests(s, a, taus, b, method.window).p * search_factor(b - a))


def _energy(z: np.ndarray, valid: np.ndarray, length: np.ndarray) -> np.ndarray:
    """E-divisive's divergence Q(tau) of each row's first `length` values, for tau = 0..size (the first
    run of the right part)."""
    rows, size = z.shape
    d = np.abs(z[:, :, None] - z[:, None, :]) * (valid[:, :, None] & valid[:, None, :])
    p = np.zeros((rows, size + 1, size + 1))
    p[:, 1:, 1:] = d.cumsum(1).cumsum(2)
    r = np.arange(rows)[:, None]
    t = np.arange(size + 1)[None, :]
    n = length[:, None].astype(float)
    full = p[r, length[:, None], length[:, None]]
    head = p[r, t, length[:, None]]
    corner = p[r, t, t]
    m = n - t
    with np.errstate(divide="ignore", invalid="ignore"):
        between = 2 * (head - corner) / (t * m)
        within_left = np.where(t > 1, corner / (t * (t - 1)), 0.0)
        within_right = np.where(m > 1, (full - 2 * head + corner) / (m * (m - 1)), 0.0)
        q = t * m / n * (between - within_left - within_right)
    return np.where(np.isfinite(q), q, -np.inf)


def _shift_statistic(z: np.ndarray, w: np.ndarray, length: np.ndarray) -> np.ndarray:
    """For every split tau of each row: the weighted means' difference in standard errors. The energy
    finds the region of a change; this places a step more exactly in Gaussian noise (it reads the
    Hampel-filtered copy, so a wild run cannot pull it)."""
    rows = np.arange(len(z))
    cw = np.concatenate([np.zeros((len(z), 1)), np.cumsum(w, axis=1)], axis=1)
    cz = np.concatenate([np.zeros((len(z), 1)), np.cumsum(w * z, axis=1)], axis=1)
    total_w, total_z = cw[rows, length][:, None], cz[rows, length][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        wr = total_w - cw
        stat = np.abs((total_z - cz) / wr - cz / cw) / np.sqrt(1 / cw + 1 / wr)
    return np.where(np.isfinite(stat), stat, -np.inf)


# 3. whether -------------------------------------------------------------------------------------------

def _tests(s: _Series, a, tau, b, cap: int) -> _Tests:
    """Each split tau of the runs [a, b), at most `cap` runs on each side: the two Huber means' difference
    over its standard error, against Student's t (counts: the exact test of _count_tests).

    The noise is the series' (each run's variance) scaled by what the sides' own residuals show,
    winsorized at HUBER_C, so a quiet stretch is judged by its own quiet and a wild run adds at most
    HUBER_C noise units: pooled over both sides, or each side's own when both have TRUST runs or more
    (Welch's form), so a side whose noise rose does not pass for a step."""
    n = len(s.y)
    a, tau, b = (np.atleast_1d(np.asarray(v, dtype=int)) for v in (a, tau, b))
    lo, hi = np.maximum(a, tau - cap), np.minimum(b, tau + cap)
    cols = np.arange(int((hi - lo).max()))[None, :]
    where = lo[:, None] + cols
    valid = where < hi[:, None]
    idx = np.minimum(where, n - 1)
    y, w, room = s.y[idx], s.w[idx], s.room[idx]
    left, right = valid & (where < tau[:, None]), valid & (where >= tau[:, None])
    if s.counts:
        return _count_tests(s, _tamed(y, room, left, right) * s.exposure[idx], s.exposure[idx], left, right)
    mu_l, wl = _huber(y, w, room, left)
    mu_r, wr = _huber(y, w, room, right)
    n_l, n_r = (tau - lo).astype(float), (hi - tau).astype(float)
    resid = np.where(left, y - mu_l[:, None], np.where(right, y - mu_r[:, None], 0.0)) * np.sqrt(w)
    sq = np.clip(resid, -HUBER_C, HUBER_C) ** 2 / WINSOR_VAR
    floor = 1.0 if s.discrete else MIN_SCALE
    with np.errstate(divide="ignore", invalid="ignore"):
        info_l, info_r = wl.sum(axis=1), wr.sum(axis=1)
        pooled = np.maximum(np.sum(sq, axis=1) / (n_l + n_r - 2), floor)
        scale_l = np.maximum(_side_scale(sq, left), floor)
        scale_r = np.maximum(_side_scale(sq, right), floor)
        welch = (n_l >= WELCH) & (n_r >= WELCH)
        var_l = np.where(welch, scale_l, pooled) / info_l
        var_r = np.where(welch, scale_r, pooled) / info_r
        df = DF_SHARE * np.where(welch, (var_l + var_r) ** 2 / (var_l ** 2 / (n_l - 1) + var_r ** 2 / (n_r - 1)),
                                 n_l + n_r - 2)
        t = np.abs(mu_r - mu_l) / np.sqrt(var_l + var_r)
    ok = (df >= DF_SHARE) & np.isfinite(t)
    p = np.where(ok, np.minimum(1.0, 2 * t_sf(np.where(ok, t, 0.0), np.maximum(df, DF_SHARE))), 1.0)
    return _Tests(p, mu_l, mu_r, info_l, info_r)


def _side_scale(sq: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The winsorized scale of the masked residuals of each row (NaN with fewer than two)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mask, sq, 0.0).sum(axis=1) / (mask.sum(axis=1) - 1)


def _tamed(y: np.ndarray, room: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Counts with each run held within its room (HUBER_C of its noise) of its side's median: one wild night's
    burst of failures weighs as a run two noise units out, as a wild run does in the Huber means, and cannot
    make a side's total by itself; a step, which moves the side's median, is left whole."""
    mid_l, mid_r = _masked_median(y, left), _masked_median(y, right)
    mid = np.where(left, mid_l[:, None], np.where(right, mid_r[:, None], y))
    return np.clip(y, mid - room, mid + room)


def _count_tests(s: _Series, k: np.ndarray, e: np.ndarray, left: np.ndarray, right: np.ndarray) -> _Tests:
    """Counts `k` with exposures `e` (relative to the mean; all 1 for plain counts): given both sides' total,
    the right side's count is binomial with the right side's share of the exposure, the two-sided p from
    both tails; counts that vary more than Poisson's (the dispersion) are divided by it first
    (quasi-Poisson). The sides' means are rates at the mean exposure."""
    from scipy.special import betainc  # SciPy, as the t distribution: only when a series is tested

    n_l, n_r = np.where(left, e, 0.0).sum(axis=1), np.where(right, e, 0.0).sum(axis=1)
    sum_l, sum_r = np.where(left, k, 0.0).sum(axis=1), np.where(right, k, 0.0).sum(axis=1)
    total, k = (sum_l + sum_r) / s.dispersion, sum_r / s.dispersion
    share = n_r / (n_l + n_r)
    with np.errstate(all="ignore"):
        upper = np.where(k > 0, betainc(np.maximum(k, 1e-12), np.maximum(total - k + 1, 1e-12), share), 1.0)
        lower = np.where(k < total, 1 - betainc(k + 1, np.maximum(total - k, 1e-12), share), 1.0)
    p = np.where(total > 0, np.minimum(1.0, 2 * np.minimum(upper, lower)), 1.0)
    var = s.dispersion * np.maximum((sum_l + sum_r) / (n_l + n_r), 1.0 / (n_l + n_r))  # a run's variance, pooled
    return _Tests(p, sum_l / n_l, sum_r / n_r, n_l / var, n_r / var)


def _calibrated(tests: _Tests, lo, tau, hi, n: int, newest: int) -> np.ndarray:
    """The tests' p-values calibrated to the search: a split whose after side is the newest runs, fewer than
    `newest` of them, by the newest-runs test's factor; any other by the search over its stretch."""
    lo, tau, hi = (np.atleast_1d(np.asarray(v, dtype=int)) for v in (lo, tau, hi))
    end = (hi == n) & (hi - tau < newest)
    factor = np.where(end, END_FACTOR, search_factor(hi - lo))
    return np.minimum(1.0, tests.p * factor)


def _huber(y: np.ndarray, w: np.ndarray, room: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's Huber mean over its masked runs, and each run's weight in it (0 outside the mask)."""
    mu = _masked_median(y, mask)
    weights = np.where(mask, w, 0.0)
    tol = HUBER_TOL * float(room.min())
    wh = weights
    for _ in range(HUBER_STEPS):
        wh = weights * np.minimum(1.0, room / np.maximum(np.abs(y - mu[:, None]), 1e-300))
        with np.errstate(all="ignore"):
            new = (wh * y).sum(axis=1) / wh.sum(axis=1)
            settled = not (np.abs(new - mu) > tol).any()  # a row without runs (NaN) counts as settled
        mu = new
        if settled:
            break
    return mu, wh


def _masked_median(y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each row's median over its masked values (NaN for a row with none)."""
    ordered = np.sort(np.where(mask, y, np.inf), axis=1)
    k = mask.sum(axis=1)
    rows = np.arange(len(y))
    low, high = ordered[rows, np.maximum((k - 1) // 2, 0)], ordered[rows, np.maximum(k // 2, 0)]
    with np.errstate(invalid="ignore"):
        return np.where(k > 0, (low + high) / 2, np.nan)


def _settle(s: _Series, cuts: list[int], method: Method) -> list[int]:
    """Each change point moved (by up to REFINE runs) to where the mean-shift statistic between its two
    neighbours peaks: a window's split saw only the window, this sees the whole stretch on either side."""
    n = len(s.y)
    cuts = sorted(set(cuts))
    out = []
    for i, tau in enumerate(cuts):
        a, b = (out[-1] if out else 0), (cuts[i + 1] if i + 1 < len(cuts) else n)
        low, high = _low(a, method), _high(b, n, method)
        if b - a < low + high:
            out.append(tau)
            continue
        z, w = s.located[a:b][None, :], s.w[a:b][None, :]
        stat = _shift_statistic(z, w, np.array([b - a]))[0]
        t = np.arange(len(stat))
        near = (t >= max(low, tau - a - REFINE)) & (t <= min(b - a - high, tau - a + REFINE))
        out.append(a + int(np.argmax(np.where(near, stat, -np.inf))) if near.any() else tau)
    return sorted(set(out))


def _prune(s: _Series, cuts: list[int], method: Method) -> list[int]:
    n = len(s.y)
    cuts = sorted(cuts)
    while cuts:
        bounds = [0, *cuts, n]
        tests = _tests(s, bounds[:-2], cuts, bounds[2:], method.window)
        p = _calibrated(tests, _lows(bounds, method.window), cuts, _highs(bounds, method.window), n, NEWEST)
        moved = _moved(s, tests)
        short = _too_short(bounds, p, method)
        if short is not None:
            del cuts[short]
            continue
        doubtful = [i for i in range(len(cuts)) if not _believable(s, bounds, tests, i)]
        if doubtful:
            del cuts[max(doubtful, key=lambda i: p[i])]
            continue
        weak = _weakest(p, moved, method.alpha)
        if weak:
            for i in reversed(weak):
                del cuts[i]
            continue
        small = int(np.argmin(moved))
        if moved[small] < method.min_change:
            del cuts[small]
            continue
        break
    return cuts


def _lows(bounds: list[int], cap: int) -> np.ndarray:
    """Where each cut's test starts: its left neighbour, at most `cap` runs before it."""
    b = np.array(bounds)
    return np.maximum(b[:-2], b[1:-1] - cap)


def _highs(bounds: list[int], cap: int) -> np.ndarray:
    b = np.array(bounds)
    return np.minimum(b[2:], b[1:-1] + cap)


def _newest(s: _Series, cuts: list[int], method: Method) -> list[int]:
    """The newest runs as a side of their own: when no change point lies among the newest NEWEST - 1 runs,
    the newest k of them (min_after <= k < NEWEST) are tested against the runs before, back to the last
    change point; the best k becomes a change point if it holds as the pruning would hold it."""
    n = len(s.y)
    start = cuts[-1] if cuts else 0
    if cuts and cuts[-1] > n - NEWEST:
        return cuts
    ks = [k for k in range(method.min_after, NEWEST) if n - k - start >= TRUST]
    if not ks:
        return cuts
    taus = [n - k for k in ks]
    tests = _tests(s, [start] * len(ks), taus, [n] * len(ks), method.window)
    p = np.minimum(1.0, tests.p * END_FACTOR)
    moved = _moved(s, tests)
    for i in np.argsort(p, kind="stable"):
        if p[i] > method.alpha:
            break
        trial = [*cuts, taus[i]]
        bounds = [0, *trial, n]
        if moved[i] >= method.min_change and _believable(s, bounds, _tests(s, bounds[:-2], trial, bounds[2:],
                                                                            method.window), len(trial) - 1):
            return trial
    return cuts


def _weakest(p: np.ndarray, moved: np.ndarray, alpha: float) -> list[int]:
    """The change points to drop in one step: each with p > alpha that is weaker than both neighbours (its
    removal changes only their tests, so several far apart can go at once, as one at a time would)."""
    out = []
    for i in range(len(p)):
        if p[i] > alpha and all(j < 0 or j >= len(p) or (p[i], -moved[i]) >= (p[j], -moved[j]) for j in (i - 1, i + 1)):
            if not out or out[-1] < i - 1:
                out.append(i)
    return out


def _too_short(bounds: list[int], p: np.ndarray, method: Method) -> int | None:
    """The change point to drop for a stretch too short to be a level (None when none is): the first
    stretch needs `min_after` runs, one between two change points `confirm`; its weaker end goes."""
    if bounds[1] - bounds[0] < method.min_after:
        return 0
    for i in range(1, len(bounds) - 2):
        if bounds[i + 1] - bounds[i] < method.confirm:
            return i - 1 if p[i - 1] >= p[i] else i
    return None


def _moved(s: _Series, tests: _Tests) -> np.ndarray:
    """How far each level moved, relative to the level before."""
    if s.log:
        return np.abs(np.expm1(tests.after - tests.before))
    with np.errstate(all="ignore"):
        rel = np.abs(tests.after / tests.before - 1)
    return np.where(tests.before == 0, np.where(tests.after != 0, np.inf, 0.0), rel)


# 4. how final -----------------------------------------------------------------------------------------

def _finish(x: np.ndarray, s: _Series, cuts: list[int], method: Method) -> list[Change]:
    n = len(x)
    if not cuts:
        return []
    bounds = [0, *cuts, n]
    tests = _tests(s, bounds[:-2], cuts, bounds[2:], method.window)
    ps = _calibrated(tests, _lows(bounds, method.window), cuts, _highs(bounds, method.window), n, NEWEST)
    out = []
    for i, tau in enumerate(cuts):
        a, b = bounds[i], bounds[i + 2]
        after_n = b - tau
        if after_n >= method.confirm:
            confirmed = True
        elif b == n and after_n >= method.min_after:
            confirmed = False
        else:
            continue
        before, after = _level(x[a:tau]), _level(x[tau:b])
        change = None if before.mean == 0 else after.mean / before.mean - 1
        low, high = _place(s, a, tau, b, method)
        out.append(Change(tau, before, after, change, float(ps[i]), confirmed, low, high))
    return out


def compare(before, after, method: Method = Method(), *, se=None, df=None, discrete: bool = False, counts=None,
            exposure=None) -> Change:
    """Two levels judged at a split known beforehand (no search, so p is not calibrated): the runs `before`
    (a level) against the runs `after`, with the same noise, tests and run-by-run belief for a short side as
    a change point's. `se`, `df`, `counts` and `exposure` cover both, before then after. A side too short,
    or a short side whose runs do not each lie beyond the other level, gives p = 1."""
    x = np.concatenate([np.asarray(before, dtype=float), np.asarray(after, dtype=float)])
    tau, n = len(before), len(x)
    before_level, after_level = _level(x[:tau]), _level(x[tau:])
    change = None if before_level.mean == 0 else after_level.mean / before_level.mean - 1
    if tau < 2 or n - tau < 1 or not np.all(np.isfinite(x)):
        return Change(tau, before_level, after_level, change, 1.0, False)
    if _has_exposure(counts, exposure, n):
        noise = prepare_counts(np.asarray(counts, dtype=float), np.asarray(exposure, dtype=float))
        if noise is None:
            return Change(tau, before_level, after_level, change, 1.0, False)
        s = _series(noise)
    else:
        s = _prepare(x, se, df, discrete)
    bounds = [0, tau, n]
    tests = _tests(s, [0], [tau], [n], max(method.window, n))
    p = float(tests.p[0]) if _believable(s, bounds, tests, 0) else 1.0
    return Change(tau, before_level, after_level, change, p, n - tau >= method.confirm, tau, tau)


def _place(s: _Series, a: int, tau: int, b: int, method: Method) -> tuple[int, int]:
    """The runs the change at `tau` between its neighbours `a` and `b` could start at: every split whose
    mean-shift statistic squared (a log-likelihood ratio, for Gaussian noise) lies within PLACE_LR of the
    split's own, the earliest and the latest. A step of many noise units is placed to the run; a small one
    could have started a few runs either side, and two findings there are one."""
    low, high = _low(a, method), _high(b, len(s.y), method)
    if b - a < low + high:
        return tau, tau
    stat = _shift_statistic(s.located[a:b][None, :], s.w[a:b][None, :], np.array([b - a]))[0]
    t = np.arange(len(stat))
    allowed = (t >= low) & (t <= b - a - high) & np.isfinite(stat)
    if not allowed[tau - a]:
        return tau, tau
    near = allowed & (stat ** 2 >= stat[tau - a] ** 2 - PLACE_LR)
    places = a + t[near]
    return int(min(places.min(), tau)), int(max(places.max(), tau))


def _believable(s: _Series, bounds: list[int], tests: _Tests, i: int) -> bool:
    """A side of a change shorter than TRUST runs is believed only when every run of it lies beyond the
    other side's level, on the side it moved to, by BAND_Z of its own noise and that level's uncertainty:
    two wild runs among three are not a new level, and a run back at the old level is no evidence."""
    a, tau, b = bounds[i], bounds[i + 1], bounds[i + 2]
    before, after = tests.before[i], tests.after[i]
    side = 1 if after > before else -1
    if b - tau < TRUST:
        band = BAND_Z * np.sqrt(1 / s.w[tau:b] + 1 / tests.info_before[i])
        if not np.all(side * (s.y[tau:b] - before) > band):
            return False
    if tau - a < TRUST:
        band = BAND_Z * np.sqrt(1 / s.w[a:tau] + 1 / tests.info_after[i])
        if not np.all(side * (after - s.y[a:tau]) > band):
            return False
    return True


def _level(xs: np.ndarray) -> Level:
    n = len(xs)
    mean = float(np.mean(xs))
    if n < 2:
        return Level(mean, None, None, n)
    half = t_quantile(0.975, n - 1) * float(np.std(xs, ddof=1)) / math.sqrt(n)
    return Level(mean, mean - half, mean + half, n)


def largest_shift_t(x: np.ndarray) -> np.ndarray:
    """Each row's largest two-sample t over every split leaving two runs or more a side: plain means (of the
    logs, for rows of positive figures) and the robust noise of neighbour differences, never below a third of
    their root mean square. A cheap bound: a series below QUIET_T here is far from any change the gate could
    make a finding of among hundreds of series (benchmarks/history_gate.py --full checks that skipping them
    changes no finding)."""
    x = np.asarray(x, dtype=float)
    y = np.where(x > 0, np.log(np.maximum(x, 1e-300)), 0.0)
    y = np.where((x > 0).all(axis=1, keepdims=True), y, x)
    n = y.shape[1]
    if n < 5:
        return np.zeros(len(y))
    d = np.abs(np.diff(y, axis=1))
    sigma = 1.4826 * np.median(d, axis=1) / math.sqrt(2)
    sigma = np.maximum(sigma, np.sqrt(np.mean(d ** 2, axis=1) / 2) / 3)
    sigma = np.maximum(sigma, 1e-9)
    c = np.cumsum(y, axis=1)
    total = c[:, -1:]
    k = np.arange(2, n - 1)
    left = c[:, k - 1] / k
    right = (total - c[:, k - 1]) / (n - k)
    t = np.abs(right - left) / (sigma[:, None] * np.sqrt(1 / k + 1 / (n - k)))
    return t.max(axis=1)
