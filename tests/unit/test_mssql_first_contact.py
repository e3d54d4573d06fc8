"""A SQL Server's first contact with concurbench (issue 22): when a container is ready, which database a
dsn run happens in, the container's memory and CPU limits, the compose file's healthcheck, and the
permissions docs/mssql.md names.

No SQL Server can run here: every server below is a stand-in that answers as Microsoft's documentation
says SQL Server would, and is named so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from test_tsql_parses import check_tsql

from concurbench.engines import odbc, sqlserver
from concurbench.engines.odbc import CONNECTION, classify
from concurbench.errors import ConfigError, EngineError
from concurbench.provisioners import containers, docker as target, docker_mssql
from concurbench.running.load import load_scenario

ROOT = Path(__file__).resolve().parents[2]


class StandInError(Exception):
    """Shaped like a pyodbc error: (SQLSTATE, message with the native number before the function name)."""

    def __init__(self, number: int, text: str, state: str = "42000"):
        super().__init__(state, f"[{state}] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]{text} ({number}) "
                                f"(SQLDriverConnect)")


class StandInCursor:
    def __init__(self, rows=()):
        self.rows = list(rows)
        self.description = [("c",)]

    def fetchall(self):
        rows, self.rows = self.rows, []
        return rows

    def fetchone(self):
        return self.rows.pop(0) if self.rows else None

    def nextset(self):
        return False


class StartingSqlServer:
    """Stand-in for SQL Server right after its process started: logins into master work at once, while
    tempdb, model and the run's database go through RECOVERING before they are ONLINE (sys.databases
    state_desc); one state per probe. Records the statements and whether each connection was closed."""

    def __init__(self, states: list[dict[str, str]], database_exists: bool = True):
        self.states = states
        self.database_exists = database_exists
        self.statements: list[str] = []
        self.connections: list[StartingConnection] = []

    def connect(self, conn_str: str, autocommit: bool = True, timeout: int = 10):
        conn = StartingConnection(self, sqlserver.database_of(conn_str))
        self.connections.append(conn)
        return conn


class StartingConnection:
    def __init__(self, server: StartingSqlServer, database: str | None):
        self.server = server
        self.database = database
        self.closed = False

    def execute(self, sql: str, *params):
        assert not self.closed
        self.server.statements.append(sql)
        if sql.startswith("SELECT name, state_desc FROM sys.databases"):
            state = self.server.states.pop(0) if len(self.server.states) > 1 else self.server.states[0]
            names = re.findall(r"N'([^']*)'", sql)
            return StandInCursor([(n, s) for n, s in state.items() if n in names])
        if sql.startswith("IF DB_ID("):
            return StandInCursor()
        raise AssertionError(f"stand-in for SQL Server does not know: {sql}")

    def close(self):
        self.closed = True


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def docker_mssql_server() -> target.DockerServer:
    server = target.DockerServer("mssql", "mcr.microsoft.com/mssql/server:2022-latest", run_id="r1")
    server._odbc_driver, server.port = "FreeTDS", 14333
    return server


# -- readiness -----------------------------------------------------------------------------------------
def test_a_container_is_ready_once_tempdb_model_and_the_run_database_are_online(monkeypatch):
    """Stand-in for SQL Server that accepts logins while its databases recover. The old probe ran
    `SELECT 1` in master and called the server ready at the first login, so CREATE DATABASE (which
    copies model) or tempdb's SHRINKFILE came while recovery was still going on."""
    recovering = {"master": "ONLINE", "tempdb": "RECOVERING", "model": "RECOVERING", "concurbench": "RECOVERING"}
    half = {**recovering, "tempdb": "ONLINE", "model": "ONLINE"}
    online = dict.fromkeys(recovering, "ONLINE")
    standin = StartingSqlServer([recovering, recovering, half, online])
    monkeypatch.setattr(odbc, "connect", standin.connect)
    server, clock = docker_mssql_server(), FakeClock()
    target.wait_until_ready(server._probe, timeout=60, clock=clock, sleep=clock.sleep, interval=0.5)
    assert clock.now == 1.5  # three probes found a database not ONLINE, the fourth found all of them
    assert len(standin.connections) == 4 and all(c.closed for c in standin.connections)
    assert all(c.database == "master" for c in standin.connections)


