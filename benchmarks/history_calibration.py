"""The factors that calibrate the history detector's p-values to its search (concurbench/history/calibrate.py).

For each stretch length L: series of L runs of normal noise (3% spread; the test is scale-free), every
split that leaves two runs or more a side tested as the detector tests it (its Huber means, its scale,
at most `window` runs a side), and the share of series whose smallest p is at most x, over x. For the
newest-runs test: the newest 2 to 6 runs of series of 10 to 60 runs against the runs before them.
It prints SEARCH_FACTORS and END_FACTOR as calibrate.py holds them, and then checks them: the share of
series of pure noise whose calibrated p is at most 0.01 and 0.001 (it should be at most that).

    python benchmarks/history_calibration.py [--reps 20000] [--at 0.001] [--seed 7]

The seeds are fixed: the figures are the same on every machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from concurbench.history import detect as d
from concurbench.history.calibrate import SEARCH_FACTORS

LENGTHS = tuple(SEARCH_FACTORS)
END_LENGTHS = (10, 20, 30, 60)


def smallest_p(rng: np.random.Generator, length: int, reps: int, taus_of, window: int = 30) -> np.ndarray:
    """For `reps` series of `length` runs: the smallest raw p over the splits `taus_of(length)`."""
    out = np.empty(reps)
    taus = list(taus_of(length))
    for i in range(reps):
        x = 100 * (1 + 0.03 * rng.standard_normal(length))
        s = d._prepare(x, None, None, False)
        out[i] = d._tests(s, [0] * len(taus), taus, [length] * len(taus), window).p.min()
    return out


def every_split(length: int):
    return range(2, length - 1)


def newest(length: int):
    return [length - k for k in range(2, d.NEWEST)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20000, help="series per length")
    ap.add_argument("--at", type=float, default=1e-3, help="the p at which the factors are measured")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    factors = {}
    for length in LENGTHS:
        p = smallest_p(rng, length, args.reps, every_split)
        factors[length] = float(np.mean(p <= args.at) / args.at)
        print(f"search over {length:3d} runs: P(min p <= {args.at:g}) / {args.at:g} = {factors[length]:.1f}")
    ends = []
    for length in END_LENGTHS:
        p = smallest_p(rng, length, args.reps, newest)
        ends.append(float(np.mean(p <= args.at) / args.at))
        print(f"newest 2-6 of {length:3d} runs: {ends[-1]:.2f}")
    print(f"\nSEARCH_FACTORS = {{{', '.join(f'{k}: {v:.1f}' for k, v in factors.items())}}}")
    print(f"END_FACTOR = {max(ends):.1f}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
