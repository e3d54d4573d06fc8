"""The dsn target on a server run as a user's would be: Debian's PostgreSQL (the postgresql package; `.ci/run`
installs it where it is missing) as a cluster of its own on 127.0.0.1, `max_connections` 150 and the default
shared_buffers (128MB), reached over TCP by a role that is not a superuser and logs in with a password.

`--server-settings as-is` runs the README's first scenario on it and names the two settings it ran without
(manifest, report, every claim's reason); a server that gives fewer connections than the run opens at once
refuses it before any load, with both figures and nothing created; the role's CONNECTION LIMIT and the
sessions of other roles count; a setting the role may not read is recorded as unknown. After every run the
server's settings are those it had before. The README run takes about a minute on two cores: run this file
under the heavy-work lock (`flock /work/heavy.lock python3 -m pytest tests/integration/test_dsn_as_is.py`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from users_server import PASSWORD, concurbench, debian_server, dsn_args, run_dir

ROOT = Path(__file__).resolve().parents[2]
README_SCENARIO = ROOT / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml"
pytestmark = pytest.mark.integration


@pytest.fixture()
def cluster(users_server):
    """The user's server (users_server.py) as these tests take it: (server, superuser conninfo, bench's dsn)."""
    return users_server.pg, users_server.admin, users_server.dsn


def settings(admin: str) -> dict:
    """Every setting of the server and what ALTER SYSTEM wrote, read as a superuser."""
    with psycopg.connect(admin, autocommit=True) as conn:
        return {"settings": conn.execute("SELECT name, setting FROM pg_settings ORDER BY 1").fetchall(),
                "auto.conf": conn.execute("SELECT name, setting FROM pg_file_settings "
                                          "WHERE sourcefile LIKE '%%auto.conf' ORDER BY 1").fetchall()}


def small(tmp_path: Path, server: str, clients: int = 4) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(f"name: small\nengine: postgres\nduration: 0.5s\nwarmup: 0s\nserver:\n  settings: {server}\n"
                    f"variants:\n  v:\n    samplers: [wait_events]\n    pools:\n"
                    f"      p: {{clients: {clients}, transaction: [SELECT 1]}}\n"
                    f"expect:\n  - check: \"v: tps > 1\"\n")
    return path


def test_the_readme_scenario_runs_as_is_and_names_the_two_differences(cluster, users_server, tmp_path):
    """It runs in a database of concurbench's own, created for the run and dropped at its end: the user's database
    `app`, whose table `accounts` has the name the scenario's setup drops, is byte for byte what it was."""
    _, admin, dsn = cluster
    before, dump, databases = settings(admin), users_server.dump(), users_server.databases()
    refused = concurbench("run", README_SCENARIO, "--quick", *dsn_args(dsn, tmp_path / "refused"))
    assert refused.returncode == 2 and "--server-settings as-is" in refused.stderr  # the way on is named
    for as_is, code in (([], 1), (["--server-settings", "as-is"], 0)):  # the probe says the same
        probe = concurbench("probe", README_SCENARIO, "--quick", *dsn_args(dsn, tmp_path / "probes", *as_is))
        assert probe.returncode == code, probe.stdout[-3000:]
        checks = {c["check"]: c for c in json.loads(run_dir(probe).read_text())["probes"][0]["checks"]}
        assert [c["check"] for c in checks.values() if c["status"] == "failed"] == \
            ([] if as_is else ["setting max_connections", "setting shared_buffers"])
        assert ("--server-settings as-is" in checks["setting shared_buffers"]["fix" if not as_is else "server_says"])
        assert checks["connections"]["server_says"].startswith("92 at most (for_update, 90 clients (sweep point 90)")
        assert "the server gives this run 147: max_connections is 150, 3 are reserved" in \
            checks["connections"]["server_says"]
    result = concurbench("run", README_SCENARIO, "--quick", *dsn_args(dsn, tmp_path, "--server-settings", "as-is"))
    assert result.returncode == 0, result.stderr[-3000:]
    directory = run_dir(result)
    manifest = json.loads((directory / "manifest.json").read_text())
    [server] = manifest["servers"]
    assert server["version_num"] // 10000 == int(debian_server().name)
    assert server["connection"].endswith("/concurbench")
    assert server["database"] == {"name": "concurbench", "ownership": "create", "dropped_at_end": True}
    assert server["differences"] == [
        {"setting": "max_connections", "wanted": "300", "found": "150", "why": "changes only with a server restart"},
        {"setting": "shared_buffers", "wanted": "256MB", "found": "128MB", "why": "changes only with a server restart"}]
    named = "max_connections 150, the scenario wants 300; shared_buffers 128MB, the scenario wants 256MB"
    line = ("Settings not as the scenario's (--server-settings as-is; claims name them too): max_connections 150, the "
            "scenario wants 300 (changes only with a server restart); shared_buffers 128MB, the scenario wants 256MB "
            "(changes only with a server restart)")
    report = (directory / "report.md").read_text()
    assert report.index(line) < report.index("\n## ")  # above the first table
    assert line in " ".join(result.stdout.split())  # and on the terminal (wrapped at its width)
    claims = json.loads((directory / "summary.json").read_text())["claims"]
    assert len(claims) == 6 and all(c["reason"].endswith(f"ran with {named}") for c in claims)
    html = concurbench("report", directory, "--format", "html", "-o", tmp_path / "page.html")
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "page.html").read_text()
    assert page.index(line.replace("'", "&#x27;")) < page.index("<table>")
    for path in [p for p in directory.rglob("*") if p.is_file()]:
        assert PASSWORD not in path.read_text(errors="replace"), path
    assert PASSWORD not in result.stdout + result.stderr
    assert settings(admin) == before
    assert users_server.dump() == dump and users_server.databases() == databases


