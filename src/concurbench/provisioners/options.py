"""What a target is given: the options of `--target` and its neighbours, and the shape of a target's factory
(registry.py keeps the factories by target name)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .base import PullListener

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
    database: str | None = None  # dsn: the database the run creates or uses (--database)
    xe_without_max_duration: bool = False  # dsn SQL Server 2019/2022: an XE observer a kill would leave running
    run_id: str | None = None
    ready_timeout: float | None = None  # docker: seconds a container has to accept connections (None: the engine's)
    listener: PullListener | None = field(default=None, compare=False, repr=False)  # told of an image pull


Factory = Callable[[str, dict, TargetOptions], object]