def test_before_the_run_database_exists_only_tempdb_and_model_count():
    rows = [("tempdb", "ONLINE"), ("model", "ONLINE")]
    assert docker_mssql.not_online(rows) == []
    assert docker_mssql.not_online([("tempdb", "ONLINE")]) == ["model is not listed yet"]
    assert docker_mssql.not_online(rows + [("concurbench", "RECOVERY_PENDING")]) == ["concurbench is RECOVERY_PENDING"]


def test_readiness_names_what_it_waits_for_when_time_runs_out(monkeypatch):
    """Stand-in for SQL Server whose tempdb never comes ONLINE: the timeout's cause says so."""
    standin = StartingSqlServer([{"tempdb": "RECOVERING", "model": "ONLINE"}])
    monkeypatch.setattr(odbc, "connect", standin.connect)
    server, clock = docker_mssql_server(), FakeClock()
    with pytest.raises(TimeoutError) as waited:
        target.wait_until_ready(server._probe, timeout=5, clock=clock, sleep=clock.sleep, interval=1)
    assert "tempdb is RECOVERING" in str(waited.value.__cause__)


def test_the_run_database_is_created_over_a_connection_that_is_closed(monkeypatch):
    """Stand-in for SQL Server. pyodbc's `with connect()` commits but leaves the connection open, which
    the old code relied on."""
    standin = StartingSqlServer([dict.fromkeys(("tempdb", "model"), "ONLINE")])
    monkeypatch.setattr(odbc, "connect", standin.connect)
    docker_mssql.create_database(docker_mssql_server()._odbc("master"))
    assert standin.statements == ["IF DB_ID(N'concurbench') IS NULL CREATE DATABASE [concurbench]"]
    assert [c.closed for c in standin.connections] == [True]


@pytest.mark.parametrize("number, text", [
    (4060, 'Cannot open database "concurbench" requested by the login. The login failed.'),
    (922, "Database 'concurbench' is being recovered. Waiting until recovery is finished."),
])
def test_a_database_still_being_recovered_is_a_connection_error(number, text):
    """pyodbc-shaped errors (no server here) of a login or a statement that came while the database
    recovered: worth connecting again, so they are connection errors (the old code said OTHER)."""
    assert classify(StandInError(number, text)) == CONNECTION
    assert sqlserver.is_connection_error(StandInError(number, text))  # the admin session connects again


def test_readiness_statements_parse_as_tsql():
    check_tsql(docker_mssql.ready_query(), "ready_query")
    check_tsql("IF DB_ID(N'concurbench') IS NULL BEGIN CREATE DATABASE [concurbench]; END;", "create database")


def test_files_are_removed_only_by_patterns_an_observer_writes():
    command = docker_mssql.remove_command(["/var/opt/mssql/data/concurbench_plans_0_*.xel",
                                           "/var/opt/mssql/data/concurbench-x 1*.trc"])
    assert command == ["sh", "-c", "rm -f -- /var/opt/mssql/data/concurbench_plans_0_*.xel "
                                   "'/var/opt/mssql/data/concurbench-x 1'*.trc"]
    for bad in ("/var/opt/mssql/data/*", "relative_*.xel", "/var/*/x_*.xel", "/data/a_*_*.xel", "/data/x.xel"):
        with pytest.raises(ValueError):
            docker_mssql.remove_command([bad])


# -- the dsn target's database ---------------------------------------------------------------------------
# Which database a dsn run uses, and what it does to it: test_dsn_mssql_owned.py (issue 38).


def test_the_configurator_never_falls_back_to_master():
    with pytest.raises(EngineError, match="names no database"):
        sqlserver.configurator(object(), "Driver={FreeTDS};Server=db.lab;UID=sa;PWD=pw")


# -- the container's limits -------------------------------------------------------------------------------
def mssql_config(settings: dict, host_cpus: int | None = None) -> dict:
    return containers.mssql_container_config(image="mcr.microsoft.com/mssql/server:2019-latest", name="c",
                                             settings=settings, password="Pw-1234567890abcd", port=51433,
                                             labels={}, host=containers.DockerHost(host_cpus, cpuset=True))


@pytest.mark.parametrize("memory, limit_mb", [("4g", 3276), ("8G", 6553), ("6144m", 4915), ("2.5g", 2048)])
def test_sql_server_is_told_its_memory_below_the_containers(memory, limit_mb):
    """SQL Server before 2022 CU20 does not see a cgroup v2 memory limit: MSSQL_MEMORY_LIMIT_MB keeps it
    at 80% of the container's (the old configuration set only mem_limit)."""
    config = mssql_config({"memory_limit": memory})
    assert config["mem_limit"] == memory
    assert config["environment"]["MSSQL_MEMORY_LIMIT_MB"] == str(limit_mb)


