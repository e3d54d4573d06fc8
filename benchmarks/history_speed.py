"""How fast the history answers: `history show` over 1,000 runs x 200 series, `history add` of one run, and
the nightly gate, `history check --run`, over 5,000 series x 100 runs of which about 700 are gated.

Builds an SQLite store of RUNS simulated runs of one scenario, each with SERIES series (metrics of a
few variants, noise and a few steps, concurbench/history/simulate.py), then times the whole
commands as a user runs them (a new process each time: start-up, imports, the store, the detector,
the output), ROUNDS times each, interleaved:

  - `concurbench history show --store S` (its tables), against the goal of 5 s, and `--format json`
    (every point with its repeats, about 47 MB), with no goal;
  - `concurbench history add RUN_DIR --store COPY` of a real run directory into a copy of that store
    (a fresh copy each round), against the goal of 1 s.

    python benchmarks/history_speed.py [--runs 1000] [--series 200] [--rounds 5] [--run-dir DIR]
    python benchmarks/history_speed.py --gate [--gate-runs 100] [--locations 117] [--rounds 5] [--hog 1]

`--gate` builds instead a store of GATE_RUNS nightly runs with LOCATIONS locations (variant, pool,
clients) of a scenario, each with the six gated headline figures (tps, latency mean, p95 and p99,
failed and retried per transaction with their counts and transactions) and DIAGNOSTICS figures that are
shown but not gated (statement latencies, waits, WAL): 117 locations are 702 gated series among 5,031;
one location in ten steps by 10-30% somewhere. One check of the night before makes the findings those
steps are (the store as a nightly job has it); then it times `concurbench history check --store S --run
NEWEST` on a fresh copy of that store each round (a check writes), against the goal of 5 s.
`--hog N` runs N busy processes beside it the whole time (a neighbour that takes N CPUs), to quote the
figure on a busy machine too.

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
from contextlib import contextmanager

from concurbench.history.records import PointRecord, RunRecord, SeriesKey
from concurbench.history.simulate import series
from concurbench.history.store import open_store
from concurbench.results.store import cpu_model

ROOT = Path(__file__).resolve().parent.parent
SHOW_GOAL_S, ADD_GOAL_S, CHECK_GOAL_S = 5.0, 1.0, 5.0
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


GATED = ("tps", "latency.mean_ms", "latency.p95_ms", "latency.p99_ms", "failed_per_txn", "retries_per_txn")
DIAGNOSTICS = tuple([f"statements.s{i}.{m}" for i in range(4) for m in ("mean_ms", "p50_ms", "p95_ms", "p99_ms",
                                                                        "max_ms", "count")]
                    + [f"waits.W{i}" for i in range(8)] + ["latency.p50_ms", "latency.max_ms", "wal.bytes",
                                                         "wal.bytes_per_txn", "transactions"])


def build_gate_store(path: Path, runs: int, locations: int, seed: int = 2) -> tuple[str, str]:
    """RUNS nightly runs of LOCATIONS locations, GATED and DIAGNOSTICS figures each; the two newest runs' ids."""
    rng = np.random.default_rng(seed)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    spread = rng.uniform(0.02, 0.06, locations)
    steps = {loc: (int(rng.integers(runs // 3, runs)), float(rng.uniform(0.1, 0.3)))
             for loc in range(0, locations, 10)}
    rates = rng.uniform(0.2, 3.0, (locations, 2))
    run_id, before = "", ""
    with open_store(path, create=True) as store:
        for r in range(runs):
            when = (start + timedelta(days=r)).isoformat()
            before, run_id = run_id, f"{(start + timedelta(days=r)).strftime('%Y%m%dT%H%M%SZ')}-gate"
            record = RunRecord(run_id, f"digest-{r}", "bench", "sha", {}, False, when, when, "ok", None, "host", "cpu",
                               "0.1.0", f"{r:040x}", False, "binaries", ["16.9"], 3, {"night": str(r)},
                               {"cpu_model": "cpu", "cpus": 2, "others": 0.02, "busy": False})
            points = []
            machine = 0.5 * rng.standard_normal()
            for loc in range(locations):
                at, step = steps.get(loc, (runs + 1, 0.0))
                factor = (1 - step) if r >= at else 1.0
                z = rng.standard_normal() + machine
                tps = 1000 * factor * (1 + spread[loc] * z)
                key = SeriesKey("bench", f"v{loc // 4:02d}", "pool", (loc % 4 + 1) * 4, -1, "16.9", "")
                txns = round(tps * 60)
                values = {"tps": tps, "latency.mean_ms": 4 / factor * (1 - spread[loc] * z),
                          "latency.p95_ms": 9 / factor * (1 + spread[loc] * rng.standard_normal()),
                          "latency.p99_ms": 15 / factor * (1 + 2 * spread[loc] * rng.standard_normal())}
                for name, value in values.items():
                    points.append(PointRecord(run_id, key._replace(metric=name), "ok", float(value), None, None,
                                              None, None, 1, (float(value),)))
                for i, name in enumerate(("failed_per_txn", "retries_per_txn")):
                    count = float(rng.poisson(rates[loc, i] * txns / 60_000))
                    points.append(PointRecord(run_id, key._replace(metric=name), "ok", round(count / txns, 6), None,
                                              None, None, None, 1, (round(count / txns, 6),), count, float(txns)))
                for name in DIAGNOSTICS:
                    value = float(abs(10 * (1 + spread[loc] * rng.standard_normal())))
                    points.append(PointRecord(run_id, key._replace(metric=name), "ok", value, None, None, None,
                                              None, 1, (value,)))
            store.add(record, points)
    return before, run_id


@contextmanager
def hog(n: int):
    """N busy processes beside the benchmark (a neighbour taking N CPUs), stopped at the end."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def gate_main(args, exe: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "history.db"
        t = time.perf_counter()
        night_before, newest = build_gate_store(store, args.gate_runs, args.locations)
        series = args.locations * (len(GATED) + len(DIAGNOSTICS))
        print(f"store of {args.gate_runs} runs x {series} series ({args.locations * len(GATED)} gated) built in "
              f"{time.perf_counter() - t:.1f} s ({store.stat().st_size / 1e6:.1f} MB)")
        first = timed([*exe, "history", "check", "--store", str(store), "--run", night_before], ok=(0, 5))
        print(f"the night before's check (it makes the findings of the store's steps): {first:.2f} s")
        took = {"alone": [], f"beside {args.hog} busy process(es)": []}
        for _ in range(args.rounds):
            for name in took:
                copy = Path(tmp) / "copy.db"
                shutil.copy(store, copy)
                with hog(args.hog if name != "alone" else 0):
                    took[name].append(timed([*exe, "history", "check", "--store", str(copy), "--run", newest],
                                             ok=(0, 5)))
    print(f"CPU: {cpu_model()}; {args.rounds} rounds, alone and beside the neighbour in turn; whole commands")
    for name, values in took.items():
        med = statistics.median(values)
        print(f"history check {name:28s} median {med:6.2f} s (min {min(values):.2f}, max {max(values):.2f}); "
              f"goal {CHECK_GOAL_S:.0f} s: ratio {med / CHECK_GOAL_S:.2f} {'ok' if med <= CHECK_GOAL_S else 'OVER'}")


def timed(cmd: list[str], ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--run-dir", type=Path, default=ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn")
    ap.add_argument("--gate", action="store_true", help="time the nightly gate instead (see above)")
    ap.add_argument("--gate-runs", type=int, default=100)
    ap.add_argument("--locations", type=int, default=117)
    ap.add_argument("--hog", type=int, default=1)
    args = ap.parse_args()
    exe = [sys.executable, "-m", "concurbench.cli.main"]
    if args.gate:
        gate_main(args, exe)
        return
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
