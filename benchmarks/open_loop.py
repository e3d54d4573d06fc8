"""What the open-loop (rate-driven) load generator measures, and what it costs, on one server.

One embedded PostgreSQL serves four measurements, each with every event loop in `--loops`:

- rate: a pool offering `--rate` transactions per second of a primary-key SELECT for
  `--rate-seconds`, once with Poisson arrivals (as pgbench -R) and once with fixed ones: the
  throughput it achieved against the rate (ratio and % error; Poisson arrivals alone move the count
  by one over the square root of the expected count, fixed ones do not, so the fixed run shows the
  loop's own error), and its schedule lag (when each transaction was sent, minus when it was due) at
  p99 and max;
- stall: a `--stall` long row-lock stall, `--stall-at` into the window: a held transaction locks
  the row that every transaction of the pool updates. Once with a pool at `--stall-rate`, once
  with a closed-loop pool of the same clients whose think time offers about the same load. The
  rate-driven pool times each transaction from when it was due, so the stall shows in every
  transaction due during it; the closed loop's clients wait, send nothing, and record one slow
  transaction each. Printed: p99, max and mean latency of both, how many transactions took longer
  than half the stall, and the ratios. How far the closed loop's p99 falls depends on the window:
  its `--clients` slow transactions reach its p99 while they are more than 1% of the window's;
- cpu: the load generator's CPU per transaction (its worker processes' load loops, warm-up
  included, per transaction at the measured rate) and its wakeups per transaction (the workers'
  voluntary context switches), rate-driven over closed-loop, in three pairs of `--seconds` windows
  in `--cpu-processes` worker processes, interleaved round by round (see part_cpu): busy (both as
  fast as the server answers: the rate loop's own work), alike (a set rate over one session against
  one closed client, with the same wakeups: the fair pair at a rate) and lockstep (Poisson arrivals
  against clients that think alike and so wake together). The busy and alike ratios are judged
  against the goal (at most 1.10x) with a 95% interval over sequential rounds, as
  driver_overhead.py judges its goals;
- instructions: user-space instructions per transaction of one session, rate-driven over
  closed-loop, busy and at a set rate, counted by valgrind (needs it installed): figures the
  machine's state does not move.

    python benchmarks/open_loop.py [--seconds 3] [--rate-seconds 20] [--rate 1000] [--clients 8]
        [--stall 1] [--stall-at 1] [--stall-window 5] [--stall-rate 200] [--cpu-rate 500]
        [--cpu-rounds 20] [--cpu-min-rounds 3] [--cpu-processes 1] [--instructions 1000]
        [--loops python,compiled] [--parts rate,stall,cpu,instructions]

The figures are one run of each: on a shared or busy machine read them as that, not as a quiet
machine's (docs/load-generator.md, "Open-loop load"). The worker processes are spawned, not forked by
the fork server, so that they are this process's children and their wakeups are counted; a pool's
warning that it fell behind its rate fails a window, except in the busy pair (which offers 1e6/s on
purpose) and the stall (where a low Poisson count can leave it short of the offered number).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import resource
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import psycopg

from concurbench.background.kinds import make_background
from concurbench.engines import postgres as pg
from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.results.store import cpu_model
from concurbench.scenario.distributions import parse_distribution
from concurbench.scenario.model import Background, Pool, Statement
from concurbench.workload import fastloop
from concurbench.workload import pool as pools
from concurbench.workload.lag import behind
from concurbench.workload.pool import LoadGenerator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_overhead import goal_verdict, look_alpha, ratio_interval, ratio_summary  # noqa: E402 - the same rules
from instructions_per_transaction import drive_pool, per_transaction  # noqa: E402 - the same count

CPU_GOAL = (0.0, 1.10)  # the rate loop's own CPU per transaction within 10% of the closed loop's
BUSY_RATE = 1e6  # the busy pair's rate: far above what the server gives (the pool falls behind it on purpose)

ROWS = 1000
LOOKUP = Statement("lookup", "SELECT n FROM ol_rows WHERE id = :id")
HOT_UPDATE = Statement("update", "UPDATE ol_rows SET n = n + 1 WHERE id = 1")


def setup(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS ol_rows")
        admin.execute("CREATE TABLE ol_rows (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)")
        admin.execute(f"INSERT INTO ol_rows (id) SELECT g FROM generate_series(1, {ROWS}) g")
        admin.execute("VACUUM ANALYZE ol_rows")


def run(conninfo: str, pool: Pool, *, seconds: float, warmup: float, loop: str, background=(),
        processes: int | None = None, may_fall_behind: bool = False):
    """One window of one pool (with background sessions beside it); returns (result, the pool's stats).
    `may_fall_behind`: the pool's warning that it fell behind its rate is no failure (a window that offers far
    more than the server gives, or whose stall may leave a low Poisson count short of the offered number)."""
    sessions = [make_background(spec, conninfo, pg) for spec in background]
    try:
        for bg in sessions:
            bg.start()
        result = LoadGenerator(conninfo, [pool], warmup=warmup, duration=seconds, listeners=sessions,
                               loop=loop, processes=processes).run()
    finally:
        for bg in sessions:
            bg.close()
    stats = result.pools[pool.name]
    expected = [behind(pool, stats, result.elapsed_s)] if may_fall_behind else []
    if [message for message in result.messages if message not in expected] or stats.failed:
        raise RuntimeError(f"run not clean: {result.messages} failed={stats.failed} {dict(stats.error_messages)}")
    return result, stats


def cpu_us_per_txn(result, stats) -> float:
    """The worker processes' CPU over their whole load loop, per transaction at the measured rate (as
    benchmarks/driver_overhead.py counts it)."""
    tps = stats.transactions / result.elapsed_s
    return sum(result.worker_cpu_s) / max(tps * max(result.worker_wall_s), 1) * 1e6


def slower_than(stats, ms: float) -> int:
    """How many of the pool's transactions took longer than `ms` (from its latency histogram)."""
    stats.txn.flush()
    return sum(item.count_at_value_iterated_to for item in stats.txn.hist.get_recorded_iterator()
               if item.value_iterated_to > ms * 1e6)


