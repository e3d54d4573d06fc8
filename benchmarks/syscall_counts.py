"""What pgbench and concurbench's worker processes do per transaction, counted rather than timed:
system calls by kind, context switches (voluntary and involuntary) and, with `--instructions`,
user-space instructions. Counts move little with what else the machine runs, so they compare the
two load generators where timings on a shared machine cannot.

Only the client processes are counted, never the server. pgbench runs as itself (`-c C -j J`, J
as many threads as concurbench would start worker processes); concurbench runs as J worker
processes (`--drive`), each stepping its share of the sessions in the compiled loop exactly as
pool._worker does after connecting. Each side runs twice, with N and 4N transactions per client
(`-t`, and the pool's `transactions:`); the difference between the two runs, over the difference in
transactions each side itself reports, is the cost of one transaction without start-up and
connecting. System calls come from `perf stat` on the syscalls tracepoints (the whole process
tree: all threads, all workers), context switches from getrusage of the finished children,
instructions from valgrind's callgrind (`perf stat -e instructions` where the PMU is exposed).

    python benchmarks/syscall_counts.py [--clients 8,32] [--protocols simple,prepared]
        [--workloads select1,tpcb] [--transactions 16000] [--repeat 3] [--instructions N]
        [--baseline CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from concurbench.engines import postgres as pg
from concurbench.provisioners.embedded import EmbeddedPostgres, wheel_install
from concurbench.workload import pool as pools
from concurbench.workload.session import FAR_FUTURE, Session
from concurbench.workload.stats import PoolStats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_overhead import select1_pool, tpcb_pool  # noqa: E402 - the pools of the timed benchmark

KINDS = ("sendto", "recvfrom", "epoll_wait", "epoll_pwait", "poll", "ppoll", "epoll_ctl", "futex", "read",
         "write", "clock_gettime", "getppid")
SHOWN = ("send", "recv", "wait", "epoll_ctl", "futex", "other")  # the table's columns


def make_pool(workload: str, clients: int, protocol: str, transactions: int):
    pool = select1_pool(clients, protocol) if workload == "select1" else tpcb_pool(clients, protocol, 1)
    return pool.__class__(**{**pool.__dict__, "transactions": transactions})


def drive(conninfo: str, workload: str, protocol: str, indexes: list[int], clients: int, n: int) -> None:
    """One worker process: connect its sessions, run the compiled loop until each has done n transactions."""
    pool = make_pool(workload, clients, protocol, n)
    k = len(indexes)
    counters, status, finished = array("q", [0] * k), array("b", [0] * k), array("q", [0] * k)
    stats = PoolStats(pool.name)
    sessions = [Session(conninfo, pool, index, 1, counters, slot, pg, stats) for slot, index in enumerate(indexes)]
    for session in sessions:
        session.connect()
    now = time.perf_counter_ns()
    window = array("q", [now, now, FAR_FUTURE])
    pools._compiled_loop(sessions, window, status, finished)
    for session in sessions:
        session.close()
        session.settle_stats()
    print(f"transactions {stats.transactions} failed {stats.failed}", flush=True)


def parse_perf(path: Path) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in path.read_text().splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].replace(".", "").isdigit():
            continue
        event = fields[2]
        counts["raw_syscalls" if event.startswith("raw_syscalls") else event.split("sys_enter_")[-1]] = float(fields[0])
    return counts


def counted(cmd: list[str], work: Path) -> tuple[dict[str, float], str]:
    """Run cmd under perf stat; system calls by kind and context switches of it and its descendants."""
    out = work / "perf.csv"
    events = ",".join(["raw_syscalls:sys_enter", *(f"syscalls:sys_enter_{k}" for k in KINDS)])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(["perf", "stat", "-x,", "-o", str(out), "-e", events, "--", *cmd], capture_output=True,
                         text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed:\n{run.stdout}\n{run.stderr}")
    counts = parse_perf(out)
    counts["voluntary"] = after.ru_nvcsw - before.ru_nvcsw
    counts["involuntary"] = after.ru_nivcsw - before.ru_nivcsw
    counts["cpu_us"] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e6
    return counts, run.stdout


def callgrind(cmd: list[str], work: Path) -> tuple[float, str]:
    """User-space instructions of cmd and every process it starts (valgrind callgrind)."""
    for old in work.glob("cg.*"):
        old.unlink()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                          f"--callgrind-out-file={work}/cg.%p", *cmd], capture_output=True, text=True, env=env)
    if run.returncode:
        raise SystemExit(f"valgrind {shlex.join(cmd)} failed:\n{run.stderr[-2000:]}")
    total = 0
    for path in work.glob("cg.*"):
        for line in path.read_text().splitlines():
            if line.startswith("totals:") or line.startswith("summary:"):
                total += int(line.split()[1])
                break
    return total, run.stdout


def pgbench_transactions(out: str) -> int:
    found = re.search(r"number of transactions actually processed: (\d+)", out)
    if not found:
        raise SystemExit(f"no transaction count in pgbench's output:\n{out}")
    return int(found.group(1))


def ours_transactions(out: str) -> int:
    found = re.findall(r"^transactions (\d+) failed (\d+)$", out, re.M)
    if not found or any(int(f) for _, f in found):
        raise SystemExit(f"concurbench's workers did not all succeed:\n{out}")
    return sum(int(t) for t, _ in found)


class Sides:
    """The two commands of one cell: pgbench, and concurbench's worker processes."""

    def __init__(self, pgbench: Path, port: int, conninfo: str, script: Path, workload: str, protocol: str,
                 clients: int):
        self.pgbench, self.port, self.conninfo, self.script = pgbench, port, conninfo, script
        self.workload, self.protocol, self.clients = workload, protocol, clients
        self.jobs = min(clients, os.cpu_count() or 1)

    def pgbench_cmd(self, n: int) -> list[str]:
        bench = ["-f", str(self.script)] if self.workload == "select1" else ["-b", "tpcb-like"]
        return [str(self.pgbench), "-n", *bench, "-M", self.protocol, "-c", str(self.clients), "-j", str(self.jobs),
                "-t", str(n), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "concurbench"]

    def ours_cmd(self, n: int, src: str | None = None) -> list[str]:
        """concurbench's workers; with `src`, those of another checkout's src/ (its own built loop)."""
        # the sessions dealt round-robin over the workers, as LoadGenerator deals them
        workers = []
        env = ["env", f"PYTHONPATH={src}"] if src else []
        for w in range(self.jobs):
            indexes = ",".join(str(i) for i in range(w, self.clients, self.jobs))
            workers.append(shlex.join([*env, sys.executable, __file__, "--drive", self.conninfo, self.workload,
                                       self.protocol, indexes, str(self.clients), str(n)]))
        return ["sh", "-c", " & ".join(workers) + " & wait"]


