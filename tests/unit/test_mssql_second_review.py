"""The second review of every SQL Server path (issue 34): the probe on a fresh server, the container's
CPUs, the smaller fixes (memory floor, one driver list, TRACESTATUS without flags, the DSN example).

No SQL Server can run here: every server, connection and Docker engine below is a stand-in, named so,
that answers as Microsoft's (or Docker's) documentation says the real one would. Each test failed on the
code before the fix; the docstrings say how.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from mssql_standin import StandInCursor, StandInSqlServer

from concurbench.housekeeping import doctor
from concurbench.provisioners import docker_mssql
from concurbench.engines import odbc, sqlserver
from concurbench.engines.base import ChangePolicy
from concurbench.provisioners.registry import DOCKER
from concurbench.engines import mssql_config as mc
from concurbench.errors import ConfigError, EngineError, ProvisionError
from concurbench.probe import probe
from concurbench.provisioners.base import Connection
from concurbench.report.server_facts import server_facts_table
from concurbench.results.model import ServerInfo
from concurbench.running.load import load_scenario

ROOT = Path(__file__).resolve().parents[2]
NO_LIMIT = "none"  # how the scenario stores `server: cpus:` left empty (engines/mssql_limits.py)


# -- 1. the probe reads a sampler of a table only the setup creates ---------------------------------------
GHOSTS = """\
name: fresh
engine: mssql
setup:
  - CREATE TABLE dbo.ghost_demo (id int NOT NULL PRIMARY KEY)
samplers:
  index_physical_stats: {table: dbo.ghost_demo}
duration: 1s
warmup: 0s
variants:
  v:
    pools:
      p: {clients: 1, transaction: [SELECT 1]}
