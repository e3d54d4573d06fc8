"""The CI gate: findings made, kept, judged again each night and resolved, and whether the check is red.

A check looks at the gated series (gatefile.py: the catalogue's headline figures unless told
otherwise) that had a run in the check (`--run`; without it, every series). On each, the detector's
change points that moved the metric its worse way by at least the minimum change, from a level of
MIN_BEFORE runs with MIN_AFTER runs after it, and that could not start at a run an earlier finding of
the series could start at (the change point's own interval: one cause, one finding), are the night's
candidates; so is the first level of a new server major against the previous major's last level
(upgrade.py). Each series' p is its smallest candidate's one-sided p (times its number of
candidates); Benjamini and Hochberg's procedure over the night's gated series (per family: the
night's alpha, or a rule's own) decides which become findings. Under no change at all that is a
family-wise bound: at most `alpha` of nights red without cause, however many series a night has.

A finding is made `new`, or `acknowledged` when an expectation's window covers where it starts
(expect.py) or when an acknowledged finding of the same place starts there too. Every open finding is
judged again by the thresholds it was found with (judge.py): its present size is kept, and it is
`resolved` when the metric came back. The check is red while a finding is new on a series that had a
run in the check; a red does not turn green by itself, and a series no job runs any more does not keep
the gate red. The analysis and every write are one transaction of the store (`atomically`): two checks
at once make one finding. The red findings are grouped by cause (causes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from ..figures import Way, way_of
from .analysis import Analysis, Point, Series, analyse, figure_of, quiet_line
from .causes import FindingGroup, line_ranks, with_causes
from .detect import Change, Method
from .evidence import machine_line
from .expect import covers, lapsed
from .findings import OPEN, Expectation, Finding, FindingKind, FindingState, overlap
from .gatefile import MIN_AFTER, MIN_BEFORE, Gated, GateSpec
from .judge import back, present, size
from .store import HistoryStore
from .upgrade import Unjudged, unjudged, upgrades

SLACK = 1  # runs either side of a change's interval within which another change is the same


@dataclass(frozen=True)
class Candidate:
    series: Series
    change: Change
    gated: Gated
    p: float  # one-sided: the change's p for a move its worse way
    before: Point  # the last run before the change (an upgrade's: the previous major's last run)
    after: Point  # the first run after it
    starts: tuple[int, int]  # the runs (store row ids) the change could start at
    kind: FindingKind = FindingKind.CHANGE
    baseline: str | None = None  # an upgrade's: the previous major's line


@dataclass(frozen=True)
class GateResult:
    """One check's outcome: what the summary, the JUnit report and the exit code all say."""

    spec: GateSpec
    analysis: Analysis
    checked: list[str] | None  # the run ids the check was given (None: every series counts)
    gated: int  # gated series that had a run in the check
    made: list[Finding]  # found by this check (new, or acknowledged)
    red: list[Finding]  # new findings on series that had a run in the check
    resolved: list[Finding]  # resolved by this check
    stale: list[Finding]  # new findings on series without a run in the check (not red)
    causes: list[FindingGroup] = field(default_factory=list)
    unjudged: list[Unjudged] = field(default_factory=list)  # lines nothing can judge yet, and why
    busy: list[str] = field(default_factory=list)  # the checked runs made on a busy machine, in a few words
    lapsed: list[Expectation] = field(default_factory=list)  # expectations whose window lapsed in this check
    machines: list[str] = field(default_factory=list)  # lines whose machine changed lately, in a few words

    @property
    def regression(self) -> bool:
        return bool(self.red)


