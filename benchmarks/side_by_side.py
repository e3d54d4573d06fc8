"""Confirming a new release the same night, measured: how often `history check --side-by-side` is red on the
first night of a release that is slower, how often it confirms one that is not, and what it adds in minutes.

Everything below "real" starts real servers: PostgreSQL OLD and NEW from the binaries target, the workload of
benchmarks/scenarios/side-by-side.yaml (two clients, a scan and an update a transaction, 1 s a variant run),
whose scan also sleeps 1 ms on the server in a share of the transactions (`sleep`) on the releases from
`slow_from` on: the same statements and round trips, a release made slower on purpose by a wait that costs
the same on a quiet or a busy machine.

  1. calibration (real): two side-by-side runs of OLD and NEW (10 rounds each), NEW sleeping in shares S1 and
     S2 of its transactions, give how much throughput a share costs; from them, the share that makes NEW 10%
     slower, checked by a run of its own (and moved, and checked again, while it gives more than a point off
     0.90), and the shares for 20% and 50% from all of them;
  2. the history (real): NIGHTS runs of OLD, added to a store (their spread is printed);
  3. trials (real): each on a copy of that store, tonight's first run of NEW, added, then `history check
     --run TONIGHT --side-by-side` as the nightly job runs it; the trial is red when the check exits 5 with a
     confirmed finding. In "none", tonight's run sleeps on every release (slow_from 14): the history sees a
     slower first run of NEW (the parameter changed with the release), the side-by-side run of both, with
     tonight's parameters, sees two releases alike: any confirmation is a false one. The trials given with
     --hog run beside a neighbour, a process that keeps one CPU busy, those given with --switching beside one
     that keeps it busy 5 s and leaves it 5 s, in turn (the table counts the side-by-side runs
     that saw others use half a CPU or more while their load paused: the neighbour's, or anyone's);
  4. simulation (not real): the decision rule (check/across.py's AcrossServers, as the runs use it) on
     rounds drawn from the real "none" trials' own rounds (new over old of tps and the latencies, each round
     a vector, centred; a smoothed bootstrap), with the step added, SIM times a cell: at the noise measured
     here, and with that noise scaled so one run's tps spreads 3%;
  5. replay (real rounds, judged again): the rule as the code has it now on every trial's own rounds, in the
     order they ran, where the trial's run had rounds enough to say (with --tabulate, a run made with an
     earlier rule is judged by today's).
  6. instances (real): whether a server's starts differ, within a run (the rounds between two restarts of
     the side-by-side run against the rounds' own spread) and between runs (the "none" trials' trimmed means
     against their own standard errors); the offset found between runs is then simulated as an instance's
     own, with one start a release and with the restarts the rule makes.

    python benchmarks/side_by_side.py [--old 16.14] [--new 16.15] [--nights 5]
        [--trials none=30,10=40,20=20,50=10] [--hog none=10,10=15] [--switching none=2,10=3] [--minutes M]
        [--sim 10000] [--out DIR]
    python benchmarks/side_by_side.py --tabulate DIR [--trials ...] [--hog ...] [--sim N]

The trials of the cells are taken in turn (none, 10%, 20%, 50%, beside the hogs, then again), and each is
kept in DIR/trials.json as it ends: --minutes stops a run with trials of every cell, and --tabulate prints
the tables and the simulation of a run again.

Run it alone on the machine (flock /work/heavy.lock ...): it measures. docs/history.md shows its output.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
from scipy import stats as sst

from concurbench.check import CheckPolicy
from concurbench.check.across import BUSY_ROUNDS, ROUNDS, STARTS, TRIM, AcrossServers, Comparison
from concurbench.check.sides import MIN_RUNS
from concurbench.figures import Better, Place, Scope
from concurbench.results.machine import OTHERS_LIMIT
from concurbench.results.model import PoolResult, VariantRun
from concurbench.results.store import cpu_model
from concurbench.running.load import load_scenario
from concurbench.scenario.claims import Ref
from concurbench.stats import Verdict
from concurbench.stats.estimates import trimmed

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "side-by-side.yaml"
METRICS = ("tps", "latency.mean_ms", "latency.p95_ms", "latency.p99_ms")  # the gated figures of the pool
BETTER = {"tps": Better.HIGHER}
CALIBRATION = (0.03, 0.06)  # shares of transactions that sleep 1 ms: around the 10% step
CALIBRATION_ROUNDS = 10
MIN_CHANGE = 0.02  # the gate's default minimum change
COMPARISONS = tuple(Comparison(Ref("work", None, "workers", m), BETTER.get(m, Better.LOWER), MIN_CHANGE)
                    for m in METRICS)


def cli(*args, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def last_line(done: subprocess.CompletedProcess) -> Path:
    if done.returncode not in (0, 3):
        raise SystemExit(f"a run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def figures(run_dir: Path) -> list[dict]:
    """Each variant run's (repeat, server) and gated figures."""
    summary = json.loads((run_dir / "summary.json").read_text())
    out = []
    for r in summary["results"]:
        m = r["pools"]["workers"]["metrics"]
        out.append({"repeat": r["repeat"], "server": r["server"], "tps": m["tps"],
                    **{k: (m.get("latency") or {}).get(k.split(".")[1]) for k in METRICS[1:]}})
    return out


