"""Engines by the names scenarios use (`engine: postgres` or `engine: mssql`): one `EngineSpec` each.

An EngineSpec says what an engine is apart from its code: its display name, the server versions a
check covers by default, what the docker target needs of its official image, the setting that caps
connections, and what differs in how concurbench drives it (the compiled loop, one statement per
protocol message, `database:` options, the statements an administrator runs to let a role create
databases). Everything that differs between engines is read from here, never decided by comparing
an engine's name. The engine's code is a module that meets the `Engine` protocol (engines/base.py),
imported when asked for (`get_engine`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, cast

from .base import Engine
from .quoting import pg_shown_name, tsql_name


@dataclass(frozen=True)
class Container:
    """What the docker target needs of an engine's official image."""

    image: str  # the image of a version, `{version}` in it
    versions: tuple[str, ...]  # the versions there are images for; () when any version is a tag
    port: int  # the server's port inside the container
    data_dir: str  # where the server keeps its data (PostgreSQL: the image's PGDATA, when it says)
    ready_timeout_s: float  # how long a new container may take to accept connections
    admin: str  # the administrator's login
    password_env: str  # the environment variable that carries its password into the container


@dataclass(frozen=True)
class EngineSpec:
    name: str  # as scenarios write it
    display: str  # as people write it
    module: str  # the module under engines/ that meets the Engine protocol
    versions: tuple[str, ...]  # the versions `concurbench claims` covers for a scenario without server.versions
    default_version: str  # the docker target's version when none is asked for
    container: Container
    connection_setting: str  # the server setting that caps connections
    default_connections: int  # its value on a server started with the engine's defaults
    fds_per_session: int  # file descriptors a harness session holds (pyodbc sessions add a wake-up pipe)
    compiled_loop: bool  # the compiled event loop can drive it (it speaks libpq)
    one_statement_per_message: bool  # its prepared and extended protocols send one statement at a time
    database_options: bool  # a scenario may set `database:` options (ALTER DATABASE)
    shown_name: Callable[[str], str]  # a name as a statement shown to a person writes it
    create_grant: str  # what lets a role create databases ({role})
    create_for: str  # how an administrator makes an empty database a role may use as its own ({role}, {database})

    def grant_to_create(self, role: str) -> str:
        return self.create_grant.format(role=self.shown_name(role))

    def database_for(self, role: str, database: str) -> str:
        return self.create_for.format(role=self.shown_name(role), database=self.shown_name(database))


POSTGRES = EngineSpec(
    name="postgres", display="PostgreSQL", module="postgres", versions=("14", "15", "16", "17", "18"),
    default_version="18",
    container=Container(image="postgres:{version}", versions=(), port=5432, data_dir="/var/lib/postgresql/data",
                        ready_timeout_s=60.0, admin="postgres", password_env="POSTGRES_PASSWORD"),
    connection_setting="max_connections", default_connections=100, fds_per_session=1, compiled_loop=True,
    one_statement_per_message=True, database_options=False, shown_name=pg_shown_name,
    create_grant="ALTER ROLE {role} CREATEDB", create_for="CREATE DATABASE {database} OWNER {role}")

MSSQL = EngineSpec(
    name="mssql", display="SQL Server", module="sqlserver", versions=("2019", "2022", "2025"), default_version="2022",
    container=Container(image="mcr.microsoft.com/mssql/server:{version}-latest", versions=("2019", "2022", "2025"),
                        port=1433, data_dir="/var/opt/mssql", ready_timeout_s=180.0, admin="sa",
                        password_env="MSSQL_SA_PASSWORD"),
    connection_setting="user connections", default_connections=32767, fds_per_session=3, compiled_loop=False,
    one_statement_per_message=False, database_options=True, shown_name=tsql_name,
    create_grant="ALTER SERVER ROLE dbcreator ADD MEMBER {role}",
    create_for="CREATE DATABASE {database}; then in it: CREATE USER {role} FOR LOGIN {role}; "
               "ALTER ROLE db_owner ADD MEMBER {role}")

SPECS = {spec.name: spec for spec in (POSTGRES, MSSQL)}


def spec(name: str) -> EngineSpec:
    """The engine a scenario names (the loader has checked the name)."""
    if name not in SPECS:
        raise ValueError(f"unknown engine {name}")
    return SPECS[name]


def get_engine(name: str) -> Engine:
    return cast(Engine, importlib.import_module(f"{__package__}.{spec(name).module}"))