def lookups(clients: int, **kw) -> Pool:
    return Pool("readers", clients, (LOOKUP,), params=(("id", parse_distribution(f"uniform(1, {ROWS})")),), **kw)


def part_rate(conninfo: str, args, loop: str) -> list[str]:
    """--rate over --rate-seconds, with Poisson arrivals (whose count alone varies by one over the square
    root of the expected count) and with fixed ones (which do not: what is left is the loop's own error)."""
    lines = []
    for arrivals in ("poisson", "fixed"):
        result, stats = run(conninfo, lookups(args.clients, rate=args.rate, arrivals=arrivals),
                            seconds=args.rate_seconds, warmup=args.warmup, loop=loop)
        tps = stats.transactions / result.elapsed_s
        error = (tps / args.rate - 1) * 100
        noise = (f"Poisson arrivals alone: +/-{100 / math.sqrt(args.rate * result.elapsed_s):.2f}% at one sd"
                 if arrivals == "poisson" else "fixed arrivals: no count noise")
        lines.append(f"rate [{result.loop}] {arrivals}: {tps:,.1f} tps of {args.rate:g} offered over "
                     f"{result.elapsed_s:.2f} s: ratio {tps / args.rate:.4f}, error {error:+.2f}% ({noise}); "
                     f"lag p99 {stats.lag.percentile_ms(99.0):.2f} ms, max {stats.lag.max_ms():.2f} ms, "
                     f"mean {stats.lag.mean_ms():.3f} ms")
    return lines


