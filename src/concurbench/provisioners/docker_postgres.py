"""PostgreSQL in a container of the docker target: what differs from SQL Server's (docker_mssql.py), as
the recipe DockerServer follows. The official image keeps its data where its PGDATA says, takes the
scenario's settings as `-c name=value` arguments, and is ready when it answers a query; the run's
database is created once and marked as concurbench's (the container is concurbench's own).
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import make_conninfo

from ..engines.quoting import pg_name
from ..engines.registry import POSTGRES
from .base import Connection
from .containers import DATABASE, postgres_container_config
from .owned import comment_sql


class PostgresContainer:
    """The recipe of a PostgreSQL container; `server` is the DockerServer it serves."""

    engine = POSTGRES
    pins_cpus = False  # the scenario's CPUs are the host's: nothing pins a PostgreSQL container

    def __init__(self, server):
        self.server = server

    def before_pull(self) -> None:
        return None  # psycopg is always there

    def on_engine(self, info: dict) -> None:
        return None

    def on_image(self, image) -> None:
        """The image says where its data lives (PGDATA); the volume goes there."""
        env = dict(e.split("=", 1) for e in (image.attrs.get("Config") or {}).get("Env") or [] if "=" in e)
        self.server.data_dir = env.get("PGDATA", self.server.data_dir)

    def server_settings(self, settings: dict) -> dict:
        return {}  # all go in as server arguments

    def config(self) -> dict:
        s = self.server
        return postgres_container_config(image=s.image, name=s.container_name, settings=s.settings,
                                         password=s.password, port=s.port, labels=s.labels,
                                         host_network=s.host_network, data_dir=s.data_dir)

    def conninfo(self, database: str) -> str:
        return make_conninfo(host="127.0.0.1", port=self.server.port, user=POSTGRES.container.admin,
                             password=self.server.password, dbname=database)

    def probe(self, seconds: int) -> None:
        with psycopg.connect(self.conninfo("postgres"), connect_timeout=seconds) as conn:
            conn.execute("SELECT 1")

    def create_database(self) -> None:
        with psycopg.connect(self.conninfo("postgres"), autocommit=True, connect_timeout=10) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
                conn.execute(f"CREATE DATABASE {pg_name(DATABASE)}")
                conn.execute(comment_sql(DATABASE, temporary=False))

    def connection(self, extra: dict) -> Connection:
        return Connection(self.conninfo(DATABASE), f"postgresql://{POSTGRES.container.admin}@127.0.0.1:"
                                                   f"{self.server.port}/{DATABASE}", extra)

    def hint(self) -> str:
        s = self.server
        return (f"psql 'host=127.0.0.1 port={s.port} user={POSTGRES.container.admin} dbname={DATABASE}' with the "
                f"password from `docker exec {s.container_name} printenv {POSTGRES.container.password_env}`, or "
                f"`docker exec -it {s.container_name} psql -U {POSTGRES.container.admin} {DATABASE}`")
