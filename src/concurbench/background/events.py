"""Timeline events: what happened when in a variant run's measurement window.

An event is a plain dict, as summary.json keeps it:

    {"t_s": 0.512, "source": "background:ddl", "kind": "statement_start", "detail": "ALTER TABLE ..."}

`t_s` is seconds since the measurement window started (negative before it: a transaction held from
the warm-up). `source` is `pool:<name>` or `background:<name>`. Background sessions record `start`,
`release`, `stop`, `statement_start`, `statement_end` and `statement_failed`; the load generator's
pools record `start`, `stop` and `phase`.
"""

from __future__ import annotations

BACKGROUND_KINDS = ("start", "release", "stop", "statement_start", "statement_end", "statement_failed")


def event(t_s: float, source: str, kind: str, detail: str = "") -> dict:
    return {"t_s": round(float(t_s), 4), "source": source, "kind": kind, "detail": detail}


class Recorder:
    """Events of one background session, stamped on its clock and turned into window times once the window's
    start is known (an event before it, in the warm-up, gets a negative time)."""

    def __init__(self, name: str):
        self.source = f"background:{name}"
        self._stamped: list[tuple[int, str, str]] = []

    def add(self, ns: int, kind: str, detail: str = "") -> None:
        self._stamped.append((ns, kind, detail))

    def events(self, measure_from_ns: int) -> list[dict]:
        if not measure_from_ns:  # the window never started: no time to give them
            return []
        return [event((ns - measure_from_ns) / 1e9, self.source, kind, detail) for ns, kind, detail in self._stamped]


def merged(*lists: list[dict]) -> list[dict]:
    """Every event of the lists in time order (stable: events at one time keep their order)."""
    return sorted((dict(e) for events in lists for e in events), key=lambda e: e["t_s"])


def short(sql: str, width: int = 60) -> str:
    """One line of SQL for an event's detail."""
    text = " ".join(sql.split())
    return text if len(text) <= width else text[:width - 1] + "…"
