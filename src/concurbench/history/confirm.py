"""Confirming a suspicion the same night: which new releases' first runs to set beside the release before, and
what a side-by-side run decided, kept with the findings.

A line (a track of one scenario) is at a release boundary when its newest run, one of the check's, is the
first run of a server release on it (16.15 after 16.14), or the first run of a new major's series with an
earlier major to judge it against (upgrade.py). There the history has one run of the new release, which
cannot convince it, either way; a run of both releases side by side, interleaved and paired by round, can.
So every gated series of such a line is compared there, whether or not its first new run moved (a claim's
figure and a rare event's rate, judged as a count with its exposure, are left to the history); it is
`suspected` when that run moved its worse way by at least the minimum change against the old release's
level, or when it has a new finding whose first run is such a first run (however many nights ago) still
without a decided confirmation. A finding not at a release boundary (a configuration drift, a machine
change) is judged by the history alone, and the summary says so.

A boundary's suspicions are confirmed by one run (concurbench/sidebyside.py: the variants they read, on
the old release and the new); the cheapest informative first (boundaries with a suspicion, fewest
variants, then the largest suspected change). What each decided is a Confirmation, kept with its finding
(`Finding.confirmation`) and, for a suspicion without a finding, in the store's log (CONFIRM_ACTION), so a
finding the history makes later at that place takes it without running again:

    confirmed      the new release is worse by more than the minimum change (the paired ratio's interval at
                   the verdict's level lies beyond it): red the same night; a suspicion without a finding
                   becomes one (kind CHANGE at the first run, or UPGRADE for a new major), made by this run
    not confirmed  not worse by the minimum change (decided), or the rounds could not tell (undecided): a
                   decided one is not red, whatever the history suspects; an undecided one leaves the
                   history's judgement as it was
    failed         the run failed or was interrupted: the history's judgement stands
    unavailable    the run cannot be made (a target that cannot start another release, the old release has
                   no wheel or image, the scenario file is gone or changed): the history's judgement stands
    over budget    the night's budget (--side-by-side-budget) was spent first: listed, tried again while a
                   finding waits for it
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ..figures import Way, way_of
from ..stats.tdist import t_quantile
from .analysis import Analysis, Point, Series, figure_of, quiet_line
from .findings import Finding, FindingKind, FindingState
from .gatefile import MIN_BEFORE, Gated, GateSpec
from .level import Level
from .records import CLAIMS, SeriesKey
from .store import LogEntry, StoredRun
from .upgrade import baseline_of, places

CONFIRM_ACTION = "side by side"  # the store's log entry of a side-by-side run's decided suspicions


class ConfirmState(StrEnum):
    CONFIRMED = "confirmed"
    NOT_CONFIRMED = "not confirmed"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    OVER_BUDGET = "over budget"


DECIDED = (ConfirmState.CONFIRMED, ConfirmState.NOT_CONFIRMED)  # a run told: never run again for that suspicion


@dataclass(frozen=True)
class Confirmation:
    """What a side-by-side run said of one suspicion: its state, one line why, new over old with its 95%
    interval, the A/B run (its id, its report page, minutes, rounds) and the releases."""

    state: ConfirmState
    why: str
    old: str
    new: str
    metric: str = ""
    decided: bool = False  # not confirmed: decided not worse (True), or undecided (False)
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    p: float | None = None  # one-sided, for the new release worse
    run: str | None = None
    report: str | None = None
    minutes: float | None = None
    rounds: int | None = None
    at: str = ""

    def as_dict(self) -> dict:
        return {"state": self.state.value, "why": self.why, "old": self.old, "new": self.new, "metric": self.metric,
                "decided": self.decided, "ratio": self.ratio, "low": self.low, "high": self.high, "p": self.p,
                "run": self.run, "report": self.report, "minutes": self.minutes, "rounds": self.rounds, "at": self.at}

    @classmethod
    def of(cls, data: dict | None) -> "Confirmation | None":
        """A finding's confirmation as the store keeps it (None: none, or one this concurbench cannot read)."""
        if not isinstance(data, dict):
            return None
        try:
            state = ConfirmState(data.get("state"))
        except ValueError:
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "state"}
        return cls(state=state, **{"why": "", "old": "", "new": "", **known})

    @property
    def ratio_text(self) -> str:
        if self.ratio is None:
            return ""
        interval = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None and self.high is not None else ""
        return f"{self.new}/{self.old} {self.metric} {self.ratio:.3f}{interval}"

    def short(self) -> str:
        """One line: "confirmed side by side: 16.15/16.14 tps 0.902 [0.887, 0.918] (A/B run RUN, 2.4 min)"."""
        state = "not confirmed (undecided)" if self.state is ConfirmState.NOT_CONFIRMED and not self.decided \
            else self.state.value
        ratio = self.ratio_text
        run = ", ".join(filter(None, [f"A/B run {self.run}" if self.run else "",
                                      f"{self.minutes:.1f} min" if self.minutes is not None else ""]))
        text = f"{state} side by side" + (f": {ratio}" if ratio else "") + (f" ({run})" if run else "")
        return text if self.state in DECIDED else f"{text}: {self.why}"


