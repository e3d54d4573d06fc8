"""The end of a window under row-lock contention, on the embedded server: every worker reports within
the bound, no transaction stays open, and a worker that dies or stops answering makes its variant
run incomplete (with a message saying which), quickly.

Two tests make PostgreSQL drop a cancel, as it does when the cancel reaches a backend that has not
yet read the statement: the backend is stopped (SIGSTOP) while the statement is sent and cancelled,
and resumed once the cancel's SIGINT is pending on it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
import pytest

from concurbench.results.model import RunStatus, Workers
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario
from concurbench.scenario.model import Pool, Statement
from concurbench.scenario.distributions import parse_distribution
from concurbench.workload.pool import REPORT_GRACE_S, LoadGenerator
from concurbench.workload.session import RUNNING, Session
from concurbench.workload.window_end import END_BOUND_S, end_sessions

pytestmark = pytest.mark.integration

BOUND_S = END_BOUND_S + REPORT_GRACE_S
UPDATE = "UPDATE hot SET v = v + 1 WHERE id = :id"


@pytest.fixture()
def hot(admin):
    admin.execute("DROP TABLE IF EXISTS hot")
    admin.execute("CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL)")
    admin.execute("INSERT INTO hot SELECT g, 0 FROM generate_series(1, 10) g")
    yield
    admin.execute("DROP TABLE IF EXISTS hot")


def hot_pool(name: str, clients: int, ids: str) -> Pool:
    return Pool(name, clients, (Statement("update", UPDATE),), params=(("id", parse_distribution(ids)),), atomic=True)


@contextmanager
def holding(conninfo: str, row: int):
    """A background transaction that holds a row lock until the block ends."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("UPDATE hot SET v = v WHERE id = %s", (row,))
        try:
            yield conn
        finally:
            conn.execute("ROLLBACK")