"""


class StandInFreshSqlServer:
    """Stand-in for a fresh SQL Server (no earlier run left dbo.ghost_demo), reached over several connections.

    As Microsoft Learn documents it: OBJECT_ID returns NULL for an object that does not exist; a table created
    inside a transaction is seen by that session until the transaction is rolled back (and by no other one
    here, the others are not in it); SAVE TRANSACTION sets a savepoint (error 628 outside a transaction),
    @@TRANCOUNT counts open transactions, XACT_STATE() is 0 outside one; a deadlock victim's whole transaction is
    rolled back (error 1205). Every statement is logged with the connection that ran it; any other statement is an
    AssertionError."""

    OBJECT_ID = 901578250

    def __init__(self, deadlock_victim: bool = False):
        self.log: list[tuple[int, str]] = []
        self.connections = 0
        self.deadlock_victim = deadlock_victim  # the reading of the physical stats is chosen as a deadlock victim

    def connect(self, conninfo, application_name=""):
        self.connections += 1
        return StandInSession(self, self.connections)


class StandInSession:
    def __init__(self, server: StandInFreshSqlServer, number: int):
        self.server, self.number = server, number
        self.trancount, self.created = 0, set()

    def close(self):
        pass

    def rollback(self):
        pass

    def execute(self, sql: str, *params):
        self.server.log.append((self.number, sql))
        sampler = mssql_sampler()
        if sql == "BEGIN TRANSACTION":
            self.trancount += 1
            return StandInCursor()
        if sql == "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION":
            self.trancount, self.created = 0, set()
            return StandInCursor()
        if sql.startswith("SAVE TRANSACTION"):
            assert self.trancount, "a savepoint outside a transaction (error 628)"
            return StandInCursor()
        if sql.startswith("IF XACT_STATE() = 1 ROLLBACK TRANSACTION"):  # XACT_STATE() is 0 outside a transaction
            return StandInCursor()
        if sql == "SELECT @@TRANCOUNT":
            return StandInCursor(("n",), [(self.trancount,)])
        if sql.startswith("CREATE TABLE dbo.ghost_demo"):
            assert self.trancount, "the probe's setup must run inside its transaction"
            self.created.add("[dbo].[ghost_demo]")
            return StandInCursor()
        if sql == sampler.RESOLVE:
            return StandInCursor(("database_id", "object_id"),
                                 [(5, self.server.OBJECT_ID if params[0] in self.created else None)])
        if sql == sampler.INDEXES:
            return StandInCursor(("index_id", "name"), [(1, "PK__ghost_demo")])
        if sql == sampler.QUERY:
            assert params == (5, self.server.OBJECT_ID)
            if self.server.deadlock_victim:  # SQL Server rolls the victim's whole transaction back (error 1205)
                self.trancount, self.created = 0, set()
                raise RuntimeError("[40001] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Transaction (Process "
                                   "ID 57) was deadlocked on lock resources with another process and has been chosen "
                                   "as the deadlock victim. Rerun the transaction. (1205) (SQLExecDirectW)")
            return StandInCursor(("index_id", "partition_number", "index_level", "page_count", "record_count",
                                  "ghost_record_count", "version_ghost_record_count", "avg_page_space_used_in_percent"),
                                 [(1, 1, 0, 1, 0, 0, 0, 0.0)])
        if sql.startswith("SELECT DB_NAME()"):
            return StandInCursor(("db",), [("concurbench",)])
        if sql == "DBCC TRACESTATUS(-1) WITH NO_INFOMSGS":  # no flag on: no result set
            return StandInCursor()
        if sql.startswith(("SELECT CAST(SERVERPROPERTY('IsTempdbMetadataMemoryOptimized')",
                           "SELECT COUNT(*) FROM tempdb.sys.database_files")):
            return StandInCursor(("v",), [(1,)])
        if sql.startswith("IF COL_LENGTH('sys.databases', 'is_accelerated_database_recovery_on')"):
            return StandInCursor(("a", "b", "c", "d", "adr"), [(0, 0, "DISABLED", "FULL", 0)])
        if sql.startswith("SELECT SUSER_SNAME(), IS_SRVROLEMEMBER"):
            return StandInCursor(("login", "sysadmin"), [("sa", 1)])
        if sql.startswith(("SELECT session_id FROM sys.dm_exec_sessions", "SELECT name FROM sys.server_event_sessions")):
            return StandInCursor(("c",), [])
        raise AssertionError(f"the stand-in did not expect: {sql}")


def mssql_sampler():
    from concurbench.samplers.mssql import IndexPhysicalStats
    return IndexPhysicalStats


class StandInOwnedProvisioner:
    """Stand-in for the docker target's container (owned: the probe plans, never applies)."""

    name = "docker"

    def start(self):
        return Connection("Driver={FreeTDS};Server=127.0.0.1;Port=1;Database=concurbench;UID=sa;PWD=x;",
                          "mssql://sa@127.0.0.1:1/concurbench")

    def stop(self):
        pass

    def policy(self):
        return ChangePolicy()

    def inspect(self):
        return None


def probe_standin(tmp_path, text: str, deadlock_victim: bool = False):
    path = tmp_path / "fresh.yaml"
    path.write_text(text)
    server = StandInFreshSqlServer(deadlock_victim)
    engine = SimpleNamespace(connect=server.connect,
                             server_info=lambda conn, names: {"version": "Microsoft SQL Server 2022",
                                                              "version_num": 16_000_004_135, "version_short": "2022"},
                             run_script=sqlserver.run_script, query_rows=sqlserver.query_rows)
    report = probe(load_scenario(path), StandInOwnedProvisioner(), engine=engine)
    return report, {c.check: c for c in report.checks}, server