def check(store: HistoryStore, spec: GateSpec, *, runs: set[int] | None = None, checked: list[str] | None = None,
          scenario: str | None = None, metrics: tuple[str, ...] = (), order: str = "track", method: Method = Method(),
          directions: dict[str, str] | None = None, now: str | None = None) -> GateResult:
    """One check, as one transaction of the store: analyse the gated series, judge the open findings again,
    make the night's findings, write them and the states changed, and group the red ones by cause."""
    def work() -> GateResult:
        stored = store.runs(scenario)
        findings = store.findings(scenario)
        open_ = {f.key for f in findings if f.state in OPEN}
        a = analyse(store, scenario=scenario, metrics=metrics, order=order, method=method, directions=directions,
                    runs=stored, groups=False, quiet=lambda k: k not in open_,
                    select=lambda k: spec.gated(figure_of(k), k.metric, method.min_change) is not None)
        result, made, changed = evaluate(a, spec, findings, store.expectations(), runs, now)
        result = saved(result, store.save_findings(made, changed))
        if result.lapsed:
            store.lapse(result.lapsed)
        return with_causes(result, checked, store, stored, directions)
    return store.atomically(work)


def evaluate(a: Analysis, spec: GateSpec, findings: list[Finding], expectations: list[Expectation],
             runs: set[int] | None, now: str | None = None) -> tuple[GateResult, list[Finding], list[Finding]]:
    """The check's result, the findings to add and the findings whose state or present size changed."""
    now = now or datetime.now(timezone.utc).isoformat(timespec="seconds")
    ranks = line_ranks(a)
    by_key: dict = {}
    for f in findings:
        by_key.setdefault(f.key, []).append(f)
    changed: dict[int, Finding] = {}
    tested: dict = {}  # series key -> (gated, candidates)
    checked_keys = set()
    for s in a.series:
        gated = spec.gated(figure_of(s.key), s.key.metric, a.method.min_change)
        if gated is None:
            continue
        mine = by_key.get(s.key, [])
        if runs is not None and not any(p.run.id in runs for p in s.points):
            continue
        checked_keys.add(s.key)
        rank = ranks.get((s.key.scenario, s.key.server), {})
        found = [c for c in _candidates(s, gated) if not _known(c, mine, rank)]
        tested[s.key] = (gated, found)
    for u in upgrades(a.series, a.method, checked_keys):
        gated, found = tested[u.series.key]
        if any(f.kind is FindingKind.UPGRADE for f in by_key.get(u.series.key, [])) or not _worse(u.change, gated):
            continue
        found.append(Candidate(u.series, u.change, gated, u.change.p / 2, u.before[-1], u.after[0],
                               (u.after[0].run.id, u.after[0].run.id), FindingKind.UPGRADE,
                               quiet_line(u.baseline.key.server)))
    families: dict[str, tuple[float, list[tuple[float, list[Candidate]]]]] = {}
    for gated, found in tested.values():
        p = min((c.p for c in found), default=1.0) * max(1, len(found))
        families.setdefault(gated.family, (gated.alpha, []))[1].append((min(p, 1.0), found))
    series = {s.key: s for s in a.series}
    acknowledged = [f for f in findings if f.state is FindingState.ACKNOWLEDGED]
    made = [_finding(c, expectations, acknowledged, ranks, series, now) for alpha, items in families.values()
            for c in _hochberg(alpha, items)]
    for s in a.series:  # every open finding judged again, each up to the next one of its series (those just made too)
        gated = spec.gated(figure_of(s.key), s.key.metric, a.method.min_change)
        mine = by_key.get(s.key, [])
        for f in mine if gated is not None else ():
            if f.state in OPEN:
                judged = _judged(f, s, gated, a.method, now,
                                 _next_start(f, mine + [m for m in made if m.key == s.key], ranks))
                if judged is not None:
                    changed[f.id] = judged
    after = [changed.get(f.id, f) for f in findings]
    resolved = [f for f in changed.values() if f.state is FindingState.RESOLVED]
    current = {f.id for f in after + made if f.key in checked_keys and _on_newest_machine(f, series[f.key])}
    red = [f for f in after + made if f.state is FindingState.NEW and (f.id is None or f.id in current)
           and f.key in checked_keys]
    stale = [f for f in after if f.state is FindingState.NEW and f.key in series and f.id not in current]
    gone = [replace(e, lapsed=now) for e in expectations if e.lapsed is None
            and any(lapsed(e, s) for s in a.series if s.key in checked_keys)]
    lines = {(k.scenario, k.server) for k in checked_keys}
    busy = sorted({line for r in a.runs if runs is not None and r.id in runs for line in [machine_line(r.record)]
                   if line})
    result = GateResult(spec, a, None, len(checked_keys), made, red, resolved, stale,
                        unjudged=unjudged(a.series, lines), busy=busy, lapsed=gone,
                        machines=_machine_changes([s for s in a.series if s.key in checked_keys]))
    return result, made, list(changed.values())


