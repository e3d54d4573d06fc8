"""Which findings an announced change covers, and when its window lapses.

`history ack --release 16.14` (or `--commit SHA`) says that a change is expected with that release or
commit. It covers the changes that start at its first runs: on each line, the first WINDOW runs of
that release (or commit), the runs a change there could start at before a check could see it (a
change needs MIN_AFTER runs after it). A finding whose runs it could start at (its interval) meet that
window is acknowledged when it is made, whenever that is (a small change found late still started
there); a change that starts later, an unrelated regression weeks after the upgrade, is new. A
commit's window is the same: a checkout's commit can stay for weeks, its first runs are when it came.

The window lapses on a line once that line holds WINDOW + MIN_AFTER runs from its first run of the
release or commit on: by then a change at the window's last run has been seen. The expectation keeps
when it lapsed on the first line that got there (`lapsed`), so `history show` can say it.
"""

from __future__ import annotations

from .analysis import Series
from .findings import Expectation, Finding
from .gatefile import MIN_AFTER

WINDOW = MIN_AFTER  # a release's or commit's first runs on a line that its expectation covers


def window(e: Expectation, s: Series) -> list[int]:
    """The store's row ids of the first WINDOW runs of the expectation's release or commit on this series'
    line (none where it has not run)."""
    return [p.run.id for p in _runs_of(e, s)[:WINDOW]]


def covers(e: Expectation, f: Finding, s: Series, ranks: dict[int, int]) -> bool:
    """The finding's change could start at a run of the expectation's window on its line (`ranks`: the line's
    runs in order)."""
    mine = [ranks[r] for r in window(e, s) if r in ranks]
    if not mine:
        return False
    low, high = (ranks.get(r) for r in f.starts)
    if low is None or high is None:
        return False
    return low <= max(mine) and min(mine) <= high


def lapsed(e: Expectation, s: Series) -> bool:
    """This line holds WINDOW + MIN_AFTER runs from its first run of the release or commit on."""
    runs = _runs_of(e, s)
    if not runs:
        return False
    pts = s.included
    first = pts.index(runs[0])
    return len(pts) - first >= WINDOW + MIN_AFTER


def _runs_of(e: Expectation, s: Series):
    return [p for p in s.included if e.matches(p.run.record.commit or p.run.record.labels.get("commit", ""),
                                               p.server)]
