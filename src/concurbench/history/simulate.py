"""Simulated series of runs, to measure the detector's error and power (tests/unit/test_history_detect.py,
benchmarks/history_detection.py; docs/history.md gives the figures).

A run's figure is 100 x (1 + noise) x level: the noise is normal with the run-to-run `spread` (a
coefficient of variation), and one run in `wild_every` (on average) is wild: its noise is
`wild_factor` times wider (heavy tails). The level may drift (`drift`: noise units per 100 runs,
a straight line) and may step by `step` (relative) from run `step_at` on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .detect import Method, detect

WILD_EVERY = 20
WILD_FACTOR = 5.0


def series(rng: np.random.Generator, n: int, spread: float, *, wild_every: float | None = WILD_EVERY,
           wild_factor: float = WILD_FACTOR, drift: float = 0.0, step_at: int | None = None,
           step: float = 0.0) -> np.ndarray:
    noise = rng.standard_normal(n) * spread
    if wild_every:
        noise[rng.random(n) < 1 / wild_every] *= wild_factor
    level = 1 + drift * spread * np.arange(n) / 100
    x = 100 * level * (1 + noise)
    if step_at is not None:
        x[step_at:] *= 1 + step
    return np.maximum(x, 1e-3)


@dataclass(frozen=True)
class Simulated:
    """A series with what the detector is given besides the values: each run's own error and its degrees of
    freedom (None: not known), and whether the figure is a count."""

    values: np.ndarray
    se: np.ndarray | None = None
    df: np.ndarray | None = None
    discrete: bool = False


def counts(rng: np.random.Generator, n: int, mean: float) -> Simulated:
    """A count per run (errors, retries): Poisson with this mean, so most runs of a small mean tie at 0."""
    return Simulated(rng.poisson(mean, n).astype(float), discrete=True)


def pages(rng: np.random.Generator, n: int, low: int = 2, high: int = 3, page: int = 8192) -> Simulated:
    """A size of a few pages that flips between `low` and `high` pages at random (equal chances): not a count,
    but its runs tie often."""
    return Simulated(page * rng.integers(low, high + 1, n).astype(float))


def repeated(rng: np.random.Generator, n: int, spread: float, repeats: int, *, between: float = 0.5) -> Simulated:
    """Runs of `repeats` repeats each: the run's mean with its standard error from the repeats (repeats - 1
    degrees of freedom). A repeat moves by `spread`; a run as a whole by `between` x spread besides."""
    level = 100 * (1 + between * spread * rng.standard_normal(n))
    reps = level[:, None] * (1 + spread * rng.standard_normal((n, repeats)))
    return Simulated(reps.mean(axis=1), reps.std(axis=1, ddof=1) / np.sqrt(repeats), np.full(n, repeats - 1.0))


def rising(rng: np.random.Generator, n: int, spread: float, to: float, *, at: int | None = None) -> Simulated:
    """A level that never moves while its noise rises from `spread` to `to` at run `at` (half way)."""
    at = n // 2 if at is None else at
    noise = rng.standard_normal(n) * np.where(np.arange(n) < at, spread, to)
    return Simulated(np.maximum(100 * (1 + noise), 1e-3))


def false_rate(make, method: Method, *, n: int, reps: int, seed: int) -> "FalseRate":
    """Change points found in series without a change of level, `make(rng, n)` giving each (a Simulated)."""
    rng = np.random.default_rng(seed)
    confirmed = candidates = 0
    for _ in range(reps):
        s = make(rng, n)
        found = detect(s.values, s.se, method=method, df=s.df, discrete=s.discrete)
        confirmed += sum(c.confirmed for c in found)
        candidates += sum(not c.confirmed for c in found)
    return FalseRate(n * reps, confirmed, candidates)


@dataclass(frozen=True)
class FalseRate:
    runs: int
    confirmed: int
    candidates: int

    @property
    def per_100_runs(self) -> float:
        return 100 * (self.confirmed + self.candidates) / self.runs


def false_changes(method: Method, *, n: int, spread: float, drift: float = 0.0, reps: int,
                  seed: int, wild_every: float | None = WILD_EVERY) -> FalseRate:
    """Change points found in series without a step, counted per run of the series."""
    rng = np.random.default_rng(seed)
    confirmed = candidates = 0
    for _ in range(reps):
        found = detect(series(rng, n, spread, drift=drift, wild_every=wild_every), method=method)
        confirmed += sum(c.confirmed for c in found)
        candidates += sum(not c.confirmed for c in found)
    return FalseRate(n * reps, confirmed, candidates)


@dataclass(frozen=True)
class Power:
    reps: int
    found_by: dict[int, int]  # runs after the step -> series in which it was found (placed within one run) by then

    def share(self, runs_after: int) -> float:
        return self.found_by.get(runs_after, 0) / self.reps


def step_power(method: Method, *, step: float, spread: float, reps: int, seed: int, runs_after: int = 5,
               before: tuple[int, int] = (10, 60), wild_every: float | None = None) -> Power:
    """How often a step is found within 1..runs_after runs after it, placed within one run of the truth,
    the detector looking at the series as it grows run by run."""
    rng = np.random.default_rng(seed)
    first: list[int | None] = []
    for _ in range(reps):
        k = int(rng.integers(*before))
        x = series(rng, k + runs_after, spread, step_at=k, step=step, wild_every=wild_every)
        first.append(next((j for j in range(1, runs_after + 1)
                           if any(abs(c.index - k) <= 1 for c in detect(x[:k + j], method=method))), None))
    return Power(reps, {j: sum(1 for f in first if f is not None and f <= j) for j in range(1, runs_after + 1)})
