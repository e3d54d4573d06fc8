"""The store's points as series in run order, with their change points grouped by where they are.

A series is keyed by the scenario's name, not its file's hash, and runs on a line (the key's `server`):

  track    (the default) one series per track: the run's `track` label where it has one, else the
           server's major version (`16` for 16.9 and 16.10, `2022` for 2022-CU14); runs in the order
           they started. The first runs of a new release (16.10 after 16.9, or 17.0 after 16.x on a
           track a job's labels name) are judged against the level of the release before.
  time     one series per server version, runs in the order they started.
  version  one series through every server version in version order ("16.9" before "16.10"), runs of
           one version in the order they started.

A run made while others kept a large share of the machine's CPUs busy (records.py's `busy`) puts its
figures of speed (throughput, latencies, lag, time, late and skipped transactions, wait shares:
`speed`) on a line of its own, its line's name followed by the share of the CPUs others took, to the
nearest quarter (`16 (busy 50%)`: one CPU of two): a busy spell is judged against the runs made beside
a neighbour of the same size, never mixed into a quiet series' level and noise, where it would pass
for a regression of the server and hide the next real step. A neighbour changes how fast the work
goes, not how much there is: WAL per transaction, counts, sizes and a claim's ratio of two variants
measured side by side stay on the line. A run made to confirm a suspicion (RunKind.CONFIRMATION) is in
no series.

A run whose scenario file or parameters differ from the run before it in its series is marked there,
and a change point at it says that the scenario changed with it; a run on another server version than
the run before it is marked as a release change. A point whose run failed or ended early is kept and
shown, and left out of the detection. A rare event's count keeps its exposure (the transactions it is
out of), and the detector judges its rate with it.

A series never mixes machines silently: where the machine (CPU model and CPUs) changes between two
runs of a series, a new level starts (the runs on each machine are searched on their own, so no change
point, and no finding, spans the two); the change is told as such (`machine_starts`), not as a
regression.

What a metric means (its better direction, whether it is a count) is the metric catalogue's. Change
points of several metrics of one location (scenario, variant, pool, clients, point, line) within one
run of each other are one change: a metric with a better direction (throughput, latency) leads before
one without (a count), then the smallest p; the others are listed with it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from enum import StrEnum

import numpy as np
from dataclasses import dataclass, field, replace
from typing import NamedTuple
from fnmatch import fnmatchcase

from ..figures import Better, Figure, Way, way_of
from ..results.catalogue import CATALOGUE, claim_figure
from ..results.model import RunStatus
from ..stats.tdist import t_quantile
from .detect import QUIET_T, Change, Level, Method, detect, largest_shift_t
from .records import CLAIMS, ClaimKey, RunKind, SeriesKey
from .store import HistoryStore, StoredRun

class Order(StrEnum):
    """How a series' runs are lined up: each release line on its own (track), all in time, all by version."""

    TRACK = "track"
    TIME = "time"
    VERSION = "version"


ORDERS = tuple(o.value for o in Order)
Z95 = 1.959964  # the normal's 97.5% point
ALL_SERVERS = "*"
TRACK_LABEL = "track"  # a run's label that names its track (otherwise the server's major version)
QUIET_MIN_SERIES = 200  # from this many series, those far from any change may go unsearched (analyse's `quiet`)
BUSY = " (busy "  # after a line's name: the runs of that line made on a busy machine, and the share others took


class Point(NamedTuple):
    """One run's figure in a series (a named tuple: a show reads hundreds of thousands of them)."""

    run: StoredRun
    server: str  # the version the run had on this series' server
    scenario_changed: bool  # the scenario file or parameters differ from the run before in the series
    release_changed: bool  # the server version differs from the run before's in the series
    status: RunStatus  # of the variant run (OK, or how it ended)
    mean: float
    se: float | None  # the mean's standard error, with df degrees of freedom
    df: float | None
    given_low: float | None  # a 95% interval stored as such (a claim's), where se is not known
    given_high: float | None
    n: int
    vals: str | None  # each repeat's value, as JSON (None when not read)
    count: float | None  # a rare event's count, and the transactions it is out of (None: not a count)
    exposure: float | None

    @property
    def included(self) -> bool:
        """Whether the detection uses it: the run and its variant run ended normally."""
        return self.status == RunStatus.OK and self.run.record.status == RunStatus.OK

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
    way: Way


@dataclass(frozen=True)
class ChangeGroup:
    """One change at one location: where (the last run before it and the first after), and what moved."""

    key: SeriesKey
    confirmed: bool  # else a candidate
    before_run: Point
    after_run: Point
    moved: list[Moved]
    scenario_changed: bool
    release_changed: bool = False  # the first run after is on another server version than the last before

    @property
    def status(self) -> str:
        return "confirmed" if self.confirmed else "candidate"

    @property
    def lead(self) -> Moved:
        return self.moved[0]

    @property
    def worse(self) -> list[Moved]:
        return [m for m in self.moved if m.way is Way.WORSE]


