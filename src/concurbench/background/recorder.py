"""A background session's timeline events (workload/events.py's Event), stamped on its own clock while it
runs and given window times once the window's start is known."""

from __future__ import annotations

from ..workload.events import Event

BACKGROUND_KINDS = ("start", "release", "stop", "statement_start", "statement_end", "statement_failed")


class Recorder:
    """Events of one background session, stamped on its clock and turned into window times once the window's
    start is known (an event before it, in the warm-up, gets a negative time)."""

    def __init__(self, name: str):
        self.source = f"background:{name}"
        self._stamped: list[tuple[int, str, str]] = []

    def add(self, ns: int, kind: str, detail: str = "") -> None:
        self._stamped.append((ns, kind, detail))

    def events(self, measure_from_ns: int) -> list[Event]:
        if not measure_from_ns:  # the window never started: no time to give them
            return []
        return [Event.at((ns - measure_from_ns) / 1e9, self.source, kind, detail) for ns, kind, detail in self._stamped]


def short(sql: str, width: int = 60) -> str:
    """One line of SQL for an event's detail."""
    text = " ".join(sql.split())
    return text if len(text) <= width else text[:width - 1] + "…"
