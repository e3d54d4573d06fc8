"""`concurbench probe` against a real PostgreSQL, over the dsn target: a passing probe, a role that is not
a superuser, an extension the role cannot create (pgstattuple), a setting the role may not change, and
settings a dsn server would need a restart for. Each failure is in the table and the JSON with exit 1,
and after every probe the server holds what it held before: no concurbench session, no table,
function, extension or role, the same settings (as the fault tier checks)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest

from concurbench.provisioners.dsn import safe_conninfo

ROOT = Path(__file__).resolve().parents[2]
HOLD = ROOT / "tests" / "integration" / "scenarios" / "hold-and-errors.yaml"
CHURN = ROOT / "scenarios" / "postgres" / "dead-tuple-churn.yaml"
DB = "probe_db"
WATCHED = ("log_min_duration_statement", "max_connections", "work_mem", "synchronous_commit")
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dsns(server):
    """A database of this module's own (so pgstattuple is surely not installed in it) and two roles that are not
    superusers: `plain` may create nothing, `maker` may create in schema public. Dropped at the end."""
    conninfo = server[1].conninfo
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB}")
        conn.execute("DROP ROLE IF EXISTS probe_plain")
        conn.execute("DROP ROLE IF EXISTS probe_maker")
        conn.execute(f"CREATE DATABASE {DB}")
        conn.execute("CREATE ROLE probe_plain LOGIN")
        conn.execute("CREATE ROLE probe_maker LOGIN")
    with psycopg.connect(conninfo + f" dbname={DB}", autocommit=True) as conn:
        conn.execute("GRANT CREATE ON SCHEMA public TO probe_maker")
    try:
        yield {who: f"{conninfo} dbname={DB}" + (f" user=probe_{who}" if who != "super" else "")
               for who in ("super", "plain", "maker")}
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            conn.execute("DROP ROLE IF EXISTS probe_plain")
            conn.execute("DROP ROLE IF EXISTS probe_maker")


def server_state(dsns) -> dict:
    """What a probe must not change, read as a superuser."""
    with psycopg.connect(dsns["super"], autocommit=True) as conn:
        return {
            "sessions": conn.execute("SELECT application_name FROM pg_stat_activity "
                                     "WHERE application_name LIKE 'concurbench:%'").fetchall(),
            "relations": conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = relnamespace "
                                      "WHERE nspname = 'public'").fetchall(),
            "functions": conn.execute("SELECT proname FROM pg_proc p JOIN pg_namespace n ON n.oid = pronamespace "
                                      "WHERE nspname = 'public'").fetchall(),
            "extensions": conn.execute("SELECT extname FROM pg_extension ORDER BY 1").fetchall(),
            "roles": conn.execute("SELECT rolname FROM pg_roles ORDER BY 1").fetchall(),
            "settings": conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s) ORDER BY 1",
                                     (list(WATCHED),)).fetchall(),
            "auto.conf": conn.execute("SELECT name, setting FROM pg_file_settings "
                                      "WHERE sourcefile LIKE '%%auto.conf' ORDER BY 1").fetchall(),
        }


def assert_unchanged(dsns, before: dict) -> None:
    deadline = time.monotonic() + 5  # a closed session's backend leaves pg_stat_activity shortly after
    while (after := server_state(dsns))["sessions"] != before["sessions"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert after == before


@pytest.fixture()
def probe(cli_main, dsns, tmp_path):
    """Runs `concurbench probe` on the dsn of a role; returns (exit code, stdout, the JSON's one report, checks by
    name), having checked that the server was left as it was."""

    def run(scenario, who: str, *args):
        before = server_state(dsns)
        out = tmp_path / f"probe-{len(list(tmp_path.iterdir()))}.json"
        code, stdout, stderr = cli_main("probe", scenario, "--target", "dsn", "--dsn", dsns[who], "--json", out, *args)
        assert "Traceback" not in stderr and "internal error" not in stderr, stderr
        assert stdout.strip().splitlines()[-1] == str(out)
        data = json.loads(out.read_text())
        assert data["format"] == "concurbench-probe/1" and len(data["probes"]) == 1
        report = data["probes"][0]
        assert data["ok"] is report["ok"] is (code == 0)
        assert_unchanged(dsns, before)
        return code, stdout, report, {c["check"]: c for c in report["checks"]}

    return run


def scenario_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text("name: probed\nengine: postgres\nduration: 1s\nwarmup: 0s\n" + text)
    return path


def test_a_normal_scenario_passes_and_its_setup_is_rolled_back(probe, dsns):
    code, stdout, report, checks = probe(HOLD, "super")
    assert code == 0
    assert "probe of hold-and-errors on dsn" in stdout
    assert report["connection"] == safe_conninfo(dsns["super"]) and report["server"].split(".")[0].isdigit()
    assert all(c["status"] == "ok" for c in report["checks"]), [c for c in report["checks"] if c["status"] != "ok"]
    assert checks["setup (inline)"]["server_says"] == "3 statements ran and were rolled back"
    assert checks["held_snapshot: background holder"]["status"] == "ok"  # its SELECT on the setup's table
    for name in ("connect", "sampler wait_events", "sampler database", "sampler wal",
                 "background holder (hold_transaction)", "background locker (hold_transaction)",
                 "teardown (inline)", "nothing left behind"):
        assert checks[name]["status"] == "ok", name
    assert report["elapsed_s"] < 30


def test_a_setup_without_teardown_is_undone_by_the_rollback(probe, tmp_path):
    """Only the probe's rollback stands between this setup and a table left on the server."""
    path = scenario_file(tmp_path, "setup:\n  - CREATE TABLE probe_left (id int); INSERT INTO probe_left VALUES (1)\n"
                                   "  - VACUUM probe_left\nvariants:\n  v:\n"
                                   "    probes: [{name: rows, sql: SELECT count(*) FROM probe_left}]\n"
                                   "    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n")
    code, _, _, checks = probe(path, "super")
    assert code == 0
    assert checks["setup 1 (inline)"]["server_says"] == "2 statements ran and were rolled back"
    vacuum = checks["setup 2 (inline), line 1"]
    assert vacuum["status"] == "skipped" and "VACUUM cannot run inside a transaction block" in vacuum["server_says"]
    assert checks["v: probe rows"]["status"] == "ok"