def cleared(f: Finding) -> bool:
    """A side-by-side run decided that the finding's new release is not worse by its minimum change: the
    history's suspicion, kept and shown as such, never red."""
    c = Confirmation.of(f.confirmation)
    return c is not None and c.state is ConfirmState.NOT_CONFIRMED and c.decided


def confirmed(f: Finding) -> Confirmation | None:
    c = Confirmation.of(f.confirmation)
    return c if c is not None and c.state is ConfirmState.CONFIRMED else None


@dataclass(frozen=True)
class Suspicion:
    """One gated series a boundary's side-by-side run compares: the history's move at the new release's first
    run, the old release's level it is measured from, and its finding (None: the history has none yet)."""

    series: Series
    gated: Gated
    change: float | None
    level: Level
    finding: Finding | None = None

    @property
    def key(self) -> SeriesKey:
        return self.series.key

    @property
    def suspected(self) -> bool:
        """The history suspects it: a finding, or a first run that moved its worse way by the minimum change (the
        others of a boundary are compared all the same: one run cannot convince a history either way)."""
        if self.finding is not None:
            return True
        worse = way_of(self.gated.better, self.change) is Way.WORSE
        return worse and (self.change is None or abs(self.change) >= self.gated.min_change)


@dataclass(frozen=True)
class Boundary:
    """A new release's first run on a line, with the suspicions a side-by-side run of old and new decides."""

    scenario: str
    line: str
    run: StoredRun  # the new release's first run on the line
    before: StoredRun  # the last run of the release before (an upgrade's: the previous major's)
    old: str
    new: str
    kind: FindingKind
    baseline: str | None  # an upgrade's: the previous major's line
    suspicions: tuple[Suspicion, ...] = ()
    after_mean: dict = field(default_factory=dict)  # series key -> the new release's first run's figure

    @property
    def variants(self) -> list[str]:
        return sorted({s.key.variant for s in self.suspicions})

    @property
    def largest(self) -> float:
        """The largest change the history suspects (0 where it suspects none; infinite for a move from 0)."""
        return max((math.inf if s.change is None else abs(s.change) for s in self.suspicions if s.suspected),
                   default=0.0)

    @property
    def order(self) -> tuple:
        """Cheapest informative first: boundaries with a suspicion, fewest variants, the largest suspected change."""
        return (self.largest == 0, len(self.variants), -self.largest, self.scenario, self.line)

    @property
    def title(self) -> str:
        return f"{self.scenario} on {self.line}: {self.new} after {self.old}" + \
            (f" (upgrade from {self.baseline})" if self.kind is FindingKind.UPGRADE else "")


@dataclass
class Plan:
    """What a night's side-by-side runs are to decide, and what needs no run."""

    boundaries: list[Boundary]
    attached: list[Finding]  # findings that take a confirmation kept in the log (no run needed)
    alone: list[tuple[Finding, str]]  # new findings judged by the history alone, and why


def logged(entries: list[LogEntry]) -> dict[tuple, Confirmation]:
    """The decided confirmations the store's log keeps, by (series key, the run id of the new release's first
    run)."""
    out = {}
    for e in entries:
        if e.action != CONFIRM_ACTION:
            continue
        for item in e.detail.get("suspicions", []):
            c = Confirmation.of(item.get("confirmation"))
            try:
                key = SeriesKey(e.detail["scenario"], item["variant"], item["pool"], int(item["clients"]),
                                int(item["point"]), e.detail["line"], item["metric"])
            except (KeyError, TypeError, ValueError):
                continue
            if c is not None and c.state in DECIDED:
                out[(key, e.detail.get("first_run"))] = c
    return out


