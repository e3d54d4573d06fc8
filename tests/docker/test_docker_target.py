"""The docker target against a real engine, with the image the conftest builds (no registry needed).

Runs go through `python -m concurbench.cli.main run --target docker --host-network` as a user's
would; every test checks that no container (nor data volume) of concurbench is left behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from concurbench.errors import ProvisionError
from concurbench.provisioners import containers, docker as target, docker_engine
from concurbench.running.progress_events import ImagePull, Recorder

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml"
POSTGRES_IMAGE = "concurbench-test/postgres:18"  # built by the conftest's fixture (`images`)
DOCKER_ARGS = ["--target", "docker", "--image", POSTGRES_IMAGE, "--host-network"]
TINY = ("name: tiny\nengine: postgres\nserver: {settings: {max_connections: 50}}\n"
        "setup: CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)\nduration: 1s\nwarmup: 0s\n"
        "variants:\n  v:\n    pools:\n      p: {clients: 2, transaction: [SELECT 1]}\n")
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("images")]


def concurbench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def run_dir_of(result) -> Path:
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture()
def leftovers(docker_client, concurbench_containers):
    """Asserts, after the test, that it left no concurbench container or volume behind."""
    def volumes() -> set[str]:
        return {v.name for v in docker_client.volumes.list(filters={"label": containers.LABEL_RUN})}

    containers_before, volumes_before = concurbench_containers(), volumes()
    yield
    assert concurbench_containers() - containers_before == set()
    assert volumes() - volumes_before == set()


def test_row_lock_quick_run_in_a_container(tmp_path, leftovers):
    started = time.monotonic()
    result = concurbench("run", str(SCENARIO), "--quick", *DOCKER_ARGS, "--variant", "advisory",
                         "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = run_dir_of(result)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert "starting the docker server" in result.stderr and "server PostgreSQL 18." in result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    runs = {(r["variant"], r["point"]) for r in summary["results"]}
    assert runs == {("advisory", 4), ("advisory", 90)}
    assert all(r["pools"]["lockers"]["metrics"]["transactions"] > 0 for r in summary["results"])
    assert "| advisory | lockers | 90 |" in (run_dir / "report.md").read_text()
    assert manifest["servers"][0]["image"] == POSTGRES_IMAGE and manifest["servers"][0]["cpu_limit"] == "none"
    print(f"docker quick run: {time.monotonic() - started:.1f} s")


def test_an_image_pinned_by_the_scenario_for_its_version(tmp_path, leftovers):
    """`server: images:` names the image of a version; the run records the image the container ran."""
    scenario = tmp_path / "pinned.yaml"
    scenario.write_text(TINY.replace("server: {settings: {max_connections: 50}}",
                                     f'server: {{settings: {{max_connections: 50}}, images: {{"18": "{POSTGRES_IMAGE}"}}}}'))
    result = concurbench("run", str(scenario), "--target", "docker", "--server-version", "18", "--host-network",
                         "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    server = json.loads((run_dir_of(result) / "manifest.json").read_text())["servers"][0]
    assert server["image"] == POSTGRES_IMAGE and server["container"].startswith("concurbench-")


def test_kept_container_and_the_password_in_no_file(tmp_path, docker_client, concurbench_containers, leftovers):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    before = concurbench_containers()
    result = concurbench("run", str(scenario), *DOCKER_ARGS, "--keep", "--out", str(tmp_path / "runs"))
    new = concurbench_containers() - before
    try:
        assert result.returncode == 0, result.stderr[-3000:]
        assert len(new) == 1, new
        container = docker_client.containers.get(new.pop())
        assert container.status == "running"
        assert container.labels[containers.LABEL_KEEP] == "1" and container.labels[containers.LABEL_KIND] == "postgres"
        env = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
        password = env["POSTGRES_PASSWORD"]
        assert len(password) >= 16
        assert "kept running" in result.stderr and "printenv POSTGRES_PASSWORD" in result.stderr
        assert password not in result.stdout and password not in result.stderr
        run_dir = run_dir_of(result)
        files = [p for p in run_dir.rglob("*") if p.is_file()]
        assert files
        for path in files:
            assert password.encode() not in path.read_bytes(), path
        port = json.loads((run_dir / "manifest.json").read_text())["servers"][0]["connection"].rsplit(":", 1)[1]
        port = port.split("/")[0]
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", password=password,
                             dbname="concurbench", connect_timeout=10) as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)
    finally:
        run_ids = {docker_client.containers.get(n).labels[containers.LABEL_RUN]
                   for n in concurbench_containers() - before}
        if run_ids:
            assert len(docker_engine.remove_leftover_containers(run_ids)) == len(run_ids)


def test_failing_setup_exits_1_and_removes_the_container(tmp_path, leftovers):
    scenario = tmp_path / "broken.yaml"
    scenario.write_text("name: broken\nengine: postgres\nsetup: |\n  CREATE TABLE a (x int);\n"
                        "  SELECT no_such_function();\nvariants:\n  v:\n    pools:\n"
                        "      p: {clients: 1, transaction: [SELECT 1]}\n")
    result = concurbench("run", str(scenario), *DOCKER_ARGS, "--out", str(tmp_path / "runs"))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "no_such_function" in result.stderr and "Traceback" not in result.stderr
    assert json.loads((run_dir_of(result) / "manifest.json").read_text())["status"] == "failed"


def test_ctrl_c_exits_130_and_removes_the_container(tmp_path, concurbench_containers, leftovers):
    scenario = tmp_path / "long.yaml"
    scenario.write_text(
        "name: long\nengine: postgres\nsetup: CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)\n"
        "duration: 60s\nwarmup: 0s\nvariants:\n"
        "  first:\n    duration: 1s\n    pools:\n      p: {clients: 2, transaction: [SELECT 1]}\n"
        "  second:\n    pools:\n      p: {clients: 4, transaction: [UPDATE t SET id = id WHERE id = 1]}\n")
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(scenario), *DOCKER_ARGS,
                             "--out", str(tmp_path / "runs")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        measuring = re.compile(r"^  second: [\d.]+ s, [1-9][\d,]* txns")  # the second variant commits
        deadline, seen, found = time.monotonic() + 90, [], False
        while not found and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            found = bool(measuring.search(line))
        assert found, "".join(seen)
        assert concurbench_containers(), "the run's container should be up now"
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole process group
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    assert time.monotonic() - started < 30
    manifest = json.loads((Path(stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"


def test_restart_applies_settings_and_keeps_the_data(docker_client, leftovers):
    server = target.DockerServer("postgres", POSTGRES_IMAGE, {"work_mem": "4MB"}, host_network=True)
    try:
        connection = server.start()
        container = docker_client.containers.get(server.container_name)
        assert container.labels[containers.LABEL_RUN] == server.run_id
        assert container.labels[containers.LABEL_KIND] == "postgres"
        assert container.labels[containers.LABEL_OWNER] == str(os.getpid())
        volumes = docker_client.volumes.list(filters={"label": f"{containers.LABEL_SERVER}={server.server_id}"})
        assert len(volumes) == 1
        with psycopg.connect(connection.conninfo, autocommit=True) as conn:
            assert conn.execute("SHOW work_mem").fetchone() == ("4MB",)
            assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
            conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
        connection = server.restart({"work_mem": "8MB"})
        with psycopg.connect(connection.conninfo, autocommit=True) as conn:
            assert conn.execute("SHOW work_mem").fetchone() == ("8MB",)
            assert conn.execute("SELECT x FROM kept").fetchone() == (7,)
        assert "ready to accept connections" in server.logs(20)
        assert server.password not in server.logs(200)
    finally:
        server.stop()
    server.stop()  # idempotent


def test_published_port_on_loopback(docker_client, leftovers):
    if not docker_client.networks.list(names=["bridge"]):
        pytest.skip("this engine has no bridge network (dockerd --bridge=none), so no port can be published")
    server = target.DockerServer("postgres", POSTGRES_IMAGE)
    try:
        connection = server.start()
        ports = docker_client.containers.get(server.container_name).attrs["HostConfig"]["PortBindings"]
        assert ports == {"5432/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(server.port)}]}
        with psycopg.connect(connection.conninfo) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("concurbench",)
    finally:
        server.stop()


def test_readiness_timeout_shows_the_container_log(images, leftovers):
    server = target.DockerServer("postgres", images.sleeper, host_network=True, ready_timeout=3)
    started = time.monotonic()
    with pytest.raises(ProvisionError) as info:
        server.start()
    message = info.value.message
    assert "did not accept connections within 3 s" in message
    for line in images.sleeper_lines:
        assert line in message
    assert time.monotonic() - started < 30
    server.stop()


def test_a_server_that_exits_fails_at_once_with_its_log(leftovers):
    server = target.DockerServer("postgres", POSTGRES_IMAGE, {"no_such_setting": "1"}, host_network=True)
    started = time.monotonic()
    with pytest.raises(ProvisionError) as info:
        server.start()
    assert "container stopped (exit 1)" in info.value.message
    assert "no_such_setting" in info.value.message
    assert time.monotonic() - started < 30


def test_remove_leftover_containers_of_a_killed_run(docker_client, images):
    killed, other = f"killed-{uuid.uuid4().hex[:8]}", f"alive-{uuid.uuid4().hex[:8]}"
    made = []
    for run_id in (killed, other):
        made.append(docker_client.containers.run(
            images.sleeper, name=f"concurbench-{run_id}-postgres-18", detach=True, network_mode="host",
            labels={containers.LABEL_RUN: run_id, containers.LABEL_KIND: "postgres"}))
    try:
        assert docker_engine.remove_leftover_containers({killed}) == [f"concurbench-{killed}-postgres-18"]
        names = {c.name for c in docker_client.containers.list(all=True)}
        assert f"concurbench-{killed}-postgres-18" not in names
        assert f"concurbench-{other}-postgres-18" in names
    finally:
        assert docker_engine.remove_leftover_containers({other}) == [f"concurbench-{other}-postgres-18"]


def test_an_image_that_cannot_be_pulled(leftovers):
    events = Recorder()
    server = target.DockerServer("postgres", "concurbench-test/not-here:1", host_network=True, listener=events)
    with pytest.raises(ProvisionError) as info:
        server.start()
    message = info.value.message
    assert "cannot pull the image concurbench-test/not-here:1" in message and "docker load" in message
    assert events.events and isinstance(events.events[0], ImagePull)


def test_engine_status_lists_the_test_image():
    status = docker_engine.engine_status()
    assert status["reachable"] is True and status["error"] is None and status["version"]
    assert POSTGRES_IMAGE in status["images"]