def part_stall(conninfo: str, args, loop: str) -> list[str]:
    holder = Background("holder", "hold_transaction", "read committed",
                        ("SELECT n FROM ol_rows WHERE id = 1 FOR UPDATE",),
                        start_after=args.stall_at, release_after=args.stall_at + args.stall)
    think = args.clients / args.stall_rate  # the closed loop's offered load, about the rate's
    lines, p99, slow = [], {}, {}
    half = args.stall * 500  # ms: half the stall
    for name, pool in (("rate", Pool("hot", args.clients, (HOT_UPDATE,), rate=args.stall_rate)),
                       ("closed", Pool("hot", args.clients, (HOT_UPDATE,), think=think))):
        result, stats = run(conninfo, pool, seconds=args.stall_window, warmup=args.warmup, loop=loop,
                            background=[holder], may_fall_behind=True)
        p99[name] = stats.txn.percentile_ms(99.0)
        slow[name] = slower_than(stats, half)
        lines.append(f"stall [{result.loop}] {name:6} ({'rate %g/s' % args.stall_rate if name == 'rate' else 'think %.0f ms' % (think * 1000)}): "
                     f"{stats.transactions / result.elapsed_s:,.1f} tps; latency p99 {p99[name]:,.1f} ms, "
                     f"max {stats.txn.max_ms():,.1f} ms, mean {stats.txn.mean_ms():,.2f} ms; {slow[name]:,} of "
                     f"{stats.transactions:,} transactions ({100 * slow[name] / max(stats.transactions, 1):.1f}%) "
                     f"slower than {half:,.0f} ms")
    lines.append(f"stall [{loop}]: a {args.stall:g} s stall: p99 rate-driven / closed loop = "
                 f"{p99['rate'] / p99['closed']:.2f}x (rate-driven p99 {'>=' if p99['rate'] >= 900 * args.stall else '<'} "
                 f"{900 * args.stall:,.0f} ms); transactions slower than {half:,.0f} ms: rate-driven / closed loop = "
                 f"{slow['rate'] / max(slow['closed'], 1):.1f}x")
    return lines


def switches_per_txn(before, after, result, stats) -> float:
    """Voluntary context switches of the worker processes (each one a wait that blocked: a wakeup) per
    transaction, over the same span as cpu_us_per_txn."""
    tps = stats.transactions / result.elapsed_s
    return (after.ru_nvcsw - before.ru_nvcsw) / max(tps * max(result.worker_wall_s), 1)


