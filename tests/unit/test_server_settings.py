"""`--server-settings as-is` without a server: how a scenario's PostgreSQL value is compared with what the server
holds (pg_settings' value and unit, as `read` takes them from the server), what each setting becomes on a server
concurbench does not own, how the differences travel from the manifest to the report, the claims' reasons and
the claims-by-version table, the option's bad uses, and the connections a variant run opens at once.
The same against a real server (Debian's PostgreSQL, a role that is not a superuser):
tests/integration/test_dsn_as_is.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from concurbench.running import guards
from concurbench.check import with_differences
from concurbench.engines import pg_settings as ps
from concurbench.report.by_version import claims_by_version
from concurbench.report.html import report_page
from concurbench.report.render import markdown
from concurbench.report.tables import build_report
from concurbench.results.model import ClaimVerdict, Run, ScenarioInfo, ServerInfo
from concurbench.running.load import load_scenario

ROOT = Path(__file__).resolve().parents[2]

# rows as pg_settings gives them on PostgreSQL 15 (name, setting, unit, vartype, context; SHOW's text)
SHARED_BUFFERS = ps.Found("shared_buffers", "128MB", "16384", "8kB", "integer", "postmaster")
MAX_CONNECTIONS = ps.Found("max_connections", "150", "150", None, "integer", "postmaster")
LOG_MIN = ps.Found("log_min_duration_statement", "-1", "-1", "ms", "integer", "superuser")
TIMEOUT = ps.Found("checkpoint_timeout", "5min", "300", "s", "integer", "sighup")
FSYNC = ps.Found("fsync", "on", "on", None, "bool", "sighup")
COMMIT = ps.Found("synchronous_commit", "on", "on", None, "enum", "user")
FRACTION = ps.Found("checkpoint_completion_target", "0.9", "0.9", None, "real", "sighup")
LIBRARIES = ps.Found("shared_preload_libraries", unknown=ps.UNREADABLE)
BLOCK = ps.Found("block_size", "8192", "8192", None, "integer", "internal")


@pytest.mark.parametrize("found,wanted,same", [
    (SHARED_BUFFERS, "128MB", True), (SHARED_BUFFERS, "131072kB", True), (SHARED_BUFFERS, "0.125GB", True),
    (SHARED_BUFFERS, 16384, True), (SHARED_BUFFERS, "256MB", False), (SHARED_BUFFERS, "128ms", None),
    (MAX_CONNECTIONS, 300, False), (MAX_CONNECTIONS, "150", True), (LOG_MIN, -1, True), (LOG_MIN, "12345", False),
    (TIMEOUT, "5min", True), (TIMEOUT, "300s", True), (TIMEOUT, "300000ms", True), (TIMEOUT, "1h", False),
    (FSYNC, True, True), (FSYNC, "off", False), (FSYNC, "maybe", None), (COMMIT, "ON", True), (COMMIT, "off", False),
    (FRACTION, 0.9, True), (FRACTION, "0.5", False), (LIBRARIES, "pg_stat_statements", None),
    (ps.Found("search_path", '"$user", public', '"$user", public', None, "string", "user"), '"$user",public', True),
])
def test_a_scenario_value_is_compared_as_the_server_reads_it(found, wanted, same):
    assert ps.same(wanted, found) is same


PLANNED = {"shared_buffers": "256MB", "block_size": 4096, "synchronous_commit": "off", "fsync": "on",
           "shared_preload_libraries": "pg_stat_statements"}
FOUND = {f.name: f for f in (SHARED_BUFFERS, BLOCK, COMMIT, FSYNC, LIBRARIES)}


@pytest.mark.parametrize("as_is,allowed,actions", [
    (False, False, ["refuse", "refuse", "refuse", "same", "refuse"]),
    (False, True, ["refuse", "refuse", "apply", "same", "refuse"]),
    (True, False, ["record", "record", "record", "same", "record"]),
    (True, True, ["record", "record", "apply", "same", "record"]),
], ids=["default", "allowed", "as-is", "as-is-allowed"])
def test_what_each_setting_becomes_on_a_server_concurbench_does_not_own(as_is, allowed, actions):
    plan = ps.plan(FOUND, PLANNED, as_is=as_is, allowed=allowed)
    assert [p.action for p in plan] == actions
    whys = {p.name: p.why for p in plan}
    assert whys["shared_buffers"] == ps.RESTART and whys["block_size"] == ps.FIXED
    assert whys["shared_preload_libraries"] == ps.UNREADABLE
    assert whys["synchronous_commit"] == ("" if allowed else ps.NOT_ALLOWED)


def test_differences_say_what_was_wanted_found_and_why():
    assert ps.differences(FOUND, PLANNED, allowed=True) == [
        {"setting": "shared_buffers", "wanted": "256MB", "found": "128MB", "why": ps.RESTART},
        {"setting": "block_size", "wanted": "4096", "found": "8192", "why": ps.FIXED},
        # allowed, yet still different once the run configured the server: it did not take the value
        {"setting": "synchronous_commit", "wanted": "off", "found": "on",
         "why": "the server did not take the scenario's value"},
        {"setting": "shared_preload_libraries", "wanted": "pg_stat_statements", "found": None, "why": ps.UNREADABLE}]


# -- from the manifest to what a reader sees ------------------------------------------------------------------
DIFFERENCES = [{"setting": "max_connections", "wanted": "300", "found": "150", "why": ps.RESTART},
               {"setting": "shared_buffers", "wanted": "256MB", "found": "128MB", "why": ps.RESTART}]
SAID = "max_connections 150, the scenario wants 300; shared_buffers 128MB, the scenario wants 256MB"


def a_run(servers: list[ServerInfo], claims: list[ClaimVerdict]) -> Run:
    return Run(ScenarioInfo("row-lock-vs-advisory", "Row-level locks versus advisory locks"), servers=servers,
               target="dsn", host={"hostname": "h", "cpu_count": 2}, claims=claims)


def test_the_manifest_keeps_the_differences_and_the_report_shows_them_above_the_tables():
    server = ServerInfo("PostgreSQL 15.18", 150018, "15.18", {"max_connections": "150"}, "dsn",
                        "postgresql://bench@127.0.0.1:5432/bench", differences=DIFFERENCES)
    stored = server.as_dict()
    assert stored["differences"] == DIFFERENCES and ServerInfo.from_dict(stored) == server
    assert "differences" not in replace(server, differences=[]).as_dict()  # other runs' manifests are unchanged
    claim = ClaimVerdict("advisory@max: tps > for_update@max: tps", "pass", server="15.18",
                         reason="holds at 95% (3 runs a side; paired by round)")
    run = a_run([server], with_differences([claim], [server]))
    assert run.claims[0].reason == f"holds at 95% (3 runs a side; paired by round); ran with {SAID}"
    assert with_differences(run.claims, [server]) == run.claims  # said once
    text = markdown(build_report(run))
    line = (f"Settings not as the scenario's (--server-settings as-is; claims name them too): max_connections 150, "
            f"the scenario wants 300 ({ps.RESTART}); shared_buffers 128MB, the scenario wants 256MB ({ps.RESTART})")
    assert text.index(line) < text.index("\n## ")
    assert "Settings not as the scenario" in report_page(build_report(run))
    table = claims_by_version([run])
    assert f"on 15.18, settings not as the scenario's (--server-settings as-is): {line.split(': ', 1)[1]}" in \
        table.tables[0].notes


def test_only_the_verdicts_of_the_server_that_differed_name_it():
    differed = ServerInfo(version_short="15.18", differences=DIFFERENCES[:1])
    as_wanted = ServerInfo(version_short="18.6")
    claims = [ClaimVerdict("c", "pass", server=v, reason="holds") for v in ("15.18", "18.6")]
    assert [c.reason for c in with_differences(claims, [differed, as_wanted])] == \
        ["holds; ran with max_connections 150, the scenario wants 300", "holds"]


def test_a_malformed_differences_entry_is_a_format_problem():
    with pytest.raises(ValueError, match=r"manifest.servers\[0\].differences"):
        ServerInfo.from_dict({"version_short": "15", "differences": [{"wanted": "1"}]}, "manifest.servers[0]")


# -- the option ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "probe"])
def test_as_is_is_refused_on_a_target_concurbench_starts(cli_main, command, tmp_path):
    code, _, err = cli_main(command, ROOT / "scenarios/postgres/row-lock-vs-advisory.yaml", "--server-settings",
                            "as-is", "--out", tmp_path)
    assert code == 2
    assert "--server-settings as-is is for a server concurbench does not own (--target dsn); the embedded target " \
           "starts its own server with the scenario's settings" in err
    assert not list(tmp_path.iterdir())


def test_claims_takes_no_version_list_on_a_dsn_target(cli_main, tmp_path):
    code, _, err = cli_main("claims", ROOT / "scenarios/postgres/row-lock-vs-advisory.yaml", "--target", "dsn",
                            "--server-version", "15", "--out", tmp_path)
    assert code == 2 and "--server-version does not apply to --target dsn" in err


# -- the connections a variant run opens at once ---------------------------------------------------------------
def scenario(tmp_path: Path, body: str):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nengine: postgres\nduration: 1s\n" + body)
    return load_scenario(path)


def test_a_timed_statement_holds_two_connections_and_an_observer_one(tmp_path):
    s = scenario(tmp_path, "variants:\n  v:\n    background:\n"
                           "      - {name: alter, kind: statement, at: 0.5s, sql: SELECT 1}\n"
                           "      - {name: drain, kind: log_drain, rate: 1MB}\n"
                           "    pools:\n      p: {clients: 3, transaction: [SELECT 1]}\n")
    assert guards.worst(s.variants[0]).own == {"admin": 1, "sampler": 0, "background": 3}


def test_a_server_concurbench_starts_gets_the_same_count_against_the_scenarios_setting(tmp_path):
    """The probe of the embedded, binaries and docker targets: the server is started with the scenario's
    max_connections, so the count is checked against that (no query reaches a server)."""
    s = scenario(tmp_path, "server:\n  settings: {max_connections: 12}\nsamplers: [wait_events]\nsweep: [4, 11]\n"
                           "variants:\n  v:\n    pools:\n      p: {clients: sweep, transaction: [SELECT 1]}\n")
    found = guards.capacity(s, list(s.variants), query=None, owned=True)
    assert found.fits is False and found.says.startswith("13 needed (v, 11 clients (sweep point 11): pool p: 11; "
                                                         "the harness's own: 1 admin, 1 sampler)")
    assert "max_connections is 12 (server.settings)" in found.says and "raise max_connections" in found.fix
    roomy = scenario(tmp_path, "variants:\n  v:\n    pools:\n      p: {clients: 98, transaction: [SELECT 1]}\n")
    found = guards.capacity(roomy, list(roomy.variants), query=None, owned=True)
    assert found.fits and found.says == ("99 at most (v, 98 clients: pool p: 98; the harness's own: 1 admin); the run "
                                         "starts the server with max_connections is 100 (the server's default)")