def test_the_probe_reads_index_physical_stats_after_the_setup_created_its_table(tmp_path):
    """Stand-in for a fresh SQL Server. The old probe read the sampler on its own connection before the rolled-back
    setup, where OBJECT_ID('dbo.ghost_demo') is NULL, and failed with "no table" (rcsi-ghost-churn on every fresh
    container). Now it is read again on the setup's connection, inside the transaction, after the setup."""
    report, checks, server = probe_standin(tmp_path, GHOSTS)
    sampler = checks["sampler index_physical_stats"]
    assert sampler.status == "ok", sampler
    assert "after v's setup" in sampler.server_says and "no table 'dbo.ghost_demo'" in sampler.server_says
    assert report.ok, [c for c in report.checks if c.status != "ok"]
    setup_conn = next(n for n, sql in server.log if sql == "BEGIN TRANSACTION")
    on_setup = [sql for n, sql in server.log if n == setup_conn]
    begin, end = on_setup.index("BEGIN TRANSACTION"), on_setup.index("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION")
    created = on_setup.index("CREATE TABLE dbo.ghost_demo (id int NOT NULL PRIMARY KEY)")
    read = on_setup.index(mssql_sampler().QUERY)
    assert begin < created < read < end  # read where the table exists, and rolled back with it
    assert checks["nothing left behind"].status == "ok"
    # a misspelt table is not there after the setup either: the probe still fails, in the server's words
    report, checks, _ = probe_standin(tmp_path, GHOSTS.replace("{table: dbo.ghost_demo}", "{table: dbo.ghost_dmeo}"))
    sampler = checks["sampler index_physical_stats"]
    assert sampler.status == "failed" and not report.ok
    assert sampler.server_says == "index_physical_stats: no table 'dbo.ghost_dmeo'"


def test_a_reading_that_ends_the_probes_transaction_stops_the_setup_there(tmp_path):
    """Stand-in for a fresh SQL Server that picks the reading after the setup as a deadlock victim (error 1205),
    which rolls back the probe's whole transaction: nothing after it may run outside a transaction (it would
    stay on the server), so the probe says so and tries no further step."""
    text = GHOSTS.replace("      p: {clients: 1, transaction: [SELECT 1]}\n",
                          "      p: {clients: 1, transaction: [SELECT 1]}\n    teardown: [DROP TABLE dbo.ghost_demo]\n")
    report, checks, server = probe_standin(tmp_path, text, deadlock_victim=True)
    assert "(1205)" in checks["sampler index_physical_stats"].server_says
    assert checks["v: samplers after the setup"].status == "failed"
    assert checks["v: teardown (inline)"].status == "skipped"
    assert not any(sql.startswith("DROP TABLE") for _, sql in server.log)


# -- 6. DBCC TRACESTATUS(-1) with no flag on -----------------------------------------------------------------
def test_no_trace_flag_on_is_recorded_as_an_empty_list():
    """Stand-in for SQL Server with no trace flag on: DBCC TRACESTATUS(-1) returns no result set (only the
    informational message, which NO_INFOMSGS suppresses), so pyodbc's fetchall() raises. The old code took that
    for a missing permission and the manifest lost its `trace_flags` key instead of recording []."""
    server = StandInSqlServer()
    conn = server.connect("Driver={FreeTDS};Database=concurbench;")
    assert mc.read_server(conn, [])["trace_flags"] == []
    assert sqlserver.server_info(conn, [])["settings"]["trace_flags"] == []
    server.trace_flags.add(7006)
    assert mc.read_server(conn, [])["trace_flags"] == [7006]


# -- 6. one list of ODBC drivers for doctor and the engine ---------------------------------------------------
@pytest.mark.parametrize("installed", [["ODBC Driver 13 for SQL Server"], ["SQL Server Native Client 11.0"],
                                       ["Devart ODBC Driver for SQL Server"], ["TDS"],
                                       ["ODBC Driver 18 for SQL Server"], ["FreeTDS"], ["PostgreSQL Unicode"]])
def test_doctor_accepts_exactly_the_drivers_the_engine_connects_with(monkeypatch, installed):
    """A stand-in for pyodbc's driver list (no driver manager needed). The old doctor passed any name holding
    "SQL Server" or "TDS", while the engine connects only with Driver 18, 17 or FreeTDS: a machine with only
    Driver 13 was told it was ready, and the run then failed with "no ODBC driver for SQL Server found"."""
    monkeypatch.setattr(doctor, "odbc_drivers", lambda: (installed, "pyodbc"))
    try:
        engine_takes = bool(odbc.detect_driver(installed))
    except EngineError:
        engine_takes = False
    check = doctor.check_odbc()
    assert check.ok is engine_takes
    assert engine_takes is (installed[0] in odbc.PREFERRED_DRIVERS)
    if not check.ok:
        assert "ODBC Driver 18 for SQL Server" in check.detail


