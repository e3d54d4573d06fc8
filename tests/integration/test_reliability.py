"""Against a real server: the admin connection made again, the connection guard with the server's own
figures, a failing teardown labelled as such with the measured figures kept, and the plan the runner
announces matching the variant runs it then takes. (Faults from outside a running command are in
tests/faults.)
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from concurbench.check import CheckPolicy
from concurbench.engines import postgres as pg
from concurbench.engines.admin import AdminSession
from concurbench.errors import ConfigError, EngineError
from concurbench.running.guards import check_connected
from concurbench.provisioners.embedded import EmbeddedPostgres
from concurbench.running.progress_events import Planned, Recorder, VariantDone
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario

pytestmark = pytest.mark.integration


def terminate(admin, application_name: str) -> int:
    return len(admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                             (application_name,)).fetchall())


def test_the_admin_connection_is_made_again_each_time_its_backend_is_gone(server, admin):
    """The engine's functions take the session as a connection; a statement sent on a connection found gone runs
    again on a new one."""
    heard: list[str] = []
    session = AdminSession(pg, server[1].conninfo, application_name="concurbench:admin-test", on_note=heard.append)
    try:
        assert pg.query_rows(session, "SELECT 1 AS one", "a query") == [{"one": 1}]
        for _ in range(2):
            assert terminate(admin, "concurbench:admin-test") == 1
            pg.run_script(session, "CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (1)")
            assert pg.query_rows(session, "SELECT count(*) AS n FROM t", "a query") == [{"n": 1}]
        assert heard == ["the admin connection was lost (terminating connection due to administrator command) "
                         "and made again"] * 2
        assert session.take_notes() == heard and session.take_notes() == []
        with pytest.raises(EngineError, match="setup SQL failed"):  # an error on a live connection stays an error
            pg.run_script(session, "SELECT no_such_function()")
        assert heard == ["the admin connection was lost (terminating connection due to administrator command) "
                         "and made again"] * 2
    finally:
        session.close()


def test_a_server_gone_for_good_is_an_error_that_says_so():
    pg_server = EmbeddedPostgres()
    connection = pg_server.start()
    try:
        session = AdminSession(pg, connection.conninfo)
    finally:
        pg_server.stop()
    with pytest.raises(EngineError, match=r"the harness's admin connection was lost \(.*\) and could not be made "
                                          r"again: cannot connect to PostgreSQL"):
        pg.run_script(session, "SELECT 1")


def test_teardown_errors_are_labelled_teardown(server):
    with psycopg.connect(server[1].conninfo, autocommit=True) as conn:
        with pytest.raises(EngineError, match=r"^teardown SQL failed \(inline SQL, line 2\): function no_such"):
            pg.run_script(conn, "SELECT 1;\nSELECT no_such();", what="teardown SQL")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_the_connection_guard_counts_what_others_hold_on_the_server(server, tmp_path):
    """The shared server allows 200; the test holds 30 connections, so a variant needing 180 is refused."""
    scenario = load_scenario(write(tmp_path, "name: s\nengine: postgres\nvariants:\n  big:\n    pools:\n"
                                             "      p: {clients: 179, transaction: [SELECT 1]}\n"
                                             "  small:\n    pools:\n      p: {clients: 10, transaction: [SELECT 1]}\n"))
    held = [psycopg.connect(server[1].conninfo, autocommit=True) for _ in range(30)]
    session = AdminSession(pg, server[1].conninfo)

    def query(sql: str, what: str) -> list[dict]:
        return pg.query_rows(session, sql, what)

    try:
        with pytest.raises(ConfigError) as refused:
            check_connected(scenario, list(scenario.variants), query, "the test server")
        message = refused.value.message
        assert message.startswith(f"{scenario.path}:6:20: variants.big.pools.p.clients: 179 clients make 180 "
                                  f"connections (pool p: 179; the harness's own: 1 admin), and the server at the test "
                                  f"server gives this run ")
        assert "max_connections is 200" in message and "in use by other sessions" in message
        check_connected(scenario, [scenario.variant("small")], query, "the test server")
    finally:
        session.close()
        for conn in held:
            conn.close()


def test_a_failing_teardown_keeps_the_measured_figures(server, running_server, tmp_path):
    scenario = load_scenario(write(tmp_path, "name: s\nengine: postgres\nduration: 0.5s\nwarmup: 0s\nvariants:\n"
                                             "  v:\n    teardown: SELECT no_such_function()\n    pools:\n"
                                             "      p: {clients: 2, transaction: [SELECT 1]}\n"))
    outcome = Runner(scenario, running_server(server[1]), out_dir=tmp_path / "runs").run()
    assert outcome.status == "failed"
    assert outcome.error.message.startswith("v (") and "teardown SQL failed (inline SQL, line 1)" in outcome.error.message
    [result] = outcome.results
    assert result.status == "failed" and result.own("p")["transactions"] > 0


def test_the_plan_is_the_order_the_runner_takes(server, running_server, tmp_path):
    scenario = load_scenario(write(tmp_path, "name: s\nengine: postgres\nduration: 0.2s\nwarmup: 0s\nsweep: [1, 2]\n"
                                             "variants:\n  a:\n    pools:\n"
                                             "      p: {clients: sweep, transaction: [SELECT 1]}\n"
                                             "  b:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n"))
    events = Recorder()
    outcome = Runner(scenario, running_server(server[1]), out_dir=tmp_path / "runs", progress=events,
                     repeat=2).run()
    assert outcome.status == "ok", outcome.error
    plans = [e.runs for e in events.of(Planned)]
    assert len(plans) == 1 and all(r.estimate_s > 0 for r in plans[0])
    planned = [(r.variant, r.point, r.repeat) for r in plans[0]]
    assert planned == [(r.variant, r.point, r.repeat) for r in outcome.results]
    assert len(planned) == 6


def test_each_check_round_is_announced_before_it_runs(server, running_server, tmp_path):
    """--check adds rounds of the points its claim reads (a and b, not c): each is added to the plan and the
    plan sent again before the round starts, so the last plan is every variant run, in the order they ran."""
    scenario = load_scenario(write(tmp_path, "name: s\nengine: postgres\nduration: 0.2s\nwarmup: 0s\n"
                                             "variants:\n" + "".join(f"  {v}:\n    pools:\n      p: {{clients: 1, "
                                                                     f"transaction: [SELECT 1]}}\n" for v in "abc")
                                   + "expect:\n  - claim: a is faster\n    check: \"a: tps > 2 * b: tps\"\n"))
    events = Recorder()
    outcome = Runner(scenario, running_server(server[1]), out_dir=tmp_path / "runs", progress=events,
                     check=CheckPolicy(max_repeats=3, budget_s=120)).run()
    assert outcome.error is None, outcome.error
    plans = events.of(Planned)
    assert len(plans) >= 2 and all(p.check for p in plans)
    assert [(r.variant, r.repeat) for r in plans[0].runs] == [("a", 1), ("b", 1), ("c", 1)]
    assert [(r.variant, r.repeat) for r in plans[1].runs][3:] == [("b", 2), ("a", 2)]  # backwards
    ran = [(r.variant, r.repeat) for r in outcome.results]
    assert [(r.variant, r.repeat) for r in plans[-1].runs] == ran and ("c", 2) not in ran
    for previous, plan in zip(plans, plans[1:]):  # sent once the runs planned before had run, before the round
        sent = next(i for i, e in enumerate(events.events) if e is plan)
        done = sum(1 for e in events.events[:sent] if isinstance(e, VariantDone))
        assert done == len(previous.runs)


def test_a_log_drain_whose_backend_was_terminated_still_restores_the_log_settings():
    """Its ALTER SYSTEM must be undone on a new connection, or the server would go on logging into a FIFO."""
    from concurbench.background.log_drain import LogDrain
    from concurbench.scenario.model import Background

    pg_server = EmbeddedPostgres({"logging_collector": "on"})
    connection = pg_server.start()
    try:
        with psycopg.connect(connection.conninfo, autocommit=True) as admin:
            before = admin.execute("SHOW log_directory").fetchone()[0]
            drain = LogDrain(Background("slow", "log_drain", "read committed", (), rate=1 << 20), connection.conninfo)
            drain.start()
            try:
                assert admin.execute("SHOW log_directory").fetchone()[0] != before
                assert terminate(admin, "concurbench:background:slow") == 1
            finally:
                drain.close()
            assert admin.execute("SHOW log_directory").fetchone()[0] == before
            assert admin.execute("SELECT count(*) FROM pg_file_settings WHERE sourcefile LIKE '%%auto.conf'"
                                 ).fetchone()[0] == 0
        assert any("its connection was lost (terminating connection due to administrator command) and made again"
                   in note for note in drain.describe()["notes"])
    finally:
        pg_server.stop()
