"""A SQL Server of one's own loses nothing (issue 38), on a real server reached by CONCURBENCH_MSSQL_DSN (a login
in dbcreator with VIEW SERVER STATE, ALTER ANY EVENT SESSION and CREATE ANY DATABASE; the password from the
variable CONCURBENCH_MSSQL_PASSWORD_ENV names, default CONCURBENCH_MSSQL_PASSWORD): a database holding a user's
table is refused by `probe` and `run` with the table's rows intact; a run without `Database` goes to a database
of concurbench's own that is gone afterwards; a run killed with SIGKILL in the middle of an Extended Events arm
leaves a session and a database that `gc --target dsn --yes` removes. Skips, saying why, where no such server
is reachable (as on the machine concurbench is built on).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from concurbench.engines import sqlserver
from concurbench.engines.sqlserver import with_option
from concurbench.provisioners.dsn_mssql import ExistingSqlServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.mssql


@pytest.fixture(scope="module")
def dsn() -> tuple[str, list[str]]:
    """(an ODBC string with the password, for the test's own checks; the dsn arguments of the command line)."""
    text = os.environ.get("CONCURBENCH_MSSQL_DSN")
    if not text:
        pytest.skip("no SQL Server of one's own: CONCURBENCH_MSSQL_DSN is not set")
    password_env = os.environ.get("CONCURBENCH_MSSQL_PASSWORD_ENV", "CONCURBENCH_MSSQL_PASSWORD")
    try:
        server = ExistingSqlServer(text, password_env=password_env if password_env in os.environ else None)
    except Exception as exc:  # noqa: BLE001 - no driver here: a skip that says why
        pytest.skip(f"no SQL Server client: {getattr(exc, 'message', exc)}")
    args = ["--target", "dsn", "--dsn", text] + (["--password-env", password_env] if password_env in os.environ
                                                  else [])
    return server.conninfo, args


def concurbench(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def query(conninfo: str, sql: str, database: str = "master") -> list:
    conn = sqlserver.connect(with_option(conninfo, "Database", database), application_name="concurbench:test")
    try:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else []
    finally:
        conn.close()


def with_database(args: list[str], database: str) -> list[str]:
    out = list(args)
    out[out.index("--dsn") + 1] = with_option(out[out.index("--dsn") + 1], "Database", database)
    return out


@pytest.fixture()
def users_database(dsn):
    """A database of a user's, holding `dbo.accounts` with two rows; dropped afterwards."""
    conninfo, _ = dsn
    name = f"cb_user_{uuid.uuid4().hex[:8]}"
    query(conninfo, f"CREATE DATABASE [{name}]")
    query(conninfo, "CREATE TABLE dbo.accounts (aid int PRIMARY KEY, abalance int); "
                    "INSERT INTO dbo.accounts VALUES (1, 100), (2, 200)", name)
    yield name
    query(conninfo, f"DROP DATABASE [{name}]")


def test_a_users_database_is_refused_by_probe_and_run_and_its_rows_are_intact(dsn, users_database, tmp_path):
    conninfo, args = dsn
    scenario = str(ROOT / "scenarios" / "mssql" / "row-lock-vs-applock.yaml")
    probed = concurbench("probe", scenario, *with_database(args, users_database))
    assert probed.returncode != 0 and "dbo.accounts" in probed.stdout + probed.stderr
    ran = concurbench("run", scenario, "--quick", *with_database(args, users_database), "--out", str(tmp_path))
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert "holds objects concurbench did not create" in ran.stderr and "dbo.accounts" in ran.stderr
    assert query(conninfo, "SELECT aid, abalance FROM dbo.accounts ORDER BY aid", users_database) == [(1, 100), (2, 200)]


def test_a_run_without_a_database_uses_its_own_and_drops_it(dsn, users_database, tmp_path):
    conninfo, args = dsn
    ran = concurbench("run", str(ROOT / "scenarios" / "mssql" / "row-lock-vs-applock.yaml"), "--quick", *args,
                      "--out", str(tmp_path))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert query(conninfo, "SELECT name FROM sys.databases WHERE name LIKE N'concurbench[_]%'") == []
    assert query(conninfo, "SELECT aid, abalance FROM dbo.accounts ORDER BY aid", users_database) == [(1, 100), (2, 200)]


def test_a_run_killed_during_an_observer_arm_leaves_what_gc_removes(dsn, tmp_path):
    conninfo, args = dsn
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run",
                             str(ROOT / "scenarios" / "mssql" / "observer-overhead.yaml"), "--quick",
                             "--variant", "xe_ring_buffer", "--allow-xe-without-max-duration", *args,
                             "--out", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not query(conninfo, "SELECT name FROM sys.dm_xe_sessions WHERE name LIKE N'concurbench[_]%[_]xe'"):
            assert proc.poll() is None and time.monotonic() < deadline, "the arm never started its session"
            time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    listed = concurbench("gc", "--target", "dsn", *args[2:], timeout=300)
    assert "xe session concurbench_" in listed.stdout, listed.stdout + listed.stderr
    deadline = time.monotonic() + 60  # the killed workers' sessions go when the server notices
    while True:
        removed = concurbench("gc", "--target", "dsn", *args[2:], "--yes", timeout=300)
        if "database concurbench_" in removed.stdout or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert query(conninfo, "SELECT name FROM sys.server_event_sessions WHERE name LIKE N'concurbench[_]%'") == []
    assert query(conninfo, "SELECT name FROM sys.databases WHERE name LIKE N'concurbench[_]%'") == []