# -- 2 and 3. the container's CPUs: pinned where the host can, never a quota --------------------------------
class StandInDockerEngine:
    """Stand-in for a Docker engine (docker-py's client), answering `info()` and `containers.run` as moby's
    daemon does (daemon/daemon_unix.go, verifyPlatformContainerResources): NanoCPUs without the kernel's CFS
    bandwidth control is an error; a cpuset on a host without cpuset support is dropped with only a warning;
    a cpuset naming CPUs the host does not offer is an error naming the ones it does."""

    def __init__(self, cpus: int = 8, cfs: bool = True, cpuset: bool = True, available: str | None = None):
        self.cfs, self.cpuset = cfs, cpuset
        self.available = available or f"0-{cpus - 1}"
        self.answer = {"NCPU": cpus, "CpuCfsQuota": cfs, "CpuCfsPeriod": cfs, "CPUSet": cpuset}
        self.runs: list[dict] = []
        self.containers = self
        self.made: dict[str, SimpleNamespace] = {}

    def info(self):
        return dict(self.answer)

    def run(self, **config):
        from docker.errors import APIError

        from concurbench.provisioners.containers import cpu_list
        self.runs.append(config)
        host_config = {"NanoCpus": config.get("nano_cpus", 0), "CpusetCpus": config.get("cpuset_cpus", "")}
        if host_config["NanoCpus"] and not self.cfs:
            raise APIError("400 Client Error", explanation="NanoCPUs can not be set, as your kernel does not support "
                                                           "CPU CFS scheduler or the cgroup is not mounted")
        if host_config["CpusetCpus"] and not self.cpuset:
            host_config["CpusetCpus"] = ""  # "Your kernel does not support cpuset ... Cpuset discarded."
        if host_config["CpusetCpus"] and not set(cpu_list(host_config["CpusetCpus"])) <= set(cpu_list(self.available)):
            raise APIError("400 Client Error", explanation=f"Requested CPUs are not available - requested "
                                                           f"{host_config['CpusetCpus']}, available: {self.available}")
        container = SimpleNamespace(id=f"c{len(self.runs)}", attrs={"HostConfig": host_config, "Mounts": []})
        self.made[container.id] = container
        return container

    def get(self, container_id):
        return self.made[container_id]

    def list(self, all=False, filters=None):  # what the target removes when a start fails: nothing was made
        return []

    volumes = SimpleNamespace(list=lambda filters=None: [])


def start_standin_container(monkeypatch, engine: StandInDockerEngine, settings: dict) -> Connection:
    """The docker target's start() against the stand-in engine; the server's readiness and database are left out."""
    from concurbench.provisioners import docker as target
    monkeypatch.setattr(docker_mssql, "odbc_driver", lambda: "FreeTDS")
    monkeypatch.setattr(target.docker_engine, "connect", lambda: engine)
    monkeypatch.setattr(target.docker_engine, "ensure_image", lambda client, image, progress: SimpleNamespace(
        id="sha256:standin", attrs={}))
    monkeypatch.setattr(target.DockerServer, "_wait_ready", lambda self, container: None)
    monkeypatch.setattr(target.DockerServer, "_prepare", lambda self: self.connection())
    server = target.DockerServer("mssql", "mcr.microsoft.com/mssql/server:2022-latest", settings, run_id="r34")
    return server.start()


def test_a_host_without_cfs_or_cpusets_still_starts_the_container(monkeypatch):
    """Stand-in Docker engine without CFS bandwidth control or cpusets (rootless Docker on an older systemd, some
    NAS kernels). The old configuration always set nano_cpus (half the host's CPUs), which such an engine refuses,
    so the container never started; `cpus` could not be turned off either. Now the default there is no CPU limit,
    recorded with the reason, and `server: cpus:` left empty asks for none anywhere."""
    engine = StandInDockerEngine(cpus=8, cfs=False, cpuset=False)
    connection = start_standin_container(monkeypatch, engine, {})
    assert "nano_cpus" not in engine.runs[-1] and "cpuset_cpus" not in engine.runs[-1]
    assert connection.extra["cpu_limit"] == "none (this Docker host cannot pin a container to CPUs (docker info: " \
                                            "CPUSet false))"
    assert connection.extra["cpus_pinned"] is None
    able = StandInDockerEngine(cpus=8)
    connection = start_standin_container(monkeypatch, able, {"cpus": NO_LIMIT})
    assert "nano_cpus" not in able.runs[-1] and "cpuset_cpus" not in able.runs[-1]
    assert connection.extra["cpu_limit"] == "none (`server: cpus:` is empty)"
    with pytest.raises(ProvisionError, match="cannot pin a container to CPUs") as refused:
        start_standin_container(monkeypatch, StandInDockerEngine(cpus=8, cpuset=False), {"cpus": "2"})
    assert "leave cpus: empty" in refused.value.message


