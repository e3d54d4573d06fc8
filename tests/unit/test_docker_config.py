"""The docker target without an engine: container configurations, passwords, readiness, messages."""

from __future__ import annotations

import string
import sys
import types

import pytest
from docker.errors import APIError, ImageNotFound

from concurbench.provisioners import docker_mssql
from concurbench.engines.registry import MSSQL, POSTGRES
from concurbench.provisioners.containers import image_of, mssql_container_config, postgres_container_config
from concurbench.errors import ConfigError, ProvisionError
from concurbench.provisioners import containers, docker as target, docker_engine
from concurbench.provisioners.registry import TargetOptions, make_provisioner
from concurbench.running.progress_events import ImagePull, Recorder

LABELS = target.container_labels("run1", "postgres", "srv1")


def pg_config(**kwargs):
    args = dict(image="postgres:16", name="c1", settings={"max_connections": 300, "shared_buffers": "256MB"},
                password="Secret-123", port=55432, labels=LABELS)
    return postgres_container_config(**{**args, **kwargs})


def mssql_config(**kwargs):
    args = dict(image="mcr.microsoft.com/mssql/server:2022-latest", name="c2", settings={},
                password="Pw-1234567890abcd", port=51433, labels=target.container_labels("run1", "mssql", "srv2"))
    return mssql_container_config(**{**args, **kwargs})


# -- PostgreSQL --------------------------------------------------------------------------------------
def test_settings_become_dash_c_arguments_in_order():
    assert containers.postgres_args({"max_connections": 300, "fsync": False, "shared_buffers": "256MB"}) == [
        "postgres", "-c", "max_connections=300", "-c", "fsync=off", "-c", "shared_buffers=256MB"]


def test_published_port_on_loopback_by_default():
    config = pg_config()
    assert config["ports"] == {"5432/tcp": ("127.0.0.1", 55432)}
    assert "network_mode" not in config
    assert config["command"] == ["postgres", "-c", "max_connections=300", "-c", "shared_buffers=256MB"]
    assert config["environment"]["POSTGRES_PASSWORD"] == "Secret-123"
    assert config["detach"] is True and config["image"] == "postgres:16" and config["name"] == "c1"


def test_host_network_listens_on_loopback_at_the_chosen_port_after_the_scenario_settings():
    config = pg_config(host_network=True, settings={"port": 1, "work_mem": "4MB"})
    assert config["network_mode"] == "host" and "ports" not in config
    assert config["command"][-4:] == ["-c", "port=55432", "-c", "listen_addresses=127.0.0.1"]
    assert config["command"].index("work_mem=4MB") < config["command"].index("port=55432")


def test_labels_on_the_container_and_its_data_volume():
    config = pg_config(data_dir="/var/lib/postgresql/18/docker")
    assert config["labels"]["concurbench.run_id"] == "run1"
    assert config["labels"]["concurbench.kind"] == "postgres"
    mount = config["mounts"][0]
    assert mount["Target"] == "/var/lib/postgresql/18/docker" and mount["Type"] == "volume"
    assert mount["VolumeOptions"]["Labels"]["concurbench.run_id"] == "run1"
    assert config["environment"]["PGDATA"] == "/var/lib/postgresql/18/docker"


def test_labels_carry_owner_host_and_keep():
    labels = target.container_labels("r", "mssql", "s", keep=True, owner_pid=42, host="box")
    assert labels == {"concurbench.run_id": "r", "concurbench.kind": "mssql", "concurbench.server": "s",
                      "concurbench.keep": "1", "concurbench.owner_pid": "42", "concurbench.host": "box"}


def test_images_from_version_or_option():
    assert image_of(POSTGRES, TargetOptions(target="docker")) == "postgres:18"
    assert image_of(POSTGRES, TargetOptions(target="docker", server_version="16")) == "postgres:16"
    assert image_of(POSTGRES, TargetOptions(target="docker", server_version="16", image="my/pg:x")) == "my/pg:x"


