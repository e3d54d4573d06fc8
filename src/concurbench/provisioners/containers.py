"""Container configurations for the docker target, as plain data: images, labels, passwords, server
arguments and the keyword arguments of `containers.run`. Nothing here talks to a Docker engine.

SQL Server's container gets two limits besides its memory limit (`mem_limit`):
- `MSSQL_MEMORY_LIMIT_MB`, the memory SQL Server may use, at 80% of the container's limit. SQL Server
  takes 80% of the host's memory by default, and before 2022 CU20 it does not see a cgroup v2
  limit, so without this it sizes itself to the host and the kernel kills it ("Performance best
  practices: SQL Server memory on Linux": keep 10 to 20% of the container's memory as headroom, and
  `MSSQL_MEMORY_LIMIT_MB` below the container's limit). engines/mssql_limits.py has the arithmetic
  and SQL Server's 2,000 MB floor.
- the CPUs it runs on (`cpuset_cpus`, as `docker run --cpuset-cpus`): `server: cpus: N` pins it to
  N CPUs, by default half of the Docker host's, the highest-numbered ones, so the server and the
  load generator's clients do not share every CPU. Never a CPU quota (`nano_cpus`, `--cpus`): once
  a quota is spent every thread of the server stops for the rest of the 100 ms period, the holders
  of latches and locks included, and the waits grow by an amount no run can tell apart; Docker
  also refuses a quota where the kernel's CFS bandwidth control is missing. Where the Docker host
  cannot pin (`docker info` says CPUSet false: rootless Docker without the cpuset controller
  delegated, some NAS kernels) the default is no CPU limit, and the run records why; `server:
  cpus:` left empty asks for no limit anywhere. SQL Server's scheduler count is recorded with the
  server's facts, to compare with the CPUs pinned.
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass

from ..engines.mssql_limits import (MEMORY_DEFAULT, at_least_cpus, pinned_cpus, size_mb,  # noqa: F401 - size_mb
                                    sql_memory_limit_mb)
from ..engines.registry import MSSQL, POSTGRES, EngineSpec
from ..errors import ConfigError, ProvisionError
from .options import TargetOptions

LABEL_RUN = "concurbench.run_id"
LABEL_KIND = "concurbench.kind"
LABEL_SERVER = "concurbench.server"
LABEL_KEEP = "concurbench.keep"
LABEL_OWNER = "concurbench.owner_pid"  # with LABEL_HOST, tells `gc` whether the run that made it is gone
LABEL_HOST = "concurbench.host"
DATABASE = "concurbench"
MSSQL_COMMAND = "/opt/mssql/bin/sqlservr"
MSSQL_CONTAINER_KEYS = ("memory_limit", "trace_flags", "pid", "collation", "cpus", "min_cpus")
MSSQL_MEMORY_DEFAULT = MEMORY_DEFAULT
PASSWORD_SYMBOLS = "!#%*+-=?@^_"  # none of them needs quoting in a conninfo, an ODBC string or a shell

# -- pure pieces: images, passwords, container configurations ---------------------------------------
def image_of(engine: EngineSpec, options: TargetOptions) -> str:
    """--image, else the image the scenario pins for the version (`server: images:`), else the engine's official
    image of the version (the engine's default version when none is asked for)."""
    if options.image:
        return options.image
    version = str(options.server_version or engine.default_version)
    pinned = dict(options.images).get(version)
    if pinned:
        return pinned
    known = engine.container.versions
    if known and version not in known:
        raise ConfigError(f"{engine.display} version {version} is not one of {', '.join(known)} (or name an image "
                          f"with --image, or pin one for it under the scenario's server: images:)")
    return engine.container.image.format(version=version)


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


@dataclass(frozen=True)
class DockerHost:
    """What the Docker engine says of its host (`docker info`): its CPUs, whether a container can be pinned to
    some of them (CPUSet), and which ones a cpuset may name when the engine said so (in a refusal)."""

    cpus: int | None = None  # NCPU
    cpuset: bool = False  # CPUSet
    available: str | None = None  # "0-7": the CPUs the engine offers to a cpuset


def cpu_list(text: str) -> list[int]:
    """The CPUs of a cpuset list (`0-3,8,10-11`)."""
    out = []
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"not a CPU list: {text!r}")
        out += range(int(low), int(high or low) + 1)
    return sorted(set(out))


