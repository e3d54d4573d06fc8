"""Container configurations for the docker target, as plain data: images, labels, passwords, server
arguments and the keyword arguments of `containers.run`. Nothing here talks to a Docker engine.
"""

from __future__ import annotations

import secrets
import string

from ..errors import ConfigError
from . import registry

LABEL_RUN = "concurbench.run_id"
LABEL_KIND = "concurbench.kind"
LABEL_SERVER = "concurbench.server"
LABEL_KEEP = "concurbench.keep"
LABEL_OWNER = "concurbench.owner_pid"  # with LABEL_HOST, tells `gc` whether the run that made it is gone
LABEL_HOST = "concurbench.host"
DATABASE = "concurbench"
POSTGRES_DEFAULT = "18"
POSTGRES_DATA = "/var/lib/postgresql/data"
MSSQL_YEARS = ("2019", "2022", "2025")
MSSQL_DEFAULT = "2022"
MSSQL_DATA = "/var/opt/mssql"
MSSQL_COMMAND = "/opt/mssql/bin/sqlservr"
MSSQL_CONTAINER_KEYS = ("memory_limit", "trace_flags", "pid", "collation")
READY_TIMEOUT = {"postgres": 60.0, "mssql": 180.0}
PASSWORD_SYMBOLS = "!#%*+-=?@^_"  # none of them needs quoting in a conninfo, an ODBC string or a shell

# -- pure pieces: images, passwords, container configurations ---------------------------------------
def postgres_image(options: registry.TargetOptions) -> str:
    version = str(options.server_version or POSTGRES_DEFAULT)
    return options.image or dict(options.images).get(version) or f"postgres:{version}"


def mssql_image(options: registry.TargetOptions) -> str:
    """--image, else the image the scenario pins for the version (`server: images:`), else `<year>-latest`."""
    if options.image:
        return options.image
    year = str(options.server_version or MSSQL_DEFAULT)
    pinned = dict(options.images).get(year)
    if pinned:
        return pinned
    if year not in MSSQL_YEARS:
        raise ConfigError(f"SQL Server version {year} is not one of {', '.join(MSSQL_YEARS)} "
                          f"(or name an image with --image, or pin one for it under the scenario's server: images:)")
    return f"mcr.microsoft.com/mssql/server:{year}-latest"


def cpu_limit(host_config: dict | None) -> str:
    """The CPU limit of a container from its HostConfig (docker inspect): NanoCpus, CpuQuota over CpuPeriod,
    or CpusetCpus; "none" when it may use every CPU of the host."""
    config = host_config or {}
    parts = []
    if config.get("NanoCpus"):
        parts.append(f"{config['NanoCpus'] / 1e9:g} CPUs")
    elif config.get("CpuQuota") and config["CpuQuota"] > 0:
        parts.append(f"{config['CpuQuota'] / (config.get('CpuPeriod') or 100_000):g} CPUs")
    if config.get("CpusetCpus"):
        parts.append(f"cpuset {config['CpusetCpus']}")
    return ", ".join(parts) or "none"


def generate_password(length: int = 24) -> str:
    """A random password with upper and lower case letters, digits and symbols (SQL Server's policy)."""
    if length < 8:
        raise ValueError("a password needs at least 8 characters")
    classes = [string.ascii_uppercase, string.ascii_lowercase, string.digits, PASSWORD_SYMBOLS]
    alphabet = "".join(classes)
    chars = [secrets.choice(c) for c in classes] + [secrets.choice(alphabet) for _ in range(length - len(classes))]
    secrets.SystemRandom().shuffle(chars)
    return "".join(chars)


def container_labels(run_id: str, engine: str, server: str, keep: bool = False, owner_pid: int | None = None,
                     host: str | None = None) -> dict[str, str]:
    labels = {LABEL_RUN: run_id, LABEL_KIND: engine, LABEL_SERVER: server}
    if owner_pid is not None:
        labels[LABEL_OWNER] = str(owner_pid)
    if host:
        labels[LABEL_HOST] = host
    if keep:
        labels[LABEL_KEEP] = "1"
    return labels


def _setting_value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def postgres_args(settings: dict, port: int | None = None) -> list[str]:
    """The server command: `postgres -c name=value ...`; with a port, listening on 127.0.0.1 only."""
    args = ["postgres"]
    for name, value in settings.items():
        args += ["-c", f"{name}={_setting_value(value)}"]
    if port is not None:  # last, so they win over a scenario's own
        args += ["-c", f"port={port}", "-c", "listen_addresses=127.0.0.1"]
    return args


def trace_flags(value) -> list[str]:
    """`trace_flags: [1222, 3604]` or `"1222,3604"` as sqlservr arguments `-T1222 -T3604`."""
    if value is None or value == "":
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).replace(";", ",").split(",")
    flags = []
    for item in items:
        text = str(item).strip().lstrip("-").lstrip("Tt")
        if not text:
            continue
        if not text.isdigit():
            raise ConfigError(f"trace flag '{item}' is not a number (trace_flags: [1222, 3604])")
        flags.append(f"-T{int(text)}")
    return flags


def _volume_mount(target: str, labels: dict[str, str]):
    from docker.types import Mount

    return Mount(target=target, source=None, type="volume", labels=labels)


def _common_config(image: str, name: str, labels: dict[str, str], data_dir: str, host_network: bool,
                   container_port: int, host_port: int) -> dict:
    config = {"image": image, "name": name, "labels": labels, "detach": True,
              "mounts": [_volume_mount(data_dir, labels)]}
    if host_network:
        config["network_mode"] = "host"
    else:
        config["ports"] = {f"{container_port}/tcp": ("127.0.0.1", host_port)}
    return config


def postgres_container_config(*, image: str, name: str, settings: dict, password: str, port: int,
                              labels: dict[str, str], host_network: bool = False,
                              data_dir: str = POSTGRES_DATA, shm_size: str = "512m") -> dict:
    """The keyword arguments of `containers.run` for a PostgreSQL container."""
    config = _common_config(image, name, labels, data_dir, host_network, 5432, port)
    config.update(command=postgres_args(settings, port if host_network else None),
                  environment={"POSTGRES_PASSWORD": password, "PGDATA": data_dir}, shm_size=shm_size,
                  stop_signal="SIGINT")  # a fast shutdown, as the official image asks
    return config


def mssql_container_config(*, image: str, name: str, settings: dict, password: str, port: int,
                           labels: dict[str, str], host_network: bool = False) -> dict:
    """The keyword arguments of `containers.run` for a SQL Server container."""
    config = _common_config(image, name, labels, MSSQL_DATA, host_network, 1433, port)
    env = {"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": password, "MSSQL_PID": str(settings.get("pid") or "Developer")}
    if settings.get("collation"):
        env["MSSQL_COLLATION"] = str(settings["collation"])
    if host_network:
        env.update(MSSQL_TCP_PORT=str(port), MSSQL_IP_ADDRESS="127.0.0.1")
    flags = trace_flags(settings.get("trace_flags"))
    if flags:
        config["command"] = [MSSQL_COMMAND, *flags]
    config.update(environment=env, mem_limit=str(settings.get("memory_limit") or "4g"))
    return config