def paired(run_dir: Path, old: str, new: str) -> list[dict]:
    """Each round's log of new over old, per metric."""
    rows = figures(run_dir)
    by = {(r["repeat"], r["server"]): r for r in rows}
    out = []
    for repeat in sorted({r["repeat"] for r in rows}):
        a, b = by.get((repeat, old)), by.get((repeat, new))
        if a and b and all(a[m] and b[m] for m in METRICS):
            out.append({m: math.log(b[m] / a[m]) for m in METRICS})
    return out


def others(run_dir: Path) -> float:
    """The CPUs others used while the run's load paused (the median of its looks; 0 where none was taken)."""
    looks = (json.loads((run_dir / "manifest.json").read_text()).get("machine") or {}).get("others_cpus") or [0.0]
    return statistics.median(looks)


def slept(args, out: Path, share: float) -> float:
    """NEW over OLD of tps with this share of sleeps on NEW: the trimmed mean of CALIBRATION_ROUNDS paired rounds."""
    done = cli("run", SCENARIO, "--target", "binaries", "--server-version", f"{args.old},{args.new}",
               "--repeat", CALIBRATION_ROUNDS, "--param", f"slow_from={args.new}", "--param", f"sleep={share:.4f}",
               "--out", out / "calibration")
    rounds = paired(last_line(done), args.old, args.new)
    return math.exp(trimmed([r["tps"] for r in rounds], TRIM).mean)


def calibrate(args, out: Path) -> dict[float, float]:
    """The share of transactions sleeping 1 ms that makes NEW slower by each step: from paired runs with known
    shares, 1 / ratio - 1 (the time added a transaction over its time) taken as a line in the share; then runs at
    the 10% share that say what it gives, the share moved along the line through the last two runs while a run
    gives more than a point off 0.90 (twice at most). The 20% and 50% shares come from the line through all
    of them (the trials say what they gave)."""
    points = []
    for share in CALIBRATION:
        ratio = slept(args, out, share)
        points.append((share, 1 / ratio - 1))
        print(f"calibration: {share:.1%} of the transactions sleep 1 ms on {args.new}: tps {ratio:.3f} of "
              f"{args.old} ({CALIBRATION_ROUNDS} rounds)")
    wanted, checks = 1 / 0.9 - 1, []
    for _ in range(3):
        (s1, y1), (s2, y2) = points[-2:]
        share = round(s2 + (wanted - y2) * (s2 - s1) / (y2 - y1), 4) if y2 != y1 else -1.0
        if not 0 < share <= 1:
            break
        ratio = slept(args, out, share)
        points.append((share, 1 / ratio - 1))
        checks.append((share, ratio))
        print(f"calibration: check: {share:.1%} gives tps {ratio:.3f} of {args.old}")
        if abs(ratio - 0.9) <= 0.01:
            break
    shares = {0.1: min(checks, key=lambda c: abs(c[1] - 0.9))[0] if checks else share}
    slope, intercept = np.polyfit([x for x, _ in points], [y for _, y in points], 1)
    for step in (0.2, 0.5):
        shares[step] = round((1 / (1 - step) - 1 - intercept) / slope, 4)
    for step, share in shares.items():
        print(f"calibration: a {step:.0%} step is a 1 ms sleep in {share:.1%} of the transactions"
              + ("" if 0 < share <= 1 else " (not possible here)"))
    return shares


