"""Fixtures of the fault-injection tier: a server for the dsn runs, and runs tagged and checked for leftovers."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import uuid
from pathlib import Path

import psutil
import pytest

from concurbench.provisioners.embedded import EmbeddedPostgres
from faultkit import ROOT, Run, Server, wait_until
from processes import tagged


@pytest.fixture(scope="module")
def server():
    pg = EmbeddedPostgres({"max_connections": "40"})
    connection = pg.start()
    try:
        yield Server(pg, connection.conninfo)
    finally:
        if pg._postmaster_pid():  # a test that stopped it and failed before waking it
            os.kill(pg._postmaster_pid(), signal.SIGCONT)
        pg.stop()


@pytest.fixture()
def launch(tmp_path):
    """Start runs tagged for this test; at the end, check that nothing of theirs is left running."""
    tag = f"faults-{uuid.uuid4().hex}"
    # a home the server's unprivileged user can traverse (tmp_path's parents are private to root)
    home = Path(tempfile.mkdtemp(prefix="concurbench-faults-", dir="/tmp"))
    home.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "CONCURBENCH_TEST_TAG": tag, "CONCURBENCH_HOME": str(home), "TMPDIR": str(tmp_path / "tmp")}
    runs: list[Run] = []

    def start(scenario: str, *args: str, name: str = "s") -> Run:
        path = tmp_path / f"{name}.yaml"
        path.write_text(scenario)
        run = Run([str(path), "--out", str(tmp_path / "runs"), *args], ROOT, env)
        runs.append(run)
        return run

    start.env, start.tag, start.home = env, tag, home
    yield start
    for run in runs:
        if run.proc.poll() is None:
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait(timeout=10)
    left = wait_until(lambda: not tagged(tag), 15) or tagged(tag)
    shutil.rmtree(home, ignore_errors=True)
    assert left is True, f"processes left behind: {[psutil.Process(p).cmdline() for p in left if psutil.pid_exists(p)]}"

