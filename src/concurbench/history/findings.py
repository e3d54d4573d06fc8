"""Findings: the regressions the gate found, kept in the store with their state until someone acts.

    NEW           found by a check (the night it was found, or later: a change found late is new too);
                  `check` is red while one is new on a series that had a run in the check
    ACKNOWLEDGED  someone said why (`history ack F12 --reason TEXT`), or the change was announced
                  beforehand for its commit or server release (`history ack --commit SHA|--release V`)
    RESOLVED      a later change point brought the metric back within the band its old level's runs lay in

A finding's id is shown as `F<number>`. A change the detector places one run earlier or later as more
runs arrive is the same finding (`same_change`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..errors import ConfigError
from .level import Level
from .records import SeriesKey


class FindingState(StrEnum):
    NEW = "new"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


OPEN = (FindingState.NEW, FindingState.ACKNOWLEDGED)  # not resolved: a later change may still resolve them


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
    resolved_run: int | None = None  # the first run of the change point that brought it back

    @property
    def name(self) -> str:
        return finding_name(self.id)


@dataclass(frozen=True)
class Expectation:
    """A change announced before it is found: findings whose first run has this commit (a prefix of at least
    seven characters) or this server release are acknowledged when they are made."""

    id: int | None
    commit: str  # "" when the expectation is a release's
    release: str  # "" when it is a commit's
    reason: str
    added: str

    def covers(self, commit: str, release: str) -> bool:
        if self.commit:
            return bool(commit) and commit.startswith(self.commit)
        return release == self.release


def finding_name(number: int | None) -> str:
    return f"F{number}" if number is not None else "F?"


def parse_finding(text: str) -> int:
    """`F12` or `12` -> 12; anything else is a ConfigError naming it."""
    m = re.fullmatch(r"[Ff]?(\d+)", text.strip())
    if not m:
        raise ConfigError(f"{text!r} is not a finding id: give it as `history show` and `history check` print it, "
                          f"e.g. F12")
    return int(m.group(1))


def same_change(a_index: int, b_index: int) -> bool:
    """Two changes of one series are the same when their first runs are at most one run apart."""
    return abs(a_index - b_index) <= 1