def log_detail(b: Boundary, decided: list[tuple[Suspicion, Confirmation]]) -> dict:
    """The log entry's detail for a boundary's decided suspicions."""
    return {"scenario": b.scenario, "line": b.line, "first_run": b.run.record.run_id, "old": b.old, "new": b.new,
            "suspicions": [{"variant": s.key.variant, "pool": s.key.pool, "clients": s.key.clients,
                            "point": s.key.point, "metric": s.key.metric, "confirmation": c.as_dict()}
                           for s, c in decided]}


def plan(a: Analysis, spec: GateSpec, findings: list[Finding], kept: dict[tuple, Confirmation],
         runs: set[int] | None) -> Plan:
    """The night's boundaries with their suspicions (`runs`: the check's runs; None: every line's newest run;
    `findings`: the night's new ones, red or made), the findings that take a confirmation `kept` in the log,
    and the new findings judged by the history alone."""
    by_place = places(a.series)
    series = _lines(a.series)
    found: dict[tuple, dict] = {}  # (scenario, line, run id) -> {"boundary": ..., "suspicions": {key: Suspicion}}
    attached: list[Finding] = []
    alone: list[tuple[Finding, str]] = []
    for f in findings:
        if f.state is not FindingState.NEW or f.key not in series:
            continue
        c = Confirmation.of(f.confirmation)
        if c is not None and c.state in DECIDED:
            continue
        s = series[f.key]
        gated = spec.gated(figure_of(f.key), f.key.metric, a.method.min_change)
        if gated is None:
            continue
        if _rare(s):
            alone.append((f, "a rare event's rate: judged by the history alone (its count model with the "
                             "transactions it is out of; a few rounds side by side cannot tell)"))
            continue
        at = _finding_boundary(f, s, by_place, series)
        if at is None:
            alone.append((f, "not at a release boundary: judged by the history alone"))
            continue
        boundary, level = at
        first_run_id = boundary.run.record.run_id
        if (f.key, first_run_id) in kept:
            attached.append(replace(f, confirmation=kept[(f.key, first_run_id)].as_dict()))
            continue
        change = f.now_change if f.now_change is not None else f.change
        _add(found, boundary, Suspicion(s, gated, change, level, f), None)
    for s in a.series:
        if s.key.variant == CLAIMS or not s.included or _rare(s):
            continue
        newest = s.included[-1]
        if runs is not None and newest.run.id not in runs:
            continue
        gated = spec.gated(figure_of(s.key), s.key.metric, a.method.min_change)
        at = _newest_boundary(s, by_place, series)
        if gated is None or at is None or (s.key, at[0].run.record.run_id) in kept:
            continue
        boundary, level = at
        change = None if level.mean == 0 else newest.mean / level.mean - 1
        _add(found, boundary, Suspicion(s, gated, change, level), newest.mean)
    boundaries = [replace(item["boundary"], suspicions=tuple(item["suspicions"].values()),
                          after_mean=item["after"]) for item in found.values()]
    return Plan(sorted(boundaries, key=lambda b: b.order), attached, alone)


def _rare(s: Series) -> bool:
    """A rare event's rate, kept with the transactions it is out of (failures, retries): the history's count model
    judges it, not the rounds of a side-by-side run."""
    return any(p.exposure for p in s.included)


def _add(found: dict, boundary: Boundary, suspicion: Suspicion, after: float | None) -> None:
    item = found.setdefault((boundary.scenario, boundary.line, boundary.run.id),
                            {"boundary": boundary, "suspicions": {}, "after": {}})
    if suspicion.key not in item["suspicions"] or suspicion.finding is not None:
        item["suspicions"][suspicion.key] = suspicion
    if after is not None:
        item["after"][suspicion.key] = after


def _newest_boundary(s: Series, by_place: dict, series: dict) -> tuple[Boundary, Level] | None:
    """The series' newest run as a release's first run on its track (its line's runs with those of the same
    track made on a busy machine, or on a quiet one: a run on a busy machine is a new release's first run all
    the same), and the old release's level (None when it is not one)."""
    pts = _track(s, series)
    newest = pts[-1]
    if len(pts) >= 2 and all(p.server != newest.server for p in pts[:-1]):
        before = pts[-2]
        return _boundary(s, newest, before, FindingKind.CHANGE, None), _old_level(s, series, before.server)
    if len(pts) == 1:
        found = baseline_of(s, by_place) or baseline_of(_quiet(s), by_place)
        if found is not None:
            other, old_level, _ = found
            return (_boundary(s, newest, old_level[-1], FindingKind.UPGRADE, quiet_line(other.key.server)),
                    level_of(old_level))
    return None