# -- SQL Server ---------------------------------------------------------------------------------------
def test_mssql_environment_and_defaults():
    config = mssql_config()
    env = config["environment"]
    assert env == {"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": "Pw-1234567890abcd", "MSSQL_PID": "Developer",
                   "MSSQL_MEMORY_LIMIT_MB": "3276"}  # 80% of the container's 4 GB
    assert config["mem_limit"] == "4g"
    assert "nano_cpus" not in config  # the host's CPUs unknown here
    assert config["ports"] == {"1433/tcp": ("127.0.0.1", 51433)}
    assert "command" not in config  # the image's own
    assert config["mounts"][0]["Target"] == "/var/opt/mssql"
    assert config["labels"]["concurbench.kind"] == "mssql"


def test_mssql_trace_flags_memory_edition_and_host_network():
    config = mssql_config(settings={"trace_flags": "1222, -T3604", "memory_limit": "2g", "pid": "Express",
                                    "collation": "Latin1_General_100_BIN2"}, host_network=True)
    assert config["command"] == ["/opt/mssql/bin/sqlservr", "-T1222", "-T3604"]
    assert config["mem_limit"] == "2g"
    env = config["environment"]
    assert env["MSSQL_PID"] == "Express" and env["MSSQL_COLLATION"] == "Latin1_General_100_BIN2"
    assert env["MSSQL_TCP_PORT"] == "51433" and env["MSSQL_IP_ADDRESS"] == "127.0.0.1"
    assert config["network_mode"] == "host" and "ports" not in config


@pytest.mark.parametrize("value, flags", [([1222, 3604], ["-T1222", "-T3604"]), ("1222,3604", ["-T1222", "-T3604"]),
                                          ("T1117", ["-T1117"]), (None, []), ("", [])])
def test_trace_flags_forms(value, flags):
    assert containers.trace_flags(value) == flags


def test_trace_flag_that_is_not_a_number():
    with pytest.raises(ConfigError, match="trace flag 'deadlocks'"):
        containers.trace_flags(["deadlocks"])


def test_mssql_images_by_year():
    assert image_of(MSSQL, TargetOptions(target="docker")) == "mcr.microsoft.com/mssql/server:2022-latest"
    assert image_of(MSSQL, TargetOptions(target="docker", server_version="2019")).endswith(":2019-latest")
    assert image_of(MSSQL, TargetOptions(target="docker", server_version="2025")).endswith(":2025-latest")
    with pytest.raises(ConfigError, match="2017 is not one of 2019, 2022, 2025"):
        image_of(MSSQL, TargetOptions(target="docker", server_version="2017"))


def test_images_pinned_per_version_by_the_scenario():
    """`server: images:` picks the image of a version (a CU tag); --image still wins, other versions stay -latest."""
    pinned = (("2019", "mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04"), ("16", "postgres:16.4"))
    assert image_of(MSSQL, TargetOptions(target="docker", server_version="2019", images=pinned)) \
        == "mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04"
    assert image_of(MSSQL, TargetOptions(target="docker", server_version="2022", images=pinned)) \
        == "mcr.microsoft.com/mssql/server:2022-latest"
    assert image_of(MSSQL, TargetOptions(target="docker", server_version="2019", images=pinned,
                                            image="my/mssql:x")) == "my/mssql:x"
    assert image_of(POSTGRES, TargetOptions(target="docker", server_version="16", images=pinned)) == "postgres:16.4"
    server = target._factory("mssql", {}, TargetOptions(target="docker", server_version="2019", images=pinned))
    assert server.image == "mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04"


@pytest.mark.parametrize("host_config, limit", [
    ({"NanoCpus": 0, "CpuQuota": 0, "CpuPeriod": 0, "CpusetCpus": ""}, "none"),
    ({"NanoCpus": 2_000_000_000}, "2 CPUs"),
    ({"CpuQuota": 150_000, "CpuPeriod": 100_000}, "1.5 CPUs"),
    ({"CpusetCpus": "0-3"}, "cpuset 0-3"),
    (None, "none"),
])
def test_container_cpu_limit_from_its_host_config(host_config, limit):
    """HostConfig as `docker inspect` shows it (no container runs here)."""
    assert containers.cpu_limit(host_config) == limit


