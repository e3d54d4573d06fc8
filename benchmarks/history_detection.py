"""The history detector's error and power on simulated series, over more series than the unit tests.

Series as concurbench/history/simulate.py makes them: 2-20% run-to-run spread, one wild run in 20
(five times the spread), optional slow drift (one noise unit over 100 runs). It prints:

  1. false change points per 100 runs, series without a step, by length, spread and drift;
  2. steps of 5%, 10% and 20% under 3% spread: the share found (placed within one run) by each run after
     the step, without and with wild runs;
  3. the CI gate: the share of nights on which one metric without any step fails `history check`
     (a change the bad way among the newest K runs), by --min-after and --newest;
  4. a drift of 2% a run under 3% spread: after how many runs a change is first reported.

    python benchmarks/history_detection.py [--reps 300] [--seed 1]

The seeds are fixed: the figures are the same on every machine (only the time taken is not).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from concurbench.history.detect import Method, detect
from concurbench.history.simulate import false_changes, series, step_power


def gate_rate(method: Method, newest: int, *, nights: int, spread: float, seed: int, reps: int) -> float:
    """Share of nights (from the 20th run on) whose newest `newest` runs hold a change the bad way (down)."""
    rng = np.random.default_rng(seed)
    failed = total = 0
    for _ in range(reps):
        x = series(rng, nights, spread)
        for night in range(20, nights + 1):
            total += 1
            failed += any(c.index >= night - newest and (c.change or 0) < 0 for c in detect(x[:night], method=method))
    return failed / total


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
    print("\n3. history check on a metric without a step (5% spread, wild 1 in 20): share of nights it fails")
    for min_after in (2, 3):
        for newest in (3, 5):
            rate = gate_rate(Method(min_after=min_after), newest, nights=80, spread=0.05, seed=args.seed,
                             reps=max(10, args.reps // 10))
            print(f"   --min-after {min_after} --newest {newest}: {rate:.2%} of nights")
    print("\n4. a drift of 2% a run under 3% spread: runs until the first change is reported")
    delays = drift_delay(method, per_run=0.02, spread=0.03, seed=args.seed, reps=max(50, args.reps // 2))
    print(f"   median {np.median(delays):.0f}, 90th percentile {np.percentile(delays, 90):.0f} "
          f"(the level has moved {((1.02) ** np.median(delays) - 1):.0%} by the median)")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
