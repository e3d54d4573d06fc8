"""The load generator's own instructions per transaction, counted by valgrind: pgbench beside
concurbench's compiled and pure Python event loops, one client, on one embedded PostgreSQL 18.

Instruction counts do not depend on what else the machine is doing, so this measures the harness's
cost per transaction where timings on a shared machine cannot. Each side runs twice under
`valgrind --tool=callgrind` (user-space instructions of the client process only; the server and the
kernel are not counted), with N and 4N transactions; the difference over 3N is the cost of one
transaction without start-up. The two workloads are those of driver_overhead.py: `SELECT 1` and
pgbench's TPC-B-like transaction (tables from `pgbench -i -s 1`), each with the simple and the
prepared protocol. The concurbench side runs one session in the worker loop itself (pool._loop or
pool._compiled_loop), in this script's process, so the count holds only the loop's work.

    python benchmarks/instructions_per_transaction.py [--transactions 500] [--loops compiled,python]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from concurbench.engines import postgres as pg
from concurbench.provisioners.embedded import EmbeddedPostgres, wheel_install
from concurbench.workload import fastloop
from concurbench.workload import pool as pools
from concurbench.workload.session import FAR_FUTURE, Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_overhead import select1_pool, tpcb_pool  # noqa: E402 - the same pools as the timed benchmark


def drive(conninfo: str, loop: str, transactions: int, protocol: str, workload: str) -> None:
    """Run one session for a fixed number of transactions in this process (under valgrind)."""
    pool = select1_pool(1, protocol) if workload == "select1" else tpcb_pool(1, protocol, 1)
    drive_pool(conninfo, pool.__class__(**{**pool.__dict__, "transactions": transactions}), loop)


def drive_pool(conninfo: str, pool, loop: str) -> None:
    """One session of `pool` (its `transactions` set) in this process's own worker loop, to its last transaction."""
    counters, status, finished = array("q", [0]), array("b", [0]), array("q", [0])
    session = Session(conninfo, pool, 0, 1, counters, 0, pg)
    session.connect()
    now = time.perf_counter_ns()
    window = array("q", [now, now, FAR_FUTURE])
    (pools._compiled_loop if loop == "compiled" else pools._loop)([session], window, status, finished)
    session.close()
    done = session.settle_stats()
    if done.transactions != pool.transactions or done.failed:
        raise SystemExit(f"{done.transactions} transactions, {done.failed} failed")


def instructions(cmd: list[str], out: Path) -> int:
    # no idle BLAS thread spinning under valgrind; one string hash seed, so that start-up (imports, dict
    # probes) takes the same instructions in the N and the 4N run and cancels out of the difference
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd], check=True,
                   capture_output=True, text=True, env=env)
    for line in out.read_text().splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no instruction total in {out}")


def per_transaction(make_cmd, n: int, work: Path, tag: str) -> float:
    low = instructions(make_cmd(n), work / f"{tag}.{n}")
    high = instructions(make_cmd(4 * n), work / f"{tag}.{4 * n}")
    return (high - low) / (3 * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=500)
    parser.add_argument("--loops", default="compiled,python")
    parser.add_argument("--workloads", default="select1,tpcb")
    parser.add_argument("--protocols", default="simple,prepared")
    parser.add_argument("--drive", nargs=5, metavar=("CONNINFO", "LOOP", "N", "PROTOCOL", "WORKLOAD"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        conninfo, loop, n, protocol, workload = args.drive
        drive(conninfo, loop, int(n), protocol, workload)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (on Debian: apt-get install valgrind)")
    loops = args.loops.split(",")
    if "compiled" in loops and fastloop.unavailable("postgres"):
        raise SystemExit(f"the compiled loop cannot run: {fastloop.unavailable('postgres')}")
    pgbench = wheel_install() / "bin" / "pgbench"
    server = EmbeddedPostgres({"max_connections": "20", "synchronous_commit": "off"})
    connection = server.start()
    lines = []
    try:
        conninfo, port = connection.conninfo, server.port
        target = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "concurbench"]
        subprocess.run([str(pgbench), "-i", "-q", "-s", "1", *target], check=True, capture_output=True)
        print(f"PostgreSQL {server.version()}, pgbench {pgbench}; user-space instructions per transaction of the "
              f"client process (valgrind callgrind, {args.transactions} and {4 * args.transactions} transactions)")
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            script = work / "select1.sql"
            script.write_text("SELECT 1;\n")
            for workload in args.workloads.split(","):
                bench = ["-f", str(script)] if workload == "select1" else ["-b", "tpcb-like"]
                for protocol in args.protocols.split(","):
                    counts = {"pgbench": per_transaction(
                        lambda n: [str(pgbench), "-n", *bench, "-M", protocol, "-c", "1", "-t", str(n), *target],
                        args.transactions, work, f"pgbench-{workload}-{protocol}")}
                    for loop in loops:
                        counts[loop] = per_transaction(
                            lambda n: [sys.executable, __file__, "--drive", conninfo, loop, str(n), protocol, workload],
                            args.transactions, work, f"{loop}-{workload}-{protocol}")
                    base = counts["pgbench"]
                    line = f"instructions {workload} {protocol}: pgbench {base:,.0f}" + "".join(
                        f", {loop} {counts[loop]:,.0f} ({counts[loop] / base:.2f}x)" for loop in loops)
                    print(line, flush=True)
                    lines.append(line)
    finally:
        server.stop()
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