def test_the_container_is_pinned_to_cpus_never_given_a_quota(monkeypatch):
    """Stand-in Docker engine with 8 CPUs. The old configuration gave the container a CFS quota of 4 CPUs
    (nano_cpus), under which SQL Server keeps 8 schedulers and every thread stops for the rest of the 100 ms
    period once the quota is spent, latch and lock holders included. Now it is pinned to 4 CPUs (the last four),
    and the CPUs it really got are recorded beside SQL Server's scheduler count."""
    engine = StandInDockerEngine(cpus=8)
    connection = start_standin_container(monkeypatch, engine, {})
    assert "nano_cpus" not in engine.runs[-1] and engine.runs[-1]["cpuset_cpus"] == "4-7"
    assert connection.extra["cpu_limit"] == "cpuset 4-7" and connection.extra["cpus_pinned"] == 4
    assert start_standin_container(monkeypatch, StandInDockerEngine(cpus=8), {"cpus": "2"}).extra["cpus_pinned"] == 2
    # an engine that offers fewer CPUs to cpusets than it counts names them when it refuses: pinned to those
    narrow = StandInDockerEngine(cpus=8, available="0-3")
    connection = start_standin_container(monkeypatch, narrow, {})
    assert [r["cpuset_cpus"] for r in narrow.runs] == ["4-7", "2-3"] and connection.extra["cpus_pinned"] == 2


@pytest.mark.parametrize("host, cpuset, recorded", [
    (16, "8-15", "cpuset 8-15"),  # half the host's: already 8
    (12, "4-11", "cpuset 4-11"),  # half would be 6: at least 8
    (8, "0-7", "cpuset 0-7"),
    (4, "0-3", "cpuset 0-3 (the scenario asks for at least 8 CPUs (min_cpus) and this Docker host offers 4: the "
               "server shares them with the clients)"),
])
def test_min_cpus_pins_at_least_that_many_where_the_host_has_them_and_says_when_it_has_fewer(monkeypatch, host,
                                                                                             cpuset, recorded):
    """Stand-in Docker engines of 16, 12, 8 and 4 CPUs for tempdb-gam-contention (`min_cpus: 8`, issue 38): the old
    default pinned half the host's CPUs, which on most hosts was too few schedulers for its 100 callers to queue on
    tempdb's pages as the article's 8-core laptop did, and said nothing."""
    engine = StandInDockerEngine(cpus=host)
    connection = start_standin_container(monkeypatch, engine, {"min_cpus": "8"})
    assert engine.runs[-1]["cpuset_cpus"] == cpuset and connection.extra["cpu_limit"] == recorded
    scenario = load_scenario(ROOT / "scenarios" / "mssql" / "tempdb-gam-contention.yaml")
    assert dict(scenario.settings)["min_cpus"] == "8"


def test_a_scheduler_count_that_differs_from_the_pinned_cpus_is_said_in_the_report():
    """The server's facts (sys.dm_os_sys_info: scheduler_count) beside the CPUs the container was pinned to: the
    report says when SQL Server made more schedulers than it has CPUs, which the old report could not tell."""
    facts = {"cpu_count": 8, "scheduler_count": 8, "query_store": "READ_WRITE", "adr": 0, "optimized_locking": None,
             "lightweight_query_profiling": 1}
    servers = [ServerInfo(version_short="2019-CU27", extra={"facts": facts, "cpus_pinned": 4,
                                                            "cpu_limit": "cpuset 4-7"}),
               ServerInfo(version_short="2022-CU14", extra={"facts": {**facts, "scheduler_count": 4},
                                                            "cpus_pinned": 4, "cpu_limit": "cpuset 4-7"})]
    notes = server_facts_table(servers)["notes"]
    assert any("2019-CU27: 8 schedulers on 4 pinned CPUs" in n for n in notes)
    assert not any("2022-CU14" in n for n in notes)


