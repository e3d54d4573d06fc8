"""The `docker` target: a PostgreSQL or SQL Server container of an exact version, one per run.
(The containers' configurations, as plain data, are in `containers.py`.)

PostgreSQL runs the official image (`postgres:{version}`, or `--image`) with the scenario's settings
as `-c name=value` arguments; SQL Server runs `mcr.microsoft.com/mssql/server:{year}-latest` with
its container-level settings (`memory_limit`, `trace_flags`, `pid`, `collation`) taken out of the
scenario's settings; the rest are left for the engine to apply over a connection.

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

from ..errors import ConfigError, ProvisionError
from . import registry
from .base import Connection
from .containers import (DATABASE, LABEL_RUN, LABEL_SERVER, MSSQL_CONTAINER_KEYS, MSSQL_DATA, POSTGRES_DATA,
                         READY_TIMEOUT, container_labels, cpu_limit, generate_password, mssql_container_config,
                         mssql_image, postgres_container_config, postgres_image)
from .local import free_port

Progress = Callable[[dict], None]


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


def _first_line(exc: BaseException | None) -> str:
    text = str(exc or "").strip()
    return text.splitlines()[0] if text else type(exc).__name__


# -- the engine --------------------------------------------------------------------------------------
def _client():
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=60)
        client.ping()
        return client
    except DockerException as exc:
        raise ProvisionError(
            f"cannot reach the Docker engine ({_first_line(exc)}). Is dockerd running (`docker info` should "
            f"answer; `sudo systemctl start docker`, or start dockerd by hand)? If it is, can this user open its "
            f"socket (/var/run/docker.sock: add the user to the docker group, or set DOCKER_HOST)? "
            f"The embedded and binaries targets need no Docker.", exc) from None


def engine_status() -> dict:
    """Whether a Docker engine answers, its version and the local image tags (for `doctor`)."""
    try:
        client = _client()
    except ProvisionError as exc:
        return {"reachable": False, "version": None, "error": exc.message, "images": []}
    try:
        version = client.version().get("Version")
        images = sorted(tag for image in client.images.list() for tag in image.tags)
        return {"reachable": True, "version": version, "error": None, "images": images}
    except Exception as exc:  # noqa: BLE001 - a status report never raises
        return {"reachable": False, "version": None, "error": _first_line(exc), "images": []}
    finally:
        client.close()


def remove_leftover_containers(run_ids: set[str] | None = None) -> list[str]:
    """Remove containers labelled concurbench.run_id (only those runs' when run_ids is given), and
    their volumes; return the names of the containers removed."""
    from docker.errors import APIError, NotFound

    client = _client()
    removed = []
    try:
        for container in client.containers.list(all=True, filters={"label": LABEL_RUN}):
            if run_ids is not None and container.labels.get(LABEL_RUN) not in run_ids:
                continue
            volumes = _volume_names(container)
            try:
                container.remove(force=True, v=True)
            except NotFound:
                pass
            removed.append(container.name)
            _remove_volumes(client, volumes)
        for volume in client.volumes.list(filters={"label": LABEL_RUN}):
            if run_ids is None or volume.attrs.get("Labels", {}).get(LABEL_RUN) in run_ids:
                try:
                    volume.remove(force=True)
                except (NotFound, APIError):
                    pass  # still in use by a container of another run
    finally:
        client.close()
    return removed


def _volume_names(container) -> list[str]:
    return [m["Name"] for m in container.attrs.get("Mounts", []) if m.get("Type") == "volume" and m.get("Name")]


def _remove_volumes(client, names) -> None:
    from docker.errors import APIError, NotFound

    for name in names:
        try:
            client.volumes.get(name).remove(force=True)
        except (NotFound, APIError):
            pass


def ensure_image(client, image: str, progress: Progress | None = None):
    """The local image, pulled first when missing; pull progress goes to `progress` per layer status."""
    from docker.errors import APIError, DockerException, ImageNotFound
    from docker.utils import parse_repository_tag

    try:
        return client.images.get(image)
    except ImageNotFound:
        pass
    repository, tag = parse_repository_tag(image)
    report = progress or (lambda event: None)
    report({"event": "pull", "image": image, "status": "pulling"})
    seen: set[tuple] = set()
    try:
        for line in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if "error" in line:
                raise APIError(line.get("error"))
            key = (line.get("id"), line.get("status"))
            if key not in seen:
                seen.add(key)
                report({"event": "pull", "image": image, "layer": line.get("id"), "status": line.get("status")})
        return client.images.get(image)
    except DockerException as exc:
        detail = getattr(exc, "explanation", None) or _first_line(exc)
        raise ProvisionError(
            f"cannot pull the image {image}: {_first_line(detail)}. If this machine cannot reach the registry, "
            f"pull it where you can and bring it over (`docker pull {image} && docker save {image} -o image.tar`, "
            f"then here `docker load -i image.tar`), or name a local image with --image (`docker images`).",
            exc) from None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"


class DockerServer:
    """One container of `engine` ("postgres" or "mssql") from `image`; the Provisioner protocol."""

    name = "docker"

    def __init__(self, engine: str, image: str, settings: dict | None = None, *, run_id: str | None = None,
                 host_network: bool = False, keep: bool = False, ready_timeout: float | None = None,
                 progress: Progress | None = None):
        if engine not in READY_TIMEOUT:
            raise ConfigError(f"the docker target runs postgres or mssql, not {engine}")
        self.engine = engine
        self.image = image
        self.settings = dict(settings or {})
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.host_network = host_network
        self.keep = keep
        self.ready_timeout = float(ready_timeout or READY_TIMEOUT[engine])
        self.progress = progress
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
        self._client = self._client or _client()
        try:
            image = ensure_image(self._client, self.image, self.progress)
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
            raise ProvisionError(f"the Docker engine failed while starting {self.image}: {_first_line(exc)}",
                                 exc) from None

    def _config(self) -> dict:
        build = postgres_container_config if self.engine == "postgres" else mssql_container_config
        extra = {"data_dir": self.data_dir} if self.engine == "postgres" else {}
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
            detail = getattr(exc, "explanation", None) or _first_line(exc)
            raise ProvisionError(f"cannot start a container from {self.image}: {_first_line(detail)}", exc) from None
        started = self._client.containers.get(container.id)
        self._volumes.update(_volume_names(started))
        self.cpu_limit = cpu_limit(started.attrs.get("HostConfig"))
        self._wait_ready(container)
        return self._prepare()

    def _wait_ready(self, container) -> None:
        from docker.errors import DockerException

        def check() -> None:
            try:
                container.reload()
            except DockerException as exc:
                raise ProvisionError(f"the container {self.container_name} went away before the server accepted "
                                     f"connections: {_first_line(exc)}", exc) from None
            if container.status in ("exited", "dead"):
                code = container.attrs.get("State", {}).get("ExitCode")
                raise ProvisionError(f"the {self.image} container stopped (exit {code}) before the server accepted "
                                     f"connections; last container log lines:\n{self.logs(20)}")

        try:
            wait_until_ready(self._probe, timeout=self.ready_timeout, check=check)
        except TimeoutError as exc:
            raise ProvisionError(f"the {self.engine} server in {self.container_name} ({self.image}) did not accept "
                                 f"connections within {self.ready_timeout:g} s (last error: "
                                 f"{_first_line(exc.__cause__)}); last container log lines:\n{self.logs(20)}",
                                 exc.__cause__) from None

    def _probe(self, seconds_left: float) -> None:
        if self.engine == "postgres":
            import psycopg

            with psycopg.connect(self._conninfo("postgres"), connect_timeout=max(1, min(5, int(seconds_left)))) as conn:
                conn.execute("SELECT 1")
        else:
            import pyodbc

            with pyodbc.connect(self._odbc("master"), timeout=max(1, min(5, int(seconds_left)))) as conn:
                conn.cursor().execute("SELECT 1")

    def _conninfo(self, dbname: str) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(host="127.0.0.1", port=self.port, user="postgres", password=self._password, dbname=dbname)

    def _odbc(self, database: str) -> str:
        from ..engines.mssql import connection_string

        return connection_string(self._odbc_driver, "127.0.0.1", self.port, "sa", self._password, database,
                                 trust_server_certificate=True, encrypt=True)

    def _prepare(self) -> Connection:
        """Create the run's database (like LocalPostgres) and say how to reach it."""
        try:
            if self.engine == "postgres":
                import psycopg

                with psycopg.connect(self._conninfo("postgres"), autocommit=True, connect_timeout=10) as conn:
                    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
                        conn.execute(f'CREATE DATABASE "{DATABASE}"')
            else:
                import pyodbc

                with pyodbc.connect(self._odbc("master"), autocommit=True, timeout=10) as conn:
                    conn.cursor().execute(f"IF DB_ID('{DATABASE}') IS NULL CREATE DATABASE [{DATABASE}]")
        except Exception as exc:  # noqa: BLE001 - psycopg or pyodbc errors alike
            raise ProvisionError(f"cannot prepare database {DATABASE} in {self.container_name}: {_first_line(exc)}",
                                 exc) from None
        return self.connection()

    def connection(self) -> Connection:
        """How to reach the running server: `conninfo` carries the password (memory only), `safe` does not."""
        extra = {"container": self.container_name, "image": self.image, "cpu_limit": self.cpu_limit}
        if self.engine == "postgres":
            return Connection(self._conninfo(DATABASE), f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}",
                              extra)
        return Connection(self._odbc(DATABASE), f"mssql://sa@127.0.0.1:{self.port}/{DATABASE}",
                          {**extra, "driver": self._odbc_driver})

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
            raise ProvisionError(f"cannot stop {self.container_name} for a restart: {_first_line(exc)}", exc) from None
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
                self._volumes.update(_volume_names(container))
                try:
                    container.remove(force=True, v=True)
                except NotFound:
                    pass
            _remove_volumes(self._client, sorted(self._volumes))
            for volume in self._client.volumes.list(filters=mine):
                _remove_volumes(self._client, [volume.name])
        except DockerException as exc:
            raise ProvisionError(f"cannot remove the container {self.container_name}: {_first_line(exc)}; "
                                 f"remove it with: docker rm -f -v {self.container_name}", exc) from None
        self._volumes.clear()

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
    from ..engines import mssql
    from ..errors import EngineError

    try:
        import pyodbc  # noqa: F401
    except ImportError as exc:
        raise ProvisionError(f"SQL Server needs pyodbc and an ODBC driver on this machine: {mssql.DRIVER_HELP}",
                             exc) from None
    try:
        return mssql.detect_driver(mssql.installed_drivers())
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
                        keep=options.keep, ready_timeout=options.extra.get("ready_timeout"),
                        progress=options.extra.get("progress"))


registry.register("docker", _factory)
