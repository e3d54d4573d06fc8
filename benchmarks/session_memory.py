"""Memory one client session costs on each side, measured: the figures behind the resource guard.

Starts one embedded PostgreSQL and opens N load sessions in this process, as a worker process does
(concurbench's Session: a psycopg connection, its statement channel, its statistics). Each session
runs its transaction a few times, so the server backend has parsed, planned and cached what a load
session touches. Then it reads:

- the server side: the unique set size (USS: memory no other process shares) of every backend of
  those sessions, from /proc through psutil; shared buffers are not in it (they are sized once by
  shared_buffers, not per session);
- the harness side: this process's USS after the sessions connected and ran, minus before, per
  session; and the USS of a spawned worker process once it has imported what a worker imports.

    python benchmarks/session_memory.py [--sessions 100] [--rounds 20]

The guard (src/concurbench/running/guards.py) uses round figures above what this prints here.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import select
import statistics

import psutil

from concurbench.engines import postgres as pg
from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.scenario.model import Pool, Statement
from concurbench.scenario.distributions import parse_distribution
from concurbench.workload.session import Session

SETUP = ("CREATE TABLE accounts (aid int PRIMARY KEY, abalance int NOT NULL DEFAULT 0, filler char(84));"
         "INSERT INTO accounts (aid) SELECT g FROM generate_series(1, 100000) g")


def run_once(session: Session) -> None:
    """One transaction of the session, sent and read as the worker loop does, but waiting on one socket."""
    session.params = {name: draw() for name, draw in session.drawers}
    for step in range(len(session.statements)):
        session.channel.send(step, session.params)
        while True:
            select.select([session.fd], [], [], 5)
            outcome = session.channel.receive()
            if outcome is not None:
                break
        if outcome[0] is not None:
            raise RuntimeError(f"statement failed: {outcome}")


def _worker_uss(queue) -> None:
    from concurbench.engines.registry import get_engine
    from concurbench.workload import pool, session, stats  # noqa: F401 - what a worker process imports

    get_engine("postgres")
    queue.put(psutil.Process().memory_full_info().uss)


def worker_process_uss() -> int:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker_uss, args=(queue,))
    proc.start()
    uss = queue.get(timeout=60)
    proc.join()
    return uss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    server = EmbeddedPostgres({"max_connections": str(args.sessions + 20)})
    connection = server.start()
    try:
        with pg.connect(connection.conninfo) as conn:
            pg.run_script(conn, SETUP)
        pool = Pool("lockers", args.sessions, (
            Statement("lock", "SELECT aid FROM accounts WHERE aid = :aid FOR UPDATE"),
            Statement("update", "UPDATE accounts SET abalance = abalance + 1 WHERE aid = :aid")),
            params=(("aid", parse_distribution("zipfian(1, 100000, 1.1)")),), atomic=True)
        me = psutil.Process()
        gc.collect()
        before = me.memory_full_info().uss
        sessions = [Session(connection.conninfo, pool, i, 1, [0] * args.sessions, i) for i in range(args.sessions)]
        for session in sessions:
            session.connect()
        for _ in range(args.rounds):
            for session in sessions:
                run_once(session)
        gc.collect()
        harness = (me.memory_full_info().uss - before) / args.sessions
        with pg.connect(connection.conninfo) as conn:
            pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = "
                                               "'concurbench:lockers'").fetchall()]
        backend = [psutil.Process(pid).memory_full_info() for pid in pids]
        uss = [m.uss for m in backend]
        pss = [m.pss for m in backend]
        print(f"{len(sessions)} sessions, {args.rounds} transactions each, PostgreSQL {server.version()}")
        print(f"server backend USS per session: mean {statistics.mean(uss) / 2**20:.2f} MiB, "
              f"max {max(uss) / 2**20:.2f} MiB (PSS mean {statistics.mean(pss) / 2**20:.2f} MiB)")
        print(f"harness USS per session: {harness / 2**10:.0f} KiB")
        print(f"worker process USS before its sessions: {worker_process_uss() / 2**20:.1f} MiB")
        for session in sessions:
            session.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
