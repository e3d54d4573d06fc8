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

from ..util import first_line
from ..engines.registry import spec
from ..errors import ProvisionError
from . import docker_engine, docker_mssql
from .options import TargetOptions
from .base import Connection, OwnServer, PullListener
from .containers import (LABEL_SERVER, DockerHost, container_labels, cpu_limit, cpu_list, cpu_pinning, cpus_offered,
                         generate_password, image_of)
from .docker_mssql import SqlServerContainer
from .docker_postgres import PostgresContainer
from .docker_engine import remove_volumes, volume_names
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


RECIPES = {"postgres": PostgresContainer, "mssql": SqlServerContainer}  # what differs by engine in its container


class DockerServer(OwnServer):
    """One container of `engine` ("postgres" or "mssql") from `image`; the Provisioner protocol. What differs
    between the engines' containers is the recipe's (RECIPES: docker_postgres.py, docker_mssql.py)."""

    name = "docker"

    def __init__(self, engine: str, image: str, settings: dict | None = None, *, run_id: str | None = None,
                 host_network: bool = False, keep: bool = False, ready_timeout: float | None = None,
                 listener: PullListener | None = None):
        self.engine = engine
        self.recipe = RECIPES[engine](self)
        self.image = image
        self.settings = dict(settings or {})
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.host_network = host_network
        self.keep = keep
        self.ready_timeout = float(ready_timeout or spec(engine).container.ready_timeout_s)
        self.listener = listener  # told of an image pull
        self.server_id = uuid.uuid4().hex[:8]
        self.labels = container_labels(self.run_id, engine, self.server_id, keep, os.getpid(), socket.gethostname())
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"
        self.base_name = f"concurbench-{self.run_id}-{engine}-{_slug(tag)}"
        self.container_name = self.base_name
        self.port: int | None = None
        self.image_id: str | None = None
        self.data_dir = spec(engine).container.data_dir
        self.password = generate_password()  # in memory only: conninfo carries it, safe and describe() never
        self._client = None
        self._volumes: set[str] = set()
        self._generation = 0
        self.odbc_driver: str | None = None  # SQL Server's, found before the image is pulled
        self.cpu_limit: str | None = None  # read from the running container
        self.cpus_pinned: int | None = None  # how many CPUs its cpuset names (None: not pinned)
        self.host = DockerHost()  # the Docker host's CPUs, for the ones SQL Server is pinned to

    @property
    def server_settings(self) -> dict:
        """Settings left for the engine to apply over a connection (SQL Server: all but the container's)."""
        return self.recipe.server_settings(self.settings)

    # -- life cycle --------------------------------------------------------------------------------------
    def start(self) -> Connection:
        from docker.errors import DockerException

        self.recipe.before_pull()
        self._client = self._client or docker_engine.connect()
        try:
            self.recipe.on_engine(self._client.info())
            image = docker_engine.ensure_image(self._client, self.image, self.listener)
            self.image_id = image.id
            self.recipe.on_image(image)
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

    def _run_container(self, volumes_from: str | None = None) -> Connection:
        from docker.errors import DockerException

        config = self.recipe.config()
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
        if not self.recipe.pins_cpus:
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
            wait_until_ready(lambda left: self.recipe.probe(max(1, min(5, int(left)))), timeout=self.ready_timeout,
                             check=check)
        except TimeoutError as exc:
            raise ProvisionError(f"the {spec(self.engine).display} server in {self.container_name} ({self.image}) did not accept "
                                 f"connections within {self.ready_timeout:g} s (last error: "
                                 f"{first_line(exc.__cause__)}); last container log lines:\n{self.logs(20)}",
                                 exc.__cause__) from None

    def _prepare(self) -> Connection:
        """Create the run's database (like LocalPostgres) and say how to reach it."""
        try:
            self.recipe.create_database()
        except Exception as exc:  # noqa: BLE001 - psycopg or pyodbc errors alike
            raise ProvisionError(f"cannot prepare the run's database in {self.container_name}: {first_line(exc)}",
                                 exc) from None
        return self.connection()

    def connection(self) -> Connection:
        """How to reach the running server: `conninfo` carries the password (memory only), `safe` does not."""
        return self.recipe.connection({"container": self.container_name, "image": self.image,
                                       "cpu_limit": self.cpu_limit})

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

    def file_remover(self) -> Callable[[list[str]], None]:
        """Observers write their files inside the container: it removes them."""
        return self.remove_files

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

    def connect_hint(self) -> str | None:
        if not self.keep:
            return None
        return f"{self.recipe.hint()}; remove it with `docker rm -f -v {self.container_name}` or `concurbench gc`"


def _factory(engine: str, settings: dict[str, str], options: TargetOptions) -> DockerServer:
    return DockerServer(engine, image_of(spec(engine), options), settings, run_id=options.run_id, host_network=options.host_network,
                        keep=options.keep, ready_timeout=options.ready_timeout, listener=options.listener)


FACTORIES = {"postgres": _factory, "mssql": _factory}  # registry.py: the docker target
