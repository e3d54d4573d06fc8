"""The timeline of each variant run that has one: its events (workload/events.py) as a short table,
in time order, for report.md, the terminal and the HTML page; and the events a chart marks."""

from __future__ import annotations

from ..results.model import VariantRun
from ..workload.events import Event

COLUMNS = ["t (s)", "Source", "Event", "Detail"]


def run_name(r: VariantRun, repeats: int = 1) -> str:
    """`variant @ N clients (server), repeat R`: which variant run a timeline belongs to."""
    label = r.variant + (f" @ {r.point} client{'' if r.point == 1 else 's'}" if r.point is not None else "")
    label += f" ({r.server})" if r.server else ""
    return label + (f", repeat {r.repeat}" if repeats > 1 else "")


def timeline_tables(runs: list[VariantRun], repeats: int = 1) -> list[dict]:
    """One table per variant run with events: their time in the window, source, kind and detail."""
    out = []
    for r in runs:
        if not r.events:
            continue
        rows = [[f"{e.t_s:.3f}", e.source, e.kind, e.detail] for e in r.events]
        out.append({"title": f"Timeline: {run_name(r, repeats)}", "columns": list(COLUMNS), "rows": rows,
                     "notes": ["t: seconds since the measurement window started (negative: during the warm-up)"]})
    return out


def in_window(r: VariantRun) -> list[Event]:
    """The events inside the measurement window, the ones a chart over the window marks."""
    return [e for e in r.events if 0.0 <= e.t_s <= r.elapsed_s]