def saved(result: GateResult, made: list[Finding]) -> GateResult:
    """The result with the findings it made as the store keeps them (with their ids)."""
    kept = [f for f in result.red if f.id is not None]
    return replace(result, made=made, red=kept + [f for f in made if f.state is FindingState.NEW])


def _on_newest_machine(f: Finding, s: Series) -> bool:
    """The finding started on the machine the series' newest runs ran on (a finding of the machine before is not
    red: its series is a new level there, judged on its own)."""
    pts = s.included
    at = next((i for i, p in enumerate(pts) if p.run.id == f.first_run), None)
    return at is None or s.segment(at)[1] == len(pts)


def _machine_changes(series: list[Series]) -> list[str]:
    """Lines whose newest machine started within the runs a level needs, once per scenario and line."""
    out = {}
    for s in series:
        pts = s.included
        if not s.machine_starts or len(pts) - s.machine_starts[-1] >= MIN_BEFORE + MIN_AFTER:
            continue
        start = s.machine_starts[-1]
        old, new = pts[start - 1].run.record, pts[start].run.record
        out.setdefault((s.key.scenario, s.key.server),
                       f"{s.key.scenario} on {s.key.server}: the machine changed at run {new.run_id} "
                       f"({_machine(old)} -> {_machine(new)}): a new level starts there, not a regression; its runs "
                       f"are judged among themselves from the {MIN_BEFORE + MIN_AFTER}th on")
    return list(out.values())


def _machine(record) -> str:
    model, cpus = record.machine_id or ("unknown CPU", "?")
    return f"{model} x{cpus}"


def _next_start(f: Finding, mine: list[Finding], ranks: dict) -> int | None:
    """The first run (row id) of the next open change finding on the finding's series: where its own stretch
    ends (None: none after it)."""
    rank = ranks.get((f.key.scenario, f.key.server), {})
    at = rank.get(f.first_run)
    later = [g for g in mine if g.id != f.id and g.state in OPEN and g.kind is FindingKind.CHANGE
             and at is not None and rank.get(g.starts[0], -1) > at]
    return min(later, key=lambda g: rank[g.starts[0]]).starts[0] if later else None


def _judged(f: Finding, s: Series, gated: Gated, method: Method, now: str, until: int | None) -> Finding | None:
    """The finding judged again: resolved when the metric came back, else with its present size (None: nothing
    to write)."""
    cur = present(f, s, method, until)
    if cur is None:
        return None
    if back(f, cur, gated):
        return replace(f, state=FindingState.RESOLVED, acted=now, resolved_run=cur.first, now_change=size(f, cur),
                       now_run=cur.newest)
    if cur.newest == f.now_run:
        return None
    return replace(f, now_change=size(f, cur), now_run=cur.newest)


def _candidates(s: Series, gated: Gated) -> list[Candidate]:
    """The series' change points that moved it its worse way by the minimum change, from a level of
    MIN_BEFORE runs with MIN_AFTER after, each sized by the runs of its releases alone where the line
    interleaves releases."""
    pts = s.included
    out = []
    for c in s.changes:
        if not _worse(c, gated, c.index - c.before.n in (0, *s.machine_starts)):
            continue
        low, high = c.starts
        out.append(Candidate(s, _sized(c, s), gated, c.p / 2, pts[c.index - 1], pts[c.index],
                             (pts[low].run.id, pts[high].run.id)))
    return out