def test_a_server_with_too_few_connections_is_refused_before_any_load(cluster, users_server, tmp_path):
    """max_connections 50: 47 slots for a role that is not a superuser, and the run's 90 clients open 92 at once."""
    pg, admin, dsn = cluster
    pg.restart({"max_connections": "50"})
    try:
        before = settings(admin)
        result = concurbench("run", README_SCENARIO, "--quick", *dsn_args(dsn, tmp_path, "--server-settings", "as-is"))
        assert result.returncode == 2, result.stderr[-2000:]
        assert ("90 clients (sweep point 90) make 92 connections (pool lockers: 90; the harness's own: 1 admin, "
                "1 sampler), and the server at " in result.stderr)
        assert "gives this run 47: max_connections is 50, 3 are reserved for superusers" in result.stderr
        assert "Nothing was run or changed on the server" in result.stderr and "Traceback" not in result.stderr
        assert json.loads((run_dir(result) / "summary.json").read_text())["results"] == []  # no variant began
        assert "concurbench" not in users_server.databases()  # the run's own database went with it
        assert settings(admin) == before
        probe = concurbench("probe", README_SCENARIO, "--quick", *dsn_args(dsn, tmp_path, "--server-settings", "as-is"))
        assert probe.returncode == 1
        checks = {c["check"]: c for c in json.loads(run_dir(probe).read_text())["probes"][0]["checks"]}
        assert checks["connections"]["status"] == "failed" and [c for c in checks.values() if c["status"] == "failed"] \
            == [checks["connections"]]
        assert checks["connections"]["server_says"].startswith("92 at most (for_update, 90 clients")
        assert "the server gives this run 47: max_connections is 50" in checks["connections"]["server_says"]
    finally:
        pg.restart({"max_connections": "150"})


def test_the_role_limit_and_the_sessions_of_other_roles_count(cluster, tmp_path):
    _, admin, dsn = cluster
    path = small(tmp_path, "{}", clients=4)  # 4 clients, the admin and the sampler connection: 6
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER ROLE bench CONNECTION LIMIT 5")
    try:
        result = concurbench("run", path, *dsn_args(dsn, tmp_path))
        assert result.returncode == 2
        assert "4 clients make 6 connections" in result.stderr and "gives this run 5: role bench has CONNECTION " \
            "LIMIT 5" in result.stderr and "ALTER ROLE bench CONNECTION LIMIT" in result.stderr
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER ROLE bench CONNECTION LIMIT -1")
    # sessions of a superuser show bench no backend_type (no pg_read_all_stats): they are counted all the same
    held = [psycopg.connect(admin, autocommit=True) for _ in range(144)]
    try:
        result = concurbench("run", path, *dsn_args(dsn, tmp_path))  # 150 - 3 reserved - 144 held = 3 < 6
        assert result.returncode == 2
        # an autovacuum worker at work is one more session bench cannot tell from a client
        found = re.search(r"gives this run (\d+): max_connections is 150, 3 are reserved for superusers, (\d+) are "
                          r"in use by other sessions \((\d+) of other roles whose kind this role may not see",
                          result.stderr)
        assert found, result.stderr[-2000:]
        allowed, others, hidden = map(int, found.groups())
        assert 144 <= hidden == others <= 146 and allowed == 147 - others
    finally:
        for conn in held:
            conn.close()


