"""Every SQL Server scenario, quick, on a real SQL Server (see conftest.py for where it comes from).

Each run must end with exit 0, results for every variant it could run, and nothing left on the
server: no concurbench Extended Events session, no trace of ours, no open transaction of ours.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios" / "mssql").glob("*.yaml"))
pytestmark = pytest.mark.mssql


def run(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, Path | None]:
    result = subprocess.run([sys.executable, "-m", "concurbench.cli.main", "run", *args, "--out", str(tmp_path)],
                            capture_output=True, text=True, cwd=ROOT, timeout=1800, env=os.environ.copy())
    lines = result.stdout.strip().splitlines()
    run_dir = Path(lines[-1]) if lines and Path(lines[-1]).is_dir() else None
    return result, run_dir


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_runs_quick_and_leaves_nothing_behind(scenario, mssql_target, tmp_path):
    result, run_dir = run([str(scenario), "--quick", *mssql_target], tmp_path)
    assert run_dir is not None, result.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert summary["results"], result.stderr[-3000:]
    assert manifest["status"] == "ok", manifest.get("error")
    assert result.returncode == 0, result.stderr[-3000:]
    for r in summary["results"]:
        for pool in r["pools"].values():
            if pool["measure"]:
                assert pool["metrics"]["transactions"] + pool["metrics"]["failed"] > 0
    text = result.stdout + result.stderr
    for secret_env in ("CONCURBENCH_MSSQL_PASSWORD", "MSSQL_SA_PASSWORD"):
        secret = os.environ.get(secret_env)
        if secret:
            assert secret not in text
            assert not any(secret in p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())
    if "--dsn" in mssql_target:
        assert_nothing_left(mssql_target)


def assert_nothing_left(target: list[str]) -> None:
    from concurbench.provisioners.dsn_mssql import ExistingSqlServer
    from concurbench.engines import sqlserver

    dsn = target[target.index("--dsn") + 1]
    env = target[target.index("--password-env") + 1] if "--password-env" in target else None
    conn = sqlserver.connect(ExistingSqlServer(dsn, password_env=env).conninfo, application_name="concurbench:test")
    try:
        assert sqlserver.scalar(conn, "SELECT COUNT(*) FROM sys.server_event_sessions "
                                      "WHERE name LIKE 'concurbench[_]%'") == 0
        assert sqlserver.scalar(conn, "SELECT COUNT(*) FROM sys.traces WHERE path LIKE '%concurbench%'") == 0
        assert sqlserver.scalar(conn, "SELECT COUNT(*) FROM sys.dm_exec_sessions s JOIN sys.dm_tran_session_transactions t "
                                      "ON t.session_id = s.session_id WHERE s.program_name LIKE 'concurbench:%' "
                                      "AND s.session_id <> @@SPID") == 0
    finally:
        conn.close()
