"""The store's points as series in run order, with their change points grouped by where they are.

A series is keyed by the scenario's name, not its file's hash. Ordered by time, each server version
is a series of its own, in the order the runs started; ordered by version, one series runs through
every version in version order ("16.9" before "16.10"), runs of one version in the order they
started. A run whose scenario file or parameters differ from the run before it in its series is
marked there, and a change point at it says that the scenario changed with it. A point whose run
failed or ended early is kept and shown, and left out of the detection.

Change points of several metrics of one location (scenario, variant, pool, clients, point, server)
within one run of each other are one change: a metric with a better direction (throughput, latency)
leads before one without (a count), then the smallest p; the others are listed with it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple
from fnmatch import fnmatchcase

from ..figures import Better, Figure
from ..results.catalogue import CATALOGUE, claim_figure
from ..stats.tdist import t_quantile
from .detect import Change, Level, Method, detect
from .records import CLAIMS
from .store import HistoryStore, SeriesKey, StoredRun

ORDERS = ("time", "version")
Z95 = 1.959964  # the normal's 97.5% point
ALL_SERVERS = "*"


class Point(NamedTuple):
    """One run's figure in a series (a named tuple: a show reads hundreds of thousands of them)."""

    run: StoredRun
    server: str  # the version the run had on this series' server
    scenario_changed: bool  # the scenario file or parameters differ from the run before in the series
    status: str  # of the variant run ("ok", or how it ended)
    mean: float
    se: float | None  # the mean's standard error, with df degrees of freedom
    df: float | None
    given_low: float | None  # a 95% interval stored as such (a claim's), where se is not known
    given_high: float | None
    n: int
    vals: str | None  # each repeat's value, as JSON (None when not read)

    @property
    def included(self) -> bool:
        """Whether the detection uses it: the run and its variant run ended normally."""
        return self.status == "ok" and self.run.record.status == "ok"

    @property
    def values(self) -> list[float] | None:
        return None if self.vals is None else json.loads(self.vals)

    @property
    def half(self) -> float | None:
        """Half the 95% interval from the standard error (Student's t; the normal without df)."""
        if self.se is None:
            return None
        return self.se * (_t975(self.df) if self.df else Z95)

    @property
    def low(self) -> float | None:
        half = self.half
        return self.given_low if half is None else self.mean - half

    @property
    def high(self) -> float | None:
        half = self.half
        return self.given_high if half is None else self.mean + half

    @property
    def error(self) -> float | None:
        """The standard error the detection weighs the run by (from a given interval where that is all)."""
        if self.se is not None:
            return self.se
        if self.given_low is None or self.given_high is None:
            return None
        return (self.given_high - self.given_low) / (2 * Z95)


@dataclass(frozen=True)
class Moved:
    """One metric's move at a change: the detector's finding on that metric's series."""

    metric: str
    change: float | None
    p: float
    before: Level
    after: Level
    way: str  # "worse", "better" or "neutral" (the metric has no better direction)


@dataclass(frozen=True)
class ChangeGroup:
    """One change at one location: where (the last run before it and the first after), and what moved."""

    key: SeriesKey
    status: str  # "confirmed" or "candidate"
    before_run: Point
    after_run: Point
    moved: list[Moved]
    scenario_changed: bool

    @property
    def lead(self) -> Moved:
        return self.moved[0]

    @property
    def worse(self) -> list[Moved]:
        return [m for m in self.moved if m.way == "worse"]


@dataclass
class Series:
    key: SeriesKey
    points: list[Point]
    changes: list[Change] = field(default_factory=list)  # indices into the included points

    @functools.cached_property
    def included(self) -> list[Point]:
        """The points the detection uses (runs that ended normally), in order."""
        return [p for p in self.points if p.included]


@dataclass(frozen=True)
class Analysis:
    store: str
    order: str
    method: Method
    runs: list[StoredRun]
    series: list[Series]
    groups: list[ChangeGroup]


@functools.lru_cache(maxsize=4096)
def _t975(df: float) -> float:
    return t_quantile(0.975, df)


def version_key(version: str) -> tuple:
    """Orders server versions as releases: 16.9 before 16.10, 18beta1 before 18.0, 2019-CU2 before 2019-CU10."""
    parts = re.findall(r"\d+|[A-Za-z]+", str(version))
    return tuple((1, int(p)) if p.isdigit() else (0, p.lower()) for p in parts)


