"""On a user's server concurbench runs only in a database of its own (provisioners/owned.py), and loses nothing
of the user's: a database holding the user's `accounts` is refused by `run` and by `probe` (which names what the
scenario would drop), a role without CREATEDB is told the GRANT, and a run killed with SIGKILL leaves only its
own temporary database, which `gc --target dsn` lists and removes. SIGHUP and a lost connection end a run as
SIGTERM does, and a run whose sessions the server ends makes them again and ends as usual: either way the run's
database goes, and the user's is byte for byte what it was (pg_dump before and after).

The server is Debian's PostgreSQL run as a user's would be (users_server.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from users_server import PASSWORD, ROOT, concurbench, dsn_args, run_dir
from waiting import wait_until

pytestmark = pytest.mark.integration

# A scenario whose table has the name of the user's: its setup drops and creates `accounts`.
SCENARIO = """name: same-name
engine: postgres
duration: {duration}
warmup: 0s
setup: DROP TABLE IF EXISTS accounts; CREATE TABLE accounts (aid int PRIMARY KEY, n int); INSERT INTO accounts VALUES (1, 0)
teardown: DROP TABLE IF EXISTS accounts
variants:
  v:
    pools:
      p: {{clients: 2, transaction: ["UPDATE accounts SET n = n + 1 WHERE aid = 1"]}}
expect:
  - check: "v: tps > 1"
"""


def scenario(tmp_path, duration: str = "0.5s"):
    path = tmp_path / "same-name.yaml"
    path.write_text(SCENARIO.format(duration=duration))
    return path


def hangup_heard() -> None:
    """In the harness before it starts: SIGHUP as a terminal gives it (a test that ran a worker's code in the test
    process may have left it ignored, and an ignored SIGHUP stays ignored, as under nohup)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def database_sessions(users_server, name: str = "concurbench") -> int:
    with psycopg.connect(users_server.admin, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()[0]


def test_a_database_with_the_users_objects_is_refused_and_left_as_it_was(users_server, tmp_path):
    dump, databases = users_server.dump(), users_server.databases()
    probe = concurbench("probe", scenario(tmp_path), *dsn_args(users_server.app_dsn, tmp_path))
    assert probe.returncode == 1, probe.stdout[-3000:]
    checks = {c["check"]: c for c in json.loads(run_dir(probe).read_text())["probes"][0]["checks"]}
    assert [c for c, v in checks.items() if v["status"] != "failed"] == []  # nothing else is tried, nothing "ok"
    says = checks["database"]["server_says"]
    assert "database app on postgresql://bench@127.0.0.1:" in says and "(table public.accounts)" in says
    assert "table public.accounts would be dropped (setup, line 1); written (setup, line 1)" in says
    assert "leave the database out of --dsn and concurbench creates and uses its own (concurbench)" in says

    result = concurbench("run", scenario(tmp_path), *dsn_args(users_server.app_dsn, tmp_path))
    assert result.returncode == 2, result.stderr[-2000:]
    words = " ".join(result.stderr.split())
    assert ("database app on postgresql://bench@127.0.0.1:" in words and "holds objects concurbench did not create "
            "(table public.accounts)" in words and "nothing was run or changed" in words), words
    assert "Traceback" not in result.stderr and PASSWORD not in result.stdout + result.stderr
    assert users_server.dump() == dump and users_server.databases() == databases
    with psycopg.connect(users_server.admin) as conn:
        assert conn.execute("SELECT aid, owner FROM accounts ORDER BY aid").fetchall() == [(1, "ada"), (2, "grace")]


def test_a_role_that_may_not_create_databases_is_told_the_grant(users_server, tmp_path):
    users_server.sql("ALTER ROLE bench NOCREATEDB")
    try:
        result = concurbench("run", scenario(tmp_path), *dsn_args(users_server.dsn, tmp_path))
        assert result.returncode == 2
        words = " ".join(result.stderr.split())
        assert "database concurbench does not exist" in words and "role bench may not create databases" in words
        assert "(ALTER ROLE bench CREATEDB)" in words and "(CREATE DATABASE concurbench OWNER bench)" in words
        assert "concurbench" not in users_server.databases()
    finally:
        users_server.sql("ALTER ROLE bench CREATEDB")


def test_the_servers_own_databases_are_never_used(users_server, tmp_path):
    dump = users_server.dump()
    for name in ("postgres", "template1"):
        result = concurbench("run", scenario(tmp_path), *dsn_args(users_server.dsn + name, tmp_path))
        assert result.returncode == 2, result.stderr[-2000:]
        assert f"database {name} on postgresql://bench@127.0.0.1:" in result.stderr and "is one of the server's " \
            "own" in " ".join(result.stderr.split())
    assert users_server.dump() == dump and "concurbench" not in users_server.databases()


def test_an_empty_database_the_dsn_names_is_marked_and_kept(users_server, tmp_path):
    users_server.sql("CREATE DATABASE lab OWNER bench")
    try:
        lab = users_server.dsn + "lab"
        result = concurbench("run", scenario(tmp_path), *dsn_args(lab, tmp_path))
        assert result.returncode == 0, result.stderr[-2000:]
        [server] = json.loads((run_dir(result) / "manifest.json").read_text())["servers"]
        assert server["database"] == {"name": "lab", "ownership": "empty", "dropped_at_end": False}
        with psycopg.connect(users_server.admin) as conn:
            marker = conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database "
                                  "WHERE datname = 'lab'").fetchone()[0]
        assert marker.startswith("concurbench database: kept")
        again = concurbench("run", scenario(tmp_path), *dsn_args(lab, tmp_path))  # now concurbench's own
        assert again.returncode == 0, again.stderr[-2000:]
        [server] = json.loads((run_dir(again) / "manifest.json").read_text())["servers"]
        assert server["database"]["ownership"] == "own" and "lab" in users_server.databases()
        listed = concurbench("gc", "--target", "dsn", "--dsn", users_server.dsn, "--password-env", "BENCH_PW")
        assert listed.returncode == 0 and "lab" not in listed.stdout  # kept: never a leftover
    finally:
        users_server.sql("DROP DATABASE IF EXISTS lab")


