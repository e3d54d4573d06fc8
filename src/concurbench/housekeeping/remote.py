"""What killed runs left on a server concurbench does not own (`concurbench gc --target dsn`).

A run on a dsn server cleans up as it ends, also after an error, Ctrl-C, SIGTERM or SIGHUP. A
SIGKILL, a lost connection or a crashed machine leaves what the run made: its temporary database
(both engines) and, on SQL Server, its Extended Events sessions and SQL Traces (named
`concurbench...`), trace flag 7006 when the run turned it on, and its trace and .xel files. The dsn
provisioners find these (`leftovers`) and remove one (`remove`); only things that are concurbench's
by name or marker and that no live session uses are listed. Nothing here prints: the CLI lists the
actions, and removes only when told (`--yes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..errors import ConcurbenchError
from .gc import Action


@dataclass(frozen=True)
class Leftover:
    kind: str  # database, xe session, trace, trace flag, file
    name: str
    detail: str


class Sweeper(Protocol):
    """What a dsn provisioner offers gc: the leftovers of killed runs, and their removal one by one."""

    def leftovers(self) -> list[Leftover]: ...

    def remove(self, leftover: Leftover) -> None: ...


def collect(sweeper: Sweeper, *, remove: bool) -> list[Action]:
    """One action per leftover: listed (`would remove`), or removed (`remove`), or failed with the server's words."""
    actions = []
    for item in sweeper.leftovers():
        if not remove:
            actions.append(Action(item.kind, item.name, item.detail, "would remove"))
            continue
        try:
            sweeper.remove(item)
        except ConcurbenchError as exc:
            actions.append(Action(item.kind, item.name, item.detail, "failed", [exc.message]))
            continue
        actions.append(Action(item.kind, item.name, item.detail, "removed"))
    return actions