def history(args, out: Path) -> Path:
    store = out / "base.db"
    tps = []
    for night in range(args.nights):
        done = cli("run", SCENARIO, "--target", "binaries", "--server-version", args.old, "--param",
                   f"slow_from={args.new}", "--out", out / "nights", "--history", store,
                   "--label", f"night={night}")
        tps.append(figures(last_line(done))[0]["tps"])
    spread = statistics.stdev(tps) / statistics.mean(tps)
    print(f"history: {args.nights} runs of {args.old}, tps {statistics.mean(tps):,.0f} (spread {spread:.1%} "
          f"run to run)")
    return store


HOGS = {"steady": "while True: pass",
        "switching": "import time\nwhile True:\n    t = time.monotonic() + 5\n    while time.monotonic() < t: pass\n"
                     "    time.sleep(5)"}
MACHINE = {"": "alone", "steady": "beside a CPU hog", "switching": "beside a hog 5 s on, 5 s off"}


def trial(args, base: Path, out: Path, step: float | None, shares: dict[float, float], hog: str) -> dict:
    """One first night of NEW: its run, added, then the check with --side-by-side."""
    here = Path(tempfile.mkdtemp(dir=out, prefix="trial-"))
    store = here / "h.db"
    shutil.copy(base, store)
    params = ["--param", "slow_from=14", "--param", f"sleep={shares[0.2]}"] if step is None else \
        ["--param", f"slow_from={args.new}", "--param", f"sleep={shares[step]}"]
    neighbour = subprocess.Popen([sys.executable, "-c", HOGS[hog]]) if hog else None
    try:
        began = time.monotonic()
        run = last_line(cli("run", SCENARIO, "--target", "binaries", "--server-version", args.new, *params,
                            "--out", here / "runs", "--history", store))
        checked = time.monotonic()
        done = cli("history", "check", "--store", store, "--run", run.name, "--side-by-side",
                   "--side-by-side-out", here / "ab")
        ended = time.monotonic()
    finally:
        if neighbour is not None:
            os.kill(neighbour.pid, signal.SIGTERM)
            neighbour.wait()
    ab = sorted((here / "ab").iterdir()) if (here / "ab").is_dir() else []
    tps = None
    rounds = []
    busy = False
    if ab:
        detail = json.loads((ab[0] / "side-by-side.json").read_text())
        tps = next((s["confirmation"] for s in detail["suspicions"] if s["metric"] == "tps"), None)
        rounds = paired(ab[0], args.old, args.new)
        busy = others(ab[0]) >= OTHERS_LIMIT
    confirmed = "confirmed side by side" in done.stdout.replace("not confirmed side by side", "")
    return {"step": step, "hog": hog, "exit": done.returncode, "red": done.returncode == 5 and confirmed,
            "confirmed": confirmed, "ab": bool(ab), "tps": tps, "rounds": rounds, "busy": busy,
            "run_s": checked - began, "check_s": ended - checked}


def confirms(rounds, rounds_max: int) -> bool | None:
    """What the rule (check/across.py's AcrossServers, looking where a run would) makes of these rounds, each new
    over old as logs (tps, then the latencies): True when it confirms the step, False when it stops without,
    None when the rounds ran out first."""
    decider = AcrossServers(load_scenario(SCENARIO), CheckPolicy(max_repeats=rounds_max), first=MIN_RUNS, old="o",
                            new="n", comparisons=COMPARISONS)
    runs: list[VariantRun] = []
    for r, d in enumerate(rounds, 1):
        for server, logs in (("o", np.zeros(4)), ("n", d)):
            values = [1000 * math.exp(logs[0])] + [math.exp(x) for x in logs[1:]]
            figures = {"tps": values[0], "transactions": 1000, "latency.mean_ms": values[1],
                       "latency.p95_ms": values[2], "latency.p99_ms": values[3]}
            runs.append(VariantRun("work", "work", None, server, r, pools={"workers": PoolResult("workers", True, 2)},
                                   metrics=Place("work", "workers", 2, server, r).records(figures, Scope.POOL)))
        if r < MIN_RUNS or r not in decider.schedule():  # a look only where a run takes one
            continue
        verdicts = decider.judge(runs)
        if any(v.verdict is Verdict.FAIL for v in verdicts):
            return True
        if r >= rounds_max or not decider.wanted(verdicts, runs):
            return False
    return None