def test_a_memory_limit_that_is_not_a_size_is_a_config_error():
    with pytest.raises(ConfigError, match="4g or 4096m"):
        mssql_config({"memory_limit": "lots"})


def test_the_container_gets_a_cpu_limit_by_default_and_as_asked():
    """The old configuration had none: the server's schedulers and the clients shared every CPU. (Since issue 34
    the limit is the CPUs the container is pinned to, never a quota: test_mssql_second_review.py.)"""
    assert mssql_config({}, host_cpus=8)["cpuset_cpus"] == "4-7"  # half the Docker host's
    assert mssql_config({}, host_cpus=1)["cpuset_cpus"] == "0"
    assert mssql_config({"cpus": "3"}, host_cpus=8)["cpuset_cpus"] == "5-7"
    assert containers.cpu_limit({"CpusetCpus": "5-7"}) == "cpuset 5-7"  # what the run records
    for bad in ("0", "-1", "two", "9", "1.5"):
        with pytest.raises(ConfigError, match="cpus"):
            mssql_config({"cpus": bad}, host_cpus=8)


def test_the_docker_target_records_the_memory_sql_server_was_given(monkeypatch):
    server = docker_mssql_server()
    server.settings = {"memory_limit": "8g"}
    monkeypatch.setattr(target.DockerServer, "_prepare", lambda self: self.connection())
    assert server.connection().extra["sql_memory_limit_mb"] == 6553


SCENARIO = """
name: cpus
engine: mssql
server: {{cpus: {cpus}}}
duration: 1s
variants:
  a:
    pools:
      p: {{clients: 1, transaction: "SELECT 1"}}
"""


def test_cpus_is_a_server_key_of_a_sql_server_scenario(tmp_path):
    path = tmp_path / "cpus.yaml"
    path.write_text(SCENARIO.format(cpus=2), encoding="utf-8")
    assert dict(load_scenario(path).settings)["cpus"] == "2"
    path.write_text(SCENARIO.format(cpus="lots"), encoding="utf-8")
    with pytest.raises(ConfigError, match="cpus"):
        load_scenario(path)


# -- docker-compose.yml ------------------------------------------------------------------------------------
def compose_mssql_services() -> dict:
    doc = YAML(typ="safe").load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    return {name: s for name, s in doc["services"].items() if "mssql/server" in str(s.get("image"))}


def test_the_compose_files_sql_servers_have_a_healthcheck_that_waits_for_tempdb_and_model():
    """docs/mssql.md runs sqlcmd once compose says the service is healthy (`up -d --wait`); without a
    healthcheck that came right after the container started."""
    services = compose_mssql_services()
    assert services
    for name, service in services.items():
        check = service.get("healthcheck")
        assert check, f"{name} has no healthcheck"
        command = " ".join(check["test"][1:])
        sql = re.search(r'-Q "([^"]+)"', command).group(1)
        check_tsql(sql, f"{name} healthcheck")
        assert "N'tempdb', N'model'" in sql and "ONLINE" in sql and " -b " in command
        memory = containers.size_mb(service["mem_limit"])
        assert 0 < int(service["environment"]["MSSQL_MEMORY_LIMIT_MB"]) < memory


# -- docs/mssql.md ----------------------------------------------------------------------------------------
def test_docs_name_the_permissions_a_dsn_login_needs_and_the_first_live_run():
    text = (ROOT / "docs" / "mssql.md").read_text(encoding="utf-8")
    for permission in ("VIEW SERVER STATE", "VIEW SERVER PERFORMANCE STATE", "ALTER TRACE", "ALTER ANY EVENT SESSION",
                       "ALTER SETTINGS", "sysadmin", "DBCC TRACEON", "db_owner"):
        assert permission in text, permission
    first_run = text[text.index("## The first live run"):]
    first_run = first_run[:first_run.index("\n## ", 4)]
    steps = re.findall(r"^\d+\. ", first_run, re.M)
    assert len(steps) >= 4
    assert first_run.index("concurbench probe") < first_run.index("row-lock-vs-applock") \
        < first_run.index("tempdb-gam-contention")
    assert "send" in first_run.lower()
