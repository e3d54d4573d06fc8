"""The CI gate: findings made, kept and resolved, and whether the check is red.

A check looks at the gated series (gatefile.py: the catalogue's headline figures unless told
otherwise) that had a run in the check (`--run`; without it, every series). On each, the detector's
change points that moved the metric its worse way by at least the minimum change, and are not a
finding already, are the night's candidates. Each series' p is its smallest candidate's one-sided p
(times its number of candidates); Benjamini and Hochberg's procedure over the night's gated series
(per family: the night's alpha, or a rule's own) decides which become findings. Under no change at
all that is a family-wise bound: at most `alpha` of nights red without cause, however many series a
night has. Correlated series moved by one cause are corrected together, and the procedure lets the
many series a real regression moves through together.

A finding is made `new` (or `acknowledged`, when an expectation covers its first run's commit or
release, or when it belongs to a cause already acknowledged), and stays so until someone acknowledges
it or a later change point brings the metric back within the band its old level's runs lay in
(`resolved`). The check is red while a finding is new on a series that had a run in the check: a red
does not turn green by itself, and a series no job runs any more does not keep the gate red. The red
findings are grouped by the run where they start: one cause each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from ..figures import Better, Kind, Way, way_of
from ..results.catalogue import CATALOGUE
from ..stats.tdist import t_quantile
from .analysis import Analysis, Moved, Point, Series, analyse, figure_of
from .detect import Change, Method
from .findings import OPEN, Expectation, Finding, FindingState, same_change
from .gatefile import MIN_AFTER, MIN_BEFORE, Gated, GateSpec
from .store import HistoryStore


@dataclass(frozen=True)
class Candidate:
    series: Series
    change: Change
    gated: Gated
    p: float  # one-sided: the change's calibrated p for a move its worse way


@dataclass(frozen=True)
class FindingGroup:
    """One cause: the red findings that start at one run; one line of the summary, one test case of the JUnit
    report. (Not results.model.Cause, which says why a claim's verdict is what it is.)"""

    run: Point  # the first run after the change (of the first finding)
    findings: list[Finding]
    also: list[Moved]  # what else moved at that run, in series that are not findings (the likely why)
    series: dict[int, Series]  # finding id -> its series
    change: dict[int, float | None]  # finding id -> its change as the series shows it now (the runs since added)


@dataclass(frozen=True)
class GateResult:
    """One check's outcome: what the summary, the JUnit report and the exit code all say."""

    spec: GateSpec
    analysis: Analysis
    checked: list[str] | None  # the run ids the check was given (None: every series counts)
    gated: int  # gated series that had a run in the check
    made: list[Finding]  # found by this check (new, or acknowledged by an expectation)
    red: list[Finding]  # new findings on series that had a run in the check
    resolved: list[Finding]  # resolved by this check
    stale: list[Finding]  # new findings on series without a run in the check (not red)
    causes: list[FindingGroup] = field(default_factory=list)

    @property
    def regression(self) -> bool:
        return bool(self.red)


def check(store: HistoryStore, spec: GateSpec, *, runs: set[int] | None = None, checked: list[str] | None = None,
          scenario: str | None = None, metrics: tuple[str, ...] = (), order: str = "track", method: Method = Method(),
          directions: dict[str, str] | None = None) -> GateResult:
    """One check: analyse, evaluate, keep the findings made and the states changed (one transaction), and
    group the red findings by cause."""
    a = analyse(store, scenario=scenario, metrics=metrics, order=order, method=method, directions=directions)
    result, made, changed = evaluate(a, spec, store.findings(scenario), store.expectations(), runs)
    return with_causes(saved(result, store.save_findings(made, changed)), checked)


def evaluate(a: Analysis, spec: GateSpec, findings: list[Finding], expectations: list[Expectation],
             runs: set[int] | None, now: str | None = None) -> tuple[GateResult, list[Finding], list[Finding]]:
    """The check's result, the findings to add and the findings whose state changed (both for the store)."""
    now = now or datetime.now(timezone.utc).isoformat(timespec="seconds")
    by_key: dict = {}
    for f in findings:
        by_key.setdefault(f.key, []).append(f)
    families: dict[str, tuple[float, list[tuple[float, list[Candidate]]]]] = {}
    resolved: list[Finding] = []
    checked_keys = set()
    for s in a.series:
        gated = spec.gated(figure_of(s.key), s.key.metric, a.method.min_change)
        if gated is None:
            continue
        index = {p.run.id: i for i, p in enumerate(s.included)}
        mine = by_key.get(s.key, [])
        resolved += [_resolve(f, s, index, gated, now) for f in mine if f.state in OPEN and _back(f, s, index, gated)]
        if runs is not None and not any(p.run.id in runs for p in s.points):
            continue
        checked_keys.add(s.key)
        found = [Candidate(s, c, gated, c.p / 2) for c in s.changes if _worse(c, gated)
                 and not any(same_change(c.index, index.get(f.first_run, -9)) for f in mine)]
        p = min((c.p for c in found), default=1.0) * max(1, len(found))
        families.setdefault(gated.family, (gated.alpha, []))[1].append((min(p, 1.0), found))
    rank = _line_ranks(a)
    acknowledged = [f for f in findings if f.state is FindingState.ACKNOWLEDGED]
    made = [_finding(c, expectations, acknowledged, rank, now) for alpha, tested in families.values()
            for c in _hochberg(alpha, tested)]
    gone = {f.id for f in resolved}
    still = [f for f in findings if f.id not in gone]
    red = [f for f in still + made if f.state is FindingState.NEW and f.key in checked_keys]
    stale = [f for f in still if f.state is FindingState.NEW and f.key not in checked_keys
             and any(s.key == f.key for s in a.series)]
    return GateResult(spec, a, None, len(checked_keys), made, red, resolved, stale), made, resolved


def saved(result: GateResult, made: list[Finding]) -> GateResult:
    """The result with the findings it made as the store keeps them (with their ids)."""
    kept = [f for f in result.red if f.id is not None]
    return replace(result, made=made, red=kept + [f for f in made if f.state is FindingState.NEW])


def with_causes(result: GateResult, checked: list[str] | None) -> GateResult:
    """The result with its red findings grouped by cause: the findings of one scenario and line whose first
    runs are one run apart at most (the detector may place one step a run early in one metric and right in
    another) are one cause, told at the run most of them start at."""
    a = result.analysis
    series = {s.key: s for s in a.series}
    ranks = _line_ranks(a)
    groups: list[list[Finding]] = []
    for f in sorted(result.red, key=lambda f: (f.key.scenario, f.key.server, _rank(ranks, f))):
        last = groups[-1][-1] if groups else None
        if last is not None and _near(ranks, last, f):
            groups[-1].append(f)
        else:
            groups.append([f])
    causes = []
    for items in groups:
        starts = [f.first_run for f in items]
        line = ranks.get((items[0].key.scenario, items[0].key.server), {})
        first = max(set(starts), key=lambda r: (starts.count(r), line.get(r, -1)))
        items.sort(key=lambda f: (f.key.location, f.key.metric))
        mine = {f.id: series[f.key] for f in items if f.key in series}
        point = next((p for f in items if f.key in series for p in series[f.key].points if p.run.id == first), None)
        if point is None:
            continue
        named = {(f.key.location, f.key.metric) for f in items}
        also = [m for g in a.groups if g.key.scenario == items[0].key.scenario and g.key.server == items[0].key.server
                and abs(line.get(g.after_run.run.id, -9) - line.get(first, -99)) <= 1 for m in g.moved
                if (g.key.location, m.metric) not in named and m.way is not Way.BETTER]
        now = {f.id: _now(f, mine[f.id]) for f in items if f.id in mine}
        causes.append(FindingGroup(point, items, sorted(also, key=lambda m: (_count(m.metric), m.p))[:8], mine, now))
    causes.sort(key=lambda c: c.run.run.record.started)
    return replace(result, checked=checked, causes=causes)


def _line_ranks(a: Analysis) -> dict[tuple[str, str], dict[int, int]]:
    """For each scenario and line: its runs' places in the order they started (one run apart = adjacent)."""
    runs: dict[tuple[str, str], dict[int, str]] = {}
    for s in a.series:
        mine = runs.setdefault((s.key.scenario, s.key.server), {})
        for p in s.points:
            mine[p.run.id] = p.run.record.started
    return {key: {run: i for i, run in enumerate(sorted(mine, key=lambda r: (mine[r], r)))}
            for key, mine in runs.items()}


def _rank(ranks: dict, f: Finding) -> int:
    return ranks.get((f.key.scenario, f.key.server), {}).get(f.first_run, -1)


def _near(ranks: dict, a: Finding, b: Finding) -> bool:
    """Two findings of one cause: the same scenario and line, their first runs at most one run apart."""
    return (a.key.scenario, a.key.server) == (b.key.scenario, b.key.server) and \
        _rank(ranks, a) >= 0 and _rank(ranks, b) >= 0 and abs(_rank(ranks, a) - _rank(ranks, b)) <= 1


def _count(metric: str) -> bool:
    """Counts (transactions, statements executed) mostly restate a throughput's move: listed after the rest."""
    return CATALOGUE.figure(metric).kind is Kind.COUNT


def _now(f: Finding, s: Series) -> float | None:
    """A finding's change as its series' change point at the same place shows it now (as found, without one)."""
    index = {p.run.id: i for i, p in enumerate(s.included)}
    at = index.get(f.first_run, -9)
    c = next((c for c in s.changes if same_change(c.index, at)), None)
    return f.change if c is None else c.change


def _worse(c: Change, gated: Gated) -> bool:
    return c.before.n >= MIN_BEFORE and c.after.n >= MIN_AFTER and way_of(gated.better, c.change) is Way.WORSE \
        and (c.change is None or abs(c.change) >= gated.min_change)


def _hochberg(alpha: float, tested: list[tuple[float, list[Candidate]]]) -> list[Candidate]:
    """Benjamini and Hochberg's step-up over the family's series: the candidates of every series whose p
    is at most the largest p(k) <= k alpha / m."""
    m = len(tested)
    ps = sorted(p for p, _ in tested)
    passing = [p for k, p in enumerate(ps, 1) if p <= k * alpha / m]
    if not passing:
        return []
    limit = max(passing)
    return [c for p, found in tested if p <= limit for c in found]


def _finding(c: Candidate, expectations: list[Expectation], acknowledged: list[Finding], rank: dict,
             now: str) -> Finding:
    """A finding of a candidate: acknowledged when an expectation covers its first run's commit or release,
    or when it belongs to a cause someone acknowledged already (a finding of the same scenario and line
    starting at most one run apart: a metric whose move became clear only later is no new cause); new
    otherwise."""
    pts = c.series.included
    after, before = pts[c.change.index], pts[c.change.index - 1]
    record = after.run.record
    commit = record.commit or record.labels.get("commit", "")
    expected = next((e for e in expectations if e.covers(commit, after.server)), None)
    reason = f"expected: {expected.reason}" if expected else None
    if reason is None:
        probe = Finding(None, c.series.key, after.run.id, before.run.id, None, 1.0, c.change.before, 0.0)
        known = next((f for f in acknowledged if _near(rank, f, probe)), None)
        reason = f"with {known.name}: {known.reason}" if known else None
    state = FindingState.ACKNOWLEDGED if reason else FindingState.NEW
    return Finding(None, c.series.key, after.run.id, before.run.id, c.change.change, c.p, c.change.before,
                   c.change.after.mean, state, now, reason, now if reason else None)


def _back(f: Finding, s: Series, index: dict[int, int], gated: Gated) -> bool:
    """A later change point brought the metric back within the old level's band (or better): the band its
    runs lay in (twice their standard deviation either side of its mean, from its 95% interval and its
    number of runs), never narrower than the minimum change."""
    at = index.get(f.first_run)
    if at is None:
        return False
    band = max(gated.min_change * abs(f.before.mean), _run_band(f.before))
    for c in s.changes:
        if c.index > at + 1:
            level = c.after.mean
            if (gated.better is Better.LOWER and level <= f.before.mean + band) or \
                    (gated.better is Better.HIGHER and level >= f.before.mean - band):
                return True
    return False


def _run_band(level) -> float:
    """Twice the standard deviation of a level's runs, from the half width of its mean's 95% interval."""
    if level.low is None or level.high is None or level.n < 2:
        return 0.0
    return 2 * (level.high - level.low) / 2 * math.sqrt(level.n) / t_quantile(0.975, level.n - 1)


def _resolve(f: Finding, s: Series, index: dict[int, int], gated: Gated, now: str) -> Finding:
    at = index[f.first_run]
    c = next(c for c in s.changes if c.index > at + 1)
    return replace(f, state=FindingState.RESOLVED, acted=now, resolved_run=s.included[c.index].run.id)


