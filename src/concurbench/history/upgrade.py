"""A new server major judged against the one before it: the first runs of a major's track against the last
level of the previous major's track, on the same job.

With the default order (a track per major), the first runs of 17 start a series of their own, which has
no level to be judged against until it has runs enough (MIN_BEFORE and MIN_AFTER); a job that moved
from 16 to 17 would be green whatever 17 did. So the first level of a major's series (its runs up to
its first change point, at most a window) is compared with the last level of the same series on the
nearest earlier major (version order) that has one: same scenario, variant, pool, clients, point,
metric, the same machine state (quiet or busy), and the same job labels (the labels every run of each
level carries alike, other than `track`: a branch, a job name; a run id differs run by run and is no
job label). The comparison is the detector's test at a split known beforehand (detect.compare), so its
p is not paid for a search; a worse level by the minimum change is a finding of its own kind
(FindingKind.UPGRADE, "upgrade: 17 vs 16"). Lines named by a `track` label are not majors: a job that
labels its runs `track=main` keeps one series across majors, and the detector sees the upgrade there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .analysis import TRACK_LABEL, Point, Series, is_busy, quiet_line, version_key
from .detect import Change, Method, compare
from .gatefile import MIN_AFTER, MIN_BEFORE
from .analysis import figure_of

MAJOR = re.compile(r"\d+(\.\d+)?")  # a line named by a server major (16, 2022, 9.6)


@dataclass(frozen=True)
class Upgrade:
    """A major's first level against the previous major's last one."""

    series: Series  # the new major's
    baseline: Series  # the previous major's
    before: list[Point]  # the previous major's last level
    after: list[Point]  # the new major's first level
    change: Change


@dataclass(frozen=True)
class Unjudged:
    """A line whose runs nothing can judge yet: too few of its own, and no earlier major to compare with."""

    scenario: str
    line: str
    runs: int
    why: str


def upgrades(series: list[Series], method: Method, only: set | None = None) -> list[Upgrade]:
    """Each series (of `only`'s keys, when given) on a major's line with an earlier major to compare with, and
    enough runs of its own first level (MIN_AFTER) against a last level of MIN_BEFORE runs there."""
    by_place = _by_place(series)
    out = []
    for s in series:
        if only is not None and s.key not in only:
            continue
        found = baseline_of(s, by_place)
        if found is None:
            continue
        baseline, before, after = found
        if len(after) < MIN_AFTER or len(before) < MIN_BEFORE:
            continue
        pts = before + after
        change = compare([p.mean for p in before], [p.mean for p in after], method, se=[p.error for p in pts],
                         df=[p.df for p in pts], discrete=figure_of(s.key).discrete,
                         counts=[p.count for p in pts], exposure=[p.exposure for p in pts])
        out.append(Upgrade(s, baseline, before, after, change))
    return out


def baseline_of(s: Series, by_place: dict | None = None) -> tuple[Series, list[Point], list[Point]] | None:
    """The series of the nearest earlier major with a last level on the same job, that level, and this series'
    first level; None when the line is no major or there is none."""
    line = s.key.server
    major = quiet_line(line)
    if not MAJOR.fullmatch(major) or not s.included or any(TRACK_LABEL in p.run.record.labels for p in s.included):
        return None
    by_place = by_place if by_place is not None else _by_place([s])
    after = _first_level(s)
    suffix = line[len(major):]
    earlier = sorted((other for other in by_place.get(_place(s), []) if other is not s
                      and other.key.server[len(quiet_line(other.key.server)):] == suffix
                      and MAJOR.fullmatch(quiet_line(other.key.server))
                      and quiet_line(other.key.server) != major
                      and version_key(quiet_line(other.key.server)) < version_key(major)),
                     key=lambda o: version_key(quiet_line(o.key.server)), reverse=True)
    for other in earlier:
        before = _last_level(other)
        if before and same_job(before, after):
            return other, before, after
    return None


def same_job(before: list[Point], after: list[Point]) -> bool:
    """Every label the runs of `before` carry alike (other than `track`) is on each run of `after` alike, and
    all ran on one machine: the same job, whatever labels differ run by run (a run id, a night)."""
    machines = {p.run.record.machine_id for p in before + after} - {None}
    return len(machines) <= 1 and all(p.run.record.labels.get(k) == v for k, v in job_labels(before).items()
                                      for p in after)


def unjudged(series: list[Series], checked: set) -> list[Unjudged]:
    """The lines checked tonight (`checked`: scenario, line) whose series can be judged neither against a level
    of their own (fewer than MIN_BEFORE + MIN_AFTER runs) nor against an earlier major, and why."""
    by_place = _by_place(series)
    lines: dict[tuple[str, str], list[Series]] = {}
    for s in series:
        if (s.key.scenario, s.key.server) in checked:
            lines.setdefault((s.key.scenario, s.key.server), []).append(s)
    out = []
    for (scenario, line), items in sorted(lines.items()):
        runs = max(len(s.included) for s in items)
        if runs >= MIN_BEFORE + MIN_AFTER or any(baseline_of(s, by_place) for s in items):
            continue
        out.append(Unjudged(scenario, line, runs, _why(items, by_place)))
    return out


def job_labels(points: list[Point]) -> dict[str, str]:
    """The labels every run of these points carries alike, other than `track`."""
    labels = [p.run.record.labels for p in points]
    if not labels:
        return {}
    return {k: v for k, v in labels[0].items() if k != TRACK_LABEL and all(other.get(k) == v for other in labels)}


def _why(items: list[Series], by_place: dict) -> str:
    s = items[0]
    major = quiet_line(s.key.server)
    if not MAJOR.fullmatch(major):
        return f"its track `{major}` has {len(s.included)} run(s); a level of its own needs {MIN_BEFORE + MIN_AFTER}"
    others = [o for o in by_place.get(_place(s), []) if o is not s and MAJOR.fullmatch(quiet_line(o.key.server))
              and version_key(quiet_line(o.key.server)) < version_key(major)]
    busy = " on a machine this busy" if is_busy(s.key.server) else ""
    if not others:
        return (f"no earlier major holds this scenario's series{busy}, and its own level needs "
                f"{MIN_BEFORE + MIN_AFTER} runs")
    theirs = job_labels(_last_level(others[0]) or others[0].included)
    mine = {k: s.included[0].run.record.labels.get(k, "(none)") for k in theirs} if s.included else {}
    return (f"the earlier major {quiet_line(others[0].key.server)}'s runs carry other job labels "
            f"({_labels(theirs)} against {_labels(mine)}); give both the same, or relabel them "
            f"(`concurbench history label RUN... --set KEY=VALUE`)")


def _labels(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"


def _place(s: Series) -> tuple:
    k = s.key
    return k.scenario, k.variant, k.pool, k.clients, k.point, k.metric


def _by_place(series: list[Series]) -> dict[tuple, list[Series]]:
    out: dict[tuple, list[Series]] = {}
    for s in series:
        out.setdefault(_place(s), []).append(s)
    return out


def _first_level(s: Series) -> list[Point]:
    pts = s.included
    first = min([c.index for c in s.changes] + s.machine_starts + [len(pts)])
    return pts[:first]


def _last_level(s: Series) -> list[Point]:
    pts = s.included
    last = max([c.index for c in s.changes] + s.machine_starts + [0])
    return pts[last:]
