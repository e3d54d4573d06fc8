"""SQL Server as a guest that leaves nothing running (issue 45), against stand-ins for SQL Server: no SQL Server can
run where concurbench is built. The server is mssql_dsn_standin.StandInDsnServer, which answers as Microsoft's
documentation says SQL Server would (MAX_DURATION from 2025 only, @stoptime, sp_trace_setfilter on a stopped trace,
the sessions a client's lost connection ends); a harness killed with SIGKILL runs in a process of its own
(mssql_remote_standin.py) with the real runner, dsn provisioner and observers, only the worker pools replaced.

Each test failed on the code before issue 45: the observers captured every database of the server, a session on
2019/2022 ran forever after a kill and a later run's start-up dropped any session or trace of the same name,
including a live run's; a killed run's database (and the record of its server change in it) was adopted and
dropped by the next run; DBCC TRACEON(7006, -1) ran on a server concurbench does not own; the variants' needs
were found at the arm that needed them; the docstrings say more.
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from mssql_dsn_standin import DEFAULTS, VERSIONS, StandInDsnServer
from mssql_remote_standin import RemoteStandIn
from mssql_standin import StandInSqlError

from concurbench.background.mssql import SqlTrace, XEventSession
from concurbench.background.mssql_common import MARGIN_S, ObserverScope
from concurbench.engines import mssql_names as names
from concurbench.engines import odbc
from concurbench.errors import EngineError, ProvisionError
from concurbench.housekeeping import remote
from concurbench.provisioners import owned
from concurbench.provisioners.dsn_mssql import ExistingSqlServer
from concurbench.provisioners.registry import DSN as DSN_TARGET
from concurbench.results.model import RunStatus
from concurbench.running import variant_runs
from concurbench.running.load import load_scenario
from concurbench.running.runner import Runner
from concurbench.workload.pool import PoolRunResult
from concurbench.workload.stats import PoolStats

ROOT = Path(__file__).resolve().parents[2]
OBSERVERS = ROOT / "scenarios" / "mssql" / "observer-overhead.yaml"
RCSI = ROOT / "scenarios" / "mssql" / "rcsi-ghost-churn.yaml"
TEMPDB = ROOT / "scenarios" / "mssql" / "tempdb-gam-contention.yaml"
DSN = "Driver={FreeTDS};Server=db.lab;Port=1433;UID=bench;PWD=pw;"
ARMS = ["xe_ring_buffer", "xe_event_file", "xe_event_file_no_event_loss", "sql_trace_file"]
UNBOUNDED = {"2019": True, "2022": True, "2025": False}  # --allow-xe-without-max-duration where MAX_DURATION is not


def bare(path: Path):
    """A scenario of the repository with its servers' settings, database options, variants and observers as they
    are, and without what the stand-in does not run: SQL steps, probes, samplers, and the held transactions."""
    scenario = load_scenario(path, quick=True)
    variants = tuple(replace(v, setup=(), teardown=(), probes=(), samplers=(),
                             background=tuple(b for b in v.background if b.kind in ("xevents", "sql_trace")))
                     for v in scenario.variants)
    return replace(scenario, setup=(), teardown=(), variants=variants)


class QuickLoad:
    """Stand-in for the worker pools: the window's load, done at once."""

    def __init__(self, conninfo, pools, *, warmup, duration, listeners=None, **options):
        self.pools, self.listeners = pools, list(listeners or [])

    def run(self):
        for listener in self.listeners:
            listener.measurement_ended(time.perf_counter_ns())
        return PoolRunResult({p.name: PoolStats(p.name, sessions=p.clients, transactions=10) for p in self.pools},
                             elapsed_s=0.5, workers=1, reported=1)


def held(ready):
    """Stand-in for the worker pools of a harness that is killed in its window: it says so, and waits."""

    class HeldLoad(QuickLoad):
        def run(self):
            ready()
            time.sleep(120)

    return HeldLoad


def runner(scenario, tmp_path, variants, version_key: str = "2022", **options) -> Runner:
    provisioner = ExistingSqlServer(DSN, drivers=["FreeTDS"], xe_without_max_duration=UNBOUNDED[version_key],
                                    **{k: options.pop(k) for k in ("database", "keep_database", "allow_server_changes",
                                                                   "as_is") if k in options})
    return Runner(scenario, provisioner, out_dir=tmp_path / "runs", target=DSN_TARGET, variants=variants, **options)


