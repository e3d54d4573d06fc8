"""How closely a rate-driven pool keeps its schedule, beside pgbench -R, on one server.

One embedded PostgreSQL with pgbench's tables (`pgbench -i -s --scale`) serves every side. At each
rate of `--rates`, in interleaved rounds whose order of sides turns every round:

- pgbench: `pgbench -S -M simple -R RATE -c CLIENTS -j CPUS --log` (its built-in select-only script,
  Poisson arrivals), read from its per-transaction log: the transactions that end in the window
  (from `--warmup` after the first due time, `--seconds` long), their latency (from the scheduled
  start, as pgbench times it with -R) and schedule lag;
- concurbench/LOOP: a pool with `rate: RATE` over CLIENTS sessions sending the same statement
  (simple protocol, `aid` uniform over the same rows), in LoadGenerator's worker processes, one per
  CPU as a run makes them (but spawned, not forked by a fork server, so that they are the side's
  children and their wakeups are counted), after the same warm-up; its latency (from the due time) and lag
  histograms, its achieved rate, and the worker processes' CPU per transaction (their load loops,
  warm-up included, per transaction at the measured rate);
- for both: voluntary context switches a transaction (each one a wait that blocked, so a wakeup)
  and how long the load generator's threads waited for a CPU each time they ran (schedstat; for
  concurbench the workers' loop threads from when all sessions are connected);
- baseline/LOOP (with `--baseline CHECKOUT`): the same pool run by another checkout's code (its
  extension built), e.g. main's before a change, in the same rounds;
- concurbench/compiled-WAIT (with `--waits`): this tree's compiled loop made to wait with another of
  its ways (CONCURBENCH_LOOP_WAIT), to measure a fallback.

Each concurbench side runs in a subprocess of this script with PYTHONPATH set to its tree, and with
a different arrival seed every round (pgbench seeds from the clock), so rounds are independent.
`--first-round N` numbers the rounds from N (their seeds and order of sides follow), so that a run of
one round at a time (each under a lock of a shared machine, say) continues the last; the summary of
their CSV files put together (one header) is the summary of all their rounds (`--from-csv`).

Goals, each judged from its interval over the rounds (95%, Student t; ratios on their logarithms,
as driver_overhead.py judges its goals): for concurbench/compiled against pgbench at every rate,
lag mean and p99 at most 1.2x pgbench's or within 0.05 ms of it (whichever allows more), latency p50
and p99 within 0.9x-1.1x of pgbench's, the achieved rate within 1% of the rate; and against the
baseline at 1,000/s, CPU per transaction at most 1.05x (and with `--instructions N`, the user-space
instructions a transaction of one session at 1,000/s in each tree's loops (--loops), counted by
valgrind, which the machine's state does not move). The other loops are reported beside them.

    python benchmarks/rate_lag.py [--rates 100,1000,10000] [--clients 8] [--seconds 8] [--warmup 1]
        [--rounds 6] [--first-round 1] [--loops compiled,python] [--baseline CHECKOUT] [--waits WAIT,...]
        [--scale 10] [--instructions N] [--csv FILE]
    python benchmarks/rate_lag.py --from-csv FILE      # the summary of an earlier run, measuring nothing
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import psutil

from concurbench import stats as cstats
from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.results.store import cpu_model
from concurbench.workload import fastloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_overhead import goal_verdict, pgbench_binary, ratio_interval  # noqa: E402 - the same rules
from instructions_per_transaction import drive_pool, per_transaction  # noqa: E402 - the same count

STATEMENT = "SELECT abalance FROM pgbench_accounts WHERE aid = :aid"  # pgbench -S's statement
LAG_GOAL, LAG_SLACK_MS = 1.2, 0.05  # at most 1.2x pgbench's, or within 0.05 ms of it
LATENCY_GOAL = (0.9, 1.1)
RATE_GOAL = (0.99, 1.01)
CPU_GOAL, CPU_RATE = (0.0, 1.05), 1000.0  # against the baseline at 1,000/s
FIGURES = ("achieved", "lat_p50", "lat_p99", "lag_mean", "lag_p99", "cpu_us", "wakeups", "cpu_wait", "transactions")


class RunQueue:
    """How long the load generator's threads waited for a CPU each time they were woken or preempted: from
    /proc/PID/task/TID/schedstat (time on a run queue, times run), sampled every 100 ms while the processes
    `pids()` names live (the last sample of each thread counts: a thread's figures go when it exits), from
    `mark()` on when it is called (a worker's start-up and connecting left out). `main_only`: the processes'
    main threads alone (a worker's loop, not its threads that connect)."""

    def __init__(self, pids, main_only: bool = False):
        self.pids, self.main_only, self.stop = pids, main_only, threading.Event()
        self.base: dict[tuple, tuple[int, int]] = {}
        self.last: dict[tuple, tuple[int, int]] = {}
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "RunQueue":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def mark(self) -> None:
        """Count from now on."""
        self.base = self._read()

    # a LoadGenerator listener: the window is set once every session has connected
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self.mark()

    def measurement_ended(self, end_ns: int) -> None:
        pass

    def _read(self) -> dict[tuple, tuple[int, int]]:
        out = {}
        for pid in self.pids():
            tasks = [Path(f"/proc/{pid}/task/{pid}/schedstat")] if self.main_only else \
                Path(f"/proc/{pid}/task").glob("*/schedstat")
            for task in tasks:
                try:
                    _on_cpu, waited, runs = (int(f) for f in task.read_text().split())
                except (OSError, ValueError):
                    continue
                out[(pid, task.parent.name)] = (waited, runs)
        return out

    def _sample(self) -> None:
        while not self.stop.wait(0.1):
            self.last.update(self._read())

    def mean_us(self) -> float:
        waited = runs = 0
        for key, (w, r) in self.last.items():
            w0, r0 = self.base.get(key, (0, 0))
            waited, runs = waited + w - w0, runs + r - r0
        return waited / max(runs, 1) / 1000


# -- the sides ---------------------------------------------------------------------------
def run_pgbench(pgbench: Path, port: int, rate: float, args) -> dict:
    """One pgbench -R window, read from its per-transaction log."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "log"
        cmd = [str(pgbench), "-n", "-S", "-M", "simple", "-R", f"{rate:g}", "-c", str(args.clients),
               "-j", str(min(args.clients, os.cpu_count() or 1)),
               "-T", str(math.ceil(args.warmup + args.seconds) + 1), "--log", f"--log-prefix={prefix}",
               "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "concurbench"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            with RunQueue(lambda: [proc.pid]) as queue:
                _out, err = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"pgbench failed: {err[-2000:]}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # client_id transaction_no time script_no time_epoch time_us schedule_lag (times in microseconds)
        rows = np.array([[int(f) for f in line.split()[2:7]] for path in Path(tmp).glob("log.*")
                         for line in path.read_text().splitlines() if line.strip()], dtype=np.int64)
    end_us = rows[:, 2] * 1_000_000 + rows[:, 3]
    latency, lag = rows[:, 0], rows[:, 4]
    first_due = int((end_us - latency).min())
    lo = first_due + int(args.warmup * 1e6)
    inside = (end_us >= lo) & (end_us < lo + int(args.seconds * 1e6))
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"achieved": int(inside.sum()) / args.seconds,
            "wakeups": (after.ru_nvcsw - before.ru_nvcsw) / len(rows), "cpu_wait": queue.mean_us(),
            "lat_p50": _pct(latency[inside], 50) / 1000, "lat_p99": _pct(latency[inside], 99) / 1000,
            "lag_mean": float(lag[inside].mean()) / 1000, "lag_p99": _pct(lag[inside], 99) / 1000,
            "cpu_us": cpu / len(rows) * 1e6, "transactions": int(inside.sum())}


def _pct(values, pct: float) -> float:
    """The smallest value with at least pct% of them at or below it (as HdrHistogram answers)."""
    return float(np.percentile(values, pct, method="inverted_cdf"))


def run_ours(tree: Path, conninfo: str, rate: float, loop: str, wait: str, seed: int, args) -> dict:
    """One concurbench window, run by the code of `tree` in a subprocess (its workers inherit PYTHONPATH), the
    compiled loop waiting with `wait` ("": its best)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), fastloop.WAIT_ENV: wait}
    spec = json.dumps({"conninfo": conninfo, "rate": rate, "loop": loop, "seed": seed, "clients": args.clients,
                       "seconds": args.seconds, "warmup": args.warmup, "scale": args.scale})
    out = subprocess.run([sys.executable, __file__, "--drive", spec], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"the concurbench side failed ({tree}, {loop}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def drive(spec: dict) -> None:
    """A concurbench side (--drive): one window of the rate pool; its figures as a JSON line."""
    import multiprocessing as mp

    from concurbench.scenario.distributions import parse_distribution
    from concurbench.scenario.model import Pool, Statement
    from concurbench.workload import pool as pools
    from concurbench.workload.pool import LoadGenerator

    # spawned workers, not forks of a fork server: they are this process's children, whose context switches
    # RUSAGE_CHILDREN counts and whose threads RunQueue reads (a fork server's children are neither)
    pools.workers_context = lambda: mp.get_context("spawn")
    pool = Pool("select_only", spec["clients"], (Statement("select", STATEMENT),),
                params=(("aid", parse_distribution(f"uniform(1, {100000 * spec['scale']})")),),
                rate=spec["rate"], protocol="simple")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the worker processes are this process's children
    with RunQueue(lambda: [child.pid for child in psutil.Process().children()], main_only=True) as queue:
        result = LoadGenerator(spec["conninfo"], [pool], warmup=spec["warmup"], duration=spec["seconds"],
                               seed=spec["seed"], loop=spec["loop"], listeners=[queue]).run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = result.pools[pool.name]
    if result.messages or stats.failed or result.loop != spec["loop"]:
        raise SystemExit(f"run not clean: {result.messages} failed={stats.failed} loop={result.loop}")
    tps = stats.transactions / result.elapsed_s
    loop_txns = max(tps * max(result.worker_wall_s), 1)  # transactions over the load loops, warm-up included
    print(json.dumps({"achieved": tps, "wakeups": (after.ru_nvcsw - before.ru_nvcsw) / loop_txns,
                      "cpu_wait": queue.mean_us(), "lat_p50": stats.txn.percentile_ms(50.0),
                      "lat_p99": stats.txn.percentile_ms(99.0), "lag_mean": stats.lag.mean_ms(),
                      "lag_p99": stats.lag.percentile_ms(99.0),
                      "cpu_us": sum(result.worker_cpu_s) / loop_txns * 1e6,
                      "transactions": stats.transactions}))


def count(spec: dict) -> None:
    """One session of the rate pool for a set number of transactions in this process's own loop (--count,
    under valgrind)."""
    from concurbench.scenario.distributions import parse_distribution
    from concurbench.scenario.model import Pool, Statement

    pool = Pool("select_only", 1, (Statement("select", STATEMENT),), transactions=spec["transactions"],
                params=(("aid", parse_distribution(f"uniform(1, {100000 * spec['scale']})")),),
                rate=spec["rate"], protocol="simple")
    drive_pool(spec["conninfo"], pool, spec["loop"])


def part_instructions(trees: list[tuple[str, Path]], conninfo: str, args) -> list[str]:
    """User-space instructions a transaction of one session at CPU_RATE in each tree's loops (--loops), counted
    by valgrind as instructions_per_transaction.py counts them (runs of N and 4N transactions): what the loop's
    own work costs, which the machine's state does not move; the kernel's work (the wakeups) is left out."""
    if shutil.which("valgrind") is None:
        return ["instructions: left out, valgrind is not installed"]
    lines = []
    for loop in args.loops.split(","):
        counts = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, tree in trees:
                def command(n: int) -> list[str]:
                    spec = {"conninfo": conninfo, "rate": CPU_RATE, "transactions": n, "scale": args.scale, "loop": loop}
                    return [sys.executable, __file__, "--count", json.dumps(spec)]
                saved = os.environ.get("PYTHONPATH")
                os.environ["PYTHONPATH"] = str(tree / "src")  # valgrind's python imports that tree's code
                try:
                    counts[name] = per_transaction(command, args.instructions, Path(tmp), name)
                finally:
                    os.environ.pop("PYTHONPATH") if saved is None else os.environ.update(PYTHONPATH=saved)
                print(f"instructions {name}/{loop} at {CPU_RATE:,.0f}/s, one session: {counts[name]:,.0f} a "
                      f"transaction", flush=True)
        line = (f"instructions at {CPU_RATE:,.0f}/s, one session, {loop} loop ({args.instructions:,} and "
                f"{4 * args.instructions:,} transactions): " + ", ".join(f"{n} {c:,.0f}" for n, c in counts.items()))
        if "baseline" in counts:
            line += f"; concurbench / baseline {counts['concurbench'] / counts['baseline']:.3f}x"
        lines.append(line)
    return lines


# -- the summary -------------------------------------------------------------------------
def lag_verdict(ours: list[float], theirs: list[float]) -> str:
    """At most LAG_GOAL x pgbench's or within LAG_SLACK_MS of it, whichever allows more: met when either
    interval is inside its bound, missed when both are wholly beyond them, else undecided."""
    ratio, r_low, r_high = ratio_interval([o / t for o, t in zip(ours, theirs)])
    diff = cstats.estimate([o - t for o, t in zip(ours, theirs)])
    half = diff.half_at(0.05)
    text = f"{ratio:.2f}x"
    if r_low is None or half is None:
        return text + f", {diff.mean:+.3f} ms (one round): undecided"
    d_low, d_high = diff.mean - half, diff.mean + half
    text = (f"{ratio:.2f}x [{r_low:.2f}, {r_high:.2f}], {diff.mean:+.3f} ms [{d_low:+.3f}, {d_high:+.3f}]")
    if r_high <= LAG_GOAL or d_high <= LAG_SLACK_MS:
        return text + ": met"
    if r_low > LAG_GOAL and d_low > LAG_SLACK_MS:
        return text + ": missed"
    return text + ": undecided"


def ratio_verdict(ratios: list[float], goal: tuple[float, float] | None) -> str:
    """The geometric mean of the rounds' ratios, its 95% interval, and the goal's verdict (when it has one)."""
    mean, low, high = ratio_interval(ratios)
    if low is None:
        return f"{mean:.3f}x (one round)" + (": undecided" if goal else "")
    return f"{mean:.3f}x [{low:.3f}, {high:.3f}]" + (f": {goal_verdict(low, high, goal)}" if goal else "")


def summarize(rows: list[dict]) -> list[str]:
    """Medians over the rounds per rate and side, then every goal with its interval."""
    by: dict[tuple[float, str], dict[int, dict]] = {}
    for row in rows:
        by.setdefault((row["rate"], row["side"]), {})[row["round"]] = row
    rates = sorted({rate for rate, _side in by})
    sides = list(dict.fromkeys(side for _rate, side in by))
    lines = ["", f"{'rate':>8} {'side':>22} {'rounds':>6} {'achieved/s':>11} {'lat p50':>8} {'lat p99':>8} "
                 f"{'lag mean':>8} {'lag p99':>8} {'CPU us/txn':>10} {'wakeups':>7} {'CPU wait us':>11}   (medians over "
                 f"rounds; ms; wakeups: the load generator's voluntary context switches a transaction; CPU wait: the "
                 f"mean time its threads waited on a run queue each time they ran)"]
    for rate in rates:
        for side in sides:
            runs = list(by.get((rate, side), {}).values())
            if not runs:
                continue
            med = {f: statistics.median(r[f] for r in runs) for f in FIGURES}
            lines.append(f"{rate:>8,.0f} {side:>22} {len(runs):>6} {med['achieved']:>11,.1f} {med['lat_p50']:>8.3f} "
                         f"{med['lat_p99']:>8.3f} {med['lag_mean']:>8.3f} {med['lag_p99']:>8.3f} {med['cpu_us']:>10.1f} "
                         f"{med['wakeups']:>7.2f} {med['cpu_wait']:>11.1f}")
    lines.append("")
    for rate in rates:
        base = by.get((rate, "pgbench"), {})
        for side in sides:
            if not side.startswith("concurbench/"):
                continue
            mine = by[(rate, side)]
            paired = sorted(set(mine) & set(base))
            def vs(f: str) -> tuple[list[float], list[float]]:
                return [mine[r][f] for r in paired], [base[r][f] for r in paired]
            goal = "" if side == "concurbench/compiled" else " (no goal)"
            lines.append(f"{rate:,.0f}/s {side} over pgbench, {len(paired)} rounds{goal}:")
            for f, name in (("lag_mean", "lag mean"), ("lag_p99", "lag p99")):
                lines.append(f"    {name}: {lag_verdict(*vs(f))} (goal: at most {LAG_GOAL}x or +{LAG_SLACK_MS} ms)")
            for f, name in (("lat_p50", "latency p50"), ("lat_p99", "latency p99")):
                ours, theirs = vs(f)
                lines.append(f"    {name}: {ratio_verdict([o / t for o, t in zip(ours, theirs)], LATENCY_GOAL)} "
                             f"(goal: {LATENCY_GOAL[0]}x-{LATENCY_GOAL[1]}x)")
            achieved = [mine[r]["achieved"] / rate for r in sorted(mine)]
            pg_achieved = [base[r]["achieved"] / rate for r in sorted(base)]
            noise = 100 / math.sqrt(rate * statistics.median(r["transactions"] / r["achieved"] for r in mine.values()))
            lines.append(f"    achieved rate / rate: {ratio_verdict(achieved, RATE_GOAL)} (goal: within 1%; pgbench "
                         f"{ratio_interval(pg_achieved)[0]:.3f}x; Poisson arrivals alone: +/-{noise:.2f}% a round at one sd)")
            baseline = by.get((rate, "baseline/" + side.split("/", 1)[1].split("-", 1)[0]))
            if baseline:
                both = sorted(set(mine) & set(baseline))
                cpu = [mine[r]["cpu_us"] / baseline[r]["cpu_us"] for r in both]
                goal = CPU_GOAL if rate == CPU_RATE and side == "concurbench/compiled" else None
                lines.append(f"    CPU per transaction / baseline's: {ratio_verdict(cpu, goal)}"
                             + (f" (goal: at most {CPU_GOAL[1]}x)" if goal else ""))
                for f, name in (("wakeups", "wakeups"), ("lag_mean", "lag mean"), ("lag_p99", "lag p99"),
                                ("lat_p50", "latency p50"), ("lat_p99", "latency p99"), ("achieved", "achieved rate")):
                    lines.append(f"    {name} / baseline's: "
                                 f"{ratio_verdict([mine[r][f] / baseline[r][f] for r in both], None)}")
    return lines


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as fh:
        return [{"round": int(r["round"]), "rate": float(r["rate"]), "side": r["side"],
                 **{f: float(r.get(f) or "nan") for f in FIGURES}} for r in csv.DictReader(fh)]


# -- the run -----------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,1000,10000")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0, help="the measured window of every side")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--first-round", type=int, default=1, help="the first round's number (its seed and order)")
    parser.add_argument("--loops", default="compiled,python", help="concurbench's event loops to measure")
    parser.add_argument("--baseline", help="another checkout (its extension built) measured in the same rounds")
    parser.add_argument("--waits", default="", help="also run this tree's compiled loop with these waits (e.g. "
                                                    "timerfd,epoll_wait), each a side of its own")
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--csv", help="write every measurement to this file")
    parser.add_argument("--from-csv", help="print the summary of an earlier run's --csv file; measure nothing")
    parser.add_argument("--instructions", type=int, default=0,
                        help="also count user-space instructions a transaction at 1,000/s under valgrind, runs of N "
                             "and 4N transactions (0: not)")
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    parser.add_argument("--count", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive(json.loads(args.drive))
        return 0
    if args.count:
        count(json.loads(args.count))
        return 0
    if args.from_csv:
        print("\n".join(summarize(read_csv(args.from_csv))))
        return 0
    loops = [name for name in args.loops.split(",") if name]
    for name in loops:
        if name not in ("compiled", "python"):
            parser.error(f"unknown loop {name}: compiled or python")
    waits = [name for name in args.waits.split(",") if name]
    for name in waits:
        if name not in fastloop.WAITS:
            parser.error(f"unknown wait {name}: one of {', '.join(fastloop.WAITS)}")
    here = Path(__file__).resolve().parent.parent
    trees = [("concurbench", here)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    rates = [float(r) for r in args.rates.split(",")]
    load = os.getloadavg()
    print(f"{cpu_model() or 'CPU model unknown'}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f} at the start; this tree's compiled loop: {fastloop.describe('compiled')}; "
          f"trees: {', '.join(f'{n} {t}' for n, t in trees)}", flush=True)
    server = EmbeddedPostgres({"max_connections": str(4 * args.clients + 20)})
    connection = server.start()
    rows: list[dict] = []
    instruction_lines: list[str] = []
    try:
        version = server.version()
        pgbench, which = pgbench_binary(int(str(version).split(".")[0]))
        print(f"one embedded server, PostgreSQL {version}; pgbench: {which}; pgbench -i -s {args.scale}", flush=True)
        subprocess.run([str(pgbench), "-i", "-q", "-s", str(args.scale), "-h", "127.0.0.1", "-p", str(server.port),
                        "-U", "postgres", "concurbench"], capture_output=True, text=True, check=True)
        sides = [("pgbench", None, None, "")] + [(f"{name}/{loop}", tree, loop, "") for name, tree in trees
                                                 for loop in loops]
        sides += [(f"concurbench/compiled-{wait}", here, "compiled", wait) for wait in waits]
        print(f"{'round':>5} {'rate':>7} {'side':>22} {'achieved/s':>11} {'lat p50':>8} {'lat p99':>8} "
              f"{'lag mean':>8} {'lag p99':>8} {'CPU us/txn':>10} {'wakeups':>7} {'CPU wait us':>11}", flush=True)
        for round_no in range(args.first_round, args.first_round + args.rounds):
            load = os.getloadavg()
            print(f"-- round {round_no}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
            for rate in rates:
                shift = (round_no - 1) % len(sides)
                for side, tree, loop, wait in sides[shift:] + sides[:shift]:  # each side takes each place in turn
                    if tree is None:
                        m = run_pgbench(pgbench, server.port, rate, args)
                    else:
                        m = run_ours(tree, connection.conninfo, rate, loop, wait, round_no, args)
                    rows.append({"round": round_no, "rate": rate, "side": side, **m})
                    print(f"{round_no:>5} {rate:>7,.0f} {side:>22} {m['achieved']:>11,.1f} {m['lat_p50']:>8.3f} "
                          f"{m['lat_p99']:>8.3f} {m['lag_mean']:>8.3f} {m['lag_p99']:>8.3f} {m['cpu_us']:>10.1f} "
                          f"{m['wakeups']:>7.2f} {m['cpu_wait']:>11.1f}",
                          flush=True)
        if args.instructions:
            instruction_lines = part_instructions(trees, connection.conninfo, args)
    finally:
        server.stop()
        if args.csv and rows:
            with open(args.csv, "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=["round", "rate", "side", *FIGURES])
                writer.writeheader()
                writer.writerows(rows)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    print("\n".join(summarize(rows) + instruction_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