def simulate(residuals: np.ndarray, step: float, n: int, scale: float, seed: int, busy: bool = False,
             offset: float = 0.0, starts: int = STARTS) -> float:
    """The share of n simulated first nights the rule confirms: rounds drawn from the residuals (scaled), the
    step added (tps down by it, the latencies up by as much), and with `offset` each server instance's own
    offset of new over old (normal, this spread, drawn anew at each of the `starts` starts)."""
    rng = np.random.default_rng(seed)
    # a smoothed bootstrap: each round a real round's vector plus a little normal noise of the same covariance
    # (Silverman's bandwidth), the whole scaled back to the real rounds' spread; drawing the bare vectors would
    # repeat one round exactly now and then, and two equal rounds are a spread of 0, which no real run gives
    h = (4 / (residuals.shape[1] + 2)) ** (1 / (residuals.shape[1] + 4)) * len(residuals) ** (-1 / (residuals.shape[1] + 4))
    chol = np.linalg.cholesky(np.cov(residuals, rowvar=False) + 1e-12 * np.eye(residuals.shape[1]))
    shift = np.array([math.log(1 - step)] + [-math.log(1 - step)] * 3)
    rounds_max = BUSY_ROUNDS if busy else ROUNDS
    every = math.ceil(rounds_max / starts)
    way = np.array([1.0, -1.0, -1.0, -1.0])  # an instance with more tps has lower latencies

    def drawn():
        instance = np.zeros(4)
        for r in range(10 ** 6):
            if r % every == 0:
                instance = rng.normal(0.0, offset) * way if offset else np.zeros(4)
            x = residuals[rng.integers(len(residuals))] + h * chol @ rng.standard_normal(residuals.shape[1])
            yield x / math.sqrt(1 + h * h) * scale + shift + instance
    return sum(bool(confirms(drawn(), rounds_max)) for _ in range(n)) / n


def instances(results: list[dict]) -> float | None:
    """How much a server's instances differ, measured two ways on the real trials' tps (new over old, as logs):
    within a run, the rounds of each instance (a block of the rounds between two restarts) against the rounds'
    own spread, a one-way analysis of variance pooled over the trials; between runs, the 'none' trials'
    trimmed means against their own standard errors. Returns the offset a run beyond those errors (None when
    the trials cannot say)."""
    ss_b = ss_w = df_b = df_w = 0.0
    blocks = trials = 0
    for t in results:
        y = [r["tps"] for r in t["rounds"]]
        every = math.ceil((BUSY_ROUNDS if t["busy"] else ROUNDS) / STARTS)
        groups = [y[i:i + every] for i in range(0, len(y), every)]
        groups = [g for g in groups if len(g) >= 2]
        if len(groups) < 2:
            continue
        mean = statistics.fmean(v for g in groups for v in g)
        ss_b += sum(len(g) * (statistics.fmean(g) - mean) ** 2 for g in groups)
        ss_w += sum((v - statistics.fmean(g)) ** 2 for g in groups for v in g)
        df_b += len(groups) - 1
        df_w += sum(len(g) for g in groups) - len(groups)
        blocks, trials = blocks + len(groups), trials + 1
    if trials:
        ms_b, ms_w = ss_b / df_b, ss_w / df_w
        size = (df_w + blocks) / blocks
        sd = math.sqrt(max(0.0, (ms_b - ms_w) / size))
        print(f"\ninstances within a run: {trials} trials, {blocks} instances of {size:.1f} rounds; the instances' "
              f"means spread {math.sqrt(ms_b / size):.2%} where the rounds' spread gives {math.sqrt(ms_w / size):.2%} "
              f"(F = {ms_b / ms_w:.2f}, p = {sst.f.sf(ms_b / ms_w, df_b, df_w):.2g}): an offset of {sd:.2%} an "
              f"instance beyond the rounds")
    nulls = [trimmed([r["tps"] for r in t["rounds"]], TRIM) for t in results
             if t["step"] is None and not t["hog"] and len(t["rounds"]) >= 5]
    if len(nulls) < 3:
        return None
    spread = statistics.stdev(e.mean for e in nulls)
    own = math.sqrt(statistics.fmean(e.se ** 2 for e in nulls))
    beyond = math.sqrt(max(0.0, spread ** 2 - own ** 2))
    print(f"between runs: the {len(nulls)} 'none' trials' trimmed means of tps new over old spread {spread:.2%}, "
          f"their own standard errors {own:.2%}: an offset of {beyond:.2%} a run beyond them")
    return beyond


