"""Hundreds of sessions: benchmarks/thousand-sessions.yaml in its quick form (200 sessions with think
time) on an embedded server whose max_connections the scenario raises, run by the Runner from start
to end. The full 1,000 sessions run only in benchmarks/driver_overhead.py --sessions 1000."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest
from processes import is_worker

from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario
from concurbench.workload.stats import PoolStats

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


class Watched(EmbeddedPostgres):
    """The embedded server, counting the harness's sessions on it just before it stops."""

    left: int | None = None

    def stop(self) -> None:
        if self._started:
            with psycopg.connect(self.connection.conninfo, autocommit=True) as conn:
                self.left = conn.execute("SELECT count(*) FROM pg_stat_activity "
                                         "WHERE application_name LIKE 'concurbench:%'").fetchone()[0]
        super().stop()

    def start(self):
        self.connection = super().start()
        return self.connection


def test_two_hundred_sessions_connect_run_and_end_cleanly(tmp_path):
    scenario = load_scenario(ROOT / "benchmarks" / "thousand-sessions.yaml", quick=True)
    pool = scenario.variants[0].pools[0]
    assert pool.clients == 200 and pool.think > 0
    server = Watched(dict(scenario.settings))
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = Runner(scenario, server, out_dir=tmp_path).run()
    assert out.status == "ok", out.error
    result = out.results[0]
    assert result.messages == [] and result.status == "ok" and result.loop in ("compiled", "python")
    stats = PoolStats.from_dict(result.pools["readers"].stats)
    assert stats.sessions == 200
    assert stats.failed == 0 and stats.transactions > 200  # every session ran, thinking 200 ms between
    assert int(stats.series.count.sum()) == stats.transactions
    assert int(stats.series.txn_ns.sum()) == stats.txn.total_ns
    assert server.left == 0  # every session had ended before the server stopped
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["servers"][0]["settings"]["max_connections"] == "1100"
    assert not [p for p in psutil.Process().children(recursive=True)
                if p.pid not in children_before and is_worker(p)]  # no worker process outlives the run



SCRIPT = """
import sys
from concurbench.scenario.model import Pool, Statement
from concurbench.workload.pool import LoadGenerator

if __name__ == "__main__":
    pool = Pool("many", 120, (Statement("one", "SELECT 1"),), think=0.05)
    result = LoadGenerator(sys.argv[1], [pool], warmup=0.2, duration=0.8, processes=1).run()
    print(result.pools["many"].transactions, result.pools["many"].failed, result.messages)
"""


def test_a_worker_raises_its_file_limit_for_its_sessions(server, tmp_path):
    """120 sessions in one worker started with a soft limit of 64 open files: it raises the limit."""
    script = tmp_path / "many.py"
    script.write_text(SCRIPT)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 256:
        pytest.skip(f"the hard limit of open files here is {hard}")
    done = subprocess.run([sys.executable, str(script), server[1].conninfo], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard)))
    assert done.returncode == 0, done.stderr[-2000:]
    transactions, failed, messages = done.stdout.split(" ", 2)
    assert int(transactions) > 120 and int(failed) == 0 and messages.strip() == "[]"
