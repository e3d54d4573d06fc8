"""Container configurations for the docker target, as plain data: images, labels, passwords, server
arguments and the keyword arguments of `containers.run`. Nothing here talks to a Docker engine.

SQL Server's container gets two limits besides its memory limit (`mem_limit`):
- `MSSQL_MEMORY_LIMIT_MB`, the memory SQL Server may use, at 80% of the container's limit. SQL Server
  takes 80% of the host's memory by default, and before 2022 CU20 it does not see a cgroup v2
  limit, so without this it sizes itself to the host and the kernel kills it ("Performance best
  practices: SQL Server memory on Linux": keep 10 to 20% of the container's memory as headroom, and
  `MSSQL_MEMORY_LIMIT_MB` below the container's limit).
- a CPU limit (`nano_cpus`, as `docker run --cpus`): `server: cpus:`, by default half of the Docker
  host's CPUs, so the server and the load generator's clients do not share every CPU. SQL Server
  still counts the host's CPUs (its schedulers), which the run records beside the limit.
"""

from __future__ import annotations

import re
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
MSSQL_CONTAINER_KEYS = ("memory_limit", "trace_flags", "pid", "collation", "cpus")
MSSQL_MEMORY_DEFAULT = "4g"
MSSQL_MEMORY_SHARE = 0.8  # of the container's memory, for SQL Server (the rest is headroom)
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


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def size_mb(text) -> int:
    """A Docker memory size (`4g`, `4096m`, `2.5g`; units of 1,024) in MB."""
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"memory_limit must be a size such as 4g or 4096m, got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()] // 1024 ** 2)


def sql_memory_limit_mb(memory_limit) -> int:
    """MSSQL_MEMORY_LIMIT_MB for a container of `memory_limit`: its share, leaving headroom."""
    return int(size_mb(memory_limit) * MSSQL_MEMORY_SHARE)


def cpus_for(settings: dict, host_cpus: int | None) -> float | None:
    """The CPU limit of a SQL Server container: `cpus` of the scenario, else half the host's CPUs (at
    least one); None when neither is known."""
    value = settings.get("cpus")
    if value is None:
        return float(max(1, host_cpus // 2)) if host_cpus else None
    try:
        cpus = float(value)
    except (TypeError, ValueError):
        cpus = 0.0
    if cpus <= 0:
        raise ConfigError(f"cpus must be a number of CPUs above 0 (such as 2 or 1.5), got {value!r}")
    if host_cpus and cpus > host_cpus:
        raise ConfigError(f"cpus is {value}, and the Docker host has {host_cpus} CPUs; ask for {host_cpus} or fewer")
    return cpus


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
                           labels: dict[str, str], host_network: bool = False, host_cpus: int | None = None) -> dict:
    """The keyword arguments of `containers.run` for a SQL Server container (`host_cpus`: the Docker
    host's CPUs, for the default CPU limit)."""
    config = _common_config(image, name, labels, MSSQL_DATA, host_network, 1433, port)
    memory = str(settings.get("memory_limit") or MSSQL_MEMORY_DEFAULT)
    env = {"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": password, "MSSQL_PID": str(settings.get("pid") or "Developer"),
           "MSSQL_MEMORY_LIMIT_MB": str(sql_memory_limit_mb(memory))}
    if settings.get("collation"):
        env["MSSQL_COLLATION"] = str(settings["collation"])
    if host_network:
        env.update(MSSQL_TCP_PORT=str(port), MSSQL_IP_ADDRESS="127.0.0.1")
    flags = trace_flags(settings.get("trace_flags"))
    if flags:
        config["command"] = [MSSQL_COMMAND, *flags]
    config.update(environment=env, mem_limit=memory)
    cpus = cpus_for(settings, host_cpus)
    if cpus is not None:
        config["nano_cpus"] = int(cpus * 1e9)
    return config
