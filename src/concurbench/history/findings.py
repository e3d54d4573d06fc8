"""Findings: the regressions the gate found, kept in the store with their state until someone acts.

    NEW           found by a check (the night it was found, or later: a change found late is new too);
                  `check` is red while one is new on a series that had a run in the check
    ACKNOWLEDGED  someone said why (`history ack F12 --reason TEXT`), or the change was announced
                  beforehand for its commit or server release (`history ack --commit SHA|--release V`)
    RESOLVED      a later change point brought the metric back within the band its old level's runs lay in

A finding is of one of two kinds: a change on its series' line (the detector's change point), or an
upgrade: the first runs of a new server major judged against the last level of the major before it on
the same job. A finding keeps the runs its change could start at (the change point's own interval: a
change the detector places a run or three earlier as more runs arrive is the same finding), its size
when found and as the newest runs show it, and the thresholds it was found with, which judge it from
then on whatever a later check is told.

A finding's id is shown as `F<number>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..errors import ConfigError
from ..figures import Better
from .level import Level
from .records import SeriesKey


class FindingState(StrEnum):
    NEW = "new"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


OPEN = (FindingState.NEW, FindingState.ACKNOWLEDGED)  # not resolved: a later change may still resolve them


class FindingKind(StrEnum):
    CHANGE = "change"  # a change point on the series' line
    UPGRADE = "upgrade"  # a new major's first runs against the previous major's last level


@dataclass(frozen=True)
class Finding:
    """One regression on one series: the change at `first_run` (the store's run row id; `before_run` the last
    run before it), how far and how sure, and what was done about it."""

    id: int | None  # None until the store keeps it
    key: SeriesKey  # `server` holds the series' line
    first_run: int
    before_run: int
    change: float | None  # relative; None from a level of exactly 0
    p: float  # the calibrated p of the change on its own series (before the night's correction)
    before: Level
    after_mean: float
    state: FindingState = FindingState.NEW
    found: str = ""  # when a check found it (UTC, ISO 8601)
    reason: str | None = None  # why it was acknowledged
    acted: str | None = None  # when it was acknowledged or resolved
    resolved_run: int | None = None  # the first run of the level that brought it back
    kind: FindingKind = FindingKind.CHANGE
    first_low: int | None = None  # the runs the change could start at: the earliest ...
    first_high: int | None = None  # ... and the latest (store row ids; None: first_run alone)
    now_change: float | None = None  # its size as the newest runs show it (None: as found)
    now_run: int | None = None  # the newest run that size was measured at
    min_change: float | None = None  # the thresholds it was found with (None: found before they were kept)
    better: Better | None = None
    family: str = ""
    alpha: float | None = None
    baseline: str | None = None  # an upgrade's: the line of the major it is judged against
    confirmation: dict | None = None  # what a confirming run side by side decided (history/confirm.py)

    @property
    def name(self) -> str:
        return finding_name(self.id)

    @property
    def starts(self) -> tuple[int, int]:
        """The runs (store row ids) the change could start at, the earliest and the latest."""
        return (self.first_low if self.first_low is not None else self.first_run,
                self.first_high if self.first_high is not None else self.first_run)


@dataclass(frozen=True)
class Expectation:
    """A change announced before it is found: findings whose first run has this commit (a prefix of at least
    seven characters) or this server release are acknowledged when they are made."""

    id: int | None
    commit: str  # "" when the expectation is a release's
    release: str  # "" when it is a commit's
    reason: str
    added: str
    lapsed: str | None = None  # when its window had passed on every line that ran it (None: still open)

    def matches(self, commit: str, release: str) -> bool:
        """A run of this commit (a prefix of its hash) or release."""
        if self.commit:
            return bool(commit) and commit.startswith(self.commit)
        return release == self.release

    @property
    def what(self) -> str:
        return f"commit {self.commit}" if self.commit else f"release {self.release}"


def finding_name(number: int | None) -> str:
    return f"F{number}" if number is not None else "F?"


def parse_finding(text: str) -> int:
    """`F12` or `12` -> 12; anything else is a ConfigError naming it."""
    m = re.fullmatch(r"[Ff]?(\d+)", text.strip())
    if not m:
        raise ConfigError(f"{text!r} is not a finding id: give it as `history show` and `history check` print it, "
                          f"e.g. F12")
    return int(m.group(1))


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Two ranges of run places (first, last) share a place."""
    return a[0] <= b[1] and b[0] <= a[1]
