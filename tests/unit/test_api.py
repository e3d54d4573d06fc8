"""The library API as the one composition root, without a server: the Target every command builds, the
provisioners it gives `claims` (the scenario's versions and images on docker, a dsn's password from its
variable), SIGTERM turned into an interrupt and put back, and `import concurbench` staying light.

Docker cannot run here and no server is started: where a command must stop before its runner starts a
server, a stand-in runner (named so below) records the provisioners the API hands it and stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import concurbench
from concurbench import api
from concurbench.api import Target, sigterm_interrupts
from concurbench.engines.registry import POSTGRES

CLAIMS_VERSIONS = POSTGRES.versions
from concurbench.cli.main import cli
from concurbench.errors import ConfigError
from concurbench.provisioners.docker import DockerServer
from concurbench.provisioners.dsn import ExistingServer
from concurbench.running.load import load_scenario

SCENARIO = """name: pinned
engine: postgres
server:
  versions: ["16", "17"]
  images: {"16": "postgres:16.4-bookworm"}
  settings: {work_mem: 8MB}
duration: 1s
warmup: 0s
variants:
  a:
    pools:
      p: {clients: 1, transaction: [SELECT 1]}
expect:
  - claim: it runs
    check: "a: tps > 0"
"""
PASSWORD = "pw-for-the-api-test"


@pytest.fixture()
def scenario_file(tmp_path):
    path = tmp_path / "pinned.yaml"
    path.write_text(SCENARIO)
    return path


class Stop(Exception):
    """Ends a command at its runner: the provisioners were built, no server is started."""


@pytest.fixture()
def handed(monkeypatch):
    """Stand-in for the runner (no Docker here): records (provisioners, target) as the API hands them over."""
    seen: list[tuple[list, str]] = []

    class StandInRunner:
        def __init__(self, scenario, provisioners, *, target, **options):
            seen.append((list(provisioners), target))
            raise Stop

    monkeypatch.setattr(api, "Runner", StandInRunner)
    return seen


def test_claims_on_docker_uses_the_scenarios_versions_and_images(scenario_file, handed, tmp_path):
    result = CliRunner().invoke(cli, ["claims", "--target", "docker", str(scenario_file), "--out", str(tmp_path)])
    assert isinstance(result.exception, Stop), result.output
    [(provisioners, target)] = handed
    assert target.name == "docker"
    assert all(isinstance(p, DockerServer) for p in provisioners)
    assert [p.image for p in provisioners] == ["postgres:16.4-bookworm", "postgres:17"]  # 16 pinned, 17 the default
    assert all(p.settings == {"work_mem": "8MB"} for p in provisioners)


def test_claims_with_an_image_or_versions_given_takes_those(scenario_file, handed, tmp_path):
    runner = CliRunner()
    runner.invoke(cli, ["claims", "--target", "docker", "--image", "my/pg:x", str(scenario_file),
                        "--out", str(tmp_path)])
    runner.invoke(cli, ["claims", "--target", "docker", "--server-version", "15,16", str(scenario_file),
                        "--out", str(tmp_path)])
    assert [p.image for p in handed[0][0]] == ["my/pg:x"]
    assert [p.image for p in handed[1][0]] == ["postgres:15", "postgres:16.4-bookworm"]


def test_claims_on_a_dsn_takes_the_password_from_its_variable_and_never_shows_it(scenario_file, handed, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("BENCH_PW", PASSWORD)
    result = CliRunner().invoke(cli, ["claims", "--target", "dsn", "--dsn", "postgresql://bench@127.0.0.1:5432/lab",
                                      "--password-env", "BENCH_PW", "--allow-server-changes", str(scenario_file),
                                      "--out", str(tmp_path)])
    assert isinstance(result.exception, Stop), result.output
    [([server], target)] = handed
    assert target.name == "dsn" and isinstance(server, ExistingServer)
    assert f"password={PASSWORD}" in server.conninfo and server.allow
    assert PASSWORD not in server.safe and server.safe == "postgresql://bench@127.0.0.1:5432/lab"
    assert PASSWORD not in result.output


def test_claims_refuses_a_version_for_a_dsn(scenario_file, tmp_path):
    result = CliRunner().invoke(cli, ["claims", "--target", "dsn", "--dsn", "postgresql://u@h/db", "--server-version",
                                      "16", str(scenario_file), "--out", str(tmp_path)])
    assert isinstance(result.exception, ConfigError) and "does not apply to --target dsn" in result.exception.message


def test_the_target_gives_every_command_the_same_versions(scenario_file):
    model = load_scenario(scenario_file)
    assert Target("docker").versions_for(model) == ["16", "17"]  # the scenario's matrix
    assert Target("binaries").versions_for(model, CLAIMS_VERSIONS) == ["16", "17"]
    assert Target("docker", ("15",)).versions_for(model) == ["15"]
    assert Target("docker", image="my/pg:x").versions_for(model) == [None]  # one image, one server
    assert Target("embedded").versions_for(model) == [None]
    assert Target("embedded").versions_for(model, CLAIMS_VERSIONS) == list(CLAIMS_VERSIONS)
    assert Target("dsn", dsn="x").versions_for(model, CLAIMS_VERSIONS) == [None]  # the server is the one it is
    probe_side = Target("docker").provisioners(model, settings=False)  # the probe applies no settings
    assert [(p.image, p.settings) for p in probe_side] == [("postgres:16.4-bookworm", {}), ("postgres:17", {})]


def test_a_targets_repr_leaves_out_its_dsn():
    target = Target("dsn", dsn=f"postgresql://bench:{PASSWORD}@127.0.0.1/lab", password_env="X")
    assert PASSWORD not in repr(target) and "password_env='X'" in repr(target)


def test_bad_input_is_a_config_error_before_any_server(scenario_file, tmp_path):
    model, out = load_scenario(scenario_file), tmp_path / "runs"
    with pytest.raises(ConfigError, match=r"unknown target 'dokcer' \(did you mean 'docker'\?\)"):
        api.run(model, target=Target("dokcer"), out_dir=out)
    with pytest.raises(ConfigError, match="quick and params apply when a scenario file is loaded"):
        api.run(model, quick=True, out_dir=out)
    with pytest.raises(ConfigError, match="--check"):
        api.run(scenario_file, shard="1/2", check=api.CheckPolicy(), out_dir=out)
    with pytest.raises(ConfigError, match="not both"):
        api.claims([scenario_file], stored=[tmp_path])
    assert not out.exists()  # no run directory was made


def test_sigterm_interrupts_inside_and_the_handler_before_comes_back():
    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        with pytest.raises(KeyboardInterrupt):
            with sigterm_interrupts():
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next bytecode
                time.sleep(1)
        assert received == []
        os.kill(os.getpid(), signal.SIGTERM)
        assert received == [signal.SIGTERM]  # the handler from before took the second one
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_import_concurbench_does_not_load_the_api_until_it_is_used():
    code = ("import sys, concurbench; assert 'concurbench.api' not in sys.modules, 'loaded'; "
            "assert 'concurbench.running.runner' not in sys.modules; "
            "run = concurbench.run; assert run.__module__ == 'concurbench.api'; print('ok')")
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(concurbench.__file__))}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr
    assert concurbench.run is api.run and concurbench.claims is api.claims and concurbench.Target is Target
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        concurbench.nothing  # noqa: B018
