"""What a variant run pays to start its worker processes: forked from the pools' fork server (as runs
start them) against spawned (a new interpreter each, as before), interleaved, in one process.

Each round runs the same small LoadGenerator (2 clients of SELECT 1, a 0.2 s window, 2 worker
processes) once with each start method, in turns whose order alternates; the first run of the fork
server, which starts the fork server itself, is reported apart. Prints the median wall time of a run
with each method and their ratio, with the CPU model.

    python benchmarks/worker_start.py [--rounds 8] [--window 0.2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time

from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.results.store import cpu_model
from concurbench.scenario.model import Pool, Statement
from concurbench.workload import pool as pools


def timed_run(conninfo: str, window: float, method: str) -> float:
    forked = pools.workers_context
    if method == "spawn":
        pools.workers_context = lambda: mp.get_context("spawn")
    try:
        started = time.perf_counter()
        result = pools.LoadGenerator(conninfo, [Pool("p", 2, (Statement("one", "SELECT 1"),))], warmup=0,
                                     duration=window, processes=2).run()
        took = time.perf_counter() - started
    finally:
        pools.workers_context = forked
    if result.messages or not result.pools["p"].transactions:
        raise SystemExit(f"the {method} run failed: {result.messages}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--window", type=float, default=0.2)
    args = parser.parse_args()
    server = EmbeddedPostgres({"max_connections": "50"})
    connection = server.start()
    try:
        first = timed_run(connection.conninfo, args.window, "forkserver")  # starts the fork server
        times: dict[str, list[float]] = {"spawn": [], "forkserver": []}
        for i in range(args.rounds):
            for method in (("spawn", "forkserver") if i % 2 == 0 else ("forkserver", "spawn")):
                times[method].append(timed_run(connection.conninfo, args.window, method))
    finally:
        server.stop()
    print(f"CPU: {cpu_model() or 'unknown'}; {args.rounds} rounds, interleaved; a run of 2 clients, {args.window} s window, "
          f"2 worker processes")
    print(f"first run with the fork server (starting it): {first:.2f} s")
    for method, values in times.items():
        print(f"{method:<11} median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")
    ratio = statistics.median(times["forkserver"]) / statistics.median(times["spawn"])
    saved = statistics.median(times["spawn"]) - statistics.median(times["forkserver"])
    print(f"forked / spawned: {ratio:.2f}x; {saved:.2f} s less a variant run")


if __name__ == "__main__":
    main()
