"""How fast the history answers: `history show` over 1,000 runs x 200 series, `history add` of one run.

Builds an SQLite store of RUNS simulated runs of one scenario, each with SERIES series (metrics of a
few variants, noise and a few steps, concurbench/history/simulate.py), then times the whole
commands as a user runs them (a new process each time: start-up, imports, the store, the detector,
the output), ROUNDS times each, interleaved:

  - `concurbench history show --store S` (its tables), against the goal of 5 s, and `--format json`
    (every point with its repeats, about 47 MB), with no goal;
  - `concurbench history add RUN_DIR --store COPY` of a real run directory into a copy of that store
    (a fresh copy each round), against the goal of 1 s.

    python benchmarks/history_speed.py [--runs 1000] [--series 200] [--rounds 5] [--run-dir DIR]

It prints each figure's median, min and max, its ratio to the goal, and the CPU model.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from concurbench.history.records import PointRecord, RunRecord, SeriesKey
from concurbench.history.simulate import series
from concurbench.history.store import open_store
from concurbench.results.store import cpu_model

ROOT = Path(__file__).resolve().parent.parent
SHOW_GOAL_S, ADD_GOAL_S = 5.0, 1.0
METRICS = ("tps", "latency.mean_ms", "latency.p50_ms", "latency.p95_ms", "latency.p99_ms", "statements.lock.mean_ms",
           "statements.update.mean_ms", "wal.bytes_per_txn", "errors.deadlock", "waits.Lock:transactionid")


def build_store(path: Path, runs: int, n_series: int, seed: int = 1) -> None:
    """RUNS runs, each with a point in every one of N_SERIES series (variant x metric); a tenth of the series
    step by 10-30% somewhere, the rest only drift and have wild runs."""
    rng = np.random.default_rng(seed)
    keys = [(f"variant{v:02d}", m) for v in range(-(-n_series // len(METRICS))) for m in METRICS][:n_series]
    values = {}
    for i, key in enumerate(keys):
        step_at = int(rng.integers(runs // 4, runs)) if i % 10 == 0 else None
        values[key] = series(rng, runs, float(rng.choice([0.02, 0.05, 0.1])), drift=0.5, step_at=step_at,
                             step=float(rng.uniform(0.1, 0.3)))
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with open_store(path, create=True) as store:
        for r in range(runs):
            when = (start + timedelta(hours=r)).isoformat()
            run_id = f"{(start + timedelta(hours=r)).strftime('%Y%m%dT%H%M%SZ')}-bench"
            record = RunRecord(run_id, f"digest-{r}", "bench", "sha", {}, False, when, when, "ok", None, "host", "cpu",
                               "0.1.0", f"{r:040x}", False, "embedded", ["18.6"], 2, {"night": str(r)})
            points = [PointRecord(run_id, SeriesKey("bench", v, "pool", 10, 10, "18.6", m), "ok",
                                  float(values[(v, m)][r]), float(values[(v, m)][r]) * 0.01, 2.0, None, None, 3,
                                  (float(values[(v, m)][r]),)) for v, m in keys]
            store.add(record, points)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--run-dir", type=Path, default=ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn")
    args = ap.parse_args()
    exe = [sys.executable, "-m", "concurbench.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "history.db"
        t = time.perf_counter()
        build_store(store, args.runs, args.series)
        print(f"store of {args.runs} runs x {args.series} series built in {time.perf_counter() - t:.1f} s "
              f"({store.stat().st_size / 1e6:.1f} MB)")
        times: dict[str, list[float]] = {"show json": [], "show table": [], "add one run": []}
        for _ in range(args.rounds):
            times["show json"].append(timed([*exe, "history", "show", "--store", str(store), "--format", "json"]))
            times["show table"].append(timed([*exe, "history", "show", "--store", str(store)]))
            copy = Path(tmp) / "copy.db"
            shutil.copy(store, copy)
            times["add one run"].append(timed([*exe, "history", "add", str(args.run_dir), "--store", str(copy)]))
    print(f"CPU: {cpu_model()}; {args.rounds} rounds, interleaved; whole commands (a new process each)")
    for name, values in times.items():
        goal = {"add one run": ADD_GOAL_S, "show table": SHOW_GOAL_S}.get(name)
        med = statistics.median(values)
        judged = "no goal" if goal is None else \
            f"goal {goal:.0f} s: ratio {med / goal:.2f} {'ok' if med <= goal else 'OVER'}"
        print(f"{name:12s} median {med:6.2f} s (min {min(values):.2f}, max {max(values):.2f}); {judged}")


if __name__ == "__main__":
    main()