def analyse(store: HistoryStore, *, scenario: str | None = None, metrics: tuple[str, ...] = (),
            order: str = "time", method: Method = Method(), directions: dict[str, str] | None = None,
            values: bool = False) -> Analysis:
    """Every series of the store (of one scenario, of metrics matching the globs), its change points and
    their groups; with `values`, each point's repeats are read too."""
    runs = {r.id: r for r in store.runs(scenario)}
    keys = {sid: k for sid, k in store.series(scenario).items() if not metrics or any(fnmatchcase(k.metric, g)
                                                                                          for g in metrics)}
    stored = store.points(sorted(keys), values=values, scenario=scenario)
    merged: dict[SeriesKey, list[Point]] = {}
    for sid, key in keys.items():
        bucket = merged.setdefault(key if order == "time" else _without_server(key), [])
        bucket.extend(Point(runs[row[0]], key.server, False, *row[1:]) for row in stored.get(sid, ()) if row[0] in runs)
    rank = {r.id: i for i, r in enumerate(sorted(runs.values(), key=lambda r: (r.record.started, r.id)))}
    signature = {r.id: (r.record.scenario_sha256, _canon(r.record.parameters), r.record.quick) for r in runs.values()}
    series = []
    for key, items in merged.items():
        items.sort(key=(lambda p: (version_key(p.server), rank[p.run.id])) if order == "version"
                   else (lambda p: rank[p.run.id]))
        series.append(Series(key, _mark_changes(items, signature)))
    series.sort(key=lambda s: (s.key.scenario, s.key.variant, s.key.pool, s.key.point, version_key(s.key.server),
                               s.key.metric))
    for s in series:
        s.changes = _detect(s, method)
    return Analysis(store.name, order, method, sorted(runs.values(), key=lambda r: (r.record.started, r.id)), series,
                    _groups(series, directions or {}))


def _without_server(key: SeriesKey) -> SeriesKey:
    return SeriesKey(key.scenario, key.variant, key.pool, key.clients, key.point, ALL_SERVERS, key.metric)


def _mark_changes(points: list[Point], signature: dict[int, tuple]) -> list[Point]:
    """The points, each marked when its run's scenario file, parameters or quick form differ from the run's
    before it in the series."""
    out, before = [], None
    for p in points:
        now = signature[p.run.id]
        if before is not None and now != before:
            p = p._replace(scenario_changed=True)
        out.append(p)
        before = now
    return out


def _canon(parameters: dict) -> tuple:
    return tuple(sorted((str(k), repr(v)) for k, v in parameters.items()))


def _detect(s: Series, method: Method) -> list[Change]:
    pts = s.included
    if len(pts) < method.min_after + 2:
        return []
    return detect([p.mean for p in pts], [p.error for p in pts], method)


def figure_of(key: SeriesKey) -> Figure:
    """What a series' metric means, from the metric catalogue (a claim's figure from its operator)."""
    return claim_figure(key.metric) if key.variant == CLAIMS else CATALOGUE.figure(key.metric)


def better_way(key: SeriesKey, directions: dict[str, str] | None = None) -> Better:
    """Which way a series' metric is better: the first of `directions` (glob -> higher, lower or neutral)
    that matches, else the catalogue's."""
    for glob, better in (directions or {}).items():
        if fnmatchcase(key.metric, glob):
            return Better(better)
    return figure_of(key).better


def way(better: Better, change: float | None) -> str:
    """worse, better or neutral: how a move of `change` (relative) reads for a metric better `better`."""
    if better is Better.NEUTRAL or change == 0:
        return "neutral"
    rose = change is None or change > 0  # None: from exactly 0, so the level rose
    return "worse" if rose == (better is Better.LOWER) else "better"


def _groups(series: list[Series], directions: dict[str, str]) -> list[ChangeGroup]:
    found: dict[tuple, list[tuple[Series, Change]]] = {}
    for s in series:
        for c in s.changes:
            found.setdefault(_location(s.key), []).append((s, c))
    groups = []
    for items in found.values():
        items.sort(key=lambda i: _index_in_points(i[0], i[1]))
        while items:
            s0, c0 = items[0]
            at = _index_in_points(s0, c0)
            near = [i for i in items if abs(_index_in_points(*i) - at) <= 1]
            items = [i for i in items if i not in near]
            # the lead: confirmed first, then a metric with a better direction (tps before a count), then p
            near.sort(key=lambda i: (not i[1].confirmed, better_way(i[0].key, directions) is Better.NEUTRAL, i[1].p))
            lead_s, lead_c = near[0]
            pts = lead_s.included
            before, after = pts[lead_c.index - 1], pts[lead_c.index]
            moved = [Moved(s.key.metric, c.change, c.p, c.before, c.after,
                           way(better_way(s.key, directions), c.change)) for s, c in near]
            changed = any(p.scenario_changed for p in _between(lead_s, before, after))
            groups.append(ChangeGroup(lead_s.key, lead_c.status, before, after, moved, changed))
    groups.sort(key=lambda g: (g.key.scenario, g.key.variant, g.key.pool, g.key.point, g.after_run.run.record.started))
    return groups


def _location(key: SeriesKey) -> tuple:
    return (key.scenario, key.variant, key.pool, key.clients, key.point, key.server)


def _index_in_points(s: Series, c: Change) -> int:
    """Where a change sits among all of the series' points (failed runs included), to line up metrics."""
    after = s.included[c.index]
    return s.points.index(after)


def _between(s: Series, before: Point, after: Point) -> list[Point]:
    """The points after `before` up to and including `after` (failed runs between them included)."""
    i, j = s.points.index(before), s.points.index(after)
    return s.points[i + 1:j + 1]


def relative(change: float | None) -> str:
    if change is None:
        return "from 0"
    if math.isinf(change):
        return "∞"
    return f"{change:+.1%}"