@dataclass
class Series:
    key: SeriesKey
    points: list[Point]
    changes: list[Change] = field(default_factory=list)  # indices into the included points

    @functools.cached_property
    def included(self) -> list[Point]:
        """The points the detection uses (runs that ended normally), in order."""
        return [p for p in self.points if p.included]

    @functools.cached_property
    def machine_starts(self) -> list[int]:
        """Where another machine's runs start among the included points (indices; none for one machine)."""
        return machine_starts(self.included)

    def segment(self, index: int) -> tuple[int, int]:
        """The included points [start, end) run on the same machine as the point at `index`."""
        bounds = [0, *self.machine_starts, len(self.included)]
        return next((a, b) for a, b in zip(bounds, bounds[1:]) if a <= index < b)


@dataclass(frozen=True)
class Analysis:
    store: str
    order: Order
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


def major(version: str) -> str:
    """A server version's major release: `16` for 16.10, `18` for 18beta1, `9.6` for 9.6.24 (PostgreSQL before
    10 had two-part majors), `2022` for 2022-CU14."""
    parts = re.findall(r"\d+", str(version))
    if not parts:
        return str(version)
    return ".".join(parts[:2]) if int(parts[0]) < 10 and len(parts) > 1 else parts[0]


SPEED_UNITS = ("1/s", "ms", "s")  # a figure in these units measures how fast: a busy machine moves it
SPEED_NAMES = ("late_per_txn", "skipped_per_txn", "late", "skipped", "waits.*", "wait_events.*", "mssql_waits.*")


def speed(key: SeriesKey) -> bool:
    """The series' figure measures how fast the work went (a busy machine's runs go on a line of their own)."""
    if key.variant == CLAIMS:
        return False
    return figure_of(key).unit in SPEED_UNITS or any(fnmatchcase(key.metric, g) for g in SPEED_NAMES)


def line_of(run: StoredRun, server: str, order: Order, busy_apart: bool = True) -> str:
    """The line a run's point of a series runs on, in this order (see the module's docstring); `busy_apart`:
    the series' figure measures speed, so a busy machine's run is on a line of its own."""
    if order is Order.TIME:
        line = server
    elif order is Order.VERSION:
        line = ALL_SERVERS
    else:
        line = run.record.labels.get(TRACK_LABEL) or major(server)
    share = run.record.busy_share if busy_apart else None
    return line if share is None else f"{line}{BUSY}{share:.0%})"


def quiet_line(line: str) -> str:
    """A line's name without its busy share."""
    return line.split(BUSY)[0]


def is_busy(line: str) -> bool:
    return BUSY in line


def analyse(store: HistoryStore, *, scenario: str | None = None, metrics: tuple[str, ...] = (),
            order: Order | str = Order.TRACK, method: Method = Method(), directions: dict[str, str] | None = None,
            values: bool = False, select=None, runs: list[StoredRun] | None = None,
            groups: bool = True, quiet=None) -> Analysis:
    """Every series of the store (of one scenario, of metrics matching the globs, and, given `select`, whose
    key it takes), its change points and their groups; with `values`, each point's repeats are read too.
    `runs` are the store's runs when the caller has read them already. `quiet(key)` says which series may be
    left unsearched when no split of theirs moves by QUIET_T plain t, once QUIET_MIN_SERIES series or more
    are analysed (a gate's series that holds no open finding: among that many it could not reach the night's
    threshold; see detect.largest_shift_t)."""
    order = Order(order)
    runs = {r.id: r for r in (runs if runs is not None else store.runs(scenario))
            if r.record.kind is RunKind.MEASURED and (scenario is None or r.record.scenario == scenario)}
    keys = {sid: k for sid, k in store.series(scenario).items() if (not metrics or any(fnmatchcase(k.metric, g)
                                                                                           for g in metrics))
            and (select is None or select(k))}
    stored = store.points(sorted(keys), values=values, scenario=scenario)
    merged: dict[SeriesKey, list[Point]] = {}
    lines: dict[tuple[int, str, bool], str] = {}  # (run, server, speed) -> line: alike for many series of a run
    for sid, key in keys.items():
        on: dict[str, list[Point]] = {}
        apart = speed(key)
        for row in stored.get(sid, ()):
            run = runs.get(row.run)
            if run is not None:
                line = lines.get((row.run, key.server, apart))
                if line is None:
                    line = lines[(row.run, key.server, apart)] = line_of(run, key.server, order, apart)
                bucket = on.get(line)
                if bucket is None:
                    bucket = on[line] = merged.setdefault(key._replace(server=line), [])
                bucket.append(Point(run, key.server, False, False, *row[1:]))
    rank = {r.id: i for i, r in enumerate(sorted(runs.values(), key=lambda r: (r.record.started, r.id)))}
    signature = {r.id: (r.record.scenario_sha256, _canon(r.record.parameters), r.record.quick) for r in runs.values()}
    series = []
    for key, items in merged.items():
        items.sort(key=(lambda p: (version_key(p.server), rank[p.run.id])) if order is Order.VERSION
                   else (lambda p: rank[p.run.id]))
        series.append(Series(key, _mark_changes(items, signature)))
    series.sort(key=lambda s: (s.key.scenario, s.key.variant, s.key.pool, s.key.clients, s.key.point,
                               version_key(s.key.server), s.key.metric))
    quiet = quiet if len(series) >= QUIET_MIN_SERIES else None
    for s in series:
        s.changes = [] if quiet is not None and quiet(s.key) and _quiet(s) else _detect(s, method)
    return Analysis(store.name, order, method, sorted(runs.values(), key=lambda r: (r.record.started, r.id)), series,
                    _groups(series, directions or {}) if groups else [])


