"""The history detector's error and power on simulated series, over more series than the unit tests.

Series as concurbench/history/simulate.py makes them: 2-20% run-to-run spread, one wild run in 20
(five times the spread), optional slow drift (one noise unit over 100 runs). It prints:

  1. false change points per 100 runs, series without a step, by length, spread and drift;
  2. steps of 5%, 10% and 20% under 3% spread: the share found (placed within one run) by each run after
     the step, without and with wild runs;
  3. the noise cases: false change points per 100 runs of 60 runs for counts (Poisson 0.3 and 3), sizes
     of two or three pages, runs whose own error comes from 2 or 3 repeats; the share of series in
     which noise rising from 2% to 6% or 10% (no step) is taken for a change; and how calibrated the
     printed p is (the share of series of pure noise with a change whose p is at most x);
  4. a drift of 2% a run under 3% spread: after how many runs a change is first reported.

The gate's own figures (false-red nights over many series, its power) are benchmarks/history_gate.py's.

    python benchmarks/history_detection.py [--reps 300] [--seed 1]

The seeds are fixed: the figures are the same on every machine (only the time taken is not).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from concurbench.history import simulate
from concurbench.history.detect import Method, detect
from concurbench.history.simulate import false_changes, false_rate, series, step_power


def noise_cases(method: Method, reps: int, seed: int) -> None:
    cases = [("Poisson(0.3) counts", lambda rng, n: simulate.counts(rng, n, 0.3)),
             ("Poisson(3) counts", lambda rng, n: simulate.counts(rng, n, 3.0)),
             ("sizes of 2-3 pages", lambda rng, n: simulate.pages(rng, n)),
             ("errors from 2 repeats", lambda rng, n: simulate.repeated(rng, n, 0.05, 2)),
             ("errors from 3 repeats", lambda rng, n: simulate.repeated(rng, n, 0.05, 3))]
    for name, make in cases:
        rate = false_rate(make, method, n=60, reps=reps, seed=seed)
        print(f"   {name:24s} {rate.per_100_runs:5.2f} false change points per 100 runs")
    rng = np.random.default_rng(seed)
    for to in (0.06, 0.10):
        found = sum(bool(detect(simulate.rising(rng, 60, 0.02, to).values, method=method)) for _ in range(reps))
        print(f"   noise rising 2% -> {to:.0%}      a change in {found / reps:.1%} of series")
    smallest = np.array([min((c.p for c in detect(100 * (1 + 0.03 * rng.standard_normal(30)), method=method)),
                             default=1.0) for _ in range(reps * 10)])
    print("   pure noise, 30 runs: share of series with a change whose p <= x: "
          + ", ".join(f"{x:g}: {np.mean(smallest <= x):.2%}" for x in (0.01, 0.003, 0.001)))


def drift_delay(method: Method, *, per_run: float, spread: float, seed: int, reps: int, start: int = 30) -> list[int]:
    """Runs after a drift starts until the first change point is reported (the series flat before it)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        n = start + 40
        level = np.concatenate([np.ones(start), (1 + per_run) ** np.arange(1, n - start + 1)])
        x = 100 * level * (1 + spread * rng.standard_normal(n))
        out.append(next((j for j in range(1, n - start + 1) if detect(x[:start + j], method=method)), n - start))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=300, help="series per cell")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    method, started = Method(), time.perf_counter()
    print(f"detector: {method}")
    print("\n1. false change points per 100 runs (confirmed + candidates), one wild run in 20")
    print("   runs  spread  no drift  drift 1/100")
    for n in (30, 60, 100):
        for spread in (0.02, 0.05, 0.10, 0.20):
            cells = [false_changes(method, n=n, spread=spread, drift=d, reps=args.reps, seed=args.seed + n)
                     for d in (0.0, 1.0)]
            print(f"   {n:4d}  {spread:5.0%}  {cells[0].per_100_runs:8.2f}  {cells[1].per_100_runs:11.2f}")
    print("\n2. steps under 3% spread: share found (within one run of the step) by runs after it")
    for step in (0.05, 0.10, 0.20):
        for wild in (None, 20):
            p = step_power(method, step=step, spread=0.03, reps=args.reps * 2, seed=args.seed + int(step * 100),
                           wild_every=wild)
            print(f"   {step:4.0%} step{', wild 1 in 20' if wild else '':14s} "
                  + "  ".join(f"{j}: {p.share(j):6.1%}" for j in range(1, 6)))
    print("\n3. the noise cases (60 runs without a step)")
    noise_cases(method, args.reps, args.seed)
    print("\n4. a drift of 2% a run under 3% spread: runs until the first change is reported")
    delays = drift_delay(method, per_run=0.02, spread=0.03, seed=args.seed, reps=max(50, args.reps // 2))
    print(f"   median {np.median(delays):.0f}, 90th percentile {np.percentile(delays, 90):.0f} "
          f"(the level has moved {((1.02) ** np.median(delays) - 1):.0%} by the median)")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
