"""Timeline events: what happened when in a variant run's measurement window, for the load generator's
pools and the background sessions alike (background/recorder.py records a session's).

`t_s` is seconds since the measurement window started (negative before it: a transaction held from
the warm-up). `source` is `pool:<name>` or `background:<name>`. Background sessions record `start`,
`release`, `stop`, `statement_start`, `statement_end` and `statement_failed`; the load generator's
pools record `start`, `stop` and `phase`. summary.json keeps each as one object with these four keys.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Event:
    t_s: float
    source: str
    kind: str
    detail: str = ""

    @classmethod
    def at(cls, t_s: float, source: str, kind: str, detail: str = "") -> "Event":
        """An event at `t_s` seconds, kept to the 0.1 ms the results store."""
        return cls(round(float(t_s), 4), source, kind, detail)

    def as_dict(self) -> dict:
        return asdict(self)


def merged(*lists: list[Event]) -> list[Event]:
    """Every event of the lists in time order (stable: events at one time keep their order)."""
    return sorted((e for events in lists for e in events), key=lambda e: e.t_s)