def poll(query, deadline_s: float = 10.0, until=lambda value: value == 0):
    """The query's value once `until` holds, or its last value at the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = query()
        if until(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def open_transactions(admin, app: str) -> int:
    return poll(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                                      "AND xact_start IS NOT NULL", (app,)).fetchone()[0])


class WindowEnd:
    """A window listener that keeps the planned end, in perf_counter nanoseconds."""

    planned_ns = 0

    def window_set(self, measure_from_ns, planned_end_ns):
        self.planned_ns = planned_end_ns

    def measurement_ended(self, end_ns):
        pass


def test_window_ends_while_sessions_wait_on_row_locks(server, admin, hot, loop):
    """Row 1 is held by a background transaction; the pool's sessions wait on it and on each other
    (with each event loop: the compiled one hands its sessions over mid-statement)."""
    conninfo = server[1].conninfo
    clock = WindowEnd()
    with holding(conninfo, 1):
        load = LoadGenerator(conninfo, [hot_pool("waiters", 12, "uniform(1, 3)")], warmup=0.2, duration=1.0,
                             processes=2, listeners=[clock], tick=0.05, loop=loop)
        waiting = []
        watcher = threading.Thread(target=lambda: waiting.append(poll(
            lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                  "'concurbench:waiters' AND wait_event_type = 'Lock'").fetchone()[0],
            until=lambda n: n >= 4)))
        watcher.start()
        result = load.run()
        returned_ns = time.perf_counter_ns()
        watcher.join()
        assert waiting[0] >= 4  # sessions were stuck on row locks during the window
        assert open_transactions(admin, "concurbench:waiters") == 0  # while the holder still holds row 1
    assert result.workers == 2 and result.reported == 2 and result.complete and result.loop == loop
    assert (returned_ns - clock.planned_ns) / 1e9 < BOUND_S
    assert not [m for m in result.messages if "had not ended" in m]


def _sigint_pending(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as fh:
        fields = dict(line.split(":", 1) for line in fh if ":" in line)
    return any(int(fields[k].strip(), 16) & (1 << (signal.SIGINT - 1)) for k in ("ShdPnd", "SigPnd"))


@contextmanager
def cancel_dropped(session: Session):
    """The session's backend is stopped; it resumes once a cancel (SIGINT) is pending on it, and then
    drops the cancel, because it has not read its statement yet."""
    pid = session.conn.info.backend_pid
    os.kill(pid, signal.SIGSTOP)
    resumer = threading.Thread(target=lambda: (poll(lambda: _sigint_pending(pid), until=bool),
                                               os.kill(pid, signal.SIGCONT)))
    try:
        yield resumer
    finally:
        if resumer.is_alive():
            resumer.join()
        with suppress(ProcessLookupError):  # the session's end closed the connection: the backend is gone
            os.kill(pid, signal.SIGCONT)


def _session(conninfo: str, index: int, counters) -> Session:
    pool = Pool("ending", 2, (Statement("update", UPDATE),), params=(("id", parse_distribution(1)),), atomic=True)
    session = Session(conninfo, pool, index, 1, counters, index)
    session.connect()
    return session


def _step(session: Session, index: int, row: int | None) -> None:
    """Send statement `index` (BEGIN, UPDATE, COMMIT) and wait for its answer."""
    session.channel.send(index, {"id": row})
    poll(session.channel.receive, until=lambda outcome: outcome is not None)


def _ended_within(sessions: list[Session], limit_s: float, rescue) -> tuple[float, list[str]]:
    """end_sessions in a thread; `rescue` frees the server if it has not returned by the limit."""
    out: list = []
    started = time.monotonic()
    ender = threading.Thread(target=lambda: out.append(end_sessions(sessions)))
    ender.start()
    ender.join(limit_s)
    took = time.monotonic() - started
    if ender.is_alive():
        rescue()
        ender.join()
    return took, out[0] if out else []


def test_a_dropped_cancel_is_sent_again(server, admin, hot):
    """A statement whose cancel was dropped waits on a row held outside the worker: it is cancelled again."""
    conninfo = server[1].conninfo
    counters = [0, 0]
    a = _session(conninfo, 0, counters)
    with holding(conninfo, 1) as holder:
        _step(a, 0, None)
        _step(a, 1, 2)  # prepared now, so the next UPDATE goes out as one message
        with cancel_dropped(a) as resumer:
            a.channel.send(1, {"id": 1})
            a.state = RUNNING
            resumer.start()
            took, problems = _ended_within([a], 3 * END_BOUND_S, lambda: holder.execute("ROLLBACK"))
        assert took < END_BOUND_S and problems == []
        assert open_transactions(admin, "concurbench:ending") == 0


def test_a_dropped_cancel_behind_a_lock_of_the_same_worker(server, admin, hot):
    """Session B holds row 1 (its UPDATE answered, not yet read); A's UPDATE of row 1 lost its cancel.
    Ended one by one, A first, A waited for B's lock for ever (the stall of issue 15); ended together, it does not."""
    conninfo = server[1].conninfo
    counters = [0, 0]
    a, b = _session(conninfo, 0, counters), _session(conninfo, 1, counters)
    for session, row in ((a, 2), (b, 3)):
        _step(session, 0, None)
        _step(session, 1, row)
    b.channel.send(1, {"id": 1})
    b.state = RUNNING
    poll(lambda: admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s",
                               (b.conn.info.backend_pid,)).fetchone()[0], until=lambda s: s == "idle in transaction")
    b_pid = b.conn.info.backend_pid
    with cancel_dropped(a) as resumer:
        a.channel.send(1, {"id": 1})
        a.state = RUNNING
        resumer.start()
        took, problems = _ended_within([a, b], 3 * END_BOUND_S,
                                       lambda: admin.execute("SELECT pg_terminate_backend(%s)", (b_pid,)))
    assert took < END_BOUND_S and problems == []
    assert open_transactions(admin, "concurbench:ending") == 0


def _worker_pids(deadline_s: float = 30.0) -> list[int]:
    children = poll(lambda: [p for p in multiprocessing.active_children() if p.name.startswith("concurbench-worker")],
                    deadline_s, until=lambda found: len(found) >= 2)
    return [p.pid for p in sorted(children, key=lambda p: p.name)]


