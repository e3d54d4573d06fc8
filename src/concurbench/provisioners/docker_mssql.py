"""SQL Server in a container of the docker target: the recipe DockerServer follows for it
(SqlServerContainer), when it is ready for the run, creating the run's database, and removing files
the observers left in it.

SQL Server accepts logins before its databases have finished recovery: a CREATE DATABASE (which
copies model), a DBCC SHRINKFILE in tempdb or a login to the run's database sent then fails (a
login to a database still being recovered fails with error 4060). The server is ready when
sys.databases says ONLINE for tempdb, model and the run's database, once it exists (it is created
after the first start, and recovered again after every restart).

Every connection opened here is closed: pyodbc's `with connect()` commits but leaves the connection
open.

Sources (Microsoft Learn): sys.databases (state_desc), "Database states" (ONLINE, RESTORING,
RECOVERING, RECOVERY_PENDING, SUSPECT, EMERGENCY, OFFLINE; only ONLINE is available).
"""

from __future__ import annotations

import shlex

from ..engines import odbc
from ..engines.quoting import tsql_literal, tsql_name
from ..engines.mssql_names import RUN_ID_LENGTH
from ..engines.registry import MSSQL
from ..errors import EngineError, ProvisionError
from .base import Connection
from .containers import (DATABASE, MSSQL_CONTAINER_KEYS, MSSQL_MEMORY_DEFAULT, DockerHost, mssql_container_config,
                         sql_memory_limit_mb)

SYSTEM = ("tempdb", "model")


class NotReady(Exception):
    """The server answered, and a database the run needs is not ONLINE yet."""


def ready_query(database: str = DATABASE) -> str:
    names = ", ".join(tsql_literal(name) for name in (*SYSTEM, database))
    return f"SELECT name, state_desc FROM sys.databases WHERE name IN ({names})"


def not_online(rows, database: str = DATABASE) -> list[str]:
    """What keeps the server from being ready, from (name, state_desc) rows; [] when nothing does."""
    states = {str(name): str(state) for name, state in rows}
    waiting = [f"{name} is {states.get(name, 'not listed yet')}" for name in SYSTEM if states.get(name) != "ONLINE"]
    if database in states and states[database] != "ONLINE":
        waiting.append(f"{database} is {states[database]}")
    return waiting


def probe(conn_str: str, timeout: int, database: str = DATABASE) -> None:
    """Return when the server is ready; raise (NotReady, or the driver's error) while it is not."""
    conn = odbc.connect(conn_str, autocommit=True, timeout=timeout)
    try:
        rows = conn.execute(ready_query(database)).fetchall()
    finally:
        conn.close()
    waiting = not_online(rows, database)
    if waiting:
        raise NotReady("not ready: " + "; ".join(waiting))


def create_database(conn_str: str, database: str = DATABASE) -> None:
    conn = odbc.connect(conn_str, autocommit=True, timeout=10)
    try:
        conn.execute(f"IF DB_ID({tsql_literal(database)}) IS NULL CREATE DATABASE {tsql_name(database)}")
    finally:
        conn.close()


def remove_command(patterns: list[str]) -> list[str]:
    """`sh -c "rm -f -- ..."` for files an observer wrote: absolute paths whose file name has one `*`
    wildcard after a fixed start (`/data/concurbench_plans_0_*.xel`); everything else is quoted."""
    words = []
    for pattern in patterns:
        folder, _, name = pattern.rpartition("/")
        if not pattern.startswith("/") or "*" in folder or name.count("*") != 1 or name.index("*") < 3:
            raise ValueError(f"not a pattern of files an observer writes: {pattern!r}")
        words.append("*".join(shlex.quote(part) if part else "" for part in pattern.split("*")))
    return ["sh", "-c", "rm -f -- " + " ".join(words)]


class SqlServerContainer:
    """The recipe of a SQL Server container (docker.py's DockerServer follows it; docker_postgres.py has
    PostgreSQL's): an ODBC driver before any pull, the CPUs the Docker host can pin, the container's own keys
    taken out of the scenario's settings, readiness by its databases' states."""

    engine = MSSQL
    pins_cpus = True

    def __init__(self, server):
        self.server = server

    def before_pull(self) -> None:
        self.server.odbc_driver = odbc_driver()  # before pulling gigabytes for nothing

    def on_engine(self, info: dict) -> None:
        self.server.host = DockerHost(info.get("NCPU"), bool(info.get("CPUSet")))

    def on_image(self, image) -> None:
        return None

    def server_settings(self, settings: dict) -> dict:
        """Settings left for the engine to apply over a connection: all but the container's."""
        return {k: v for k, v in settings.items() if k not in MSSQL_CONTAINER_KEYS}

    def config(self) -> dict:
        s = self.server
        return mssql_container_config(image=s.image, name=s.container_name, settings=s.settings, password=s.password,
                                      port=s.port, labels=s.labels, host_network=s.host_network, host=s.host)

    def conninfo(self, database: str) -> str:
        s = self.server
        return odbc.connection_string(s.odbc_driver, "127.0.0.1", s.port, MSSQL.container.admin, s.password, database,
                                      trust_server_certificate=True, encrypt=True)

    def probe(self, seconds: int) -> None:
        probe(self.conninfo("master"), seconds)

    def create_database(self) -> None:
        create_database(self.conninfo("master"))

    def connection(self, extra: dict) -> Connection:
        s = self.server
        memory = sql_memory_limit_mb(s.settings.get("memory_limit") or MSSQL_MEMORY_DEFAULT)
        return Connection(self.conninfo(DATABASE), f"mssql://{MSSQL.container.admin}@127.0.0.1:{s.port}/{DATABASE}",
                          {**extra, "cpus_pinned": s.cpus_pinned, "driver": s.odbc_driver,
                           "sql_memory_limit_mb": memory}, run_id=s.run_id[:RUN_ID_LENGTH])

    def hint(self) -> str:
        s = self.server
        return (f"{MSSQL.container.admin} at 127.0.0.1,{s.port} (database {DATABASE}) with the password from "
                f"`docker exec {s.container_name} printenv {MSSQL.container.password_env}`")


def odbc_driver() -> str:
    """The ODBC driver for SQL Server to use (Driver 18, 17, then FreeTDS), or a ProvisionError saying what to install."""
    try:
        import pyodbc  # noqa: F401
    except ImportError as exc:
        raise ProvisionError(f"SQL Server needs pyodbc and an ODBC driver on this machine: {odbc.DRIVER_HELP}",
                             exc) from None
    try:
        return odbc.detect_driver(odbc.installed_drivers())
    except EngineError as exc:
        raise ProvisionError(exc.message) from None