@pytest.mark.parametrize("cpus, ok", [("", True), ("2", True), ("1.5", False), ("0", False), ("true", False)])
def test_cpus_takes_a_whole_number_or_nothing(tmp_path, cpus, ok):
    """`server: cpus:` left empty means no CPU limit (before, it was refused and the limit could not be turned
    off); a fraction, which only a quota could give, is refused with the file and line."""
    path = tmp_path / "cpus.yaml"
    path.write_text(f"name: cpus\nengine: mssql\nserver:\n  cpus: {cpus}\nduration: 1s\nvariants:\n  a:\n"
                    f"    pools:\n      p: {{clients: 1, transaction: SELECT 1}}\n")
    if ok:
        assert dict(load_scenario(path).settings)["cpus"] == (cpus or NO_LIMIT)
    else:
        with pytest.raises(ConfigError, match=r"cpus.yaml:4.*whole number of CPUs"):
            load_scenario(path)


# -- 6. memory_limit has a floor ------------------------------------------------------------------------------
@pytest.mark.parametrize("memory, ok", [("2g", False), ("2400m", False), ("2500m", False), ("2.5g", False),
                                        ("3g", True), ("3072m", True), ("4g", True), ("lots", False)])
def test_validate_refuses_a_memory_limit_sql_server_cannot_start_in(tmp_path, memory, ok):
    """Below 2,500 MB the container's 80% (MSSQL_MEMORY_LIMIT_MB) is under the 2,000 MB SQL Server needs, and the
    container just exits; at 2,500 MB it gets exactly that start-up minimum and nothing to run a scenario with
    (issue 38: the floor is 3g). The old validation took any size; now `validate` refuses it with the file, the
    line and the minimum."""
    path = tmp_path / "memory.yaml"
    path.write_text(f"name: memory\nengine: mssql\nserver:\n  versions: ['2022']\n  memory_limit: {memory}\n"
                    f"duration: 1s\nvariants:\n  a:\n    pools:\n      p: {{clients: 1, transaction: SELECT 1}}\n")
    if ok:
        assert dict(load_scenario(path).settings)["memory_limit"] == memory
        return
    with pytest.raises(ConfigError) as refused:
        load_scenario(path)
    assert re.search(r"memory.yaml:5\b.*server.memory_limit", refused.value.message), refused.value.message
    if memory != "lots":
        assert "at least 3g" in refused.value.message and "2,000 MB" in refused.value.message


# -- 4. tempdb_latches never makes the other samplers wait --------------------------------------------------
LATCH_COLUMNS = ("wait_type", "resource_description", "tasks")
WAIT_COLUMNS = ("wait_type", "waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")
PAGE_COLUMNS = ("object_id", "object_name", "index_id", "page_type")


class StandInLatchedPages:
    """Stand-in for the sampler's own connection to SQL Server 2019 under 100 callers: sys.dm_db_page_info reads the
    page header, so each lookup waits for that page's latch, here until `release` is set (or `hold_s` passes).
    Records the query timeout the connection was given (pyodbc's Connection.timeout) and each lookup."""

    def __init__(self, hold_s: float = 5.0):
        import threading
        self.release = threading.Event()
        self.hold_s = hold_s
        self.looked_up: list[tuple] = []
        self.timeout = 0
        self.closed = False

    def execute(self, sql, *params):
        from concurbench.samplers.mssql_pages import PAGE_INFO
        assert sql == PAGE_INFO, f"only page lookups on this connection, not: {sql}"
        self.looked_up.append(params)
        self.release.wait(self.hold_s)
        return StandInCursor(PAGE_COLUMNS, [(7, "sysallocunits", 1, 1)])

    def close(self):
        self.closed = True


