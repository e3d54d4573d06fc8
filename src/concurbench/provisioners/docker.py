"""The `docker` target: a PostgreSQL or SQL Server container of an exact version, one per run.
(The containers' configurations, as plain data, are in `containers.py`.)

PostgreSQL runs the official image (`postgres:{version}`, or `--image`) with the scenario's settings
as `-c name=value` arguments; SQL Server runs `mcr.microsoft.com/mssql/server:{year}-latest` with
its container-level settings (`memory_limit`, `cpus`, `trace_flags`, `pid`, `collation`) taken out of
the scenario's settings; the rest are left for the engine to apply over a connection. SQL Server is
ready when tempdb, model and the run's database are ONLINE (`docker_mssql.py`).

Each container gets a generated password (kept in memory: `Connection.safe` and `describe()` never
carry it), its data directory on an anonymous volume, and the labels `concurbench.run_id`,
`concurbench.kind`, `concurbench.server` (one per DockerServer), `concurbench.owner_pid` and
`concurbench.host`, so `remove_leftover_containers` (and `concurbench gc`) find what a killed run
left. The server is published on 127.0.0.1 at a free port, or, with
`host_network`, shares the host's network and listens on 127.0.0.1 at a free port.

`restart(settings)` recreates the container with the merged settings: the old one is stopped
cleanly, the new one mounts the same volumes (`volumes_from`), so the data survives; the password
and the port stay the same.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import uuid
from typing import Callable

import psycopg
from psycopg.conninfo import make_conninfo

from ..engines import odbc
from ..engines.odbc import connection_string
from ..errors import ConfigError, EngineError, ProvisionError
from . import docker_engine, docker_mssql, registry
from .base import Connection, PullListener
from .owned import comment_sql
from .containers import (DATABASE, LABEL_SERVER, MSSQL_CONTAINER_KEYS, MSSQL_DATA, POSTGRES_DATA,
                         MSSQL_MEMORY_DEFAULT, READY_TIMEOUT, DockerHost, container_labels, cpu_limit, cpu_list,
                         cpu_pinning, cpus_offered, generate_password, mssql_container_config, mssql_image,
                         postgres_container_config, postgres_image, sql_memory_limit_mb)
from .docker_engine import first_line, remove_volumes, volume_names
from .local import free_port


def wait_until_ready(probe: Callable[[float], object], *, timeout: float, check: Callable[[], None] = lambda: None,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                     interval: float = 0.5):
    """Call `probe(seconds_left)` until it returns; `check()` raises when waiting is pointless.

    Raises TimeoutError (with the probe's last error as its cause) when `timeout` passes.
    """
    deadline = clock() + timeout
    last: Exception | None = None
    while True:
        check()
        try:
            return probe(max(1.0, deadline - clock()))
        except ProvisionError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to connect means "not yet"
            last = exc
        if clock() >= deadline:
            raise TimeoutError(f"not ready after {timeout:g} s") from last
        sleep(interval)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"


class DockerServer:
    """One container of `engine` ("postgres" or "mssql") from `image`; the Provisioner protocol."""

    name = "docker"

    def __init__(self, engine: str, image: str, settings: dict | None = None, *, run_id: str | None = None,
                 host_network: bool = False, keep: bool = False, ready_timeout: float | None = None,
                 listener: PullListener | None = None):
        if engine not in READY_TIMEOUT:
            raise ConfigError(f"the docker target runs postgres or mssql, not {engine}")
        self.engine = engine
        self.image = image
        self.settings = dict(settings or {})
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.host_network = host_network
        self.keep = keep
        self.ready_timeout = float(ready_timeout or READY_TIMEOUT[engine])
        self.listener = listener  # told of an image pull
        self.server_id = uuid.uuid4().hex[:8]
        self.labels = container_labels(self.run_id, engine, self.server_id, keep, os.getpid(), socket.gethostname())
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"
        self.base_name = f"concurbench-{self.run_id}-{engine}-{_slug(tag)}"
        self.container_name = self.base_name
        self.port: int | None = None
        self.image_id: str | None = None
        self.data_dir = MSSQL_DATA if engine == "mssql" else POSTGRES_DATA
        self._password = generate_password()
        self._client = None
        self._volumes: set[str] = set()
        self._generation = 0
        self._odbc_driver: str | None = None
        self.cpu_limit: str | None = None  # read from the running container
        self.cpus_pinned: int | None = None  # how many CPUs its cpuset names (None: not pinned)
        self.host = DockerHost()  # the Docker host's CPUs, for the ones SQL Server is pinned to

    @property
    def server_settings(self) -> dict:
        """Settings left for the engine to apply over a connection (SQL Server: all but the container's)."""
        if self.engine == "mssql":
            return {k: v for k, v in self.settings.items() if k not in MSSQL_CONTAINER_KEYS}
        return {}

    # -- life cycle --------------------------------------------------------------------------------------
    def start(self) -> Connection:
        from docker.errors import DockerException

        if self.engine == "mssql":
            self._odbc_driver = mssql_odbc_driver()  # before pulling gigabytes for nothing
        self._client = self._client or docker_engine.connect()
        try:
            if self.engine == "mssql":
                info = self._client.info()
                self.host = DockerHost(info.get("NCPU"), bool(info.get("CPUSet")))
            image = docker_engine.ensure_image(self._client, self.image, self.listener)
            self.image_id = image.id
            if self.engine == "postgres":
                env = dict(e.split("=", 1) for e in (image.attrs.get("Config") or {}).get("Env") or [] if "=" in e)
                self.data_dir = env.get("PGDATA", POSTGRES_DATA)
            self.port = free_port()
            try:
                return self._run_container()
            except BaseException:
                with contextlib.suppress(ProvisionError):  # the first error is the one to report
                    self._remove()
                raise
        except DockerException as exc:
            raise ProvisionError(f"the Docker engine failed while starting {self.image}: {first_line(exc)}",
                                 exc) from None

    def _config(self) -> dict:
        build = postgres_container_config if self.engine == "postgres" else mssql_container_config
        extra = {"data_dir": self.data_dir} if self.engine == "postgres" else {"host": self.host}
        return build(image=self.image, name=self.container_name, settings=self.settings, password=self._password,
                     port=self.port, labels=self.labels, host_network=self.host_network, **extra)

    def _run_container(self, volumes_from: str | None = None) -> Connection:
        from docker.errors import DockerException

        config = self._config()
        if volumes_from:
            config.pop("mounts")
            config["volumes_from"] = [volumes_from]
        try:
            container = self._client.containers.run(**config)
        except DockerException as exc:
            detail = first_line(getattr(exc, "explanation", None) or first_line(exc))
            offered = cpus_offered(detail) if "cpuset_cpus" in config and self.host.available is None else None
            if offered:  # the engine names the CPUs a cpuset may use: pin to those (once)
                self.host = DockerHost(self.host.cpus, self.host.cpuset, offered)
                return self._run_container(volumes_from)
            raise ProvisionError(f"cannot start a container from {self.image}: {detail}", exc) from None
        started = self._client.containers.get(container.id)
        self._volumes.update(volume_names(started))
        self._record_cpus(started.attrs.get("HostConfig") or {})
        self._wait_ready(container)
        return self._prepare()

    def _record_cpus(self, host_config: dict) -> None:
        """The CPU limit the container really has (Docker drops a cpuset it cannot apply, with only a warning),
        and why it has none when SQL Server's would have been pinned."""
        self.cpu_limit = cpu_limit(host_config)
        self.cpus_pinned = len(cpu_list(host_config["CpusetCpus"])) if host_config.get("CpusetCpus") else None
        if self.engine != "mssql":
            return
        _, why = cpu_pinning(self.settings, self.host)
        if self.cpu_limit == "none":
            self.cpu_limit = f"none ({why or 'Docker dropped the cpuset it was given'})"
        elif why:  # pinned to fewer CPUs than the scenario asks for at least
            self.cpu_limit = f"{self.cpu_limit} ({why})"

    def _wait_ready(self, container) -> None:
        from docker.errors import DockerException

        def check() -> None:
            try:
                container.reload()
            except DockerException as exc:
                raise ProvisionError(f"the container {self.container_name} went away before the server accepted "
                                     f"connections: {first_line(exc)}", exc) from None
            if container.status in ("exited", "dead"):
                code = container.attrs.get("State", {}).get("ExitCode")
                raise ProvisionError(f"the {self.image} container stopped (exit {code}) before the server accepted "
                                     f"connections; last container log lines:\n{self.logs(20)}")

        try:
            wait_until_ready(self._probe, timeout=self.ready_timeout, check=check)
        except TimeoutError as exc:
            raise ProvisionError(f"the {self.engine} server in {self.container_name} ({self.image}) did not accept "
                                 f"connections within {self.ready_timeout:g} s (last error: "
                                 f"{first_line(exc.__cause__)}); last container log lines:\n{self.logs(20)}",
                                 exc.__cause__) from None

    def _probe(self, seconds_left: float) -> None:
        if self.engine == "postgres":
            with psycopg.connect(self._conninfo("postgres"), connect_timeout=max(1, min(5, int(seconds_left)))) as conn:
                conn.execute("SELECT 1")
        else:
            docker_mssql.probe(self._odbc("master"), max(1, min(5, int(seconds_left))))

    def _conninfo(self, dbname: str) -> str:
        return make_conninfo(host="127.0.0.1", port=self.port, user="postgres", password=self._password, dbname=dbname)

    def _odbc(self, database: str) -> str:
        return connection_string(self._odbc_driver, "127.0.0.1", self.port, "sa", self._password, database,
                                 trust_server_certificate=True, encrypt=True)

    def _prepare(self) -> Connection:
        """Create the run's database (like LocalPostgres) and say how to reach it."""
        try:
            if self.engine == "postgres":
                with psycopg.connect(self._conninfo("postgres"), autocommit=True, connect_timeout=10) as conn:
                    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
                        conn.execute(f'CREATE DATABASE "{DATABASE}"')
                        conn.execute(comment_sql(DATABASE, temporary=False))
            else:
                docker_mssql.create_database(self._odbc("master"))
        except Exception as exc:  # noqa: BLE001 - psycopg or pyodbc errors alike
            raise ProvisionError(f"cannot prepare database {DATABASE} in {self.container_name}: {first_line(exc)}",
                                 exc) from None
        return self.connection()

    def connection(self) -> Connection:
        """How to reach the running server: `conninfo` carries the password (memory only), `safe` does not."""
        extra = {"container": self.container_name, "image": self.image, "cpu_limit": self.cpu_limit}
        if self.engine == "postgres":
            return Connection(self._conninfo(DATABASE), f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}",
                              extra)
        memory = sql_memory_limit_mb(self.settings.get("memory_limit") or MSSQL_MEMORY_DEFAULT)
        return Connection(self._odbc(DATABASE), f"mssql://sa@127.0.0.1:{self.port}/{DATABASE}",
                          {**extra, "cpus_pinned": self.cpus_pinned, "driver": self._odbc_driver,
                           "sql_memory_limit_mb": memory})

    def restart(self, settings: dict | None = None) -> Connection:
        """Recreate the container with these settings (replacing the previous ones) over the same volumes."""
        if self._client is None:
            raise ProvisionError("restart() before start()")
        if settings is not None:
            self.settings = dict(settings)
        old = self._client.containers.get(self.container_name)
        try:
            old.stop(timeout=30)
        except Exception as exc:  # noqa: BLE001
            raise ProvisionError(f"cannot stop {self.container_name} for a restart: {first_line(exc)}", exc) from None
        self._generation += 1
        self.container_name = f"{self.base_name}-r{self._generation}"
        try:
            connection = self._run_container(volumes_from=old.id)
        except BaseException:
            with contextlib.suppress(ProvisionError):
                self._remove()
            raise
        finally:
            try:
                old.remove(force=True, v=False)
            except Exception:  # noqa: BLE001 - stop() removes it by label anyway
                pass
        return connection

    def stop(self) -> None:
        """Remove this server's containers (force) and volumes; idempotent. With keep, leave it running."""
        if self.keep:
            return
        self._remove()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _remove(self) -> None:
        from docker.errors import DockerException, NotFound

        if self._client is None:
            return
        try:
            mine = {"label": f"{LABEL_SERVER}={self.server_id}"}
            for container in self._client.containers.list(all=True, filters=mine):
                self._volumes.update(volume_names(container))
                try:
                    container.remove(force=True, v=True)
                except NotFound:
                    pass
            remove_volumes(self._client, sorted(self._volumes))
            for volume in self._client.volumes.list(filters=mine):
                remove_volumes(self._client, [volume.name])
        except DockerException as exc:
            raise ProvisionError(f"cannot remove the container {self.container_name}: {first_line(exc)}; "
                                 f"remove it with: docker rm -f -v {self.container_name}", exc) from None
        self._volumes.clear()

    def remove_files(self, patterns: list[str]) -> None:
        """Remove files an observer wrote inside the running container (`*` as a wildcard)."""
        container = self._client.containers.get(self.container_name)
        code, output = container.exec_run(docker_mssql.remove_command(patterns))
        if code:
            detail = (output or b"").decode("utf-8", "replace").strip() or f"exit {code}"
            raise ProvisionError(f"cannot remove {', '.join(patterns)} in {self.container_name}: {detail.splitlines()[0]}")

    def logs(self, lines: int = 40) -> str:
        try:
            container = self._client.containers.get(self.container_name)
            return container.logs(tail=lines).decode("utf-8", "replace").rstrip() or "(the container printed nothing)"
        except Exception:  # noqa: BLE001 - logs are best effort
            return "(no container log)"

    def describe(self) -> dict:
        return {"target": self.name, "engine": self.engine, "image": self.image, "image_id": self.image_id,
                "container": self.container_name, "port": self.port, "host_network": self.host_network,
                "run_id": self.run_id}

    def connect_hint(self) -> str:
        if self.engine == "postgres":
            how = (f"psql 'host=127.0.0.1 port={self.port} user=postgres dbname={DATABASE}' with the password "
                   f"from `docker exec {self.container_name} printenv POSTGRES_PASSWORD`, or "
                   f"`docker exec -it {self.container_name} psql -U postgres {DATABASE}`")
        else:
            how = (f"sa at 127.0.0.1,{self.port} (database {DATABASE}) with the password from "
                   f"`docker exec {self.container_name} printenv MSSQL_SA_PASSWORD`")
        return f"{how}; remove it with `docker rm -f -v {self.container_name}` or `concurbench gc`"


def mssql_odbc_driver() -> str:
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


def _factory(engine: str, settings: dict, options: registry.TargetOptions) -> DockerServer:
    if engine == "postgres":
        image = postgres_image(options)
    elif engine == "mssql":
        image = mssql_image(options)
    else:
        raise ConfigError(f"the docker target runs postgres or mssql, and this scenario's engine is {engine}")
    return DockerServer(engine, image, settings, run_id=options.run_id, host_network=options.host_network,
                        keep=options.keep, ready_timeout=options.ready_timeout, listener=options.listener)


registry.register("docker", _factory)