@pytest.fixture()
def server(monkeypatch, tmp_path):
    """A stand-in SQL Server reached by this process's harness (pyodbc replaced) and by killed ones (remote)."""
    made = StandInDsnServer.with_databases(app=["dbo.accounts"])
    monkeypatch.setattr(odbc, "connect", made.connect)
    monkeypatch.setattr(variant_runs, "LoadGenerator", QuickLoad)
    monkeypatch.setenv("CONCURBENCH_HOME", str(tmp_path / "home"))  # the killed runs' notes stay in the test's
    return made


def ours(server: StandInDsnServer) -> dict:
    """What of concurbench's the server holds: running or switched on, defined, and its databases and records."""
    return {**server.running(), "defined": sorted(server.xe_sessions) + sorted(t["path"] for t in server.traces.values()),
            "databases": sorted(d for d in server.databases if d.startswith("concurbench")),
            "records": sorted(f"{d}: {n}" for d, found in server.properties.items() for n in found
                              if n != owned.PROPERTY and d in server.databases)}


def kill_in_arm(server, tmp_path, scenario, arm: str, version: str, **options):
    """A harness in a process of its own, killed with SIGKILL while `arm`'s window runs."""
    remote_server = RemoteStandIn(server)

    def body(ready):
        variant_runs.LoadGenerator = held(ready)
        runner(scenario, tmp_path, [arm], version, **options).run()

    harness = remote_server.harness(body)
    assert harness.ready.wait(30), harness.error or "the killed harness never reached its window"
    harness.kill()
    assert harness.error is None, harness.error
    return harness


# -- the observers on a server concurbench does not own --------------------------------------------------------
@pytest.mark.parametrize("version", ["2019", "2022", "2025"])
@pytest.mark.parametrize("kind", ["ring_buffer", "event_file", "sql_trace"])
def test_standin_guest_observers_capture_the_runs_database_only_and_stop_by_themselves(server, version, kind):
    server.version = VERSIONS[version]
    server.databases["concurbench_1a2b3c4d"] = {}
    conninfo = DSN + "Database=concurbench_1a2b3c4d;"
    scope = ObserverScope(run_id="1a2b3c4d", guest=True, unbounded_xe=UNBOUNDED[version])
    spec = type("Spec", (), {"name": "obs", "kind": kind, "options": {} if kind == "sql_trace" else {"target": kind}})
    made = (SqlTrace if kind == "sql_trace" else XEventSession)(spec, conninfo, lifetime_s=70, scope=scope,
                                                               connect=lambda c, application_name: server.connect(c))
    made.start()
    mine = server.database_id("concurbench_1a2b3c4d")
    if kind == "sql_trace":
        (trace,) = server.traces.values()
        assert trace["filter_database"] == mine and trace["status"] == 1 and trace["files"] == 2
        assert "concurbench-1a2b3c4d_obs-" in trace["path"]
    else:
        session = server.xe_sessions["concurbench_1a2b3c4d_obs"]
        assert session["database_id"] == mine and session["filtered"] == session["events"] == 1
        assert session["running"] and session["max_duration"] == (None if UNBOUNDED[version] else 70 + MARGIN_S)
        if kind == "event_file":
            assert "max_file_size = 20, max_rollover_files = 2" in session["sql"]
    server.advance(70 + MARGIN_S)  # the harness is gone: nothing stops them but the server
    left = server.running()
    assert left["traces"] == [] and left["xe"] == (["concurbench_1a2b3c4d_obs"] if UNBOUNDED[version] and
                                                   kind != "sql_trace" else [])


@pytest.mark.parametrize("version", ["2019", "2022"])
def test_standin_an_xe_session_without_max_duration_is_refused_on_a_guest_server_unless_allowed(server, version):
    server.version = VERSIONS[version]
    spec = type("Spec", (), {"name": "obs", "kind": "xevents", "options": {}})
    made = XEventSession(spec, DSN + "Database=app;", scope=ObserverScope("1a2b3c4d", guest=True),
                         connect=lambda c, application_name: server.connect(c))
    with pytest.raises(EngineError, match="has no MAX_DURATION.*--allow-xe-without-max-duration"):
        made.start()
    assert server.xe_sessions == {}


