"""Load from many hosts (docs/distributed.md): `concurbench cluster start --local 2` on this machine (loopback only),
a scenario run through it end to end, a load host killed in the window, a host of another concurbench version
refused, and nothing left running after SIGTERM. Real processes: the engine's scheduler and workers, the embedded
server; skipped without the optional extra concurbench[cluster] (a failure when CI=true)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from needs import need_cluster
from processes import tagged

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "integration" / "scenarios" / "cluster-small.yaml"
COUNTED = SCENARIO.with_name("cluster-counted.yaml")
pytestmark = [pytest.mark.e2e, pytest.mark.cluster]

TAG = f"e2e-cluster-{uuid.uuid4().hex}"
ENV = {**os.environ, "CONCURBENCH_TEST_TAG": TAG}


@pytest.fixture(scope="module", autouse=True)
def _needs_the_extra():
    need_cluster()


def concurbench(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env=env or ENV)


class Started:
    """`concurbench cluster start --local N` as a subprocess: its address (the last line it printed), its pids."""

    def __init__(self, hosts: int, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "cluster", "start", "--local",
                                      str(hosts)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=ROOT, env=env or ENV)
        line = self.proc.stdout.readline()  # blocks until the address, or the end of output when start fails
        if not line.startswith("tcp://"):
            self.proc.kill()
            raise AssertionError(f"cluster start printed no address: {line!r} {self.proc.stderr.read()[-3000:]}")
        self.address = line.strip()

    def host_groups(self) -> dict[str, int]:
        """Each local host's name -> its process group (the worker process's pid)."""
        out = {}
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            match = re.search(r"--name (\S+)", " ".join(child.cmdline()))
            if match and "dask_worker" in " ".join(child.cmdline()):
                out[match.group(1)] = os.getpgid(child.pid)
        return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture(scope="module")
def two_hosts():
    cluster = Started(2)
    yield cluster
    cluster.stop()


def run_dir_of(result: subprocess.CompletedProcess) -> Path:
    return Path(result.stdout.strip().splitlines()[-1])


def test_a_run_on_two_load_hosts_merges_their_counts(two_hosts, tmp_path):
    result = concurbench("run", str(SCENARIO), "--cluster", two_hosts.address, "--check", "--max-repeats", "2",
                         "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = run_dir_of(result)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [h["name"] for h in manifest["load_hosts"]] == ["local-1", "local-2"]
    assert all(h["version"] == manifest["harness"]["version"] for h in manifest["load_hosts"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["claims"][0]["verdict"] == "pass"
    for variant_run in summary["results"]:
        assert variant_run["status"] == "ok"
        hosts = variant_run["hosts"]
        assert [h["host"] for h in hosts] == ["local-1", "local-2"] and [h["sessions"] for h in hosts] == [3, 3]
        writers = variant_run["pools"]["writers"]
        per_host = [h["transactions"] for h in hosts]
        assert all(n > 0 for n in per_host)
        assert writers["metrics"]["transactions"] == sum(per_host) == sum(writers["stats"]["series"]["count"])
        assert writers["metrics"]["sessions"] == 6
        assert variant_run["workers"]["started"] == variant_run["workers"]["reported"]
    assert "Load hosts" in (run_dir / "report.md").read_text()


def test_set_counts_end_a_host_that_has_only_background_sessions(two_hosts, tmp_path):
    """The second host is dealt only the background client: it runs until the first host's 200 are done."""
    result = concurbench("run", str(COUNTED), "--cluster", two_hosts.address, "--out", str(tmp_path), timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    (variant_run,) = json.loads((run_dir_of(result) / "summary.json").read_text())["results"]
    assert variant_run["status"] == "ok"
    assert [(h["host"], h["sessions"], h["status"]) for h in variant_run["hosts"]] == [("local-1", 1, "ok"),
                                                                                       ("local-2", 1, "ok")]
    assert variant_run["pools"]["writers"]["metrics"]["transactions"] == 200


def test_a_host_killed_in_the_window_leaves_a_partial_variant_run_and_no_hang(tmp_path):
    env = {**ENV, "CONCURBENCH_TEST_TAG": f"{TAG}-kill"}
    cluster = Started(2, env)
    try:
        victim = cluster.host_groups()["local-2"]
        began = time.monotonic()
        run = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(SCENARIO), "--param",
                                "seconds=4", "--cluster", cluster.address, "--out", str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        seen = []
        for line in run.stderr:  # the window is on once the load reports a count
            seen.append(line)
            if re.search(r"insert: \d", line):
                break
        time.sleep(1.0)
        os.killpg(victim, signal.SIGKILL)
        out, err = run.communicate(timeout=60)
        assert time.monotonic() - began < 60
        assert run.returncode == 1, "".join(seen) + err[-3000:]
        assert "load host local-2" in err
        summary = json.loads((Path(out.strip().splitlines()[-1]) / "summary.json").read_text())
        variant_run = summary["results"][0]
        assert variant_run["status"] == "incomplete"
        lost = {h["host"]: h for h in variant_run["hosts"]}
        assert lost["local-2"]["status"] == "lost" and "local-2" in " ".join(variant_run["messages"])
        assert lost["local-1"]["status"] == "ok" and lost["local-1"]["transactions"] > 0
        assert summary["claims"][0]["verdict"] == "not evaluated"
    finally:
        assert cluster.stop() == 0
    deadline = time.monotonic() + 10
    while tagged(env["CONCURBENCH_TEST_TAG"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not tagged(env["CONCURBENCH_TEST_TAG"])


def another_version(tmp_path: Path) -> dict:
    """The environment of a host whose concurbench is another version: a copy of the package with its version
    changed, first on PYTHONPATH."""
    copy = tmp_path / "other" / "concurbench"
    shutil.copytree(ROOT / "src" / "concurbench", copy, ignore=shutil.ignore_patterns("__pycache__"))
    init = copy / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.9-'))
    return {**ENV, "PYTHONPATH": str(copy.parent)}


def test_a_host_of_another_version_is_refused(two_hosts, tmp_path):
    other = another_version(tmp_path)
    joined = concurbench("cluster", "join", two_hosts.address, "--name", "other", env=other, timeout=60)
    assert joined.returncode == 2, joined.stderr
    assert "refused" in joined.stderr and "9.9.9-" in joined.stderr
    # a host that joins through the engine's own command is refused by the run, before anything starts
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", two_hosts.address, "--name",
                               "other", "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=other, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # `cluster hosts` names it (and refuses it) once it has joined
            listed = concurbench("cluster", "hosts", two_hosts.address)
            if "other" in listed.stdout + listed.stderr:
                break
            time.sleep(0.5)
        result = concurbench("run", str(SCENARIO), "--cluster", two_hosts.address, "--out", str(tmp_path / "runs"))
        assert result.returncode == 2, result.stderr
        assert "refused at start" in result.stderr and "load host other runs concurbench 9.9.9-" in result.stderr
        assert not (tmp_path / "runs").exists()
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)


def test_cluster_start_leaves_no_process_after_sigterm():
    env = {**ENV, "CONCURBENCH_TEST_TAG": f"{TAG}-stop"}
    cluster = Started(2, env)
    groups = set(cluster.host_groups().values())
    assert len(groups) == 2 and os.getpgid(cluster.proc.pid) not in groups  # each host a process group of its own
    started = tagged(env["CONCURBENCH_TEST_TAG"])
    assert len(started) >= 4  # the command, the scheduler, two hosts
    assert cluster.stop() == 0
    assert not tagged(env["CONCURBENCH_TEST_TAG"])
