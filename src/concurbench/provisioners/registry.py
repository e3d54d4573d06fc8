"""Targets by the names users write (`--target` or the scenario's `target:`): one `TargetSpec` each.

A TargetSpec says what a target is apart from its code, as engines/registry.py's EngineSpec does for an
engine: a factory for each engine it runs (the engine, the scenario's server settings and the target
options in; an object following the Provisioner protocol, base.py, out), and what it can do: whether it
starts a server of its own, takes a version matrix (a server per version), runs its server on this
machine, and honours the options of a server concurbench does not own (`--server-settings as-is`,
`--keep-database`, `--database`, `--allow-xe-without-max-duration`). Everything that differs between
targets is read from here or asked of the provisioner through its protocol, never decided by comparing a
target's name (tests/unit/test_target_names.py). An option or engine a target cannot take is refused
here, in one place. Adding a target is its module's FACTORIES and one TargetSpec in TARGETS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..engines.registry import spec
from ..errors import ConfigError
from ..util import suggest
from . import binaries, docker, docker_engine, dsn
from .base import Provisioner
from .containers import image_of
from .embedded import EmbeddedPostgres
from .options import Factory, ServerSettings, TargetOptions

__all__ = ["TARGETS", "ServerSettings", "TargetOptions", "TargetSpec", "make_provisioner", "target_spec"]


@dataclass(frozen=True)
class TargetSpec:
    name: str  # as --target and the scenario's `target:` write it
    factories: Mapping[str, Factory]  # engine name -> the factory of its provisioners
    owns_server: bool  # starts its own server: settings at start, restarts, anything may change, it goes at the end
    on_this_machine: bool  # the server's backends take this machine's memory (the resource guards count them)
    version_matrix: bool  # takes several versions (--server-version, server.versions): a server each
    as_is: bool = False  # honours --server-settings as-is (a server taken as it is, differences recorded)
    keep_database: bool = False  # honours --keep-database (the database a run created stays)
    database: bool = False  # honours --database (the database a run creates or uses)
    xe_without_max_duration: bool = False  # honours --allow-xe-without-max-duration

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self.factories)

    def refused_options(self, options: TargetOptions) -> list[str]:
        """The options given that this target does not take, each with why (for a ConfigError)."""
        why_not = (f"the {self.name} target starts its own server with the scenario's settings" if self.owns_server
                   else f"the {self.name} target does not take it")
        kept = (f"the {self.name} target's server is its own and goes at the end (--keep keeps it)"
                if self.owns_server else why_not)
        asked = [(options.as_is, self.as_is, "--server-settings as-is", why_not),
                 (options.keep_database, self.keep_database, "--keep-database", kept),
                 (options.database is not None, self.database, "--database",
                  f"the {self.name} target runs in a database of its own server"),
                 (options.xe_without_max_duration, self.xe_without_max_duration, "--allow-xe-without-max-duration",
                  f"on the {self.name} target a killed run's server goes with everything in it")]
        return [f"{flag} is for a server concurbench does not own ({_guests()}); {why}"
                for given, taken, flag, why in asked if given and not taken]


def _embedded(engine: str, settings: dict[str, str], options: TargetOptions) -> Provisioner:
    if options.server_version and not str(options.server_version).startswith("18"):
        raise ConfigError(f"the embedded target ships PostgreSQL 18 only, not {options.server_version}; "
                          f"use --target binaries (14 to 18, no Docker) or --target docker")
    return EmbeddedPostgres(settings, run_id=options.run_id, keep=options.keep)


EMBEDDED = TargetSpec("embedded", {"postgres": _embedded}, owns_server=True, on_this_machine=True,
                      version_matrix=False)
BINARIES = TargetSpec("binaries", binaries.FACTORIES, owns_server=True, on_this_machine=True, version_matrix=True)
DOCKER = TargetSpec("docker", docker.FACTORIES, owns_server=True, on_this_machine=True, version_matrix=True)
DSN = TargetSpec("dsn", dsn.FACTORIES, owns_server=False, on_this_machine=False, version_matrix=False, as_is=True,
                 keep_database=True, database=True, xe_without_max_duration=True)

TARGETS: dict[str, TargetSpec] = {t.name: t for t in (EMBEDDED, BINARIES, DOCKER, DSN)}


def _guests() -> str:
    return ", ".join(f"--target {t.name}" for t in TARGETS.values() if not t.owns_server)


def release_targets() -> tuple[str, ...]:
    """The targets that start a server of any release asked for (a version matrix): what a side-by-side run of
    two releases needs."""
    return tuple(t.name for t in TARGETS.values() if t.version_matrix)


def fetch_release(target: str, engine: str, version: str, images: tuple = ()) -> None:
    """Have `version` of the server here for `target` (the binaries' wheel unpacked, the docker image pulled),
    or a ConcurbenchError saying why it cannot be had; nothing to do for a target without a version matrix."""
    if target == BINARIES.name:
        binaries.ensure_install(version)
    elif target == DOCKER.name:
        image = image_of(spec(engine), TargetOptions(target=DOCKER.name, server_version=version, images=images))
        docker_engine.ensure_image(docker_engine.connect(), image)


def target_spec(name: str) -> TargetSpec:
    """The target `name` names; a ConfigError with a did-you-mean for one that does not exist."""
    found = TARGETS.get(name)
    if found is None:
        raise ConfigError(f"unknown target '{name}'{suggest(name, TARGETS)}; known: {', '.join(sorted(TARGETS))}")
    return found


def make_provisioner(engine: str, settings: dict[str, str], options: TargetOptions) -> Provisioner:
    target = target_spec(options.target)
    if engine not in target.factories:
        runs = " and ".join(spec(e).display for e in target.engines)
        raise ConfigError(f"the {target.name} target runs {runs} only, and this scenario's engine is "
                          f"{spec(engine).display}")
    refused = target.refused_options(options)
    if refused:
        raise ConfigError(refused[0])
    return target.factories[engine](engine, dict(settings), options)