# -- a kill -9 in each observer arm, then a plain run and gc -----------------------------------------------------
@pytest.mark.parametrize("arm, version", [(arm, version) for arm in ARMS for version in ("2022", "2025")]
                         + [("xe_ring_buffer", "2019")])  # 2019 and 2022 differ in nothing an observer does
def test_standin_kill_9_in_each_observer_arm_then_a_plain_run_and_gc_leave_nothing_running(server, tmp_path, arm,
                                                                                          version):
    server.version = VERSIONS[version]
    scenario = bare(OBSERVERS)
    killed = kill_in_arm(server, tmp_path, scenario, arm, version)
    [database] = ours(server)["databases"]
    run_id = database[len(names.DATABASE_PREFIX):]
    assert not [s for s in server.sessions if s.pid == killed.pid]  # the server ended the killed run's sessions
    server.advance(scenario.variant(arm).duration + scenario.variant(arm).warmup + MARGIN_S)
    xe_left = ["concurbench_" + run_id + "_xe"] if arm != "sql_trace_file" and version != "2025" else []
    assert server.running()["xe"] == xe_left and server.running()["traces"] == []  # stopped by itself, or not
    assert server.running()["flags"] == []
    assert ours(server)["defined"]  # stopped or not, still defined: the next run or gc drops it

    outcome = runner(scenario, tmp_path, ["baseline"], version).run()  # a plain run from the same machine
    assert outcome.error is None, outcome.error
    notes = outcome.run.servers[0].extra["found_at_start"]
    assert any(f"database {database}" in n for n in notes), notes
    assert ours(server) == {"xe": [], "traces": [], "flags": [], "defined": [], "databases": [], "records": []}
    listed = remote.collect(ExistingSqlServer(DSN, drivers=["FreeTDS"]), remove=True)
    assert {a.kind for a in listed} <= {"file"} and all(a.outcome == "left for an administrator" for a in listed)
    if arm.startswith("xe_event_file"):  # its .xel files are not forgotten: gc lists them with the command
        assert [a.name for a in listed] == [f for f in server.xel_files]
        assert all(f"concurbench_{run_id}_xe" in a.name and "rm -f --" in a.notes[0] for a in listed)
    if arm == "sql_trace_file":  # the trace's files: said by the run that closed the trace
        assert any("concurbench-" + run_id + "_trace-" in n and "rm -f --" in n for n in notes), notes


def test_standin_kill_9_in_rcsi_ghost_churn_never_turns_a_trace_flag_on(server, tmp_path):
    """The old runner ran DBCC TRACEON(7006, -1) for rcsi_tf7006 on a server concurbench does not own (with
    --allow-server-changes), kept its record in the run's database, and a killed run's next run dropped that
    database with the record: `db left: False, flags on: {7006}`. Now the arm is planned away (skipped, typed)."""
    scenario = bare(RCSI)
    kill_in_arm(server, tmp_path, scenario, "rcsi_open_txn", "2022", skip_unrunnable=True, allow_server_changes=True)
    assert server.running()["flags"] == [] and not [sql for _, sql in server.log if "TRACEON" in sql]
    outcome = runner(scenario, tmp_path, ["rcsi", "rcsi_tf7006"], skip_unrunnable=True, allow_server_changes=True).run()
    assert outcome.error is None and [r.variant for r in outcome.results] == ["rcsi"]
    assert outcome.run.skipped["rcsi_tf7006"].startswith("needs a global trace flag: trace flag 7006 on server-wide; "
                                                         "concurbench turns a global trace flag on only on a server "
                                                         "it starts")
    assert ours(server) == {"xe": [], "traces": [], "flags": [], "defined": [], "databases": [], "records": []}
    assert not [sql for _, sql in server.log if "TRACEON" in sql]
    assert remote.collect(ExistingSqlServer(DSN, drivers=["FreeTDS"]), remove=True) == []