def replayed(results: list[dict]) -> None:
    """The rule as it is now on each real trial's own rounds in the order they ran (not a simulation: the same
    rounds, judged again): how many it confirms, where the trial's run had rounds enough to say."""
    print("\n| step | machine | trials replayed | confirmed by the rule now (as the run decided) |\n"
          "|---|---|---:|---:|")
    for step in sorted({t["step"] for t in results}, key=lambda s: -1 if s is None else s):
        for hog in sorted({t["hog"] for t in results}):
            mine = [t for t in results if t["step"] == step and t["hog"] == hog and t["rounds"]]
            said = [confirms([np.array([r[m] for m in METRICS]) for r in t["rounds"]],
                             BUSY_ROUNDS if t["busy"] else ROUNDS) for t in mine]
            told = [(s, t["red"]) for s, t in zip(said, mine) if s is not None]
            if told:
                print(f"| {'none' if step is None else f'{step:.0%} slower'} | {MACHINE[hog]} | {len(told)} of "
                      f"{len(mine)} | {sum(s for s, _ in told)} ({sum(r for _, r in told)}) |")


def cells(text: str) -> list[tuple[float | None, int]]:
    out = []
    for part in filter(None, text.split(",")):
        name, count = part.split("=")
        out.append((None if name == "none" else int(name) / 100, int(count)))
    return out


def interleaved(plan: list[tuple[float | None, int, str]]) -> list[tuple[float | None, str, int]]:
    """The trials of every cell taken in turn (a cell's i-th trial, then the next cell's), so a run stopped
    by --minutes has trials of each cell, made at the same times of the machine's day."""
    out = []
    for i in range(max((count for _, count, _ in plan), default=0)):
        out += [(step, hog, i) for step, count, hog in plan if i < count]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default="16.14")
    ap.add_argument("--new", default="16.15")
    ap.add_argument("--nights", type=int, default=5)
    ap.add_argument("--trials", default="none=30,10=40,20=20,50=10")
    ap.add_argument("--hog", default="none=10,10=15", help="trials beside a process that keeps one CPU busy")
    ap.add_argument("--switching", default="", help="trials beside one that keeps a CPU busy 5 s, then idles 5 s")
    ap.add_argument("--minutes", type=float, default=None,
                    help="start no trial after this many minutes (the table says how many ran)")
    ap.add_argument("--sim", type=int, default=10000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--tabulate", type=Path, default=None, metavar="DIR",
                    help="no real part: the tables and the simulation from DIR/trials.json of an earlier run")
    args = ap.parse_args()
    started = time.perf_counter()
    plan = [(step, count, "") for step, count in cells(args.trials)] + \
        [(step, count, "steady") for step, count in cells(args.hog)] + \
        [(step, count, "switching") for step, count in cells(args.switching)]
    if args.tabulate is not None:
        saved = json.loads((args.tabulate / "trials.json").read_text())
        print(saved["head"])
        results = [{**t, "hog": {True: "steady", False: ""}.get(t["hog"], t["hog"])} for t in saved["trials"]]
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="side-by-side-"))
        out.mkdir(parents=True, exist_ok=True)
        head = (f"{date.today().isoformat()}, {cpu_model()} x{os.cpu_count()}; {args.old} and {args.new} (binaries "
                f"target); {SCENARIO.name}; out {out}")
        print(head + "\n")
        shares = calibrate(args, out)
        base = history(args, out)
        results = []
        for step, hog, i in interleaved(plan):
            if step is not None and not 0 < shares[step] <= 1:
                continue
            if args.minutes is not None and time.perf_counter() - started > args.minutes * 60:
                print(f"--minutes {args.minutes:g}: no further trial started")
                break
            t = trial(args, base, out, step, shares, hog)
            results.append(t)
            (out / "trials.json").write_text(json.dumps({"head": head, "shares": shares, "trials": results}))
            ratio = t["tps"]["ratio"] if t["tps"] and t["tps"]["ratio"] else float("nan")
            print(f"trial {'none' if step is None else f'{step:.0%}'}{' ' + MACHINE[hog] if hog else ''} {i + 1}: "
                  f"exit {t['exit']}, {'red' if t['red'] else 'green'}, tps {ratio:.3f}, "
                  f"{len(t['rounds'])} rounds, check {t['check_s'] / 60:.2f} min", flush=True)
        print(f"\nreal: {len(results)} trials in {(time.perf_counter() - started) / 60:.0f} min\n")
    table(plan, results)
    replayed(results)
    beyond = instances(results)
    residuals = np.array([[r[m] for m in METRICS] for t in results if t["step"] is None and not t["hog"]
                          for r in t["rounds"]])
    if len(residuals) < 10:
        print("\nsimulation: too few rounds of 'none' trials to draw from")
        return
    residuals -= residuals.mean(axis=0)
    sd = residuals.std(axis=0, ddof=1)
    print(f"\nsimulation (not real): rounds drawn from {len(residuals)} real rounds of the 'none' trials (alone); "
          f"their new-over-old spread a round: " + ", ".join(f"{m} {s:.1%}" for m, s in zip(METRICS, sd)))
    to_3 = 0.03 * math.sqrt(2) / sd[0]  # one run's tps spreads 3%, the two of a round independent
    print(f"\n| step | noise | simulated first nights | confirmed |\n|---|---|---:|---:|")
    for label, scale in (("as measured here", 1.0), ("scaled to 3% a run", to_3)):
        for step in (0.0, 0.1, 0.2, 0.5):
            share = simulate(residuals, step, args.sim, scale, seed=int(step * 100) + 7)
            print(f"| {'none' if step == 0 else f'{step:.0%} slower'} | {label} | {args.sim:,} | {share:.2%} |",
                  flush=True)
    if beyond:  # the offset measured between runs, as one instance a run (no restart) and as STARTS of them
        for step in (0.0, 0.1):
            for starts in (1, STARTS):
                share = simulate(residuals, step, args.sim, to_3, seed=int(step * 100) + 29, offset=beyond,
                                 starts=starts)
                print(f"| {'none' if step == 0 else f'{step:.0%} slower'} | 3% a run, and an offset of {beyond:.1%} "
                      f"an instance, {starts} start{'s' if starts > 1 else ''} a release | {args.sim:,} | {share:.2%} |",
                      flush=True)
    stepped = [np.array([[r[m] for m in METRICS] for r in t["rounds"]]) for t in results
               if t["step"] == 0.1 and not t["hog"] and len(t["rounds"]) >= 2]
    if stepped:  # the 10% trials' rounds, each trial's centred on its own mean: their spread, the step's own
        own = np.vstack([r - r.mean(axis=0) for r in stepped])
        share = simulate(own, 0.1, args.sim, 1.0, seed=17)
        print(f"| 10% slower | the 10% trials' own rounds ({len(own)}; tps {own[:, 0].std(ddof=1):.1%} a round) | "
              f"{args.sim:,} | {share:.2%} |")
    print(f"\ntotal {(time.perf_counter() - started) / 60:.0f} min")


