"""The distributed engine underneath the cluster: Dask's `distributed` package, an optional extra
(`pip install 'concurbench[cluster]'`). Nothing outside cluster/ imports it, and nothing here imports it at
module level, so a run without a cluster neither needs nor loads it.

A coordinator talks to a Dask scheduler; each load host is one Dask worker process (no nanny: the worker
is the host's process, and the load's worker processes are its children). The scheduler and the workers
are started with the engine's own commands (`python -m distributed.cli.dask_scheduler` and
`...dask_worker`), which bind only the address they are given.
"""

from __future__ import annotations

import importlib.util
import sys

from ..errors import ConfigError

INSTALL = "pip install 'concurbench[cluster]'"
CONNECT_S = 20.0  # the longest wait for a scheduler to answer
CALL_S = 20.0  # the longest wait for one call to the hosts (facts, clocks)


def unavailable() -> str | None:
    """Why the engine cannot be used here (its package is not installed), or None."""
    if importlib.util.find_spec("distributed") is None:
        return f"the cluster needs Dask's distributed package, which is not installed: {INSTALL}"
    return None


def require() -> None:
    """ConfigError, naming the install command, when the engine is missing."""
    why = unavailable()
    if why is not None:
        raise ConfigError(why)


def scheduler_command(host: str, port: int, scheduler_file: str, tls: dict[str, str] | None = None) -> list[str]:
    """The engine's scheduler, bound to `host`:`port` only (0: a free port), writing its address to
    `scheduler_file`; no dashboard (it would bind a port of its own)."""
    command = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host, "--port", str(port),
               "--scheduler-file", scheduler_file, "--no-dashboard"]
    return command + _tls_options(tls)


def worker_command(address: str, name: str, host: str | None, tls: dict[str, str] | None = None,
                   death_timeout_s: float = 60.0, local_directory: str | None = None) -> list[str]:
    """The engine's worker as one load host: one thread (a host runs one variant run's share at a time), no
    nanny (the worker process is the host's), no dashboard, listening on `host` (None: the engine's choice, the
    address it reaches the scheduler from); it ends when the scheduler has been gone for `death_timeout_s`."""
    command = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--name", name, "--nthreads", "1",
               "--no-nanny", "--no-dashboard", "--death-timeout", f"{death_timeout_s:g}"]
    if host is not None:
        command += ["--host", host]
    if local_directory is not None:
        command += ["--local-directory", local_directory]
    return command + _tls_options(tls)


def _tls_options(tls: dict[str, str] | None) -> list[str]:
    """--tls-ca-file, --tls-cert and --tls-key for the engine's commands."""
    return [part for key, value in (tls or {}).items() if value for part in (f"--tls-{key}", value)]


def client(address: str, timeout_s: float = CONNECT_S):
    """A client of the scheduler at `address` (a ConfigError when none answers in time). TLS comes from Dask's
    own configuration (DASK_DISTRIBUTED__COMM__TLS__... variables, docs/distributed.md)."""
    require()
    from distributed import Client

    try:
        return Client(address, timeout=f"{timeout_s}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--cluster {address}: no cluster answered within {timeout_s:g} s "
                          f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); start one with "
                          f"`concurbench cluster start`, or check the address", cause=exc) from None
    except ValueError as exc:
        raise ConfigError(f"--cluster {address}: not a cluster address ({exc}); give one such as "
                          f"tcp://127.0.0.1:8786", cause=exc) from None
