"""Provisioners by the target names users write (`--target` or the scenario's `target:`).

A factory takes the engine, the scenario's server settings and the target options, and returns an
object following the Provisioner protocol (start, restart, stop, logs, describe). Adding a target
is one factory and one line in TARGETS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from ..errors import ConfigError
from ..util import suggest
from .base import PullListener
from .embedded import EmbeddedPostgres

APPLY, AS_IS = "apply", "as-is"  # --server-settings: the scenario's settings applied, or the server taken as it is
SERVER_SETTINGS = (APPLY, AS_IS)


@dataclass(frozen=True)
class TargetOptions:
    target: str = "embedded"
    server_version: str | None = None  # one version; a matrix is expanded before this
    dsn: str | None = None
    password_env: str | None = None
    image: str | None = None
    images: tuple[tuple[str, str], ...] = ()  # the scenario's server.images: an image pinned per version
    host_network: bool = False
    keep: bool = False
    allow_server_changes: bool = False
    server_settings: str = APPLY  # AS_IS: a dsn server's settings are left as they are, and differences recorded
    keep_database: bool = False  # dsn: keep the database the run created (provisioners/owned.py)
    run_id: str | None = None
    ready_timeout: float | None = None  # docker: seconds a container has to accept connections (None: the engine's)
    listener: PullListener | None = field(default=None, compare=False, repr=False)  # told of an image pull


Factory = Callable[[str, dict, TargetOptions], object]


def _embedded(engine: str, settings: dict, options: TargetOptions):
    _need_postgres(engine, "embedded")
    if options.server_version and not str(options.server_version).startswith("18"):
        raise ConfigError(f"the embedded target ships PostgreSQL 18 only, not {options.server_version}; "
                          f"use --target binaries (14 to 18, no Docker) or --target docker")
    return EmbeddedPostgres(settings, run_id=options.run_id, keep=options.keep)


def _need_postgres(engine: str, target: str) -> None:
    if engine != "postgres":
        raise ConfigError(f"the {target} target runs PostgreSQL only, and this scenario's engine is {engine}")


TARGETS: dict[str, Factory] = {
    "embedded": _embedded,
}


def register(name: str, factory: Factory) -> None:
    TARGETS[name] = factory


def make_provisioner(engine: str, settings: dict, options: TargetOptions):
    _load_optional()
    factory = TARGETS.get(options.target)
    if factory is None:
        raise ConfigError(f"unknown target '{options.target}'{suggest(options.target, TARGETS)}; "
                          f"known: {', '.join(sorted(TARGETS))}")
    if options.server_settings not in SERVER_SETTINGS:
        raise ConfigError(f"--server-settings {options.server_settings}: expected {' or '.join(SERVER_SETTINGS)}")
    if options.server_settings == AS_IS and options.target != "dsn":
        raise ConfigError(f"--server-settings as-is is for a server concurbench does not own (--target dsn); the "
                          f"{options.target} target starts its own server with the scenario's settings")
    if options.keep_database and options.target != "dsn":
        raise ConfigError(f"--keep-database is for a server concurbench does not own (--target dsn); the "
                          f"{options.target} target's server is its own and goes at the end (--keep keeps it)")
    return factory(engine, dict(settings), options)


def target_names() -> list[str]:
    _load_optional()
    return sorted(TARGETS)


def _load_optional() -> None:
    """Targets in their own modules register themselves when imported."""
    for module in ("binaries", "docker", "dsn"):
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{module}":
                raise