def test_the_sampling_thread_never_waits_for_a_page_lookup():
    """Stand-in for SQL Server 2019: the lookup of page 2:1:118 waits on the latch the callers hold. The old sampler
    ran sys.dm_db_page_info inline on the connection and thread all samplers share, so every reading waited with
    it; now readings return at once, the lookup runs on a connection of its own, and the page is named all the same."""
    from mssql_standin import CannedDmvs

    from concurbench.samplers.mssql import TempdbLatches
    import time
    shared = CannedDmvs({TempdbLatches.QUERY: (LATCH_COLUMNS, [("PAGELATCH_EX", "2:1:118", 40),
                                                               ("PAGELATCH_UP", "2:1:2", 3)]),
                         TempdbLatches.WAIT_STATS: (WAIT_COLUMNS, [("PAGELATCH_EX", 10, 5, 1)])})
    own = StandInLatchedPages()
    sampler = TempdbLatches()
    sampler.prepare(shared, 15_000_000)
    sampler.attach(lambda: own)
    took = []
    for _ in range(5):
        started = time.perf_counter()
        sampler.read(shared)
        took.append(time.perf_counter() - started)
    assert max(took) < 0.05, took  # while the lookup waits on its latch
    assert all(sql in (TempdbLatches.QUERY, TempdbLatches.WAIT_STATS) for sql, _ in shared.executed)
    own.release.set()
    sampler.detach()
    assert own.looked_up == [(1, 118)] and own.timeout == 1 and own.closed
    out = sampler.summarize(None, None, [{"t_s": 0.1, "latch": "PAGELATCH_EX:other", "tasks": 200}], 0.5)
    assert out["object.sysallocunits_tasks"] == 200 and out["pages_named"] == 1 and out["pages_not_named"] == 0


def test_page_lookups_stop_at_their_time_budget():
    """Stand-in whose every lookup waits 0.1 s on its page's latch: with a budget of 0.25 s, three pages are looked
    up and the others are left unnamed with the reason; `finish` returns within the budget and one lookup."""
    import time

    from concurbench.samplers.mssql_pages import PageNamer
    own = StandInLatchedPages(hold_s=0.1)
    namer = PageNamer(lambda: own, budget_s=0.25, timeout_s=1)
    started = time.perf_counter()
    namer.ask([(1, page) for page in range(100, 108)])
    namer.finish()
    assert time.perf_counter() - started < 0.25 + 0.1 + 0.2
    names = namer.names()
    assert len(own.looked_up) == 3 and sum("object" in v for v in names.values()) == 3
    assert sum("budget for naming pages was spent" in v.get("error", "") for v in names.values()) == 5


def test_the_driver_attaches_samplers_for_the_window_and_detaches_them_before_the_summaries():
    """A recording stand-in sampler: the driver hands it a way to connect when the window is set (after prepare)
    and ends that work when it closes, before the summaries. The old driver had no such hook, so the page lookups
    could only run on the shared thread."""
    from concurbench.samplers.base import Sampler, SamplerDriver

    seen: list[str] = []

    class Recording(Sampler):
        name, kind = "recording", "periodic"

        def prepare(self, conn, version_num):
            seen.append("prepare")

        def attach(self, connect):
            seen.append(f"attach {connect()}")

        def detach(self):
            seen.append("detach")

        def read(self, conn):
            return []

        def summarize(self, before, after, rows, elapsed_s):
            seen.append("summarize")
            return {}

    driver = SamplerDriver([Recording()], lambda: "conn", 16_000_000)
    driver.open()
    driver.window_set(0, None)
    driver.measurement_ended(1)
    driver.close()
    driver.summaries(1.0)
    assert seen == ["prepare", "attach conn", "detach", "summarize"]


# -- 5. the same unmeasured warm-up for every arm, recorded ---------------------------------------------------
TEMPDB_SCENARIO = ROOT / "scenarios" / "mssql" / "tempdb-gam-contention.yaml"