def test_a_role_that_is_not_a_superuser_and_may_not_create(probe):
    code, stdout, report, checks = probe(HOLD, "plain")
    assert code == 1
    assert checks["role"]["server_says"] == f"probe_plain in database {DB} (not a superuser)"
    assert checks["create objects"]["status"] == "failed"
    assert "GRANT CREATE ON SCHEMA public TO probe_plain" in checks["create objects"]["fix"]
    setup = checks["setup (inline)"]
    assert setup["status"] == "failed" and setup["server_says"] == "line 2: permission denied for schema public"
    assert "failed" in stdout and "permission denied for schema public" in stdout
    assert checks["nothing left behind"]["status"] == "ok"


def test_an_extension_the_role_cannot_create(probe, dsns):
    with psycopg.connect(dsns["super"]) as conn:  # it is there to be installed, just not by this role
        assert conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'pgstattuple' "
                            "AND installed_version IS NULL").fetchone()[0] == 1
    code, _, report, checks = probe(CHURN, "maker", "--quick", "--variant", "loop_holder")
    assert code == 1
    ext = checks["extension pgstattuple"]
    assert ext["status"] == "failed" and "only a superuser may" in ext["server_says"]
    assert f"CREATE EXTENSION pgstattuple; in database {DB}" in ext["fix"]
    setup = checks["setup (sql/postgres/dead-tuple-churn.sql)"]
    assert setup["server_says"] == 'line 2: permission denied to create extension "pgstattuple"'
    assert checks["loop_holder: probe heap"]["status"] == "failed"  # pgstattuple() is not there to call
    assert checks["create objects"]["status"] == "ok"


def test_a_setting_the_role_may_not_change_is_planned_never_applied(probe, tmp_path):
    path = scenario_file(tmp_path, "server: {settings: {log_min_duration_statement: 12345}}\n"
                                   "variants:\n  v:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n")
    code, _, _, checks = probe(path, "maker", "--allow-server-changes")
    setting = checks["setting log_min_duration_statement"]
    assert code == 1 and setting["status"] == "failed"
    assert 'permission denied to set parameter "log_min_duration_statement"' in setting["server_says"]
    assert "GRANT ALTER SYSTEM ON PARAMETER log_min_duration_statement TO probe_maker" in setting["fix"]
    code, _, _, checks = probe(path, "super")  # a superuser, but the run was not allowed to change the server
    assert code == 1 and "--allow-server-changes" in checks["setting log_min_duration_statement"]["fix"]
    code, _, _, checks = probe(path, "super", "--allow-server-changes")  # the plan is printed, the server unchanged
    assert code == 0
    assert checks["setting log_min_duration_statement"]["server_says"].startswith("now -1; the run sets 12345")


def test_a_dsn_server_the_run_may_not_restart(probe, tmp_path):
    path = scenario_file(tmp_path, "server: {settings: {max_connections: 150}}\nvariants:\n"
                                   "  small:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n"
                                   "  roomy:\n    server: {settings: {work_mem: 8MB}}\n"
                                   "    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n")
    code, _, report, checks = probe(path, "super", "--allow-server-changes")
    assert code == 1
    assert checks["setting max_connections"]["status"] == "failed"
    assert "context postmaster" in checks["setting max_connections"]["server_says"]
    planned = checks["variant roomy"]  # the run's own plan of each variant's needs (issue 45)
    assert planned["status"] == "failed" and "needs a server restart: server settings of its own (work_mem=8MB)" \
        in planned["server_says"] and "--skip-unrunnable" in planned["fix"] and "--target docker" in planned["fix"]
    assert "variant small" not in checks and "roomy: restart" not in checks
    assert report["failed"] == 2


