"""The runner's steps on SQL Server, against a stand-in for SQL Server and its provisioner
(`mssql_standin.py`): which database each statement runs in, how often the server restarts, and
what is refused on a server concurbench does not own. The load itself (the worker pools) is left
out: these tests are about what happens before and between the arms.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from mssql_standin import StandInProvisioner, StandInSqlServer

from concurbench.engines import odbc, sqlserver
from concurbench.engines import mssql_config as mc
from concurbench.errors import ConfigError, EngineError, ProvisionError
from concurbench.provisioners.registry import DSN, TARGETS
from concurbench.running.progress_events import Recorder, RunWarning
from concurbench.running.runner import Runner
from concurbench.running.servers import ServerSession
from concurbench.running.load import load_scenario

ROOT = Path(__file__).resolve().parents[2]
TEMPDB_SCENARIO = ROOT / "scenarios" / "mssql" / "tempdb-gam-contention.yaml"


@pytest.fixture()
def standin(monkeypatch):
    """A stand-in SQL Server with 8 tempdb data files (one per core, as setup makes them), reached
    through the engine's own connect (pyodbc replaced by the stand-in's)."""
    def make(files: int = 8, holding_pages: bool = False) -> StandInSqlServer:
        server = StandInSqlServer.with_tempdb_files(files, holding_pages)
        monkeypatch.setattr(odbc, "connect", server.connect)
        return server
    return make


@pytest.fixture()
def pauses(monkeypatch):
    """The configurator's pauses between attempts, recorded instead of slept."""
    slept: list[float] = []
    make = sqlserver.configurator

    def configurator(policy, conninfo):
        config = make(policy, conninfo)
        config.sleep = slept.append
        return config

    monkeypatch.setattr(sqlserver, "configurator", configurator)
    return slept


def start(server: StandInSqlServer, tmp_path, name: str = "docker", allow: bool = False, progress=None):
    scenario = load_scenario(TEMPDB_SCENARIO, quick=True)
    provisioner = StandInProvisioner(server, name=name, allow=allow)
    runner = Runner(scenario, provisioner, out_dir=tmp_path, target=TARGETS[name],
                    **({"progress": progress} if progress else {}))
    state = runner.session(provisioner)
    runner._start(state)
    return runner, state, provisioner


@pytest.mark.parametrize("holding_pages", [False, True], ids=["empty-files", "files-holding-pages"])
def test_the_setup_after_the_tempdb_step_runs_in_the_run_database(standin, tmp_path, holding_pages):
    """Stand-in for SQL Server with 8 tempdb files, the scenario wanting 1. The old code ran
    `USE tempdb; DBCC SHRINKFILE ...` on the admin connection, so the setup that followed created the
    procedures in tempdb (every call then fails with error 2812), or it stopped at error 2555 when
    the files held pages."""
    server = standin(8, holding_pages)
    runner, state, provisioner = start(server, tmp_path)
    assert server.objects.get("concurbench") == {"dbo.temp_churn_dynamic", "dbo.temp_churn_static"}
    assert not server.objects.get("tempdb")
    setup = [sql for db, sql in server.log if "PROCEDURE" in sql]
    assert setup and all(db == "concurbench" for db, sql in server.log if "PROCEDURE" in sql)
    assert state.conn.database == "concurbench"
    assert [f.name for f in server.tempdb_files] == ["tempdev"]
    assert server.restarts == 1  # the files are removed right after one restart, when tempdb is empty
    assert state.info.settings["tempdb_files"] == 1
    assert state.info.extra["facts"] == {"cpu_count": 8, "scheduler_count": 8, "query_store": "READ_WRITE", "adr": 0,
                                   "optimized_locking": None, "lightweight_query_profiling": 1}


def test_memory_optimized_metadata_is_turned_on_with_one_restart(standin, tmp_path, monkeypatch):
    """Stand-in for SQL Server; the arms' load is replaced by a record of the server's state. The old
    code restarted the container for the variant's changed settings and then once more for the
    ALTER SERVER CONFIGURATION."""
    server = standin(1)
    runner, state, provisioner = start(server, tmp_path)
    assert server.restarts == 0
    seen = []

    def arm(server_state, variant, point, repeat):
        seen.append((variant.name, server.memory_optimized, server.restarts))
        return SimpleNamespace(variant=variant.name, status="ok")

    monkeypatch.setattr(runner._measure, "measure", arm)
    results: list = []
    for variant in runner.scenario.variants:
        runner._variant_on(state, variant, 1, results)
    assert seen == [("dynamic", False, 0), ("dynamic_memopt", True, 1), ("static", True, 1)]
    assert [r.variant for r in results] == ["dynamic", "dynamic_memopt", "static"]


def test_a_server_concurbench_does_not_own_keeps_its_tempdb_files(standin, tmp_path):
    """Stand-in for SQL Server reached through the dsn target with --allow-server-changes: removing
    tempdb files (never put back, and failing as soon as pages sit in them) is refused before any
    change; the old code emptied and removed them and recorded nothing to undo."""
    server = standin(4)
    with pytest.raises(ConfigError, match="tempdb") as refused:  # planned before anything (issue 45)
        start(server, tmp_path, name="dsn", allow=True)
    assert "--target docker" in refused.value.message
    assert len(server.tempdb_files) == 4 and server.restarts == 0
    assert not [sql for _, sql in server.log if sql.startswith(("ALTER", "DBCC SHRINKFILE", "EXEC"))]