def test_every_arm_gets_the_same_unmeasured_warm_up_pass_recorded_with_its_restart(monkeypatch, tmp_path):
    """Stand-in for SQL Server (8 tempdb files, as a container starts) and for the worker pools, which record each
    load they are asked to run. The old runner started dynamic and dynamic_memopt seconds after a container restart,
    so a cold buffer pool, plan cache and tempdb fell into their timed calls while static ran warm. Now every arm
    first runs its own procedure 10 times per client (quick form) with nothing measuring, right before its timed
    load, and the variant run records the pass and whether a restart came before it."""
    import mssql_standin

    from concurbench.running import variant_runs
    from concurbench.running.runner import Runner
    from concurbench.results.model import VariantRun
    from concurbench.workload.pool import PoolRunResult
    from concurbench.workload.stats import PoolStats

    server = StandInSqlServer.with_tempdb_files(8, holding_pages=False)
    monkeypatch.setattr(odbc, "connect", server.connect)
    monkeypatch.setattr(mssql_standin, "FACTS", [*mssql_standin.FACTS, (
        "AS data_files", ("data_files", "memory_optimized_metadata"), (1, 0))])  # the scenario's `before` probe
    loads: list[tuple] = []

    class StandInLoad:
        """Stand-in for the worker pools: what each load was, and how many restarts the server had by then."""

        def __init__(self, conninfo, pools, *, warmup, duration, seed=1, listeners=None, **options):
            self.pools, self.seed, self.measured = pools, seed, bool(listeners)

        def run(self):
            loads.append(("measured" if self.measured else "warm", {p.name: (p.clients, p.transactions)
                                                                     for p in self.pools}, self.seed, server.restarts))
            return PoolRunResult({p.name: PoolStats(p.name, sessions=p.clients, transactions=p.clients * p.transactions)
                                  for p in self.pools}, elapsed_s=0.5, workers=1, reported=1)

    monkeypatch.setattr(variant_runs, "LoadGenerator", StandInLoad)  # the timed load's and the pass's
    monkeypatch.setattr(variant_runs, "build_samplers", lambda specs: [])  # the samplers are tested apart
    provisioner = mssql_standin.StandInProvisioner(server, name="docker")
    runner = Runner(load_scenario(TEMPDB_SCENARIO, quick=True), provisioner, out_dir=tmp_path, target=DOCKER)
    state = runner.session(provisioner)
    runner._start(state)
    results: list = []
    for variant in runner.scenario.variants:
        runner._variant_on(state, variant, 1, results)
    assert [kind for kind, *_ in loads] == ["warm", "measured"] * 3
    warm, measured = loads[0::2], loads[1::2]
    assert all(w[1] == {"callers": (50, 10)} for w in warm) and all(m[1] == {"callers": (50, 60)} for m in measured)
    assert all(w[3] == m[3] for w, m in zip(warm, measured))  # no restart between a pass and its timed load
    assert all(w[2] != m[2] for w, m in zip(warm, measured))  # the pass draws its own parameters
    passes = [r.warmup_pass for r in results]
    assert [p.after_restart for p in passes] == [True, True, False]  # dynamic_memopt restarted; static did not
    assert all(p.transactions_per_client == 10 and p.transactions == 500 and p.status == "ok" for p in passes)
    again = VariantRun.from_dict(results[1].as_dict(), "result")
    assert again.warmup_pass == passes[1]


# -- 6. the example DSN and Driver 18's certificate check --------------------------------------------------
def test_every_dsn_example_with_encrypt_says_how_driver_18_treats_a_self_signed_certificate():
    """docs/mssql.md's example DSN had `Encrypt=yes` without `TrustServerCertificate`, which ODBC Driver 18 refuses
    against the self-signed certificate of every container and most lab servers: each DSN example with Encrypt=yes
    now carries it, and its paragraph says why and when to leave it out."""
    text = (ROOT / "docs" / "mssql.md").read_text(encoding="utf-8")
    examples = re.findall(r'--dsn "(Driver=[^"]*)"', text)
    assert examples
    for dsn in examples:
        if re.search(r"Encrypt=(yes|mandatory)", dsn, re.I):
            assert "TrustServerCertificate=yes" in dsn, dsn
            paragraph = next(p for p in text.split("\n\n") if dsn in p)
            assert "self-signed" in paragraph and "leave it out" in paragraph
