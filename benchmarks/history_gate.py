"""The history gate's false-red rate per night and its power, on simulated nights of many gated series.

Nights as concurbench/history/nightsim.py makes them: run groups of four locations with six headline
figures each (tps, latency mean, p95, p99, failed and retried per transaction), 2-10% spread, tps and
latency moving together, a machine factor per run group with one wild run in 20, one wild value in 50
per series, p99 heavy-tailed, counts that tie. It prints:

  1. false-red nights: 30-night histories without any change, checked every night from the 10th (the
     gate needs a baseline); the share of nights on which the gate made a finding, with 700 and 2,000
     gated series, correlated as above and independent (no shared factor, each series' own wild runs);
  2. power: one location's tps down 10% (latency up as much) under 3% spread, 20 to 27 runs of history
     before it, among a night of 1, 100, 700 and 2,000 gated series: the share red on that step by
     each run after it (with one wild run in 20, and without);
  3. with --full, the same false-red histories (fewer) with every series searched every night, to show
     that skipping the series far from any change (nightsim.PREFILTER_T) changes nothing;
  4. the realistic flat model of real nightly runs (nightsim.REALISTIC: 3-5% spread, a machine factor
     with wild runs, failures and retries of 0.2-3 a run over transactions that follow the throughput):
     40-night histories of 696 gated series checked from night 10, judged as before (the shares of the
     transactions as figures) and as counts with their exposure (the gate now), on the same nights.

    python benchmarks/history_gate.py [--histories 100] [--reps 400] [--full 3] [--realistic 100]
                                      [--processes 2] [--only realistic]

The seeds are fixed: the figures are the same on every machine (only the time taken is not).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date

from concurbench.history.detect import Method
from concurbench.history.gatefile import DEFAULT_ALPHA
from concurbench.history.nightsim import REALISTIC, Model, Tally, false_red, run_history, night_values, step_power
from concurbench.results.store import cpu_model

NIGHTS, FIRST, REAL_NIGHTS = 30, 10, 40
GROUPS = {700: 29, 2000: 83}  # run groups of 4 locations x 6 figures: 696 and 1,992 gated series


def _false_red(args) -> Tally:
    groups, independent, histories, seed = args
    return false_red(Model(groups=groups, independent=independent), Method(), DEFAULT_ALPHA, histories=histories,
                     nights=NIGHTS, first_night=FIRST, seed=seed)


def _realistic(args) -> tuple[Tally, Tally]:
    histories, seed = args
    model = Model(groups=GROUPS[700], **REALISTIC)
    before = false_red(model, Method(), DEFAULT_ALPHA, histories=histories, nights=REAL_NIGHTS, first_night=FIRST,
                       seed=seed, counts=False)
    after = false_red(model, Method(), DEFAULT_ALPHA, histories=histories, nights=REAL_NIGHTS, first_night=FIRST,
                      seed=seed, counts=True)
    return before, after


def _power(args) -> list[float]:
    family, wild, reps, seed = args
    return step_power(Method(), DEFAULT_ALPHA, family=family, step=0.10, spread=0.03, reps=reps, seed=seed,
                      wild_every=wild)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--histories", type=int, default=100, help="30-night histories per false-red cell")
    ap.add_argument("--reps", type=int, default=400, help="stepped series per power cell")
    ap.add_argument("--full", type=int, default=0, help="histories of 700 series to check the prefilter on")
    ap.add_argument("--realistic", type=int, default=100, help="40-night histories of the realistic flat model")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--only", choices=("realistic",), default=None, help="run only that part")
    args = ap.parse_args()
    started = time.perf_counter()
    print(f"{date.today().isoformat()}, {cpu_model()}, {args.processes} processes; alpha {DEFAULT_ALPHA}, "
          f"detector {Method()}")
    with ProcessPoolExecutor(args.processes) as pool:
        if args.realistic:
            print(f"\n4. the realistic flat model: {args.realistic} histories of {REAL_NIGHTS} nights x "
                  f"{GROUPS[700] * 24} gated series, checked from night {FIRST}")
            parts = _split(args.realistic, args.processes)
            done = list(pool.map(_realistic, [(h, 4600 + i) for i, h in enumerate(parts)]))
            for name, tallies in (("as before (shares)", [b for b, _ in done]), ("as counts (now)", [a for _, a in done])):
                nights = sum(t.nights for t in tallies)
                red = sum(t.red_nights for t in tallies)
                findings, causes = sum(t.findings for t in tallies), sum(t.causes for t in tallies)
                print(f"   {name:20s} {red} red nights of {nights} ({100 * red / nights:.2f}%), {findings} findings "
                      f"in {causes} causes")
        if args.only == "realistic":
            print(f"\n{time.perf_counter() - started:.0f} s")
            return
        print(f"\n1. false-red nights: {args.histories} histories of {NIGHTS} nights, checked from night {FIRST}")
        for size, groups in GROUPS.items():
            for independent in (False, True):
                parts = _split(args.histories, args.processes)
                tallies = list(pool.map(_false_red, [(groups, independent, h, 1000 * size + 10 * i + independent)
                                                     for i, h in enumerate(parts)]))
                nights = sum(t.nights for t in tallies)
                red = sum(t.red_nights for t in tallies)
                findings, causes = sum(t.findings for t in tallies), sum(t.causes for t in tallies)
                print(f"   {groups * 24:5d} series, {'independent' if independent else 'correlated '}: {red} red nights "
                      f"of {nights} ({100 * red / nights:.2f}%), {findings} findings in {causes} causes")
        print(f"\n2. power: tps -10% (latency +11%) under 3% spread: share red on the step by runs after it")
        cells = [(family, wild) for wild in (20, None) for family in (1, 100, 700, 2000)]
        results = list(pool.map(_power, [(family, wild, args.reps, 7) for family, wild in cells]))
        for (family, wild), shares in zip(cells, results):
            print(f"   {family:5d} series{', one wild run in 20' if wild else ', no wild run':22s} "
                  + "  ".join(f"{j}: {s:6.1%}" for j, s in enumerate(shares, 1)))
    if args.full:
        print(f"\n3. the prefilter: {args.full} histories of 696 series, every series searched every night")
        import numpy as np
        rng = np.random.default_rng(99)
        same = True
        for _ in range(args.full):
            values = night_values(rng, Model(groups=29), NIGHTS)
            fast, searched = run_history(values, Method(), DEFAULT_ALPHA, first_night=FIRST, model=Model(groups=29))
            slow, everything = run_history(values, Method(), DEFAULT_ALPHA, first_night=FIRST, model=Model(groups=29),
                                           prefilter=False)
            same &= fast == slow
            print(f"   findings {fast} with the prefilter ({searched} searches), {slow} without ({everything})")
        print(f"   the same findings: {same}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