def measured(conninfo: str, pool: Pool, args, loop: str) -> tuple[float, float, float, float]:
    """One window of `pool`: (tps, CPU us per transaction, wakeups per transaction, mean latency ms)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers are this process's children
    result, stats = run(conninfo, pool, seconds=args.seconds, warmup=args.warmup, loop=loop,
                        processes=args.cpu_processes, may_fall_behind=pool.rate == BUSY_RATE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (stats.transactions / result.elapsed_s, cpu_us_per_txn(result, stats),
            switches_per_txn(before, after, result, stats), stats.txn.mean_ms())


def part_cpu(conninfo: str, args, loop: str) -> list[str]:
    """Three pairs, interleaved round by round (the order of the pairs and of each pair's sides turns every round):
    - busy: a rate far above what the server gives (1e6/s) against the closed loop without think.
      Both loops send as fast as answers come, so the pair isolates the rate loop's own work per
      transaction (taking arrivals, timing from the due time, the lag histogram);
    - alike: --cpu-rate with fixed arrivals over one session against one closed-loop client thinking
      1 / --cpu-rate (the loops' timers wait whole milliseconds, so it runs at about the rate). Both
      wait for a timer, send on their one connection and wait for the answer: the same system calls
      and wakeups per transaction, so the pair is the fair test at a set rate. (Over --clients
      sessions a rate's arrivals go to each connection in turn, and waking eight backends in turn
      costs the client more a transaction than waking one: a property of spreading a rate over
      connections, which pgbench -R shares, not of the loop's work.);
    - lockstep: --cpu-rate with Poisson arrivals against --clients closed-loop clients thinking
      --clients / --cpu-rate. Started together and thinking alike, those clients wake together and
      share wakeups, which Poisson arrivals (spread out by definition) cannot; the wakeups per
      transaction say how much.

    Every window runs its sessions in --cpu-processes worker processes (1): with two, this 2-core VM
    ran a busy window in one of two states, by where the kernel put the two workers beside the
    server's backends (the same closed loop at 9.8 or 13.9 us a transaction in back-to-back windows),
    and a round whose sides fell in different states moved its ratio by up to 45%.

    Rounds are sequential, as in driver_overhead.py: from --cpu-min-rounds on, a pair with a goal (busy,
    alike: at most CPU_GOAL) stops once the goal is met or missed at that look's level, the others go on
    up to --cpu-rounds; lockstep, which has no goal, runs the first --cpu-min-rounds rounds."""
    ratios: dict[str, list[float]] = {"busy": [], "alike": [], "lockstep": []}
    goals = {"busy": CPU_GOAL, "alike": CPU_GOAL, "lockstep": None}
    first, last = args.cpu_min_rounds, max(args.cpu_rounds, args.cpu_min_rounds)
    for r in range(last):
        left = [name for name in ratios if (goals[name] is None and r < first) or
                (goals[name] is not None and not decided(ratios[name], first, last))]
        if not left:
            break
        for name in (left if r % 2 == 0 else left[::-1]):
            if name == "busy":
                sides = lookups(args.clients, rate=BUSY_RATE), lookups(args.clients)
                what = f"rate 1e6/s over {args.clients} / closed loop, {args.clients} clients"
            elif name == "alike":
                think = 1 / args.cpu_rate  # the loops' timers wait whole milliseconds: about the rate's throughput
                sides = lookups(1, rate=args.cpu_rate, arrivals="fixed"), lookups(1, think=think)
                what = f"rate {args.cpu_rate:g}/s fixed over 1 / closed loop, 1 client, think {think * 1000:.2f} ms"
            else:
                think = args.clients / args.cpu_rate
                sides = lookups(args.clients, rate=args.cpu_rate), lookups(args.clients, think=think)
                what = (f"rate {args.cpu_rate:g}/s Poisson over {args.clients} / closed loop, {args.clients} clients, "
                        f"think {think * 1000:.1f} ms")
            # the sides' order turns too (rate first in odd rounds): the pair is A B, then B A
            if r % 2 == 0:
                rated, closed = (measured(conninfo, pool, args, loop) for pool in sides)
            else:
                closed, rated = (measured(conninfo, pool, args, loop) for pool in sides[::-1])
            ratios[name].append(rated[1] / closed[1])
            print(f"cpu [{loop}] round {r + 1} {name:8}: {what}: {rated[0]:,.0f} / {closed[0]:,.0f} tps, "
                  f"{rated[1]:.1f} / {closed[1]:.1f} us CPU a transaction ({rated[1] / closed[1]:.3f}x), "
                  f"{rated[2]:.2f} / {closed[2]:.2f} wakeups a transaction", flush=True)
    summary = []
    for name, values in ratios.items():
        alpha = look_alpha(len(values), first, last) if goals[name] else 0.05
        summary.append(f"cpu [{loop}] {name}: CPU per transaction rate / closed, {args.cpu_processes} worker "
                       f"process(es): {ratio_summary(values, goals[name], alpha)}")
    return summary


def decided(values: list[float], first: int, last: int) -> bool:
    """Whether a pair's goal is met or missed after its rounds so far (not looked at before `first`)."""
    if len(values) < max(first, 2):
        return False
    _mean, low, high = ratio_interval(values, look_alpha(len(values), first, last))
    return goal_verdict(low, high, CPU_GOAL) in ("met", "missed")


def part_instructions(conninfo: str, args, loop: str) -> list[str]:
    """User-space instructions per transaction of one session in this process's own worker loop, rate-driven
    against closed-loop, counted by valgrind as instructions_per_transaction.py does (runs of N and 4N
    transactions, the difference over 3N), in two pairs: busy (rate 1e6/s against no think) and timed (200/s
    fixed against a 4 ms think: both wait for a timer before each transaction). No other process shares the
    count, so it does not move with the machine's state; it leaves out the kernel's work (the system calls,
    the same on both sides)."""
    if shutil.which("valgrind") is None:
        return [f"instructions [{loop}]: left out, valgrind is not installed (on Debian: apt-get install valgrind)"]
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for pair, n in (("busy", args.instructions), ("timed", max(args.instructions // 4, 1))):
            counts = {}
            for side in ("rate", "closed"):
                def command(count: int, kind=f"{pair}-{side}") -> list[str]:
                    return [sys.executable, __file__, "--drive", conninfo, loop, str(count), kind]
                counts[side] = per_transaction(command, n, Path(tmp), f"{loop}-{pair}-{side}")
            what = "rate 1e6/s / closed loop" if pair == "busy" else "rate 200/s fixed / closed loop, think 4 ms"
            lines.append(f"instructions [{loop}] {pair}: one session, {what}: {counts['rate']:,.0f} / "
                         f"{counts['closed']:,.0f} user-space instructions a transaction "
                         f"({counts['rate'] / counts['closed']:.3f}x; {n:,} and {4 * n:,} transactions)")
    return lines


DRIVEN = {"busy-rate": {"rate": 1e6}, "busy-closed": {}, "timed-rate": {"rate": 200.0, "arrivals": "fixed"},
          "timed-closed": {"think": 0.004}}


def drive(conninfo: str, loop: str, transactions: int, kind: str) -> None:
    """One session for `transactions` transactions in this process (under valgrind): a side of a pair (DRIVEN)."""
    drive_pool(conninfo, replace(lookups(1, **DRIVEN[kind]), transactions=transactions), loop)


PARTS = {"rate": part_rate, "stall": part_stall, "cpu": part_cpu, "instructions": part_instructions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="window of each run of the cpu part")
    parser.add_argument("--rate-seconds", type=float, default=20.0, help="window of the rate part")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="offered rate of the rate part (tps)")
    parser.add_argument("--clients", type=int, default=8, help="clients of every pool")
    parser.add_argument("--stall", type=float, default=1.0, help="seconds the row lock is held")
    parser.add_argument("--stall-at", type=float, default=1.0, help="seconds into the window the lock is taken")
    parser.add_argument("--stall-window", type=float, default=5.0, help="window of the stall part")
    parser.add_argument("--stall-rate", type=float, default=200.0, help="offered rate of the stall part (tps)")
    parser.add_argument("--cpu-rate", type=float, default=500.0, help="offered rate of the cpu part (tps)")
    parser.add_argument("--cpu-rounds", type=int, default=20, help="most interleaved rounds of the cpu part")
    parser.add_argument("--cpu-min-rounds", type=int, default=3, help="rounds before the cpu part's first look")
    parser.add_argument("--cpu-processes", type=int, default=1, help="worker processes of the cpu part's windows")
    parser.add_argument("--instructions", type=int, default=1000,
                        help="transactions of the instructions part's shorter run (the longer has 4x)")
    parser.add_argument("--loops", default="python,compiled", help="event loops: python, compiled, auto")
    parser.add_argument("--parts", default="rate,stall,cpu,instructions",
                        help="which measurements: rate, stall, cpu, instructions")
    parser.add_argument("--drive", nargs=4, metavar=("CONNINFO", "LOOP", "N", "KIND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        conninfo, loop, n, kind = args.drive
        drive(conninfo, loop, int(n), kind)
        return 0
    loops = [name for name in args.loops.split(",") if name]
    parts = [name for name in args.parts.split(",") if name]
    for name in loops:
        if name not in fastloop.LOOPS:
            parser.error(f"unknown loop {name}: one of {', '.join(fastloop.LOOPS)}")
    for name in parts:
        if name not in PARTS:
            parser.error(f"unknown part {name}: one of {', '.join(PARTS)}")
    if args.stall_at + args.stall >= args.stall_window:
        parser.error(f"--stall-at + --stall ({args.stall_at + args.stall:g} s) must end inside --stall-window "
                     f"({args.stall_window:g} s)")
    if "compiled" in loops and fastloop.unavailable("postgres"):
        print(f"compiled loop left out: {fastloop.unavailable('postgres')}")
        loops.remove("compiled")
    load = os.getloadavg()
    print(f"{cpu_model() or 'CPU model unknown'}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
          f"loops: {'; '.join(f'{n}: {fastloop.describe(n)}' for n in loops)}", flush=True)
    # spawned workers, not forks of a fork server: they are this process's children, whose context switches
    # RUSAGE_CHILDREN counts (a fork server's children are not)
    pools.workers_context = lambda: mp.get_context("spawn")
    server = EmbeddedPostgres({"max_connections": str(2 * args.clients + 20)})
    connection = server.start()
    try:
        print(f"one embedded server, PostgreSQL {server.version()}", flush=True)
        setup(connection.conninfo)
        for part in parts:
            for loop in loops:
                for line in PARTS[part](connection.conninfo, args, loop):
                    print(line, flush=True)
    finally:
        server.stop()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
