"""SQL Server tests: they run every SQL Server scenario in its quick form against a real server.

Where the server comes from, in order:
- CONCURBENCH_MSSQL_DSN: an existing server (ODBC string or mssql:// URL; the password from the
  variable named by CONCURBENCH_MSSQL_PASSWORD_ENV, default CONCURBENCH_MSSQL_PASSWORD). The runs
  use --allow-server-changes, so the scenarios' database options are set and put back,
  --skip-unrunnable (rcsi_tf7006 needs a trace flag concurbench turns on only on a server it starts)
  and --allow-xe-without-max-duration (the Extended Events arms on 2019 and 2022).
- a Docker engine that has, or can pull, mcr.microsoft.com/mssql/server:<CONCURBENCH_MSSQL_VERSION>
  (default 2022)-latest: the docker target starts and removes the containers.
Without pyodbc and an ODBC driver for SQL Server, or without either server, every test skips and
says why. None of this can run on the machine the project is built on (no SQL Server image, no
registry); .github/workflows/mssql.yml runs it against 2019, 2022 and 2025.
"""

from __future__ import annotations

import os

import pytest

VERSION = os.environ.get("CONCURBENCH_MSSQL_VERSION", "2022")
IMAGE = f"mcr.microsoft.com/mssql/server:{VERSION}-latest"


def _driver_problem() -> str | None:
    from concurbench.engines import odbc

    try:
        import pyodbc  # noqa: F401
    except ImportError as exc:
        return f"pyodbc cannot be imported ({exc}); {odbc.DRIVER_HELP}"
    try:
        odbc.detect_driver(odbc.installed_drivers())
    except Exception as exc:  # noqa: BLE001 - EngineError with the installed drivers listed
        return getattr(exc, "message", str(exc))
    return None


def _docker_problem() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"no Docker engine answers ({str(exc).splitlines()[0][:200]})"
    try:
        try:
            client.images.get(IMAGE)
        except docker.errors.ImageNotFound:
            client.images.pull(IMAGE)
    except Exception as exc:  # noqa: BLE001
        return f"the Docker engine cannot pull {IMAGE} ({str(exc).splitlines()[0][:200]})"
    finally:
        client.close()
    return None


@pytest.fixture(scope="session")
def mssql_target() -> list[str]:
    """The `run` arguments that reach a SQL Server, or a skip that says why there is none."""
    problem = _driver_problem()
    if problem:
        pytest.skip(f"no SQL Server client: {problem}")
    dsn = os.environ.get("CONCURBENCH_MSSQL_DSN")
    if dsn:
        password_env = os.environ.get("CONCURBENCH_MSSQL_PASSWORD_ENV", "CONCURBENCH_MSSQL_PASSWORD")
        args = ["--target", "dsn", "--dsn", dsn, "--allow-server-changes", "--skip-unrunnable",
                "--allow-xe-without-max-duration"]
        return args + (["--password-env", password_env] if password_env in os.environ else [])
    problem = _docker_problem()
    if problem:
        pytest.skip(f"no SQL Server: CONCURBENCH_MSSQL_DSN is not set and {problem}")
    return ["--target", "docker", "--server-version", VERSION]
