"""`concurbench gc` after a killed run: the server outlives its owner until gc stops it and removes its directory.

The run gets a home of its own (CONCURBENCH_HOME) so gc sees only this test's server, never those of
other runs on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

SCENARIO = ("name: gc-victim\nengine: postgres\nsetup: CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)\n"
            "duration: 300s\nwarmup: 0s\nvariants:\n  v:\n    pools:\n      p: {clients: 2, transaction: [SELECT 1]}\n")


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a stopped postmaster may linger unreaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture()
def home():
    """A home every user can traverse (the server runs as an unprivileged user when we are root)."""
    path = Path(tempfile.mkdtemp(prefix="concurbench-gc-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def concurbench(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "CONCURBENCH_HOME": str(home)})


def test_gc_stops_the_server_of_a_killed_run(tmp_path, home):
    scenario = tmp_path / "victim.yaml"
    scenario.write_text(SCENARIO)
    log = open(tmp_path / "run.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(scenario), "--processes", "1",
                             "--out", str(tmp_path / "runs")], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True,
                            env={**os.environ, "CONCURBENCH_HOME": str(home)})
    children: list[psutil.Process] = []
    postmaster = None
    try:
        def server_up() -> bool:
            for state_file in (home / "servers").glob("*/state.json"):
                try:
                    state = json.loads(state_file.read_text())
                except (OSError, ValueError):
                    continue
                if state.get("postmaster_pid"):
                    return True
            return False

        assert wait_until(server_up, 90), (tmp_path / "run.log").read_text()[-2000:]
        state_file = next((home / "servers").glob("*/state.json"))
        state = json.loads(state_file.read_text())
        postmaster = state["postmaster_pid"]
        server_dir = state_file.parent
        assert state["owner_pid"] == proc.pid

        # while the run is going, gc leaves its server alone
        result = concurbench(home, "gc")
        assert result.returncode == 0, result.stderr
        assert f"left alone: server {server_dir.name}" in result.stdout
        assert alive(postmaster) and server_dir.is_dir()

        assert wait_until(lambda: len(psutil.Process(proc.pid).children()) > 0, 30), "the run started no worker"
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGKILL)  # the concurbench process only, as an OOM kill would
        proc.wait(timeout=10)
        assert alive(postmaster), "the server should outlive the killed run"  # and still does after the dry run

        result = concurbench(home, "gc", "--dry-run")
        assert result.returncode == 0, result.stderr
        assert f"would remove: server {server_dir.name}" in result.stdout
        assert "owner pid" in result.stdout and "gone" in result.stdout
        assert alive(postmaster) and server_dir.is_dir(), "a dry run acts on nothing"

        result = concurbench(home, "gc")
        assert result.returncode == 0, result.stderr
        assert f"removed: server {server_dir.name}" in result.stdout
        run_dir = next((tmp_path / "runs").iterdir())  # kept, and gc says what became of its run
        assert f"killed: run {run_dir}: pid {proc.pid} ended without finishing the run; 0 of 1 variant runs " \
               f"finished" in result.stdout
        assert wait_until(lambda: not alive(postmaster), 15), "gc should stop the postmaster"
        assert not server_dir.exists()
        assert wait_until(lambda: not any(alive(c.pid) for c in children), 10), "the run's workers should be gone"

        result = concurbench(home, "gc")  # containers of the machine's Docker engine may still be listed
        assert result.returncode == 0 and ": server " not in result.stdout, result.stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for child in children:  # worker processes of the killed run (gc ends them too; this is a backstop)
            try:
                child.kill()
            except psutil.Error:
                pass
        if postmaster and alive(postmaster):
            os.kill(postmaster, signal.SIGKILL)
        log.close()
