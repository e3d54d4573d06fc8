"""Provisioners by the target names users write (`--target` or the scenario's `target:`).

A target registers one factory for each engine it runs; a factory takes the engine, the scenario's
server settings and the target options, and returns an object following the Provisioner protocol
(base.py). A target asked for an engine it has no factory for is refused here, in one place. Adding
a target is its module's FACTORIES and one line in TARGETS.
"""

from __future__ import annotations

from ..engines.registry import spec
from ..errors import ConfigError
from ..util import suggest
from . import binaries, docker, dsn
from .embedded import EmbeddedPostgres
from .options import APPLY, AS_IS, SERVER_SETTINGS, Factory, TargetOptions

__all__ = ["APPLY", "AS_IS", "SERVER_SETTINGS", "TARGETS", "TargetOptions", "make_provisioner"]



def _embedded(engine: str, settings: dict, options: TargetOptions):
    if options.server_version and not str(options.server_version).startswith("18"):
        raise ConfigError(f"the embedded target ships PostgreSQL 18 only, not {options.server_version}; "
                          f"use --target binaries (14 to 18, no Docker) or --target docker")
    return EmbeddedPostgres(settings, run_id=options.run_id, keep=options.keep)


TARGETS: dict[str, dict[str, Factory]] = {  # target -> engine -> factory
    "embedded": {"postgres": _embedded},
    "binaries": binaries.FACTORIES,
    "docker": docker.FACTORIES,
    "dsn": dsn.FACTORIES,
}


def make_provisioner(engine: str, settings: dict, options: TargetOptions):
    factories = TARGETS.get(options.target)
    if factories is None:
        raise ConfigError(f"unknown target '{options.target}'{suggest(options.target, TARGETS)}; "
                          f"known: {', '.join(sorted(TARGETS))}")
    if engine not in factories:
        runs = " and ".join(spec(e).display for e in factories)
        raise ConfigError(f"the {options.target} target runs {runs} only, and this scenario's engine is "
                          f"{spec(engine).display}")
    factory = factories[engine]
    if options.server_settings not in SERVER_SETTINGS:
        raise ConfigError(f"--server-settings {options.server_settings}: expected {' or '.join(SERVER_SETTINGS)}")
    if options.server_settings == AS_IS and options.target != "dsn":
        raise ConfigError(f"--server-settings as-is is for a server concurbench does not own (--target dsn); the "
                          f"{options.target} target starts its own server with the scenario's settings")
    if options.keep_database and options.target != "dsn":
        raise ConfigError(f"--keep-database is for a server concurbench does not own (--target dsn); the "
                          f"{options.target} target's server is its own and goes at the end (--keep keeps it)")
    if options.database is not None and options.target != "dsn":
        raise ConfigError(f"--database is for a server concurbench does not own (--target dsn); the "
                          f"{options.target} target runs in a database of its own server")
    if options.xe_without_max_duration and options.target != "dsn":
        raise ConfigError(f"--allow-xe-without-max-duration is for a server concurbench does not own (--target dsn); "
                          f"on the {options.target} target a killed run's server goes with everything in it")
    return factory(engine, dict(settings), options)