# -- two runs on one server --------------------------------------------------------------------------------------
@pytest.mark.parametrize("arm", ["xe_event_file", "sql_trace_file"])
def test_standin_a_second_run_leaves_the_first_runs_sessions_alone(server, tmp_path, arm):
    """Two runs of the same arm on one server: the old start-up stopped and dropped any session or trace of the
    same name or prefix, the live run's included."""
    scenario = bare(OBSERVERS)
    first = RemoteStandIn(server).harness(lambda ready: (setattr(variant_runs, "LoadGenerator", held(ready)),
                                                         runner(scenario, tmp_path, [arm], "2022").run()))
    assert first.ready.wait(30), first.error
    theirs = ours(server)
    assert theirs["xe"] or theirs["traces"]
    outcome = runner(scenario, tmp_path, [arm], "2022").run()  # a second run, from this same machine
    assert outcome.error is None and outcome.results[0].status == RunStatus.OK
    assert "error" not in outcome.results[0].background[0]
    mine = outcome.run.servers[0].extra["run_id"]
    [left] = outcome.files_left()  # the run's end line names them
    assert left == f"/var/opt/mssql/data/concurbench_{mine}_xe_0_*.xel" if arm == "xe_event_file" else \
        left.startswith(f"/var/opt/mssql/data/concurbench-{mine}_trace-") and left.endswith("Z*.trc")
    assert ours(server) == theirs  # the first run's session, trace, database and record, as they were
    first.kill()
    again = runner(scenario, tmp_path, ["baseline"], "2022").run()  # now gone: its leftovers go
    assert again.error is None
    assert ours(server) == {"xe": [], "traces": [], "flags": [], "defined": [], "databases": [], "records": []}


# -- the plan before the first arm ---------------------------------------------------------------------------
def test_standin_rcsi_ghost_churn_is_refused_before_the_first_arm_unless_unrunnable_variants_are_skipped(server,
                                                                                                       tmp_path):
    outcome = runner(bare(RCSI), tmp_path, None, allow_server_changes=True).run()
    message = outcome.error.message
    assert outcome.results == [] and "rcsi-ghost-churn cannot run to its end on SQL Server" in message
    assert "rcsi_tf7006 needs a global trace flag (trace flag 7006 on server-wide)" in message
    assert "--skip-unrunnable to run the others (locking, rcsi," in message and "--target docker" in message
    assert ours(server)["databases"] == [] and not [sql for _, sql in server.log if sql.startswith("ALTER DATABASE")]


def test_standin_tempdb_gam_contention_on_dsn_says_up_front_it_needs_a_server_concurbench_may_restart(server,
                                                                                                    tmp_path):
    server.tempdb_files = server.tempdb_files * 1 + [type(server.tempdb_files[0])(f"temp{n}") for n in (2, 3, 4)]
    scenario = bare(TEMPDB)
    refused = runner(scenario, tmp_path, None, allow_server_changes=True, skip_unrunnable=True).run()
    message = refused.error.message
    assert refused.results == [] and "every variant needs a server restart (tempdb data files: 4 -> 1)" in message
    assert "--target docker" in message and "--server-settings as-is" in message and "--skip-unrunnable" not in message
    warnings = []
    as_is = runner(scenario, tmp_path, None, as_is=True)
    as_is.progress.on_warning = lambda event: warnings.append(event.message)
    outcome = as_is.run()
    assert outcome.error is None and [r.variant for r in outcome.results] == ["dynamic", "dynamic_memopt", "static"]
    assert any("its figures are not those of the scenario's (the article's) setup: tempdb_files 4, the scenario "
               "wants 1" in w for w in warnings), warnings


def test_standin_a_login_without_alter_trace_or_alter_any_event_session_is_refused_at_start_with_the_grant(
        server, tmp_path):
    server.permissions = {"ALTER SETTINGS"}
    outcome = runner(bare(OBSERVERS), tmp_path, None, "2025").run()
    message = outcome.error.message
    assert outcome.results == [] and "GRANT ALTER ANY EVENT SESSION TO [bench]" in message
    assert "GRANT ALTER TRACE TO [bench]" in message and "sql_trace_file needs a permission (SQL Trace observer " \
        "trace, which needs ALTER TRACE)" in message
    assert ours(server)["databases"] == [] and server.xe_sessions == {} and server.traces == {}


# -- records of server changes that cannot be lost ---------------------------------------------------------------
def dead_pid() -> int:
    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


