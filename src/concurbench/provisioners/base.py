"""What every provisioner offers: a server to connect to, and its end."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Callable, Protocol

from ..engines.base import ChangePolicy
from .owned import DatabasePlan


@dataclass(frozen=True)
class Connection:
    """How to reach a server. `safe` is what may be shown or stored (never a password). `run_id` is the run's id
    on that server where the provisioner gives one (every name a run makes on a SQL Server carries it); `notes`
    are what the provisioner did before the run began that the run tells (what a killed run of this host left)."""

    conninfo: str
    safe: str
    extra: dict = field(default_factory=dict)
    run_id: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImagePull:
    """Progress event: a container image is being pulled (`layer` None: the pull begins)."""

    image: str
    status: str | None  # as the Docker engine words it ("pulling" when the pull begins)
    layer: str | None = None


class PullListener(Protocol):
    """What a provisioner tells while it prepares a server: the one progress event of this layer
    (running/progress_events.Listener has it among the rest)."""

    def on_pull(self, event: ImagePull) -> None: ...


class LeftoverKind(StrEnum):
    """What a killed run left on a server concurbench does not own, as gc names it."""

    DATABASE = "database"
    XE_SESSION = "xe session"
    TRACE = "trace"
    TRACE_FLAG = "trace flag"
    SETTING = "sp_configure"
    FILE = "file"
    RUN_RECORD = "run record"


@dataclass(frozen=True)
class Leftover:
    """Something a killed run left on a server concurbench does not own (`gc --target dsn`)."""

    kind: LeftoverKind
    name: str
    detail: str
    by_hand: str = ""  # what cannot be removed from a client: the command an administrator runs instead


class Sweeper(Protocol):
    """What a dsn provisioner offers gc: the leftovers of killed runs, and their removal one by one."""

    def leftovers(self) -> list[Leftover]: ...

    def remove(self, leftover: Leftover) -> None: ...


@dataclass(frozen=True)
class Inspection:
    """What a run would do about its database on a server concurbench does not own, found before anything is
    changed (the probe shows it): the plan, the run's database (`connection.safe` may be shown), why a run would
    refuse it ("" when it would not), and whether the run keeps a database it creates (--keep-database)."""

    plan: DatabasePlan
    connection: Connection
    refusal: str = ""
    keep_database: bool = False


class Provisioner(Protocol):
    """What every target offers the runner, the probe and the API; what a target can do is declared here (an
    answer of None or a no-op where it cannot), never asked of it."""

    name: str

    def inspect(self) -> Inspection | None:
        """Before anything starts or changes: what a run would do about its database on a server concurbench does
        not own, read from the server; None where the server and its database are concurbench's own."""

    def start(self) -> Connection: ...

    def apply_settings(self) -> None:
        """Apply what `start` planned once the run's connections were checked (a dsn server's settings)."""

    def restart(self, settings: dict[str, str] | None = None) -> Connection: ...

    def stop(self) -> None: ...

    def policy(self) -> ChangePolicy:
        """What a run may change on this server (engines/base.py)."""

    def file_remover(self) -> Callable[[list[str]], None] | None:
        """What removes files an observer wrote on the server (a container's), or None where they are out of
        reach."""

    def connect_hint(self) -> str | None:
        """How to reach the server when it is left running (--keep), or None."""

    def logs(self, lines: int = 40) -> str: ...

    def describe(self) -> dict: ...


class OwnServer:
    """The answers of a server concurbench starts itself (embedded, binaries, docker): its settings go in at start,
    anything may change on it, its database is its own, and its files are out of reach unless the target says
    otherwise."""

    def inspect(self) -> Inspection | None:
        return None

    def apply_settings(self) -> None:
        return None

    def policy(self) -> ChangePolicy:
        return ChangePolicy()

    def file_remover(self) -> Callable[[list[str]], None] | None:
        return None


def as_root() -> bool:
    """Whether concurbench runs as root (then the server runs as an unprivileged user of its own)."""
    return os.name == "posix" and os.geteuid() == 0


def home_dir() -> Path:
    """Where concurbench keeps server binaries, templates and running servers' directories.

    As root this is a system path every user can traverse (the server runs as an unprivileged
    user and must reach its binaries); otherwise the user's cache.
    """
    env = os.environ.get("CONCURBENCH_HOME")
    if env:
        path = Path(env)
    elif as_root():
        path = Path("/var/lib/concurbench")
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "concurbench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def make_readable(folder: Path) -> None:
    """Make concurbench's home and a folder of binaries usable by the unprivileged server user.

    Folders become traversable, files readable, and files executable by their owner executable
    by everyone (as root the server does not run as the files' owner).
    """
    if as_root():
        for path in (home_dir(), home_dir() / "installs"):
            if path.exists():
                path.chmod(0o755)
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                mode = os.stat(full).st_mode
                os.chmod(full, mode | 0o444 | (0o111 if mode & 0o100 else 0))