def per_transaction(run, make_cmd, transactions_of, n: int, work: Path):
    """(counts per transaction, transactions of the larger run): the 4n run less the n run."""
    low, low_out = run(make_cmd(n), work)
    high, high_out = run(make_cmd(4 * n), work)
    done = transactions_of(high_out) - transactions_of(low_out)
    if isinstance(low, dict):
        return {k: (high[k] - low.get(k, 0)) / done for k in high}, transactions_of(high_out)
    return (high - low) / done, transactions_of(high_out)


def columns(c: dict[str, float]) -> dict[str, float]:
    """Per-transaction counts grouped as the table shows them."""
    grouped = {"send": c["sendto"], "recv": c["recvfrom"],
               "wait": c["epoll_wait"] + c["epoll_pwait"] + c["poll"] + c["ppoll"],
               "epoll_ctl": c["epoll_ctl"], "futex": c["futex"]}
    grouped["other"] = c["raw_syscalls"] - sum(grouped.values())
    grouped["all"] = c["raw_syscalls"]
    grouped["voluntary"], grouped["involuntary"], grouped["cpu_us"] = c["voluntary"], c["involuntary"], c["cpu_us"]
    return grouped


COLUMNS = (*SHOWN, "all", "voluntary", "involuntary", "cpu_us")