def _finding_boundary(f: Finding, s: Series, by_place: dict, series: dict) -> tuple[Boundary, Level] | None:
    """A finding whose first run is a release's first run on its track (an upgrade's: its major's first run),
    as a boundary (None when it is not at one)."""
    pts = _track(s, series)
    at = next((i for i, p in enumerate(pts) if p.run.id == f.first_run), None)
    if at is None:
        return None
    first = pts[at]
    if f.kind is FindingKind.UPGRADE:
        if at != 0:
            return None
        found = baseline_of(s, by_place) or baseline_of(_quiet(s), by_place)
        if found is None:
            return None
        other, old_level, _ = found
        before = next((p for p in other.included if p.run.id == f.before_run), old_level[-1])
        return _boundary(s, first, before, FindingKind.UPGRADE, quiet_line(other.key.server)), f.before
    if at == 0 or any(p.server == first.server for p in pts[:at]):
        return None
    return _boundary(s, first, pts[at - 1], FindingKind.CHANGE, None), f.before


def _track(s: Series, series: dict) -> list[Point]:
    """The series' runs with those of the same track on its other lines (quiet, or busy by another share), in
    the order they started."""
    pts = [p for other in series.get(_track_key(s.key), [s]) for p in other.included]
    return sorted(pts, key=lambda p: (p.run.record.started, p.run.id))


def _track_key(key: SeriesKey) -> tuple:
    return "track", key._replace(server=quiet_line(key.server))


def _lines(all_series: list[Series]) -> dict:
    """The series by key, and under ("track", its key on the quiet line) the series of each track's lines."""
    out: dict = {}
    for s in all_series:
        out[s.key] = s
        out.setdefault(_track_key(s.key), []).append(s)
    return out


def _quiet(s: Series) -> Series:
    """The series as if on its quiet line (where a busy line's first run looks for an earlier major)."""
    return Series(s.key._replace(server=quiet_line(s.key.server)), s.points, s.changes)


def _old_level(s: Series, series: dict, old: str) -> Level:
    """The old release's last level on the track: its runs since the last change point on the quiet line (the
    busy line's where the quiet line has none of them)."""
    quiet = series.get(s.key._replace(server=quiet_line(s.key.server)))
    for line in [quiet, s] if quiet is not None else [s]:
        pts = line.included
        start = max((c.index for c in line.changes), default=0)
        level = [p for p in pts[start:] if p.server == old] or [p for p in pts if p.server == old][-MIN_BEFORE:]
        if level:
            return level_of(level)
    return level_of([p for p in _track(s, series) if p.server == old])


def _boundary(s: Series, first: Point, before: Point, kind: FindingKind, baseline: str | None) -> Boundary:
    return Boundary(s.key.scenario, s.key.server, first.run, before.run, before.server, first.server, kind, baseline)


def level_of(points: list[Point]) -> Level:
    """A level of runs: their mean with its 95% interval (Student's t over the runs)."""
    values = [p.mean for p in points]
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return Level(mean, None, None, n)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return Level(mean, mean - half, mean + half, n)


def finding_of(b: Boundary, s: Suspicion, c: Confirmation, now: str) -> Finding:
    """The finding a confirmed suspicion without one becomes, made by the side-by-side run on the new release's
    first night: at its first run, sized by new over old as the run measured it, judged from then on by the
    thresholds it was found with."""
    g = s.gated
    change = None if c.ratio is None else c.ratio - 1
    return Finding(None, s.key, b.run.id, b.before.id, change, c.p if c.p is not None else 1.0, s.level,
                   b.after_mean.get(s.key, s.level.mean), FindingState.NEW, now, kind=b.kind, first_low=b.run.id,
                   first_high=b.run.id, now_run=b.run.id, min_change=g.min_change, better=g.better, family=g.family,
                   alpha=g.alpha, baseline=b.baseline, confirmation=c.as_dict())