def with_a_second_tempdb_file(server: StandInSqlServer, tmp_path) -> ServerSession:
    """The dsn target (changes allowed) on `server` after the runner added a second tempdb file."""
    provisioner = StandInProvisioner(server, name="dsn", allow=True)
    runner = Runner(load_scenario(TEMPDB_SCENARIO, quick=True), provisioner, out_dir=tmp_path, target=DSN)
    state = runner.session(provisioner)
    state.conn = server.connect(provisioner.start().conninfo)
    state.config = runner.eng.configurator(provisioner.policy(), provisioner.start().conninfo)
    state.configure({"tempdb_files": "2"}, {})
    return state


@pytest.mark.parametrize("holding_pages", [False, True], ids=["empty", "holding-pages"])
def test_files_added_to_an_unowned_server_are_emptied_in_tempdb_and_removed_at_the_end(standin, tmp_path, pauses,
                                                                                       holding_pages):
    """Stand-in for SQL Server (dsn target, changes allowed) with one tempdb file and a scenario that
    wants two: the file is added, and at the end emptied inside sp_executesql (the connection stays in
    its database) and removed; when it holds pages, the problem is reported with what to do by hand."""
    server = standin(1)
    state = with_a_second_tempdb_file(server, tmp_path)
    assert [f.name for f in server.tempdb_files] == ["tempdev", "concurbench_temp2"]
    server.tempdb_files[1].holds_pages = holding_pages
    problems = state.config.restore(state.conn)
    assert state.conn.database == "concurbench"
    if holding_pages:
        assert pauses == [mc.RETRY_PAUSE_S] * (mc.REMOVE_ATTEMPTS - 1)  # tried again before giving up
        assert len(problems) == 1 and "(2555)" in problems[0]
        assert "ALTER DATABASE tempdb REMOVE FILE [concurbench_temp2]" in problems[0]
    else:
        assert problems == [] and [f.name for f in server.tempdb_files] == ["tempdev"]


@pytest.mark.parametrize("what", ["setup SQL", "teardown SQL"])
def test_a_failing_batch_is_an_error_named_as_setup_or_teardown(standin, what):
    """Stand-in for SQL Server: a batch the server refuses (error 8985, no such file) is an EngineError
    that names the script's kind, file and line. A merge once left run_script without its raise, so a
    failing batch passed in silence and the rest of the script was skipped."""
    server = standin(1)
    conn = server.connect(StandInProvisioner(server).start().conninfo)
    script = "USE tempdb\nGO\nDBCC SHRINKFILE (N'nope', EMPTYFILE) WITH NO_INFOMSGS\nGO\n"
    with pytest.raises(EngineError, match=rf"^{what} failed \(t\.sql, batch at line 3\): .*8985"):
        sqlserver.run_script(conn, script, "t.sql", what=what)


# -- tempdb files that do not go at the first attempt (issue 22) ---------------------------------------------
def test_tempdb_files_startup_put_pages_in_are_removed_at_a_later_attempt(standin, tmp_path, pauses):
    """Stand-in for SQL Server whose startup put pages in every tempdb file, moved out a moment later. The
    old code tried EMPTYFILE and REMOVE FILE once, and the first 2555 stopped the run."""
    server = standin(8)
    server.busy_after_restart = 1
    runner, state, provisioner = start(server, tmp_path)
    assert [f.name for f in server.tempdb_files] == ["tempdev"] and server.restarts == 1
    assert pauses == [mc.RETRY_PAUSE_S] * 7  # one pause per file, then its second attempt worked
    assert server.objects.get("concurbench") == {"dbo.temp_churn_dynamic", "dbo.temp_churn_static"}


def test_tempdb_files_that_cannot_be_removed_are_reported_and_the_run_goes_on(standin, tmp_path, pauses):
    """Stand-in for SQL Server whose tempdb files stay busy: each file is tried REMOVE_ATTEMPTS times, then
    reported in one warning with what to do; the setup still runs (the old code stopped at the first)."""
    server = standin(3)
    server.busy_after_restart = 99
    events = Recorder()
    runner, state, provisioner = start(server, tmp_path, progress=events)
    warnings = [e.message for e in events.of(RunWarning)]
    assert len(warnings) == 1 and len(server.tempdb_files) == 3
    assert warnings[0].count(f"after {mc.REMOVE_ATTEMPTS} attempts") == 2 and "(2555)" in warnings[0]
    assert "ALTER DATABASE tempdb REMOVE FILE [temp3]" in warnings[0]
    assert "the run goes on with 3 tempdb data files" in warnings[0]
    assert len(pauses) == 2 * (mc.REMOVE_ATTEMPTS - 1)
    assert server.objects.get("concurbench") == {"dbo.temp_churn_dynamic", "dbo.temp_churn_static"}


def test_a_file_added_to_an_unowned_server_is_removed_once_the_workloads_pages_moved_out(standin, tmp_path,
                                                                                         pauses):
    """Stand-in for SQL Server (dsn target, changes allowed): the temp-table workload left pages in the
    added file that EMPTYFILE moves out at the second attempt; the old undo gave up at the first."""
    server = standin(1)
    state = with_a_second_tempdb_file(server, tmp_path)
    server.tempdb_files[1].busy = 1
    assert state.config.restore(state.conn) == []
    assert [f.name for f in server.tempdb_files] == ["tempdev"] and pauses == [mc.RETRY_PAUSE_S]
