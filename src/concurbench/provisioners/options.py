"""What a target is given: the options of `--target` and its neighbours, and the shape of a target's factory
(registry.py keeps the factories in each target's TargetSpec)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable

from ..errors import ConfigError
from .base import Provisioner, PullListener


class ServerSettings(StrEnum):
    """`--server-settings`: the scenario's settings applied, or a server concurbench does not own taken as it is."""

    APPLY = "apply"
    AS_IS = "as-is"


@dataclass(frozen=True)
class TargetOptions:
    """What one server's provisioner is made with; `server_settings` is read as a ServerSettings (a ConfigError
    names the values it takes)."""

    target: str = "embedded"
    server_version: str | None = None  # one version; a matrix is expanded before this
    dsn: str | None = None
    password_env: str | None = None
    image: str | None = None
    images: tuple[tuple[str, str], ...] = ()  # the scenario's server.images: an image pinned per version
    host_network: bool = False
    keep: bool = False
    allow_server_changes: bool = False
    server_settings: ServerSettings = ServerSettings.APPLY  # AS_IS: a dsn server's settings left, differences recorded
    keep_database: bool = False  # dsn: keep the database the run created (provisioners/owned.py)
    database: str | None = None  # dsn: the database the run creates or uses (--database)
    xe_without_max_duration: bool = False  # dsn SQL Server 2019/2022: an XE observer a kill would leave running
    run_id: str | None = None
    ready_timeout: float | None = None  # docker: seconds a container has to accept connections (None: the engine's)
    listener: PullListener | None = field(default=None, compare=False, repr=False)  # told of an image pull

    def __post_init__(self):
        object.__setattr__(self, "server_settings", server_settings(self.server_settings))

    @property
    def as_is(self) -> bool:
        return self.server_settings is ServerSettings.AS_IS


def server_settings(value: str) -> ServerSettings:
    """--server-settings as a ServerSettings; a ConfigError naming the values it takes."""
    try:
        return ServerSettings(value)
    except ValueError:
        raise ConfigError(f"--server-settings {value}: expected {' or '.join(ServerSettings)}") from None


Factory = Callable[[str, dict[str, str], TargetOptions], Provisioner]
"""A target's factory for one engine: the engine's name, the scenario's server settings, the options."""