def test_run_with_probe_stops_before_any_run(cli_main, dsns, tmp_path):
    before = server_state(dsns)
    code, stdout, stderr = cli_main("run", HOLD, "--probe", "--target", "dsn", "--dsn", dsns["plain"],
                                    "--out", tmp_path / "runs")
    assert code == 1
    assert "probe of hold-and-errors" in stdout and "permission denied for schema public" in stdout
    assert "the probe failed: nothing was run" in stderr
    written = list((tmp_path / "runs").iterdir())
    assert len(written) == 1 and written[0].name.startswith("probe-hold-and-errors-")  # and no run directory
    assert json.loads(written[0].read_text())["ok"] is False
    assert_unchanged(dsns, before)


def test_run_with_probe_on_the_embedded_default_probes_then_runs(cli_main, tmp_path):
    """The default target: the probe passes on a server of its own, then the run goes on and writes its directory."""
    path = scenario_file(tmp_path, "setup:\n  - CREATE TABLE t (id int)\nteardown:\n  - DROP TABLE t\n"
                                   "variants:\n  v:\n    pools:\n      p: {clients: 1, transaction: [SELECT count(*) FROM t]}\n")
    code, stdout, stderr = cli_main("run", path, "--probe", "--out", tmp_path / "runs")
    assert code == 0, stderr
    assert "probe of probed on embedded" in stdout
    written = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(written) == 2 and written[0].endswith("-probed") and written[1].startswith("probe-probed-"), written
    probe_json = json.loads((tmp_path / "runs" / written[1]).read_text())
    assert probe_json["ok"] is True and probe_json["probes"][0]["target"] == "embedded"
    summary = json.loads((tmp_path / "runs" / written[0] / "summary.json").read_text())
    assert [(r["variant"], r["status"]) for r in summary["results"]] == [("v", "ok")]


def test_a_timed_statement_is_tried_in_the_rolled_back_transaction_not_at_its_time(probe, tmp_path):
    """A `statement` background would run only once a window began; the probe tries its SQL with the setup's, so a
    mistake in it (here a table that does not exist) is found before a run."""
    path = scenario_file(tmp_path, "setup:\n  - CREATE TABLE probe_t (id int)\nvariants:\n  v:\n    background:\n"
                                   "      - {name: alter, kind: statement, at: 0.5s, sql: ALTER TABLE probe_t ADD COLUMN c int}\n"
                                   "      - {name: typo, kind: statement, at: 0.5s, sql: ALTER TABLE probe_tt ADD COLUMN c int}\n"
                                   "    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n")
    code, _, _, checks = probe(path, "super")
    assert code == 1
    assert checks["background alter (statement)"]["status"] == "ok"
    assert checks["v: background alter"]["server_says"] == "1 statement ran and was rolled back"
    typo = checks["v: background typo"]
    assert typo["status"] == "failed" and 'relation "probe_tt" does not exist' in typo["server_says"]


def test_a_sampler_of_a_table_only_the_setup_creates_is_read_after_the_setup(probe, tmp_path):
    """The probe reads each sampler before its rolled-back setup, when a table only the setup creates is not
    there yet (issue 34): table_stats of it is read again after the setup, inside the probe's transaction,
    and passes; a name no setup creates still fails. The fixture checks that the table is gone after each probe."""
    text = ("setup:\n  - CREATE TABLE probe_sampled (id int PRIMARY KEY); INSERT INTO probe_sampled VALUES (1)\n"
            "samplers:\n  table_stats: {{tables: [{table}]}}\n"
            "variants:\n  v:\n    pools:\n      p: {{clients: 1, transaction: [SELECT 1]}}\n")
    code, _, report, checks = probe(scenario_file(tmp_path, text.format(table="probe_sampled")), "super")
    sampler = checks["sampler table_stats"]
    assert code == 0, [c for c in report["checks"] if c["status"] != "ok"]
    assert sampler["status"] == "ok" and "after v's setup, inside the probe's rolled-back transaction" \
        in sampler["server_says"]
    assert "no user table named probe_sampled" in sampler["server_says"]  # what the reading before the setup met
    assert checks["nothing left behind"]["status"] == "ok"
    code, _, _, checks = probe(scenario_file(tmp_path, text.format(table="probe_sampeld")), "super")
    sampler = checks["sampler table_stats"]
    assert code == 1 and sampler["status"] == "failed"
    assert sampler["server_says"].startswith("table_stats: no user table named probe_sampeld")
