"""The container keys of a SQL Server scenario (`server: memory_limit:` and `cpus:`) as both the scenario's
validation and the docker target read them.

Memory: SQL Server gets MEMORY_SHARE of the container's memory as MSSQL_MEMORY_LIMIT_MB, the rest is
headroom ("Performance best practices: SQL Server memory on Linux"). Below 2,000 MB SQL Server does not
start: `sqlservr: This program requires a machine with at least 2000 megabytes of memory`, and the
container exits (the message of the 2017 CU2 and later images; microsoft/mssql-docker issues 452 and
608). 2,000 / 0.8 = 2,500 MB would give SQL Server exactly its start-up minimum and nothing to run a
scenario with, so the floor is 3 GB (2,457 MB for SQL Server).

CPUs: a whole number of CPUs the container is pinned to (`cpuset_cpus`), or NO_LIMIT (`cpus:` left
empty) for none; `min_cpus: N` raises the default (half the host's) to at least N where the host has
them, and to all it has where it has fewer (the run records that it got fewer). A fractional CPU limit would be a CFS quota, which freezes every thread of the server
for the rest of the 100 ms period once it is spent, latch and lock holders included: the docker target
does not set one (docs/mssql.md, "The container's CPUs and memory").
"""

from __future__ import annotations

import re

from ..errors import ConfigError

MEMORY_DEFAULT = "4g"
MEMORY_SHARE = 0.8  # of the container's memory, for SQL Server
SQL_SERVER_MINIMUM_MB = 2000  # below it SQL Server does not start
MEMORY_MINIMUM_MB = 3072  # 3g: more than the 2,500 MB whose 80% is exactly SQL Server's start-up minimum
NO_LIMIT = "none"  # `server: cpus:` left empty: no CPU limit at all

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
    return int(size_mb(memory_limit) * MEMORY_SHARE)


def memory_problem(memory_limit) -> str | None:
    """Why a container of `memory_limit` cannot run SQL Server, or None."""
    try:
        sql_mb = sql_memory_limit_mb(memory_limit)
    except ConfigError as exc:
        return exc.message.removeprefix("memory_limit ")
    if size_mb(memory_limit) < MEMORY_MINIMUM_MB:
        return (f"gives SQL Server {sql_mb} MB ({MEMORY_SHARE:.0%} of {memory_limit}, as MSSQL_MEMORY_LIMIT_MB), at "
                f"most the {SQL_SERVER_MINIMUM_MB:,} MB it needs just to start; the container needs at least 3g "
                f"({MEMORY_MINIMUM_MB}m)")
    return None


def at_least_cpus(value) -> int:
    """`server: min_cpus:` as a whole number of CPUs (ConfigError for anything else)."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"min_cpus must be a whole number of CPUs (such as 8), got {value!r}")
    return int(text)


def pinned_cpus(value) -> int | None:
    """The number of CPUs `server: cpus:` asks to pin (as the scenario stores it: a whole number, or NO_LIMIT,
    None); None for no limit. ConfigError for anything else."""
    if value is None or str(value).strip().lower() == NO_LIMIT:
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"cpus must be a whole number of CPUs to pin the container to (such as 2), or empty for "
                          f"no CPU limit, got {value!r}")
    return int(text)
