"""Every SQL Server scenario, quick, on a real SQL Server (see conftest.py for where it comes from).

Each run must end with exit 0, results for every variant it could run, and nothing left on the
server: no concurbench Extended Events session, no trace of ours, no open transaction of ours.
Every measured pool must complete transactions and fail none (no arm of these scenarios is meant
to fail: a procedure created in the wrong database fails every call), every sampler must have
read without error and the periodic ones at least twice (a first reading and the one at the end),
and the server's configuration facts (CPUs, Query Store, ...) must have been read.
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
# The least `samples` a periodic sampler's summary may count: counter samplers count intervals (two
# readings make one), the others their readings (one when the window opens, one when it ends).
# mssql_waits keeps no rows; its window_s is checked instead.
MIN_SAMPLES = {"mssql_counters": 1, "mssql_lock_waits": 1, "mssql_version_store": 1, "tempdb_allocation": 1,
               "tempdb_latches": 2, "snapshot_transactions": 2, "mssql_requests": 2}


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
        where = f"{scenario.stem}: {r['variant']}@{r['point']} on {r.get('server')}"
        for name, pool in r["pools"].items():
            if pool["measure"]:
                assert pool["metrics"]["transactions"] > 0, f"{where}/{name}: no transaction completed"
                assert pool["metrics"]["failed"] == 0, (f"{where}/{name}: {pool['metrics']['failed']} failed: "
                                                        f"{pool['metrics'].get('error_messages')}")
        assert r["sampler_errors"] == [], f"{where}: {r['sampler_errors']}"
        assert not r.get("sampler_failures"), f"{where}: {r['sampler_failures']}"
        for name, found in r["samplers"].items():
            if name in MIN_SAMPLES:
                assert (found.get("samples") or 0) >= MIN_SAMPLES[name], f"{where}: {name} has {found.get('samples')}"
        if "mssql_waits" in r["samplers"]:
            assert r["samplers"]["mssql_waits"]["window_s"] > 0 and r["samplers"]["mssql_waits"]["sessions.count"] >= 1
        if "warmup_pass" in r:  # tempdb-gam-contention's unmeasured pass before each arm (issue 34)
            assert r["warmup_pass"]["status"] == "ok" and r["warmup_pass"]["failed"] == 0, f"{where}: {r['warmup_pass']}"
    for server in manifest["servers"]:
        assert server["facts"]["cpu_count"] and server["facts"]["query_store"], server.get("facts")
        assert isinstance(server["settings"].get("trace_flags"), list), server["settings"]  # [] when none is on
        if "--target" in mssql_target and "docker" in mssql_target:  # pinned, or none with the reason
            assert server["cpu_limit"].startswith(("cpuset ", "none (")), server["cpu_limit"]
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


def test_a_server_not_owned_keeps_its_files_and_metadata_setting(mssql_target, tmp_path):
    """The dsn target (a server concurbench does not own) refuses what needs a restart or cannot be put back:
    removing tempdb data files and memory-optimized tempdb metadata. Nothing may change on the server.
    (Named without "tempdb", which the dsn job's -k filter leaves out.)"""
    if "--dsn" not in mssql_target:
        pytest.skip("needs a server concurbench does not own (CONCURBENCH_MSSQL_DSN)")
    from concurbench.engines import sqlserver
    from concurbench.provisioners.dsn_mssql import ExistingSqlServer

    dsn = mssql_target[mssql_target.index("--dsn") + 1]
    env = mssql_target[mssql_target.index("--password-env") + 1] if "--password-env" in mssql_target else None
    files = "SELECT COUNT(*) FROM tempdb.sys.database_files WHERE type = 0"
    conn = sqlserver.connect(ExistingSqlServer(dsn, password_env=env).conninfo, application_name="concurbench:test")
    try:
        before = sqlserver.scalar(conn, files)
        result, _ = run([str(ROOT / "scenarios" / "mssql" / "tempdb-gam-contention.yaml"), "--quick", *mssql_target],
                        tmp_path)
        assert result.returncode == 2, result.stderr[-2000:]  # refused at start (issue 45's plan), not a crash
        assert "tempdb" in result.stderr and "--target docker" in result.stderr, result.stderr[-2000:]
        assert "--server-settings as-is" in result.stderr
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr
        assert sqlserver.scalar(conn, files) == before
    finally:
        conn.close()
    assert_nothing_left(mssql_target)
