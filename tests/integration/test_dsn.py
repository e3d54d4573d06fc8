"""The dsn target against a server started outside the harness: password handling and setting changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "Dsn-Test-Secret-4711"
SCENARIO = ROOT / "tests" / "integration" / "scenarios" / "hold-and-errors.yaml"
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bench_role(server):
    """A role that must log in with a password (scram over TCP), as on a real shared server."""
    pg, connection = server
    with psycopg.connect(connection.conninfo, autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute("DROP ROLE IF EXISTS bench")
        conn.execute(f"CREATE ROLE bench LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        hba = pg.data / "pg_hba.conf"
        original = hba.read_text()
        hba.write_text("host all bench 127.0.0.1/32 scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
        try:
            yield f"postgresql://bench@127.0.0.1:{pg.port}/concurbench"
        finally:
            hba.write_text(original)
            conn.execute("SELECT pg_reload_conf()")


def run_cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", "run", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=180)


def test_password_from_env_is_used_and_stored_nowhere(bench_role, tmp_path):
    result = run_cli(str(SCENARIO), "--target", "dsn", "--dsn", bench_role, "--password-env", "BENCH_PW",
                     "--variant", "counted", "--out", str(tmp_path), env_extra={"BENCH_PW": PASSWORD})
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) >= 4
    for path in files:
        assert PASSWORD not in path.read_text(errors="replace"), path
    assert PASSWORD not in result.stdout + result.stderr
    assert "postgresql://bench@127.0.0.1" in (run_dir / "manifest.json").read_text()


def test_wrong_password_fails_cleanly_without_echoing_it(bench_role, tmp_path):
    result = run_cli(str(SCENARIO), "--target", "dsn", "--dsn", bench_role.replace("bench@", "bench:wrong-pw-1@"),
                     "--variant", "counted", "--out", str(tmp_path))
    assert result.returncode == 1
    assert "password authentication failed" in result.stderr
    assert "wrong-pw-1" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_server_changes_refused_without_the_flag_and_restored_with_it(bench_role, server, tmp_path):
    scenario = tmp_path / "settings.yaml"
    scenario.write_text("name: settings\nengine: postgres\nserver: {settings: {log_min_duration_statement: 12345}}\n"
                        "duration: 0.5s\nwarmup: 0s\nvariants:\n  v:\n    pools:\n"
                        "      p: {clients: 1, transaction: [SELECT current_setting('log_min_duration_statement')]}\n")
    env = {"BENCH_PW": PASSWORD}
    refused = run_cli(str(scenario), "--target", "dsn", "--dsn", bench_role, "--password-env", "BENCH_PW",
                      "--out", str(tmp_path), env_extra=env)
    assert refused.returncode == 2
    assert "--allow-server-changes" in refused.stderr
    with psycopg.connect(server[1].conninfo, autocommit=True) as conn:
        before = conn.execute("SHOW log_min_duration_statement").fetchone()[0]
    allowed = run_cli(str(scenario), "--target", "dsn", "--dsn", bench_role, "--password-env", "BENCH_PW",
                      "--allow-server-changes", "--out", str(tmp_path), env_extra=env)
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    manifest = (Path(allowed.stdout.strip().splitlines()[-1]) / "manifest.json").read_text()
    assert '"log_min_duration_statement": "12345 ms"' in manifest
    with psycopg.connect(server[1].conninfo, autocommit=True) as conn:
        assert conn.execute("SHOW log_min_duration_statement").fetchone()[0] == before
        assert conn.execute("SELECT count(*) FROM pg_file_settings WHERE name = 'log_min_duration_statement' "
                            "AND sourcefile LIKE '%%auto.conf'").fetchone()[0] == 0


def test_restart_only_settings_are_refused(bench_role, tmp_path):
    result = run_cli(str(ROOT / "scenarios/postgres/row-lock-vs-advisory.yaml"), "--quick", "--target", "dsn",
                     "--dsn", bench_role, "--password-env", "BENCH_PW", "--allow-server-changes",
                     "--out", str(tmp_path), env_extra={"BENCH_PW": PASSWORD})
    assert result.returncode == 2  # what the scenario asks cannot be done on this target: a usage error
    assert "restart" in result.stderr and "max_connections" in result.stderr
    assert "connecting to the dsn server" in result.stderr and "starting" not in result.stderr
    assert "leaving the dsn server" in result.stderr and "stopping the server" not in result.stderr
