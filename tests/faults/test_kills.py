"""Killed backends and killed processes: each is reported, none hangs the run, what was measured stays.

Documented outcomes (docs/reliability.md): a terminated backend of any kind is reconnected or reported
and the run ends 0; a flood of refused connections stops the run early, exit 1; a SIGKILLed harness
leaves a run directory that reads as `killed` with what finished, and a server that `gc` stops (a killed
shard merges with what it finished); a SIGKILLed worker process ends the window, and the variant run
reports the missing worker and is incomplete (exit 1).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from concurbench.cli.exits import EXIT_RUN_FAILED, EXIT_USAGE
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


SHARDED = """name: killed-shard
engine: postgres
duration: 0.3s
warmup: 0s
variants:
  a:
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
  b:
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
  c:
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
  long:
    duration: 120s
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
"""


def test_a_sigkilled_shard_is_refused_while_it_runs_and_merged_with_what_it_finished(server, launch, tmp_path):
    """Shard 2/2 (variants c and long) is SIGKILLed during `long`: its directory says which shard it is and
    what finished, so `merge` refuses it while it runs and afterwards joins shard 1's runs and c, with exit 1."""
    first = launch(SHARDED, *dsn(server), "--processes", "1", "--shard", "1/2")
    assert first.finish() == 0, first.stderr[-2000:]
    second = launch(SHARDED, *dsn(server), "--processes", "1", "--shard", "2/2")
    second.wait_for(r"plan: 2 variant runs \(shard 2/2 of a run of 4\)")
    second.wait_for(r"  long: .* tps now")
    killed_dir = next(d for d in (tmp_path / "runs").iterdir() if d != first.run_dir)

    def merge(*dirs: Path, out: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "concurbench.cli.main", "merge", *map(str, dirs), "-o",
                               str(tmp_path / out)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env=launch.env)

    early = merge(first.run_dir, killed_dir, out="early")
    assert early.returncode == EXIT_USAGE and f"{killed_dir}: shard 2/2 is still running (pid {second.proc.pid})" \
        in early.stderr, early.stderr
    second.proc.send_signal(signal.SIGKILL)
    second.proc.wait(timeout=10)
    merged = merge(first.run_dir, killed_dir, out="merged")
    assert merged.returncode == EXIT_RUN_FAILED, merged.stderr
    assert "shard 2/2" in merged.stderr and "ended killed and lacks 1 of its 2 combinations: long" in merged.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert [r["variant"] for r in summary["results"]] == ["a", "b", "c"]
    assert json.loads((tmp_path / "merged" / "manifest.json").read_text())["status"] == "killed"
    server.assert_nothing_left()


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
    """A dead worker ends the window at once (a fixed-count variant does not wait for its sessions): the
    variant run says which worker sent no results and how it ended, keeps the others' figures, and is
    `incomplete`, so the run exits 1."""
    run = launch(scenario, *dsn(server), "--processes", "2")
    run.wait_for(r"  v: .* tps now")
    workers = wait_until(lambda: run.workers() if len(run.workers()) == 2 else None, 10)
    assert workers, "two worker processes"
    for worker in workers[:1] if which == "one" else workers:
        os.kill(worker.pid, signal.SIGKILL)
    code = run.finish(timeout=90)
    result = run.summary()["results"][0]
    assert code == EXIT_RUN_FAILED and result["status"] == "incomplete", run.stderr[-2000:]
    lost = 1 if which == "one" else 2
    said = [m for m in result["messages"] if re.search(r"worker process \d of 2 .* exited \(killed by SIGKILL\) "
                                                       r"without sending its results", m)]
    assert len(said) == lost and result["workers"] == {"started": 2, "reported": 2 - lost}, result["messages"]
    transactions = result["pools"]["p"]["metrics"]["transactions"]
    assert transactions > 0 if which == "one" else transactions == 0  # the other worker's figures are kept
    server.assert_nothing_left()