def _when_running(admin, app: str, then) -> threading.Thread:
    """A thread that waits until the pool's sessions are all connected and working, then acts on the workers."""

    def act():
        pids = _worker_pids()
        poll(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                                   "AND state <> 'idle'", (app,)).fetchone()[0], until=lambda n: n >= 2)
        then(pids)

    thread = threading.Thread(target=act)
    thread.start()
    return thread


def test_a_worker_that_stops_answering_is_killed_at_the_bound(server, admin, hot):
    """A worker stopped (SIGSTOP) mid-window never reports: the parent kills it at the bound, not after 120 s."""
    conninfo = server[1].conninfo
    clock = WindowEnd()
    load = LoadGenerator(conninfo, [hot_pool("frozen", 4, "uniform(1, 10)")], warmup=0.2, duration=1.5, processes=2,
                         listeners=[clock], tick=0.05)
    stopper = _when_running(admin, "concurbench:frozen", lambda pids: os.kill(pids[1], signal.SIGSTOP))
    result = load.run()
    returned_ns = time.perf_counter_ns()
    stopper.join()
    assert result.workers == 2 and result.reported == 1 and not result.complete
    assert any("worker process 2 of 2 (2 sessions of pool frozen) sent no results within" in m
               and "was killed" in m for m in result.messages), result.messages
    took = (returned_ns - clock.planned_ns) / 1e9
    assert BOUND_S - 1 < took < BOUND_S + 10
    assert open_transactions(admin, "concurbench:frozen") == 0


SCENARIO = """
name: killed-worker
engine: postgres
setup:
  - |
    DROP TABLE IF EXISTS hot;
    CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL);
    INSERT INTO hot SELECT g, 0 FROM generate_series(1, 10) g;
teardown:
  - DROP TABLE IF EXISTS hot
duration: 60s
warmup: 0.2s
variants:
  victim:
    pools:
      writers:
        clients: 4
        atomic: true
        params: {id: "uniform(1, 10)"}
        transaction:
          - {name: update, sql: "UPDATE hot SET v = v + 1 WHERE id = :id"}
expect:
  - claim: the writers get something done
    check: "victim: tps > 0"
"""


def test_a_killed_worker_makes_the_variant_run_incomplete(server, admin, running_server, tmp_path):
    """SIGKILL one of two workers a moment into a 60 s window: the run ends at once, incomplete, and says so."""
    path = tmp_path / "killed-worker.yaml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    killer = _when_running(admin, "concurbench:writers", lambda pids: os.kill(pids[0], signal.SIGKILL))
    started = time.monotonic()
    outcome = Runner(scenario, running_server(server[1]), out_dir=tmp_path / "runs", processes=2).run()
    took = time.monotonic() - started
    killer.join()
    assert took < 30  # the window was 60 s: a dead worker ends it
    assert outcome.status == "incomplete"
    assert "victim" in outcome.error.message and "1 of 2 worker processes reported" in outcome.error.message
    result = outcome.results[0]
    assert result.status is RunStatus.INCOMPLETE and result.workers == Workers(started=2, reported=1)
    assert any("worker process 1 of 2 (2 sessions of pool writers) exited (killed by SIGKILL) without sending "
               "its results" in m for m in result.messages), result.messages
    assert outcome.claims and all(c.verdict == "not evaluated" for c in outcome.claims)
    reason = outcome.claims[0].reason
    assert reason.startswith("not evaluated: victim (") and ") is incomplete: worker process 1 of 2" in reason
    run_dir = Path(outcome.run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert manifest["status"] == "incomplete"
    assert summary["results"][0]["status"] == "incomplete"
    rows = (run_dir / "summary.csv").read_text().splitlines()
    status_at = rows[0].split(",").index("status")
    assert [row.split(",")[status_at] for row in rows[1:]] == ["incomplete"]
    assert open_transactions(admin, "concurbench:writers") == 0