def test_a_setting_the_role_may_not_read_is_recorded_as_unknown(cluster, tmp_path):
    """shared_preload_libraries is for superusers and pg_read_all_settings to read; work_mem is already as wanted;
    synchronous_commit could be changed with a reload, but --allow-server-changes was not given."""
    _, admin, dsn = cluster
    before = settings(admin)
    path = small(tmp_path, "{shared_preload_libraries: pg_stat_statements, work_mem: 4MB, synchronous_commit: 'off'}")
    refused = concurbench("run", path, *dsn_args(dsn, tmp_path))
    assert refused.returncode == 2
    assert "shared_preload_libraries (wanted pg_stat_statements, found unknown: the role may not read it" in \
        refused.stderr and "add --allow-server-changes to let concurbench set synchronous_commit" in refused.stderr
    result = concurbench("run", path, *dsn_args(dsn, tmp_path, "--server-settings", "as-is"))
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.loads((run_dir(result) / "manifest.json").read_text())
    assert manifest["servers"][0]["differences"] == [
        {"setting": "shared_preload_libraries", "wanted": "pg_stat_statements", "found": None,
         "why": "the role may not read it (superuser or pg_read_all_settings)"},
        {"setting": "synchronous_commit", "wanted": "off", "found": "on",
         "why": "not applied: --allow-server-changes was not given"}]
    [claim] = json.loads((run_dir(result) / "summary.json").read_text())["claims"]
    assert claim["reason"].endswith("ran with shared_preload_libraries unknown, the scenario wants pg_stat_statements; "
                                    "synchronous_commit on, the scenario wants off")
    assert settings(admin) == before


def test_as_is_still_sets_and_restores_what_a_reload_changes_when_allowed(cluster, tmp_path):
    """A DBA grants the role ALTER SYSTEM on synchronous_commit: with --allow-server-changes the run sets it for the
    run (it changes with a reload) and puts it back; to put it back exactly the role must read pg_file_settings. The
    grants on catalogs are made in template1, which the run's new database copies."""
    _, admin, dsn = cluster
    admin = make_conninfo(admin, dbname="template1")  # grants on catalogs are a database's: the run's is a new one
    path = small(tmp_path, "{shared_preload_libraries: pg_stat_statements, synchronous_commit: 'off'}")
    grants = ["ALTER SYSTEM ON PARAMETER synchronous_commit", "SELECT ON pg_file_settings",
              "EXECUTE ON FUNCTION pg_show_all_file_settings()", "EXECUTE ON FUNCTION pg_reload_conf()"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"GRANT {grants[0]} TO bench")
    try:
        before = settings(admin)
        refused = concurbench("run", path, *dsn_args(dsn, tmp_path, "--server-settings", "as-is",
                                                     "--allow-server-changes"))
        assert refused.returncode == 1 and "cannot change synchronous_commit on postgresql://bench@" in refused.stderr
        assert "GRANT SELECT ON pg_file_settings, EXECUTE ON FUNCTION pg_show_all_file_settings() and EXECUTE ON " \
            "FUNCTION pg_reload_conf() to the role" in refused.stderr
        assert settings(admin) == before
        with psycopg.connect(admin, autocommit=True) as conn:
            for grant in grants[1:]:
                conn.execute(f"GRANT {grant} TO bench")
        result = concurbench("run", path, *dsn_args(dsn, tmp_path, "--server-settings", "as-is",
                                                    "--allow-server-changes"))
        assert result.returncode == 0, result.stderr[-2000:]
        [server] = json.loads((run_dir(result) / "manifest.json").read_text())["servers"]
        assert server["settings"]["synchronous_commit"] == "off"  # as the run found it once configured
        assert [d["setting"] for d in server["differences"]] == ["shared_preload_libraries"]
        assert settings(admin) == before
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for grant in grants:
                conn.execute(f"REVOKE {grant} FROM bench")
