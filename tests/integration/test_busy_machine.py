"""A run beside a busy loop says the machine was busy: the load generator and a loop that never sleeps pinned
to one CPU, a small check on the shared server; the line is in the output and the run, and the claim left
open says what would likely decide it. Bounded: two rounds of two half-second windows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import concurbench
from concurbench.results.machine import MachineLoad

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not Path("/proc/stat").exists(),
                                 reason="pinning to a CPU and /proc/stat are Linux's")]

SAME = """name: same
engine: postgres
duration: 0.5s
warmup: 0s
variants:
  a:
    pools:
      p: {clients: 4, transaction: [SELECT 1]}
  b:
    pools:
      p: {clients: 4, transaction: [SELECT 1]}
expect:
  - check: "a: tps > b: tps"
"""
BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def test_a_run_beside_a_busy_loop_on_its_cpu_says_the_machine_was_busy(server, tmp_path):
    (tmp_path / "same.yaml").write_text(SAME)
    cpu = max(os.sched_getaffinity(0))
    env = {**os.environ, "PYTHONPATH": str(Path(concurbench.__file__).parent.parent)}
    hog = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(cpu)])
    try:
        result = subprocess.run(
            [sys.executable, "-m", "concurbench.cli.main", "run", "same.yaml", "--check", "--max-repeats", "2",
             "--processes", "1", "--target", "dsn", "--dsn", server[1].conninfo, "--out", "runs"],
            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=150,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))  # the harness, its workers: on the loop's CPU
    finally:
        hog.kill()
        hog.wait()
    assert result.returncode in (0, 3, 4), result.stderr[-3000:]
    run_dir = tmp_path / result.stdout.strip().splitlines()[-1]
    machine = json.loads((run_dir / "manifest.json").read_text())["machine"]
    # the busy loop keeps a CPU busy while the run pauses, and the workers waited for theirs
    assert sorted(machine["others_cpus"])[len(machine["others_cpus"]) // 2] >= 0.5, machine
    assert machine["cpu_wait"] > 0.1, machine
    line = MachineLoad.from_dict(machine).line()
    assert line.startswith("Busy machine: other processes kept "), line
    assert line in " ".join(result.stdout.split()), result.stdout[-3000:]  # printed (wrapped to the terminal)
    assert f"- {line}" in (run_dir / "report.md").read_text()
    (claim,) = json.loads((run_dir / "summary.json").read_text())["claims"]
    if claim["verdict"] == "inconclusive" and claim["p_value"] is not None:  # the same load on both sides
        assert "the machine was busy (other processes kept" in claim["reason"]
        assert claim["reason"].endswith("would likely decide it"), claim["reason"]