def format_row(cell: str, row: dict[str, float], instructions: bool) -> str:
    text = f"{cell:>31} " + " ".join(f"{row[k]:>9.3f}" if k != "cpu_us" else f"{row[k]:>9.1f}" for k in COLUMNS)
    return text + (f" {row['instr']:>9,.0f}" if instructions else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--protocols", default="simple,prepared")
    parser.add_argument("--workloads", default="select1,tpcb")
    parser.add_argument("--transactions", type=int, default=16000,
                        help="select1 transactions of the shorter run, all clients together (tpcb: a quarter)")
    parser.add_argument("--tpcb", default="prepared:8", help="the one tpcb cell, PROTOCOL:CLIENTS")
    parser.add_argument("--baseline", help="also measure the workers of another checkout (its extension built), "
                                           "in the same rounds, as the side 'baseline'")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each side per cell (median shown)")
    parser.add_argument("--instructions", type=int, default=0,
                        help="also count instructions with callgrind: transactions of the shorter run (0: skip)")
    parser.add_argument("--drive", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        conninfo, workload, protocol, indexes, clients, n = args.drive
        drive(conninfo, workload, protocol, [int(i) for i in indexes.split(",")], int(clients), int(n))
        return
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed (on Debian: apt-get install linux-perf)")
    cells = []
    for workload in args.workloads.split(","):
        if workload == "select1":
            cells += [(workload, p, int(c)) for p in args.protocols.split(",") for c in args.clients.split(",")]
        elif workload == "tpcb":
            protocol, clients = args.tpcb.split(":")
            cells.append((workload, protocol, int(clients)))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    load = os.getloadavg()
    print(f"{cpu}, {os.cpu_count()} CPUs, load average {load[0]:.2f} at the start")
    pgbench = wheel_install() / "bin" / "pgbench"
    server = EmbeddedPostgres({"max_connections": str(max(c for _, _, c in cells) + 20), "synchronous_commit": "off"})
    connection = server.start()
    try:
        target = ["-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "concurbench"]
        subprocess.run([str(pgbench), "-i", "-q", "-s", "1", *target], check=True, capture_output=True)
        print(f"PostgreSQL {server.version()}, {pgbench}; per transaction, client processes only, "
              f"runs of N and 4N transactions (N = {args.transactions} for select1, a quarter for tpcb)")
        header = f"{'cell':>31} " + " ".join(f"{k:>9}" for k in (*COLUMNS, *(("instr",) if args.instructions else ())))
        print(header, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            os.chmod(work, 0o755)
            script = work / "select1.sql"
            script.write_text("SELECT 1;\n")
            medians = []
            for workload, protocol, clients in cells:
                sides = Sides(pgbench, server.port, connection.conninfo, script, workload, protocol, clients)
                total = args.transactions if workload == "select1" else args.transactions // 4
                n = max(1, total // clients)
                order = [("pgbench", sides.pgbench_cmd, pgbench_transactions),
                         ("concurbench", sides.ours_cmd, ours_transactions)]
                if args.baseline:
                    order.append(("baseline", lambda n: sides.ours_cmd(n, str(Path(args.baseline) / "src")),
                                  ours_transactions))
                rows: dict[str, list[dict[str, float]]] = {side: [] for side, _, _ in order}
                for repeat in range(args.repeat):
                    for side, make, of in (order if repeat % 2 == 0 else order[::-1]):
                        counts, done = per_transaction(counted, make, of, n, work)
                        row = columns(counts)
                        if args.instructions:
                            m = max(1, args.instructions // clients)
                            row["instr"], _ = per_transaction(callgrind, make, of, m, work)
                        rows[side].append(row)
                        print(format_row(f"{workload} {protocol} {clients} {side}", row, args.instructions),
                              flush=True)
                for side, got in rows.items():
                    median = {k: statistics.median(r[k] for r in got) for k in got[0]}
                    medians.append(format_row(f"{workload} {protocol} {clients} {side}", median, args.instructions))
            print(f"\nmedians over {args.repeat} repetitions (each side's order alternating)")
            print(header)
            print("\n".join(medians))
    finally:
        server.stop()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} at the end")


if __name__ == "__main__":
    main()