def _mark_changes(points: list[Point], signature: dict[int, tuple]) -> list[Point]:
    """The points, each marked when its run's scenario file, parameters or quick form differ from the run's
    before it in the series, and when its server version does."""
    out, before = [], None
    for p in points:
        now = signature[p.run.id]
        if before is not None:
            p = p._replace(scenario_changed=now != signature[before.run.id], release_changed=p.server != before.server)
        out.append(p)
        before = p
    return out


def _canon(parameters: dict) -> tuple:
    return tuple(sorted((str(k), repr(v)) for k, v in parameters.items()))


def _quiet(s: Series) -> bool:
    """No split of the series moves it by QUIET_T plain t (rare events with their exposure are always searched:
    the plain t is for continuous figures)."""
    pts = s.included
    if any(p.exposure for p in pts):
        return False
    return float(largest_shift_t(np.array([[p.mean for p in pts]]))[0]) < QUIET_T


def _detect(s: Series, method: Method) -> list[Change]:
    return detect_points(s.included, s.key, method)


def detect_points(pts: list[Point], key: SeriesKey, method: Method) -> list[Change]:
    """The change points of these points of a series (a rare event's rate with its exposure where every point
    has them), each machine's runs on their own (indices into `pts`)."""
    bounds = [0, *machine_starts(pts), len(pts)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        part = pts[a:b]
        if len(part) < method.min_after + 2:
            continue
        found = detect([p.mean for p in part], [p.error for p in part], method, df=[p.df for p in part],
                       discrete=figure_of(key).discrete, counts=[p.count for p in part],
                       exposure=[p.exposure for p in part])
        out += [replace(c, index=c.index + a, low=c.starts[0] + a, high=c.starts[1] + a) for c in found]
    return out


def machine_starts(pts: list[Point]) -> list[int]:
    """Where the machine changes among these points: the index of each first run on another machine than the
    run before it with a known machine (runs that recorded none belong to the machine around them)."""
    out, last = [], None
    for i, p in enumerate(pts):
        now = p.run.record.machine_id
        if now is None:
            continue
        if last is not None and now != last:
            out.append(i)
        last = now
    return out


def figure_of(key: SeriesKey) -> Figure:
    """What a series' metric means, from the metric catalogue (a claim's figure from the form stored with its
    key: which way is better from its operator)."""
    if key.variant == CLAIMS:
        return claim_figure(key.metric, key.metric.form if isinstance(key.metric, ClaimKey) else None)
    return CATALOGUE.figure(key.metric)


def better_way(key: SeriesKey, directions: dict[str, str] | None = None) -> Better:
    """Which way a series' metric is better: the first of `directions` (glob -> higher, lower or neutral)
    that matches, else the catalogue's."""
    for glob, better in (directions or {}).items():
        if fnmatchcase(key.metric, glob):
            return Better(better)
    return figure_of(key).better


def _groups(series: list[Series], directions: dict[str, str]) -> list[ChangeGroup]:
    found: dict[tuple, list[tuple[Series, Change]]] = {}
    for s in series:
        for c in s.changes:
            found.setdefault(s.key.location, []).append((s, c))
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
                           way_of(better_way(s.key, directions), c.change)) for s, c in near]
            between = _between(lead_s, before, after)
            groups.append(ChangeGroup(lead_s.key, lead_c.confirmed, before, after, moved,
                                      any(p.scenario_changed for p in between), before.server != after.server))
    groups.sort(key=lambda g: (g.key.scenario, g.key.variant, g.key.pool, g.key.point, g.after_run.run.record.started))
    return groups


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
