"""Simulated nights of a CI job with many gated series, to measure the gate's false-red rate per night and
its power (tests/unit/test_history_gate.py with small sizes, benchmarks/history_gate.py with the sizes of
docs/history.md).

A night runs `groups` run groups (one scenario on one server line), each with `locations` locations
(variant, pool, clients), each with the headline figures a pool reports: tps, latency mean, p95 and
p99, and the shares of its transactions that failed and were retried. What moves them:

  - each location's run-to-run spread, drawn between 2% and 10% (log-uniform);
  - tps and latency move together (latency's noise is tps's, reversed, plus a third of its own); the
    p95 shares 60% of it, the p99 30%, each with its own noise besides, the p99's heavy-tailed
    (Student's t with 4 degrees of freedom);
  - the machine: every series of a run group shares a factor of half the spread, and one run in
    `wild_every` of a run group is wild (that factor five times wider: a busy night slows it all);
  - one value in `spike_every` of a series is wild on its own (five times its spread);
  - failed and retried transactions are counts (Poisson, a mean of 0.1 to 3 a run, so most runs tie
    at 0 or 1) over about 10,000 transactions.

`independent=True` takes the correlation away (no shared factor; every series' wild runs its own, one
in `wild_every`): the worst case for a per-night bound.

`varying=True` is the flat model of real nightly runs of fixed duration (docs/history.md, "rare events
as counts"): a run's transactions are its throughput times the window, so they vary with the spread and
the machine; failures and retries are Poisson at 0.2 to 3 a run over them, burstier on a busy night
(their rate moves with the machine factor), and stored as a pool stores them: the count, the scheduled
transactions, and their share rounded to six places. `counts=False` in run_history judges those shares
as the gate did before it kept counts with their exposure.

The gate is the one of gate.py on arrays: each night every series is searched by the detector
(detect.py) unless its largest plain two-sample t over all splits stays below PREFILTER_T (a series
that far from any change cannot reach the night's threshold: benchmarks/history_gate.py --full checks
that skipping them changes nothing), the worse-way changes of at least the minimum change that are
not findings yet are the candidates, and Benjamini-Hochberg over the night's series at `alpha` makes
the findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..figures import Better
from .detect import QUIET_T, Method, detect, largest_shift_t
from .findings import overlap
from .gatefile import MIN_AFTER, MIN_BEFORE

METRICS = ("tps", "latency.mean_ms", "latency.p95_ms", "latency.p99_ms", "failed_per_txn", "retries_per_txn")
BETTER = (Better.HIGHER, Better.LOWER, Better.LOWER, Better.LOWER, Better.LOWER, Better.LOWER)
PREFILTER_T = QUIET_T
TXNS = 10_000
RATES = (4, 5)  # the METRICS that are a rare event's share of the transactions


@dataclass(frozen=True)
class Model:
    groups: int
    locations: int = 4
    wild_every: float = 20
    spike_every: float = 50
    independent: bool = False
    spread: tuple[float, float] = (0.02, 0.10)  # each location's run-to-run spread, log-uniform between
    varying: bool = False  # rare events over transactions that vary with the run (see the module's note)
    rare: tuple[float, float] = (0.2, 3.0)  # varying: failures and retries a run, log-uniform between
    transactions: float = 60_000.0  # varying: a run's transactions at the location's level
    burst: float = 0.25  # varying: how far the rare events' rate moves with the machine factor (log scale)

    @property
    def series(self) -> int:
        return self.groups * self.locations * len(METRICS)


REALISTIC = dict(spread=(0.03, 0.05), varying=True)  # the flat model of issue review: 3-5%, rare events vary


@dataclass(frozen=True)
class Nights:
    """Simulated nights: each series' figures (series, nights), and for the rare events their counts and the
    transactions they are out of (NaN for the other series)."""

    values: np.ndarray
    counts: np.ndarray
    exposure: np.ndarray


def night_values(rng: np.random.Generator, model: Model, nights: int) -> np.ndarray:
    """An array (series, nights) of positive figures, series in location-major order (METRICS each)."""
    return simulate_nights(rng, model, nights).values


def simulate_nights(rng: np.random.Generator, model: Model, nights: int) -> Nights:
    """The nights' figures, with the rare events' counts and exposures."""
    g, loc = model.groups, model.locations
    spread = np.exp(rng.uniform(math.log(model.spread[0]), math.log(model.spread[1]), (g, loc, 1)))
    shared = 0.5 * rng.standard_normal((g, 1, nights))
    wild = rng.random((g, 1, nights)) < 1 / model.wild_every
    shared = np.where(wild, 5 * shared, shared)
    if model.independent:
        shared = np.zeros_like(shared)
    base = rng.standard_normal((g, loc, nights))
    if model.independent:
        base = np.where(rng.random((g, loc, nights)) < 1 / model.wild_every, 5 * base, base)
    tps_z = base + shared  # in units of the location's spread
    own = rng.standard_normal((g, loc, nights, 3))
    lat_z = -tps_z + own[..., 0] / 3
    p95_z = 0.6 * lat_z + 0.8 * own[..., 1]
    p99_z = 0.3 * lat_z + 1.2 * rng.standard_t(4, (g, loc, nights))
    out = []
    for z, level in ((tps_z, 1000.0), (lat_z, 4.0), (p95_z, 9.0), (p99_z, 15.0)):
        spiked = np.where(rng.random(z.shape) < 1 / model.spike_every, 5 * rng.standard_normal(z.shape), z)
        out.append(np.maximum(level * (1 + spread * spiked), level * 0.05))
    counts, exposure = [], []
    if model.varying:
        txns = np.round(model.transactions * out[0] / 1000.0)  # fixed duration: transactions follow throughput
        for _ in range(2):
            lam = np.exp(rng.uniform(math.log(model.rare[0]), math.log(model.rare[1]), (g, loc, 1)))
            k = rng.poisson(lam * txns / model.transactions * np.exp(model.burst * shared)).astype(float)
            counts.append(k)
            exposure.append(txns)
            out.append(np.round(k / txns, 6))
    else:
        for means in ((0.1, 0.5, 3.0), (0.3, 1.0, 3.0)):
            lam = rng.choice(means, (g, loc, 1))
            k = rng.poisson(np.broadcast_to(lam, (g, loc, nights))).astype(float)
            counts.append(k)
            exposure.append(np.full(k.shape, float(TXNS)))
            out.append(k / TXNS)
    nan = np.full((g, loc, nights), np.nan)
    shape = g * loc * len(METRICS), nights
    return Nights(np.stack(out, axis=2).reshape(shape), np.stack([nan] * 4 + counts, axis=2).reshape(shape),
                  np.stack([nan] * 4 + exposure, axis=2).reshape(shape))


def better_of(index: int) -> Better:
    return BETTER[index % len(METRICS)]


@dataclass
class Tally:
    nights: int = 0
    red_nights: int = 0  # nights on which a finding was made (in a history without any change: false)
    findings: int = 0
    causes: int = 0  # findings grouped by their first run and run group
    first_red: list[int] = field(default_factory=list)  # per history: the night of its first finding (-1: none)


def run_history(values, method: Method, alpha: float, *, first_night: int, model: Model,
                prefilter: bool = True, counts: bool = True) -> tuple[list[tuple[int, int, int]], int]:
    """Check night by night from `first_night` to the last: the findings made, as (night, series, first
    run), and how many series the detector searched. `values` are the nights' figures, or Nights (whose
    rare events are judged as counts with their exposure unless `counts` is False)."""
    nights_ = values if isinstance(values, Nights) else None
    values = nights_.values if nights_ is not None else values
    n_series, nights = values.shape
    found: dict[int, list[tuple[int, int]]] = {}
    made: list[tuple[int, int, int]] = []
    searched = 0
    for night in range(first_night, nights + 1):
        x = values[:, :night]
        suspects = np.nonzero(largest_shift_t(x) >= PREFILTER_T)[0] if prefilter else np.arange(n_series)
        if prefilter and counts and nights_ is not None:  # the prefilter's t is for continuous figures
            rates = np.nonzero(np.isfinite(nights_.exposure[:, 0]))[0]
            suspects = np.union1d(suspects, rates)
        tested = []
        for s in suspects:
            searched += 1
            better = better_of(int(s))
            exposure = nights_ is not None and counts and bool(np.isfinite(nights_.exposure[s, 0]))
            changes = detect(x[s], method=method, counts=nights_.counts[s, :night] if exposure else None,
                             exposure=nights_.exposure[s, :night] if exposure else None)
            cands = [c for c in changes if _worse(c, better, method.min_change)
                     and not any(overlap(_slack(c.starts), f) for f in found.get(int(s), []))]
            if cands:
                tested.append((min(c.p for c in cands) / 2 * len(cands), int(s), cands))
        ps = sorted(p for p, _, _ in tested)
        passing = [p for k, p in enumerate(ps, 1) if p <= k * alpha / n_series]
        limit = max(passing) if passing else -1.0
        for p, s, cands in tested:
            if p <= limit:
                for c in cands:
                    found.setdefault(s, []).append(c.starts)
                    made.append((night, s, c.index))
    return made, searched


def _slack(places: tuple[int, int]) -> tuple[int, int]:
    """A change's places widened by a run either side (the detector may place a step a run off)."""
    return places[0] - 1, places[1] + 1