def cpuset_text(cpus: list[int]) -> str:
    """`[4, 5, 6, 7, 9]` as `4-7,9`."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def cpu_pinning(settings: dict, host: DockerHost) -> tuple[str | None, str]:
    """(the cpuset to pin a SQL Server container to, or None; why it is not pinned, or "").

    `cpus` absent: half the host's CPUs (at least one, and at least `min_cpus` where the host offers them, all it
    offers where it has fewer: then the reason says so) where the host can pin, else no limit; `cpus` empty
    (NO_LIMIT): no limit; `cpus: N`: N CPUs, a ProvisionError where the host cannot pin. The highest-numbered
    CPUs the host offers are taken (CPU 0 tends to take more of the kernel's own work)."""
    asked = "cpus" in settings
    wanted = pinned_cpus(settings["cpus"]) if asked else None
    if asked and wanted is None:
        return None, "`server: cpus:` is empty"
    if not host.cpuset:
        if asked:
            raise ProvisionError(f"server: cpus: {wanted} pins the container to {wanted} CPUs, and this Docker host "
                                 f"cannot pin a container to CPUs (docker info: CPUSet false; rootless Docker needs "
                                 f"the cpuset controller delegated to the user's systemd slice); leave cpus: empty "
                                 f"to run without a CPU limit")
        return None, "this Docker host cannot pin a container to CPUs (docker info: CPUSet false)"
    offered = cpu_list(host.available) if host.available else list(range(host.cpus or 0))
    if not offered:
        if asked:
            raise ProvisionError(f"server: cpus: {wanted}: the Docker host did not say how many CPUs it has")
        return None, "the Docker host did not say how many CPUs it has"
    least = at_least_cpus(settings["min_cpus"]) if "min_cpus" in settings and not asked else 1
    count = wanted if asked else min(len(offered), max(least, len(offered) // 2))
    if count > len(offered):
        raise ConfigError(f"cpus is {wanted}, and the Docker host offers {len(offered)} CPUs "
                          f"({cpuset_text(offered)}); ask for {len(offered)} or fewer")
    fewer = (f"the scenario asks for at least {least} CPUs (min_cpus) and this Docker host offers "
             f"{len(offered)}: the server shares them with the clients" if count < least else "")
    return cpuset_text(offered[-count:]), fewer


_REFUSED = re.compile(r"Requested CPUs are not available - requested (\S+), available: ([0-9,\-]+)", re.I)


def cpus_offered(refusal: str) -> str | None:
    """The CPUs the Docker engine offers, from its refusal of a cpuset ("Requested CPUs are not available -
    requested 4-7, available: 0-3"), or None when `refusal` is another error."""
    m = _REFUSED.search(refusal or "")
    return m.group(2) if m else None


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
                              data_dir: str = POSTGRES.container.data_dir, shm_size: str = "512m") -> dict:
    """The keyword arguments of `containers.run` for a PostgreSQL container."""
    config = _common_config(image, name, labels, data_dir, host_network, POSTGRES.container.port, port)
    config.update(command=postgres_args(settings, port if host_network else None),
                  environment={POSTGRES.container.password_env: password, "PGDATA": data_dir}, shm_size=shm_size,
                  stop_signal="SIGINT")  # a fast shutdown, as the official image asks
    return config


def mssql_container_config(*, image: str, name: str, settings: dict, password: str, port: int,
                           labels: dict[str, str], host_network: bool = False, host: DockerHost | None = None) -> dict:
    """The keyword arguments of `containers.run` for a SQL Server container (`host`: what the Docker engine said
    of its CPUs, for the CPUs the container is pinned to)."""
    config = _common_config(image, name, labels, MSSQL.container.data_dir, host_network, MSSQL.container.port, port)
    memory = str(settings.get("memory_limit") or MSSQL_MEMORY_DEFAULT)
    env = {"ACCEPT_EULA": "Y", MSSQL.container.password_env: password, "MSSQL_PID": str(settings.get("pid") or "Developer"),
           "MSSQL_MEMORY_LIMIT_MB": str(sql_memory_limit_mb(memory))}
    if settings.get("collation"):
        env["MSSQL_COLLATION"] = str(settings["collation"])
    if host_network:
        env.update(MSSQL_TCP_PORT=str(port), MSSQL_IP_ADDRESS="127.0.0.1")
    flags = trace_flags(settings.get("trace_flags"))
    if flags:
        config["command"] = [MSSQL_COMMAND, *flags]
    config.update(environment=env, mem_limit=memory)
    cpuset, _ = cpu_pinning(settings, host or DockerHost())
    if cpuset:
        config["cpuset_cpus"] = cpuset
    return config
