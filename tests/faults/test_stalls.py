"""A server that stops answering for a while, and a run directory on a disk that fills up.

A stopped postmaster (SIGSTOP) takes no new connection while its backends go on; stopping every
process of the server freezes the statements in flight too. Either way the run waits for the server
(3 seconds here), then ends as documented: exit 0, its figures kept, nothing left behind.

A full disk for the run directory (a tmpfs of a few hundred kB that the test fills; it needs root to
mount one): the run's results go to the fallback directory, and the run exits 1 naming both.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time

import psutil
import pytest

from concurbench.cli.exits import EXIT_RUN_FAILED, EXIT_USAGE
from concurbench.results.store import load_run
from faultkit import dsn

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]
STOPPED_S = 3.0  # how long the server does not answer: the fault itself, not a wait for anything


TWO = """name: stall
engine: postgres
duration: 3s
warmup: 0s
samplers: [wait_events]
variants:
  first:
    pools:
      p: {clients: 3, transaction: [SELECT 1]}
  second:
    duration: 1s
    pools:
      p: {clients: 3, transaction: [SELECT 1]}
"""


def stopped(pids: list[int]):
    """SIGSTOP these processes for STOPPED_S, then SIGCONT (also when the test fails in between)."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(STOPPED_S)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def ended_ok(run, server) -> list[dict]:
    assert run.finish(timeout=90) == 0, run.stderr[-2000:]
    results = run.summary()["results"]
    assert [(r["variant"], r["status"]) for r in results] == [("first", "ok"), ("second", "ok")]
    assert all(r["pools"]["p"]["metrics"]["transactions"] > 0 for r in results)
    server.assert_nothing_left()
    return results


def test_a_stopped_postmaster_while_sessions_must_reconnect(server, launch):
    run = launch(TWO, *dsn(server))
    run.wait_for(r"  first: .* tps now")
    sessions = [pid for (pid,) in server.query("SELECT pid FROM pg_stat_activity WHERE application_name = "
                                               "'concurbench:p'")]
    os.kill(server.postmaster, signal.SIGSTOP)
    try:
        for pid in sessions:  # terminated (SIGTERM, as pg_terminate_backend does): their reconnects now wait
            os.kill(pid, signal.SIGTERM)
    finally:
        stopped([])  # the postmaster stays stopped for STOPPED_S
        os.kill(server.postmaster, signal.SIGCONT)
    results = ended_ok(run, server)
    assert results[0]["pools"]["p"]["metrics"]["errors"]["connection"] >= len(sessions)


def test_a_stopped_postmaster_while_the_next_variant_connects(server, launch):
    run = launch(TWO, *dsn(server))
    run.wait_for(r"  done first")
    stopped([server.postmaster])
    ended_ok(run, server)


def test_every_server_process_stopped_during_the_window(server, launch):
    run = launch(TWO, *dsn(server))
    run.wait_for(r"  first: .* tps now")
    postmaster = psutil.Process(server.postmaster)
    stopped([postmaster.pid, *(p.pid for p in postmaster.children())])
    results = ended_ok(run, server)
    assert results[0]["elapsed_s"] == pytest.approx(3.0, abs=0.5)


@pytest.fixture()
def small_disk(tmp_path):
    """A tmpfs of 512 kB for the run directory."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system for the run directory needs root")
    path = tmp_path / "disk"
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder) -> None:
    """Write into `folder` until its file system is full (in big blocks, then in small ones)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_full_disk_sends_the_results_to_the_fallback_directory(server, launch, small_disk, tmp_path):
    # sessions that sleep in every transaction are seen active by every wait_events sample; with SELECT 1 a
    # session is idle between statements, and on a loaded machine a 3 s window's samples could catch none
    # active: no rows to keep, and nothing for the check that the samples were kept
    sleeping = TWO.replace("transaction: [SELECT 1]", "transaction: [SELECT pg_sleep(0.005)]")
    run = launch(sleeping, *dsn(server), "--out", str(small_disk / "runs"))
    run.wait_for(r"  first: .* tps now")
    fill(small_disk)
    assert run.finish(timeout=90) == EXIT_RUN_FAILED, run.stderr[-2000:]
    fallback = tmp_path / "tmp" / "concurbench-unsaved" / run.run_dir.name
    assert run.run_dir == fallback, "the last line names where the results are"
    assert "No space left on device" in run.stderr
    assert f"the results were written to {fallback} instead" in run.stderr
    assert "warning: finished variant runs cannot be kept until the end" in run.stderr
    kept = load_run(fallback)
    assert kept.status == "ok" and [r.variant for r in kept.variant_runs] == ["first", "second"]
    assert kept.variant_runs[0].samples["wait_events"], "samples too"
    server.assert_nothing_left()


def test_a_full_disk_before_the_start_is_a_usage_error_before_any_server(server, launch, small_disk):
    (small_disk / "runs").mkdir()
    fill(small_disk)
    run = launch(TWO, *dsn(server), "--out", str(small_disk / "runs"))
    assert run.finish(timeout=60) == EXIT_USAGE, run.stderr[-2000:]
    assert "cannot write the run directory: No space left on device" in run.stderr
    assert "connecting" not in run.stderr
    assert not list((small_disk / "runs").iterdir()), "the run directory it could not write is removed"