def _worse(c, better: Better, min_change: float) -> bool:
    """As the gate's (gate._worse): MIN_BEFORE runs before a change from the series' first level, MIN_AFTER
    from a level an earlier change point bounds."""
    first_level = c.index - c.before.n <= 0
    if c.before.n < (MIN_BEFORE if first_level else MIN_AFTER) or c.after.n < MIN_AFTER:
        return False
    if c.change is None:
        return better is Better.LOWER
    moved_up = c.change > 0
    return abs(c.change) >= min_change and moved_up == (better is Better.LOWER)


def false_red(model: Model, method: Method, alpha: float, *, histories: int, nights: int, first_night: int,
              seed: int, prefilter: bool = True, counts: bool = True) -> Tally:
    """Histories without any change: the nights (from `first_night` on) on which the gate made a finding."""
    rng = np.random.default_rng(seed)
    tally = Tally()
    for _ in range(histories):
        values = simulate_nights(rng, model, nights)
        made, _ = run_history(values, method, alpha, first_night=first_night, model=model, prefilter=prefilter,
                              counts=counts)
        tally.nights += nights - first_night + 1
        red = {night for night, _, _ in made}
        tally.red_nights += len(red)
        tally.findings += len(made)
        per = len(METRICS) * model.locations
        tally.causes += len({(night, s // per, first) for night, s, first in made})
        tally.first_red.append(min(red) if red else -1)
    return tally


def step_power(method: Method, alpha: float, *, family: int, step: float, spread: float, reps: int, seed: int,
               before: tuple[int, int] = (20, 28), after: int = 5, wild_every: float | None = 20) -> list[float]:
    """One location whose tps steps down by `step` (and its latency up as much) under `spread`, among a
    night's `family` gated series (the others without change): the share of histories red on that step
    (a finding within one run of it) by each run after it, 1 to `after`. The other series are taken as
    making no finding (they would only lower the night's threshold for this one)."""
    rng = np.random.default_rng(seed)
    by = np.zeros(after)
    for _ in range(reps):
        k = int(rng.integers(*before))
        n = k + after
        z = rng.standard_normal(n)
        if wild_every:
            z = np.where(rng.random(n) < 1 / wild_every, 5 * z, z)
        tps = 1000 * (1 + spread * z)
        lat = 4 * (1 - spread * z + spread / 3 * rng.standard_normal(n))
        tps[k:] *= 1 - step
        lat[k:] /= 1 - step
        x = np.stack([tps, lat])
        for j in range(1, after + 1):
            tested = []
            for s in range(2):
                cands = [c for c in detect(x[s, :k + j], method=method)
                         if _worse(c, BETTER[s], method.min_change) and abs(c.index - k) <= 1]
                if cands:
                    tested.append(min(c.p for c in cands) / 2 * len(cands))
            ps = sorted(tested)
            if any(p <= r * alpha / family for r, p in enumerate(ps, 1)):
                by[j - 1:] += 1
                break
    return list(by / reps)