def _sized(c: Change, s: Series) -> Change:
    """A change at a release boundary on a line whose runs interleave releases: its size from the runs of the
    release before on one side and of the new release on the other (the series mixes them)."""
    pts = s.included
    before, after = pts[c.index - 1], pts[c.index]
    if before.server == after.server:
        return c
    old = [p.mean for p in pts[max(0, c.index - c.before.n):c.index] if p.server == before.server]
    new = [p.mean for p in pts[c.index:c.index + c.after.n] if p.server == after.server]
    if len(old) == c.before.n and len(new) == c.after.n:
        return c
    was, now = sum(old) / len(old), sum(new) / len(new)
    return replace(c, before=replace(c.before, mean=was), after=replace(c.after, mean=now),
                   change=None if was == 0 else now / was - 1)


def _known(c: Candidate, mine: list[Finding], rank: dict[int, int]) -> bool:
    """The candidate could start where a finding of its series could (either's interval, a run of slack):
    the same change, whatever the finding's state."""
    if c.kind is FindingKind.UPGRADE:
        return False
    at = _places(c.starts, rank)
    return at is not None and any(f.kind is FindingKind.CHANGE and (places := _places(f.starts, rank)) is not None
                                  and overlap((at[0] - SLACK, at[1] + SLACK), places) for f in mine)


def _places(starts: tuple[int, int], rank: dict[int, int]) -> tuple[int, int] | None:
    low, high = rank.get(starts[0]), rank.get(starts[1])
    return None if low is None or high is None else (low, high)


def _worse(c: Change, gated: Gated, first_level: bool = True) -> bool:
    """The change moved the metric its worse way by the minimum change, with MIN_AFTER runs after it, from a
    baseline: MIN_BEFORE runs where the level before is the series' first (on its machine), MIN_AFTER where an
    earlier change point bounds it (a second step soon after a first is a finding of its own)."""
    return c.before.n >= (MIN_BEFORE if first_level else MIN_AFTER) and c.after.n >= MIN_AFTER \
        and way_of(gated.better, c.change) is Way.WORSE and (c.change is None or abs(c.change) >= gated.min_change)


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


def _finding(c: Candidate, expectations: list[Expectation], acknowledged: list[Finding], ranks: dict,
             series: dict, now: str) -> Finding:
    """A finding of a candidate, with the thresholds it is found with: acknowledged when an expectation's
    window covers where it could start, or when an acknowledged finding of the same place could start there
    too (a metric whose move became clear only later); new otherwise."""
    f = Finding(None, c.series.key, c.after.run.id, c.before.run.id, c.change.change, c.p, c.change.before,
                c.change.after.mean, FindingState.NEW, now, None, None, None, c.kind, c.starts[0], c.starts[1],
                c.change.change, c.series.included[-1].run.id, c.gated.min_change, c.gated.better, c.gated.family,
                c.gated.alpha, c.baseline)
    rank = ranks.get((f.key.scenario, f.key.server), {})
    expected = next((e for e in expectations if covers(e, f, c.series, rank)), None)
    reason = f"expected: {expected.reason}" if expected else None
    if reason is None and c.kind is FindingKind.CHANGE:
        at = _places(f.starts, rank)
        known = next((k for k in acknowledged if k.key.location == f.key.location and at is not None
                      and (places := _places(k.starts, rank)) is not None
                      and overlap((at[0] - SLACK, at[1] + SLACK), places)), None)
        reason = f"with {known.name}: {known.reason}" if known else None
    if reason is None:
        return f
    return replace(f, state=FindingState.ACKNOWLEDGED, reason=reason, acted=now)
