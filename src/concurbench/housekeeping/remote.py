"""What killed runs left on a server concurbench does not own (`concurbench gc --target dsn`).

A run on a dsn server cleans up as it ends, also after an error, Ctrl-C, SIGTERM or SIGHUP. A
SIGKILL, a lost connection or a crashed machine leaves what the run made: its temporary database
(both engines) and, on SQL Server, its Extended Events sessions and SQL Traces (named
`concurbench...`), trace flag 7006 when the run turned it on, and its trace and .xel files. The dsn
provisioners find these (`leftovers`, provisioners/base.py's Leftover) and remove one (`remove`); only things that are concurbench's
by name or marker and that no live session uses are listed. What a client connection cannot remove
(a file on the server) carries the command an administrator runs (`by_hand`), and is listed as such.
Nothing here prints: the CLI lists the actions, and removes only when told (`--yes`).
"""

from __future__ import annotations

from ..errors import ConcurbenchError
from ..provisioners.base import Sweeper
from .gc import Action, GcOutcome


def collect(sweeper: Sweeper, *, remove: bool) -> list[Action]:
    """One action per leftover: listed (`would remove`), or removed (`remove`), or failed with the server's words;
    one that only an administrator can remove is listed with the command, with or without `remove`."""
    actions = []
    for item in sweeper.leftovers():
        if item.by_hand:
            actions.append(Action(item.kind, item.name, item.detail, GcOutcome.BY_HAND, [item.by_hand]))
            continue
        if not remove:
            actions.append(Action(item.kind, item.name, item.detail, GcOutcome.WOULD_REMOVE))
            continue
        try:
            sweeper.remove(item)
        except ConcurbenchError as exc:
            actions.append(Action(item.kind, item.name, item.detail, GcOutcome.FAILED, [exc.message]))
            continue
        actions.append(Action(item.kind, item.name, item.detail, GcOutcome.REMOVED))
    return actions
