"""Killed backends and killed processes: each is reported, none hangs the run, what was measured stays.

Documented outcomes (docs/reliability.md): a terminated backend of any kind is reconnected or reported
and the run ends 0; a flood of refused connections stops the run early, exit 1; a SIGKILLed harness
leaves a run directory that reads as `killed` with what finished, and a server that `gc` stops; a
SIGKILLed worker process makes the variant run report the missing worker, and the run goes on.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import psycopg
import pytest

from concurbench.cli.exits import EXIT_RUN_FAILED
from faultkit import ROOT, dsn, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


ADMIN = """name: admin-kill
engine: postgres
setup: CREATE TABLE faults_admin (id int PRIMARY KEY); INSERT INTO faults_admin VALUES (1)
teardown: DROP TABLE faults_admin
duration: 3s
warmup: 0s
variants:
  v:
    teardown: UPDATE faults_admin SET id = 1
    probes: [{name: rows, sql: SELECT count(*) AS n FROM faults_admin, when: [after, final]}]
    pools:
      p: {clients: 2, transaction: [SELECT * FROM faults_admin]}
"""


def test_a_terminated_admin_connection_is_made_again_and_the_teardown_runs(server, launch):
    run = launch(ADMIN, *dsn(server))
    run.wait_for(r"tps now")
    assert server.terminate("concurbench:admin") == ["concurbench:admin"]
    assert run.finish() == 0, run.stderr[-2000:]
    result = run.summary()["results"][0]
    assert result["status"] == "ok"
    assert "the admin connection was lost (terminating connection due to administrator command) and made again" \
        in result["messages"]
    assert result["probes"]["rows"]["final"] == [{"n": 1}]  # probes and teardown ran on the new connection
    assert server.query("SELECT to_regclass('faults_admin')") == [(None,)]  # so did the scenario's teardown
    server.assert_nothing_left()


EVERY_KIND = """name: every-kind
engine: postgres
setup: CREATE TABLE faults_every (id int PRIMARY KEY); INSERT INTO faults_every VALUES (1)
teardown: DROP TABLE faults_every
duration: 3s
warmup: 0s
samplers: [wait_events, database]
variants:
  v:
    background: [{kind: hold_transaction, isolation: repeatable read, sql: SELECT count(*) FROM faults_every}]
    pools:
      p: {clients: 3, transaction: [SELECT * FROM faults_every]}
"""


def test_every_kind_of_backend_terminated_at_once_is_reported_and_the_run_goes_on(server, launch):
    run = launch(EVERY_KIND, *dsn(server))
    run.wait_for(r"tps now")
    killed = server.terminate("concurbench:%")
    assert sorted(set(killed)) == ["concurbench:admin", "concurbench:background:hold_transaction1",
                                   "concurbench:p", "concurbench:sampler"]
    assert run.finish() == 0, run.stderr[-2000:]
    result = run.summary()["results"][0]
    pool = result["pools"]["p"]["metrics"]
    assert pool["transactions"] > 0 and pool["errors"]["connection"] >= 3  # each session lost one, then went on
    assert any("samplers: the connection was lost" in e and "made again" in e for e in result["sampler_errors"])
    # the closing reading of a snapshot sampler is taken on the new connection, after the window
    assert result["samplers"]["database"]["xact_commit"] > 0, result["samplers"]
    assert "so the transaction was not held to the end" in result["background"][0]["error"]
    assert any(m.startswith("background hold_transaction1: its connection was lost") for m in result["messages"])
    # the admin connection is next used by the scenario's teardown, after the last variant run: a warning
    assert "warning: the admin connection was lost (terminating connection due to administrator command) and made " \
        "again" in run.stderr
    assert server.query("SELECT to_regclass('faults_every')") == [(None,)]
    server.assert_nothing_left()


FLOOD = """name: flood
engine: postgres
duration: 120s
warmup: 0s
variants:
  v:
    pools:
      p: {clients: 4, transaction: [SELECT 1]}
