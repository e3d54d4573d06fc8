"""The library API against a real PostgreSQL: docs/api.md's example as a user would run it (its own
embedded server), and a rate-driven pool that falls behind its schedule ending with a warning on the
terminal and in the report (the `run` command through the API, on the shared server as a dsn target)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import concurbench
from concurbench.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def example_code() -> str:
    """The Python block of docs/api.md's "An example" section, as the page shows it."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("## An example", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_of_docs_api_runs(tmp_path):
    (tmp_path / "example.py").write_text(example_code())
    (tmp_path / "docs").symlink_to(ROOT / "docs")  # it names its scenario from the repository's root
    env = {**os.environ, "PYTHONPATH": str(Path(concurbench.__file__).parent.parent)}
    result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"18\.\d+ ok", lines[0]), lines[:3]
    status, run_dir = lines[1].split()
    assert status == "ok" and run_dir.startswith("results/") and run_dir.endswith("-hot-row")
    assert lines[2].split() == ["variant", "pool", "clients", "value"]
    assert [line.split()[:3] for line in lines[3:5]] == [["bump", "bumpers", "2"]] * 2
    assert all(float(line.split()[3]) > 0 for line in lines[3:5])
    assert "| 1 | bump: tps > 0 | PASS " in result.stdout
    manifest = json.loads((tmp_path / run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["repeat"] == 2


BEHIND = """name: behind
engine: postgres
duration: 1s
warmup: 0s
variants:
  kept:
    pools:
      p: {clients: 2, rate: 50, transaction: [SELECT 1]}
  behind:
    pools:
      p: {clients: 2, rate: 1e9, transaction: [SELECT 1]}
"""


def test_a_pool_behind_its_rate_ends_with_a_warning_on_the_terminal_and_in_the_report(server, tmp_path):
    path = tmp_path / "behind.yaml"
    path.write_text(BEHIND)
    result = CliRunner().invoke(cli, ["run", str(path), "--target", "dsn", "--dsn", server[1].conninfo,
                                      "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output[-3000:]
    pattern = (r"warning: behind: pool p fell behind its rate: offered 1,000,000,000 tps, served ([\d,]+) tps; "
               r"transactions started up to ([\d.]+) s after they were due \(mean lag ([\d.]+) s\)\. Its latencies, "
               r"timed from when each transaction was due, measure the queue")
    printed = re.search(pattern, " ".join(result.output.split()))
    assert printed, result.output[-3000:]
    served, worst, mean = int(printed.group(1).replace(",", "")), float(printed.group(2)), float(printed.group(3))
    assert 0 < served < 1_000_000 and worst > 0.3 and 0 < mean <= worst  # the backlog grew through the window
    run = concurbench.load(Path(result.output.strip().splitlines()[-1]))
    behind, kept = (next(r for r in run.variant_runs if r.variant == name) for name in ("behind", "kept"))
    assert [m for m in behind.messages if "fell behind its rate" in m] and behind.status == "ok"
    assert not [m for m in kept.messages if "fell behind" in m]  # 50 tps with two clients is kept
    assert "- behind: pool p fell behind its rate: offered 1,000,000,000 tps" in (run.path / "report.md").read_text()


LONG = """name: long
engine: postgres
duration: 60s
warmup: 0s
variants:
  a:
    pools:
      p: {clients: 2, transaction: [SELECT 1]}
"""
SCRIPT = """import sys

import concurbench
from concurbench.api import Target
from concurbench.running.progress_events import Listener


class Measuring(Listener):
    said = False

    def on_tick(self, event):
        if event.phase == "measure" and event.transactions and not self.said:
            self.said = True
            print("measuring", flush=True)


if __name__ == "__main__":
    outcome = concurbench.run(sys.argv[1], target=Target("dsn", dsn=sys.argv[2]), out_dir=sys.argv[3],
                              listener=Measuring())
    print(outcome.status, outcome.run_dir, flush=True)
"""


def test_sigterm_stops_a_run_of_the_api_which_keeps_what_it_measured(server, tmp_path):
    (tmp_path / "long.yaml").write_text(LONG)
    (tmp_path / "script.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(concurbench.__file__).parent.parent)}
    proc = subprocess.Popen([sys.executable, "script.py", "long.yaml", server[1].conninfo, "runs"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "measuring"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    status, run_dir = out.split()
    assert status == "interrupted"
    run = concurbench.load(tmp_path / run_dir)
    assert run.status == "interrupted" and run.variant_runs[0].status == "interrupted"
    assert run.variant_runs[0].own("p")["transactions"] > 0
    assert run.variant_runs[0].elapsed_s < 30  # stopped in the window, not at its end