def test_mssql_container_settings_are_not_left_for_the_engine():
    server = target.DockerServer("mssql", "img:1", {"memory_limit": "4g", "trace_flags": [1222],
                                                   "max degree of parallelism": 1})
    assert server.server_settings == {"max degree of parallelism": 1}


# -- passwords ------------------------------------------------------------------------------------------
def test_generated_passwords_are_strong_and_need_no_quoting():
    seen = set()
    for _ in range(300):
        password = target.generate_password()
        assert len(password) >= 16
        assert any(c in string.ascii_uppercase for c in password)
        assert any(c in string.ascii_lowercase for c in password)
        assert any(c in string.digits for c in password)
        assert any(c in containers.PASSWORD_SYMBOLS for c in password)
        assert not set(password) & set(";{}'\"\\$ `&|<>")
        seen.add(password)
    assert len(seen) == 300


@pytest.mark.parametrize("engine", ["postgres", "mssql"])
def test_password_is_in_conninfo_only(engine):
    server = target.DockerServer(engine, "img:1", {"work_mem": "4MB"}, run_id="r1", keep=True)  # a hint when kept
    server.port = 50001
    server.odbc_driver = "ODBC Driver 18 for SQL Server"
    password = server.password
    connection = server.connection()
    assert password in connection.conninfo
    assert password not in connection.safe and password not in str(connection.extra)
    assert password not in str(server.describe()) and password not in server.connect_hint()
    assert password not in repr(server.labels)
    assert "printenv" in server.connect_hint() and "docker rm -f -v" in server.connect_hint()
    assert server.describe()["container"].startswith("concurbench-r1-")
    assert target.DockerServer(engine, "img:1").connect_hint() is None  # not kept: nothing to reach


# -- the target in the registry ---------------------------------------------------------------------------
def test_factory_through_the_registry():
    server = make_provisioner("postgres", {"work_mem": "4MB"}, TargetOptions(
        target="docker", server_version="16", host_network=True, keep=True, run_id="abc"))
    assert isinstance(server, target.DockerServer)
    assert server.image == "postgres:16" and server.host_network and server.keep
    assert server.labels["concurbench.run_id"] == "abc" and server.labels["concurbench.keep"] == "1"
    assert server.ready_timeout == 60
    mssql = make_provisioner("mssql", {}, TargetOptions(target="docker", ready_timeout=5))
    assert mssql.image.endswith("server:2022-latest") and mssql.ready_timeout == 5
    assert target.DockerServer("mssql", "x:1").ready_timeout == 180


def test_a_target_refuses_an_engine_it_does_not_run():
    for name in ("embedded", "binaries"):
        with pytest.raises(ConfigError, match=f"the {name} target runs PostgreSQL only, and this scenario's engine is "
                                              f"SQL Server"):
            make_provisioner("mssql", {}, TargetOptions(target=name))


# -- readiness, with an injected clock ------------------------------------------------------------------
class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_ready_after_a_few_failures():
    clock, calls = FakeClock(), []

    def probe(left):
        calls.append(left)
        if len(calls) < 4:
            raise ConnectionRefusedError("not yet")
        return "up"

    assert target.wait_until_ready(probe, timeout=10, clock=clock, sleep=clock.sleep, interval=0.5) == "up"
    assert len(calls) == 4 and clock.sleeps == [0.5] * 3
    assert calls[0] == 10


def test_timeout_keeps_the_last_error():
    clock = FakeClock()

    def probe(left):
        raise OSError(f"refused at {clock.now:g}")

    with pytest.raises(TimeoutError) as info:
        target.wait_until_ready(probe, timeout=3, clock=clock, sleep=clock.sleep, interval=1)
    assert str(info.value.__cause__) == "refused at 3"