"""


def test_a_flood_of_refused_connections_stops_the_run_early(server, launch):
    run = launch(FLOOD, *dsn(server))
    run.wait_for(r"tps now")
    hogs: list[psycopg.Connection] = []

    def take_every_slot() -> None:
        while True:
            try:
                hogs.append(psycopg.connect(server.conninfo, autocommit=True, application_name="faults:hog"))
            except psycopg.OperationalError:
                return

    try:
        take_every_slot()
        killer = hogs.pop()  # one slot for the terminations; the sessions must reconnect into a full server

        def refused() -> bool:
            killer.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
                           "'concurbench:p'")
            take_every_slot()
            return run.proc.poll() is not None
        wait_until(refused, 30)
        code = run.finish(timeout=60)
    finally:
        for hog in [*hogs, killer]:
            hog.close()
    assert code == EXIT_RUN_FAILED, run.stderr[-2000:]
    assert "stopped early: the server refused new connections (sorry, too many clients already)" in run.stderr
    result = run.summary()["results"][0]
    assert result["status"] == "failed" and result["pools"]["p"]["metrics"]["transactions"] > 0
    assert result["elapsed_s"] < 60, "stopped long before the window's end"
    assert run.manifest()["status"] == "failed"
    server.assert_nothing_left()


TWO = """name: killed-harness
engine: postgres
duration: 1s
warmup: 0s
variants:
  first:
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
  second:
    duration: 120s
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
"""


def test_a_sigkilled_harness_leaves_a_killed_run_with_what_finished(server, launch, tmp_path):
    """(That gc then stops a server the killed run started is tests/e2e/test_gc.py.)"""
    run = launch(TWO, *dsn(server), "--processes", "1")
    run.wait_for(r"  second: .* tps now")
    run.proc.send_signal(signal.SIGKILL)  # the harness only, as an OOM kill would
    run.proc.wait(timeout=10)
    run_dir = next((tmp_path / "runs").iterdir())

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=120, env=launch.env)

    listed = cli("results", str(tmp_path / "runs"))
    assert listed.returncode == 0
    assert f"killed: {run_dir}: pid {run.proc.pid} ended without finishing the run; 1 of 2 variant runs finished; " \
           f"finished: first" in listed.stdout
    report = cli("report", str(run_dir))
    assert report.returncode == 0 and "Status: killed" in report.stdout and "│ first " in report.stdout
    cleaned = cli("gc")
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"killed: run {run_dir}: pid {run.proc.pid} ended without finishing the run; 1 of 2 variant runs " \
           f"finished (first" in cleaned.stdout
    again = cli("gc")
    assert "killed: run" not in again.stdout, "gc names a killed run once"
    server.assert_nothing_left()  # the workers and the admin connection went with the harness


WORKERS = """name: killed-worker
engine: postgres
duration: 4s
warmup: 0s
variants:
  v:
    pools:
      p: {clients: 4, transaction: [SELECT 1]}
"""

FIXED = """name: killed-worker-fixed
engine: postgres
warmup: 0s
variants:
  v:
    pools:
      p: {clients: 4, transactions: 3000, transaction: [SELECT pg_sleep(0.0001)]}
"""


@pytest.mark.parametrize("scenario,which", [(WORKERS, "one"), (WORKERS, "every"), (FIXED, "one")],
                         ids=["window-one-worker", "window-every-worker", "fixed-count-one-worker"])
def test_a_sigkilled_worker_process_is_reported_and_the_run_ends(server, launch, scenario, which):
    """A fixed-count variant waits for every measured session: one whose worker is gone must not keep it waiting.

    The variant run says which worker sent no results; the run's exit code is the one its status documents
    (0 for a variant run marked ok, 1 once it is marked incomplete)."""
    run = launch(scenario, *dsn(server), "--processes", "2")
    run.wait_for(r"  v: .* tps now")
    workers = wait_until(lambda: run.workers() if len(run.workers()) == 2 else None, 10)
    assert workers, "two worker processes"
    for worker in workers[:1] if which == "one" else workers:
        os.kill(worker.pid, signal.SIGKILL)
    code = run.finish(timeout=90)
    result = run.summary()["results"][0]
    assert code == {"ok": 0, "incomplete": EXIT_RUN_FAILED}[result["status"]], run.stderr[-2000:]
    lost = 1 if which == "one" else 2
    said = [m for m in result["messages"] if re.search(r"worker process.*(sent no results|without sending)", m)]
    assert said == [f"{lost} of 2 worker processes sent no results"] or len(said) == lost, result["messages"]
    transactions = result["pools"]["p"]["metrics"]["transactions"]
    assert transactions > 0 if which == "one" else transactions == 0  # the other worker's figures are kept
    server.assert_nothing_left()
