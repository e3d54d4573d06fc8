"""A finding judged again each night: its present size, and whether the metric came back.

A finding's present level is the level of its series' newest runs since the finding started, on the
machine it was found on and before a later open finding of the series started (a second regression is
its own finding, not a growth of the first): the runs from its first run on are searched by the
detector on their own (so the old level cannot hide a change
back, nor a long history swallow a short spell), and the last level found there, at least MIN_AFTER
runs, is the present one. Where releases are interleaved on a line, only the runs of the newest release
count. The present size is that level against the level before the finding.

A finding is resolved when the metric is back: a later level (a change point among the runs since it
started, with at least MIN_AFTER runs after it) lies within the finding's own minimum change of the old
level and within the band the old level's runs lay in (twice their standard deviation), or better; or,
when the detector finds no change at all among the runs since, the whole stretch of at least MIN_BEFORE
runs lies there (the change did not last). A partial fix leaves it open, with its present size. The
thresholds are the finding's own, kept when it was found: a later check with other settings judges it
as it was found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..figures import Better
from ..stats.tdist import t_quantile
from .analysis import Point, Series, detect_points
from .detect import Method
from .findings import Finding
from .gatefile import MIN_AFTER, MIN_BEFORE, Gated
from .level import Level


@dataclass(frozen=True)
class Present:
    """The level of a finding's series now: its mean, over how many runs, the newest of them, and whether it
    is a new level (a change point among the runs since the finding started)."""

    mean: float
    n: int
    newest: int  # the store's row id of the newest run
    first: int  # ... and of the level's first run
    new_level: bool


def present(f: Finding, s: Series, method: Method, until: int | None = None) -> Present | None:
    """The finding's series' level now (None: too few runs since it started to say); `until`: the first run
    (a store row id) of a later open finding on the series, whose change is its own and not this one's."""
    pts = s.included
    at = next((i for i, p in enumerate(pts) if p.run.id == f.first_run), None)
    if at is None:
        return None
    end = s.segment(at)[1]  # on the finding's machine: another's runs are a level of their own
    if until is not None:
        end = min(end, next((i for i, p in enumerate(pts) if p.run.id == until and i > at), end))
    since = pts[at:end]
    if len(since) < MIN_AFTER:
        return None
    changes = [c for c in detect_points(since, s.key, method) if c.after.n >= MIN_AFTER]
    segment = since[changes[-1].index:] if changes else since
    segment = newest_release(segment)
    return Present(level_mean(segment), len(segment), segment[-1].run.id, segment[0].run.id, bool(changes))


def newest_release(points: list[Point]) -> list[Point]:
    """The points of the newest point's server version, where the line interleaves several."""
    newest = points[-1].server
    return [p for p in points if p.server == newest] if any(p.server != newest for p in points) else points


def level_mean(points: list[Point]) -> float:
    """A level's mean: a rare event's pooled rate where every point has its count and exposure (in the
    series' unit), else the mean of the points."""
    if all(p.count is not None and p.exposure for p in points) and any(p.count for p in points):
        rate = sum(p.count for p in points) / sum(p.exposure for p in points)
        shares = [p.mean * p.exposure / p.count for p in points if p.count]
        return rate * sorted(shares)[len(shares) // 2]
    return sum(p.mean for p in points) / len(points)


def thresholds(f: Finding, gated: Gated) -> tuple[float, Better]:
    """The minimum change and better way a finding is judged by: its own, kept when found; a finding made
    before they were kept takes the gate's."""
    return (gated.min_change if f.min_change is None else f.min_change,
            gated.better if f.better is None else f.better)


def back(f: Finding, now: Present, gated: Gated) -> bool:
    """The metric came back: a new level within the finding's minimum change of the old one and within its
    band (or better), or no change at all since it started and every run since there."""
    if not now.new_level and now.n < MIN_BEFORE:
        return False
    min_change, better = thresholds(f, gated)
    old = f.before.mean
    room = min(abs(old) * min_change, run_band(f.before))
    if better is Better.HIGHER:
        return now.mean >= old - room
    if better is Better.LOWER:
        return now.mean <= old + room
    return False


def size(f: Finding, now: Present) -> float | None:
    """The finding's present size, relative to its old level (None from a level of 0)."""
    return None if f.before.mean == 0 else now.mean / f.before.mean - 1


def run_band(level: Level) -> float:
    """Twice the standard deviation of a level's runs, from the half width of its mean's 95% interval
    (infinite where one run or no interval says nothing of it)."""
    if level.low is None or level.high is None or level.n < 2:
        return math.inf
    return 2 * (level.high - level.low) / 2 * math.sqrt(level.n) / t_quantile(0.975, level.n - 1)