def test_a_dead_container_ends_the_wait_at_once():
    clock = FakeClock()

    def check():
        raise ProvisionError("the container stopped (exit 1)")

    with pytest.raises(ProvisionError, match="exit 1"):
        target.wait_until_ready(lambda left: None, timeout=60, check=check, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


# -- no engine, no driver, no registry ---------------------------------------------------------------------
def test_unreachable_engine_is_one_paragraph(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(ProvisionError) as info:
        target.DockerServer("postgres", "postgres:18").start()
    message = info.value.message
    assert "dockerd running" in message and "/var/run/docker.sock" in message and "\n" not in message
    status = docker_engine.engine_status()
    assert status["reachable"] is False and status["version"] is None and status["images"] == []
    assert "dockerd" in status["error"]


def test_mssql_without_pyodbc_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyodbc", None)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(ProvisionError, match="pip install pyodbc"):
        target.DockerServer("mssql", "mcr.microsoft.com/mssql/server:2022-latest").start()


def test_mssql_driver_choice(monkeypatch):
    """A stand-in pyodbc module (no ODBC stack here) lists the drivers the choice is made from."""
    fake = types.ModuleType("pyodbc")
    fake.drivers = lambda: ["PostgreSQL Unicode"]
    monkeypatch.setitem(sys.modules, "pyodbc", fake)
    with pytest.raises(ProvisionError, match="no ODBC driver for SQL Server.*PostgreSQL Unicode"):
        docker_mssql.odbc_driver()
    fake.drivers = lambda: ["ODBC Driver 17 for SQL Server", "FreeTDS", "ODBC Driver 18 for SQL Server"]
    assert docker_mssql.odbc_driver() == "ODBC Driver 18 for SQL Server"
    fake.drivers = lambda: ["FreeTDS"]
    assert docker_mssql.odbc_driver() == "FreeTDS"


class FakeImages:
    def __init__(self, present: bool):
        self.present = present

    def get(self, name):
        if not self.present:
            raise ImageNotFound(f"No such image: {name}")
        return types.SimpleNamespace(id="sha256:abc", tags=[name])


class FakeApi:
    def __init__(self, lines, images):
        self.lines, self.images, self.pulled = lines, images, []

    def pull(self, repository, tag, stream, decode):
        self.pulled.append((repository, tag))
        for line in self.lines:
            yield line
        self.images.present = True


def fake_client(lines):
    images = FakeImages(False)
    return types.SimpleNamespace(images=images, api=FakeApi(lines, images))


def test_pull_reports_each_layer_status_once():
    client = fake_client([{"status": "Pulling from library/postgres", "id": "16"},
                          {"status": "Downloading", "id": "a1", "progress": "[=>  ] 1MB"},
                          {"status": "Downloading", "id": "a1", "progress": "[==> ] 2MB"},
                          {"status": "Pull complete", "id": "a1"}])
    events = Recorder()
    image = docker_engine.ensure_image(client, "postgres:16", events)
    assert image.id == "sha256:abc" and client.api.pulled == [("postgres", "16")]
    assert [(e.layer, e.status) for e in events.of(ImagePull)] == [
        (None, "pulling"), ("16", "Pulling from library/postgres"), ("a1", "Downloading"), ("a1", "Pull complete")]


def test_failed_pull_names_the_image_and_how_to_bring_it():
    client = fake_client([{"error": "Get \"https://registry-1.docker.io/v2/\": dial tcp: no such host"}])
    with pytest.raises(ProvisionError) as info:
        docker_engine.ensure_image(client, "postgres:16")
    message = info.value.message
    assert "cannot pull the image postgres:16" in message and "no such host" in message
    assert "docker load" in message and "docker pull postgres:16" in message and "--image" in message


def test_pull_refused_by_the_engine():
    client = fake_client([])

    def refuse(*args, **kwargs):
        raise APIError("500 Server Error", explanation="pull access denied for nope/nope")

    client.api.pull = refuse
    with pytest.raises(ProvisionError, match="cannot pull the image nope/nope:1: pull access denied"):
        docker_engine.ensure_image(client, "nope/nope:1")