def test_standin_a_trace_flag_record_in_an_adopted_database_is_put_back_first(server, tmp_path):
    """A killed run (of an older concurbench, which turned 7006 on) left its temporary database with the flag's
    record. The old run adopted that database, ran, and dropped it, record and all, with 7006 still on."""
    left = names.run_database("0badc0de")
    server.databases[left] = dict(DEFAULTS)
    server.trace_flags.add(7006)
    server.properties[left] = {owned.PROPERTY: owned.marker_text(temporary=True).replace(
        f"@{socket.gethostname()} ", "@lab-runner-3 "), "concurbench_trace_flag_7006":
        f"made by concurbench pid {dead_pid()} on lab-runner-3 at 2026-01-01T12:00:00Z"}
    outcome = runner(bare(OBSERVERS), tmp_path, ["baseline"], database=left).run()
    assert outcome.error is None, outcome.error
    assert any("put back what a killed run recorded in database concurbench_0badc0de: trace flag 7006" in n
               for n in outcome.run.servers[0].extra["found_at_start"])
    assert server.trace_flags == set() and left not in server.databases  # put back, then dropped at the end


def test_standin_a_server_changes_record_survives_a_failed_restore_and_gc_puts_it_back(server, tmp_path):
    """The old stop dropped the run's database after a failed restore, with the only record of the change."""
    scenario = replace(bare(OBSERVERS), settings=(("max degree of parallelism", "1"),))
    server.fail[r"^EXEC sp_configure N'max degree of parallelism', 0$"] = StandInSqlError(
        15247, "User does not have permission to perform this action.")  # the putting back fails
    warnings = []
    run = runner(scenario, tmp_path, ["baseline"], allow_server_changes=True)
    run.progress.on_warning = lambda event: warnings.append(event.message)
    outcome = run.run()
    assert outcome.error is None
    [database] = ours(server)["databases"]
    run_id = database[len(names.DATABASE_PREFIX):]
    assert ours(server)["records"] == [f"{database}: concurbench_configure:max degree of parallelism",
                                       f"{database}: {names.run_property(run_id)}"]
    assert any(f"temporary database {database}" in w and "was left: it holds the record of server changes that "
               "were not put back" in w and "concurbench gc --target dsn" in w for w in warnings), warnings
    assert server.configurations["max degree of parallelism"][0] == 1  # the change the record tells of
    listed = remote.collect(ExistingSqlServer(DSN, drivers=["FreeTDS"]), remove=True)
    assert [(a.kind, a.name, a.outcome) for a in listed] == [
        ("sp_configure", f"max degree of parallelism ({database})", "removed"), ("database", database, "removed")]
    assert server.configurations["max degree of parallelism"][0] == 0 and ours(server)["databases"] == []


# -- the files of an observer, and a certificate --------------------------------------------------------------
def test_standin_gc_deletes_the_observers_files_it_can_reach_on_the_servers_machine(server, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    server.data_dir = str(data) + "/"
    kept = data / "not_ours.xel"
    for name in ("concurbench_0badc0de_xe_0_134343910972710000.xel", "not_ours.xel"):
        (data / name).write_text("x")
        server.xel_files.append(str(data / name))
    local = ExistingSqlServer("Driver={FreeTDS};Server=127.0.0.1;Port=1433;UID=bench;PWD=pw;", drivers=["FreeTDS"])
    listed = remote.collect(local, remove=True)
    assert [(a.kind, a.outcome) for a in listed] == [("file", "removed")]
    assert sorted(p.name for p in data.iterdir()) == [kept.name]


def test_a_refused_certificate_names_the_option_that_accepts_it(monkeypatch):
    """A lab server's self-signed certificate through Driver 18 (Encrypt=yes by default): the old message was the
    driver's alone, with no word of trust_server_certificate."""
    pyodbc = pytest.importorskip("pyodbc")

    def refuse(conn_str, autocommit=True, timeout=10):
        raise pyodbc.OperationalError("08001", "[08001] [Microsoft][ODBC Driver 18 for SQL Server]SSL Provider: "
                                               "[error:0A000086:SSL routines::certificate verify failed:self-signed "
                                               "certificate] (-1) (SQLDriverConnect)")

    monkeypatch.setattr(pyodbc, "connect", refuse)
    dsn = ExistingSqlServer("mssql://bench@db.lab:1433", drivers=["ODBC Driver 18 for SQL Server"])
    with pytest.raises(ProvisionError) as refused:
        dsn.inspect()
    assert "add ?trust_server_certificate=yes to an mssql:// DSN, or TrustServerCertificate=yes" in refused.value.message