def table(plan: list[tuple[float | None, int, str]], results: list[dict]) -> None:
    """The real trials, a row a cell: how many were red on the first night, with the exact binomial 95% upper
    bound where none or few were."""
    print("| step | machine | trials | side-by-side runs (busy) | red on the first night (95% interval) | "
          "tps new/old (median, range) | rounds (median, range) | minutes of the check (median, range) |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for step, _, hog in plan:
        mine = [t for t in results if t["step"] == step and t["hog"] == hog]
        if not mine:
            continue
        ratios = [t["tps"]["ratio"] for t in mine if t["tps"] and t["tps"]["ratio"]] or [float("nan")]
        rounds = [len(t["rounds"]) for t in mine if t["ab"]]
        minutes = [t["check_s"] / 60 for t in mine]
        red = sum(t["red"] for t in mine)
        low, high = clopper_pearson(red, len(mine))
        print(f"| {'none' if step is None else f'{step:.0%} slower'} | {MACHINE[hog]} | "
              f"{len(mine)} | {sum(t['ab'] for t in mine)} ({sum(t['busy'] for t in mine)}) | "
              f"{red} ({red / len(mine):.0%}; {low:.0%}-{high:.0%}) | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | "
              f"{statistics.median(rounds) if rounds else 0:.0f} ({min(rounds, default=0)}-{max(rounds, default=0)}) | "
              f"{statistics.median(minutes):.2f} ({min(minutes):.2f}-{max(minutes):.2f}) |")


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """The exact two-sided binomial interval of k in n (with k = 0 the upper bound is 1 - (alpha/2)^(1/n))."""
    low = 0.0 if k == 0 else _beta_quantile(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else _beta_quantile(1 - alpha / 2, k + 1, n - k)
    return low, high


def _beta_quantile(q: float, a: float, b: float) -> float:
    """The Beta(a, b) quantile by bisection on the binomial tail (integer a, b: P(Beta <= x) = P(Bin >= a))."""
    n = int(a + b - 1)

    def cdf(x: float) -> float:
        return sum(math.comb(n, j) * x ** j * (1 - x) ** (n - j) for j in range(int(a), n + 1))

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
    return (lo + hi) / 2


if __name__ == "__main__":
    main()