def test_a_killed_run_leaves_only_its_database_and_gc_removes_it(users_server, tmp_path):
    dump = users_server.dump()
    log = open(tmp_path / "run.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(scenario(tmp_path, "60s")),
                             *map(str, dsn_args(users_server.dsn, tmp_path / "runs"))], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "BENCH_PW": PASSWORD})
    try:
        assert wait_until(lambda: database_sessions(users_server) >= 3, 60), (tmp_path / "run.log").read_text()
        proc.send_signal(signal.SIGKILL)  # the harness only, as an OOM kill would
        proc.wait(timeout=10)
        assert wait_until(lambda: database_sessions(users_server) == 0, 30), "the killed run's sessions stayed"
        listed = concurbench("gc", "--target", "dsn", "--dsn", users_server.dsn, "--password-env", "BENCH_PW")
        assert listed.returncode == 0, listed.stderr
        assert "would remove: database concurbench:" in listed.stdout and "concurbench database: temporary" in \
            listed.stdout and "add --yes" in listed.stdout
        assert "concurbench" in users_server.databases()  # listing removes nothing
        removed = concurbench("gc", "--target", "dsn", "--dsn", users_server.dsn, "--password-env", "BENCH_PW",
                              "--yes")
        assert removed.returncode == 0 and "removed: database concurbench" in removed.stdout, removed.stdout
        assert "concurbench" not in users_server.databases() and users_server.dump() == dump
        again = concurbench("gc", "--target", "dsn", "--dsn", users_server.dsn, "--password-env", "BENCH_PW")
        assert "nothing to clean up on postgresql://bench@127.0.0.1:" in again.stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for child in psutil.process_iter(["name"]):  # the killed run's workers end once they see it gone
            if (child.info["name"] or "").startswith("concurbench-w") and child.ppid() == 1:
                wait_until(lambda: not child.is_running(), 10)


@pytest.mark.parametrize("how", ["SIGHUP", "lost connection"])
def test_a_hangup_or_a_lost_connection_ends_the_run_and_drops_its_database(users_server, tmp_path, how):
    dump, before = users_server.dump(), users_server.settings()
    log = tmp_path / "run.log"
    duration = "30s" if how == "SIGHUP" else "3s"
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(scenario(tmp_path, duration)),
                             *map(str, dsn_args(users_server.dsn, tmp_path / "runs"))], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True,
                            env={**os.environ, "BENCH_PW": PASSWORD}, preexec_fn=hangup_heard)
    try:
        assert wait_until(lambda: database_sessions(users_server) >= 3, 60), log.read_text()
        if how == "SIGHUP":
            proc.send_signal(signal.SIGHUP)
        else:  # the server ends every session of the run, as a failover or a DBA's pg_terminate_backend would
            users_server.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'concurbench'")
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert proc.returncode == (130 if how == "SIGHUP" else 0), text[-2000:]
    assert "Traceback" not in text and ("interrupted" in text if how == "SIGHUP" else
                                        "the admin connection was lost (terminating connection due to administrator "
                                        "command) and made again" in text), text[-2000:]
    assert (ROOT / out.strip().splitlines()[-1] / "manifest.json").exists()  # what was measured is kept
    assert wait_until(lambda: "concurbench" not in users_server.databases(), 10)
    assert users_server.dump() == dump and users_server.settings() == before


def test_a_users_database_of_the_default_name_is_refused_with_a_way_to_choose_another(users_server, tmp_path):
    """Issue 45: a user's own database `concurbench` holding `precious`, and a DSN without a database. The old
    refusal told the user to leave the database out of --dsn, which the user had done; now it says --database NAME,
    with which the run makes, uses and drops a database of that name, and `precious` is as it was."""
    users_server.sql("CREATE DATABASE concurbench OWNER bench")
    try:
        with psycopg.connect(make_conninfo(users_server.admin, dbname="concurbench"), autocommit=True) as conn:
            conn.execute("CREATE TABLE precious (id int PRIMARY KEY, what text)")
            conn.execute("INSERT INTO precious VALUES (1, 'keep me')")
        refused = concurbench("run", scenario(tmp_path), *dsn_args(users_server.dsn, tmp_path))
        words = " ".join(refused.stderr.split())
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "database concurbench on postgresql://bench@127.0.0.1:" in words and "(table public.precious)" in words
        assert "choose another name for the database concurbench creates and uses with --database NAME" in words
        assert "leave the database out of --dsn" not in words and "Traceback" not in refused.stderr
        ran = concurbench("run", scenario(tmp_path), *dsn_args(users_server.dsn, tmp_path, "--database", "bench_run"))
        assert ran.returncode == 0, ran.stderr[-2000:]
        [server] = json.loads((run_dir(ran) / "manifest.json").read_text())["servers"]
        assert server["database"] == {"name": "bench_run", "ownership": "create", "dropped_at_end": True}
        assert "bench_run" not in users_server.databases()
        with psycopg.connect(make_conninfo(users_server.admin, dbname="concurbench")) as conn:
            assert conn.execute("SELECT id, what FROM precious").fetchall() == [(1, "keep me")]
        both = concurbench("run", scenario(tmp_path), *dsn_args(users_server.app_dsn, tmp_path, "--database", "x"))
        assert both.returncode == 2 and "name the run's database once" in " ".join(both.stderr.split())
    finally:
        users_server.sql("DROP DATABASE IF EXISTS concurbench")
