"""The gate's red findings grouped by cause: one line of the summary, one test case of the JUnit report.

Findings of one scenario and line whose changes could start at the same runs (their intervals meet,
with a run of slack) are one cause, told at the run most of them start at: tps, latency and a p99 that
became clear nights later, moved by one cause. A change that starts later is a cause of its own, even
while an older cause is still red. An upgrade finding (a new major against the one before) is a cause
of its own kind. Each cause says what else changed at its first run (evidence.py: the machine, the
server's settings, concurbench, the scenario file) and what else moved there, in the series of the
same variants that are not gated (waits, WAL, statement latencies first, counts that restate a
throughput last): the likely why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..figures import Kind, Way
from ..results.catalogue import CATALOGUE
from .analysis import Analysis, Moved, Point, Series, analyse, quiet_line
from .evidence import changed, explaining
from .findings import Finding, FindingKind, overlap
from .store import HistoryStore, StoredRun

SLACK = 1  # runs either side of a cause's start that another finding's start may lie at
MOST_ALSO = 8  # what else moved: at most this many metrics kept with a cause


@dataclass(frozen=True)
class Also:
    """Something else that moved at a cause's start: where (the location's key without its metric) and how."""

    where: tuple
    moved: Moved


@dataclass(frozen=True)
class FindingGroup:
    """One cause: the red findings that could start at the same runs; one line of the summary, one test
    case of the JUnit report. (Not results.model.Cause, which says why a claim's verdict is what it is.)"""

    run: Point  # the first run after the change (where most of its findings start)
    findings: list[Finding]
    also: list[Also]  # what else moved at that run, in series that are not findings (the likely why)
    series: dict[int, Series]  # finding id -> its series
    change: dict[int, float | None]  # finding id -> its present size (as found, where none was measured since)
    evidence: list[str] = field(default_factory=list)  # what else changed at that run
    before_server: str = ""  # the server version of the last run before it, where it differs

    @property
    def upgrade(self) -> Finding | None:
        """The cause's upgrade finding (a new major judged against the one before), if it is one."""
        return next((f for f in self.findings if f.kind is FindingKind.UPGRADE), None)


def line_ranks(a: Analysis) -> dict[tuple[str, str], dict[int, int]]:
    """For each scenario and line: its runs' places in the order they started (one run apart = adjacent)."""
    runs: dict[tuple[str, str], dict[int, str]] = {}
    for s in a.series:
        mine = runs.setdefault((s.key.scenario, s.key.server), {})
        for p in s.points:
            mine[p.run.id] = p.run.record.started
    return {key: {run: i for i, run in enumerate(sorted(mine, key=lambda r: (mine[r], r)))}
            for key, mine in runs.items()}


def with_causes(result, checked: list[str] | None, store: HistoryStore | None = None,
                runs: list[StoredRun] | None = None, directions: dict[str, str] | None = None):
    """The gate's result with its red findings grouped by cause, each with what else changed and moved at its
    first run (the latter read from the store when one is given)."""
    a = result.analysis
    series = {s.key: s for s in a.series}
    ranks = line_ranks(a)
    groups = _grouped(result.red, ranks)
    moved = _also(store, a, groups, runs, directions) if store is not None and groups else {}
    causes = [c for i, items in enumerate(groups) if (c := _cause(items, series, ranks, moved.get(i, []))) is not None]
    causes.sort(key=lambda c: c.run.run.record.started)
    return replace(result, checked=checked, causes=causes)


def _grouped(red: list[Finding], ranks: dict) -> list[list[Finding]]:
    """The red findings in causes: per scenario, line and kind, the most precisely placed findings (the
    narrowest intervals, then the smallest p) start a cause each at their first run; every other finding
    joins the cause whose start its interval holds (a run of slack either side), the nearest to its own
    first run, or starts one of its own. A finding whose change could have started anywhere over a long
    stretch (a noisy p99) joins a cause; it never chains two causes into one."""
    groups: list[list[Finding]] = []
    starts: list[tuple[tuple, int]] = []  # each group's (scenario, line, kind) and start (the line's run place)
    order = sorted(red, key=lambda f: (_width(ranks, f), f.p))
    for f in order:
        where, at = (f.key.scenario, f.key.server, f.kind), _at(ranks, f)
        line = ranks.get((f.key.scenario, f.key.server), {})
        first = line.get(f.first_run)
        home = [i for i, (w, start) in enumerate(starts) if w == where and at is not None
                and at[0] - SLACK <= start <= at[1] + SLACK]
        if home:
            best = min(home, key=lambda i: abs(starts[i][1] - (first if first is not None else starts[i][1])))
            groups[best].append(f)
        else:
            groups.append([f])
            starts.append((where, first if first is not None else -1))
    return groups


def _width(ranks: dict, f: Finding) -> int:
    at = _at(ranks, f)
    return 10 ** 6 if at is None else at[1] - at[0]


def _cause(items: list[Finding], series: dict, ranks: dict, moved: list[Moved]) -> FindingGroup | None:
    line = ranks.get((items[0].key.scenario, items[0].key.server), {})
    first = _explained(items, series, line) or _start(items, line)
    items = sorted(items, key=lambda f: (f.key.location, f.key.metric))
    mine = {f.id: series[f.key] for f in items if f.key in series}
    point = next((p for f in items if f.key in series for p in series[f.key].points if p.run.id == first), None)
    if point is None:
        return None
    named = {(f.key.location, f.key.metric) for f in items}
    also = [(where, m) for where, m in moved if where not in named]
    now = {f.id: f.now_change if f.now_change is not None else f.change for f in items}
    before = _before_point(items, series)
    evidence = changed(before.run.record, point.run.record, before.server, point.server) if before else []
    server = before.server if before is not None and before.server != point.server else ""
    also = [Also(where[0], m) for where, m in also]
    return FindingGroup(point, items, sorted(also, key=lambda a: (_count(a.moved.metric), a.moved.p))[:MOST_ALSO],
                        mine, now, evidence, server)


def _start(items: list[Finding], line: dict[int, int]) -> int:
    """The run a cause is told at: the one most of its findings could start at (their intervals hold it; one
    metric's change placed a run late does not move it), the earliest of a tie."""
    places = {r: line.get(r, -1) for f in items for r in (f.first_run, *f.starts)}
    held = {r: sum(1 for f in items if _within(line, f, at)) for r, at in places.items()}
    return max(places, key=lambda r: (held[r], -places[r]))


def _explained(items: list[Finding], series: dict, line: dict[int, int]) -> int | None:
    """The one run among those the cause's findings could start at (a third of them at least, so one noisy
    metric's long interval does not widen the cause) where something was recorded to change (the server's
    settings or release, the machine, concurbench's version, the scenario file), when exactly one is: a
    recorded change explains a step better than the noise that placed it a run off."""
    held: dict[int, int] = {}
    for f in items:
        for r in _places_of(f, line):
            held[r] = held.get(r, 0) + 1
    enough = max(1, -(-len(items) // 3))
    places = sorted((r for r, n in held.items() if n >= enough), key=lambda r: line[r])
    runs = {p.run.id: p for f in items if f.key in series for p in series[f.key].included}
    order = sorted(runs, key=lambda r: line.get(r, -1))
    found = []
    for r in places:
        i = order.index(r) if r in order else 0
        if i and r in runs and explaining(runs[order[i - 1]].run.record, runs[r].run.record,
                                          runs[order[i - 1]].server, runs[r].server):
            found.append(r)
    return found[0] if len(found) == 1 else None


def _places_of(f: Finding, line: dict[int, int]) -> list[int]:
    """The runs (row ids) the finding could start at, a run of slack either side."""
    low, high = (line.get(r) for r in f.starts)
    if low is None or high is None:
        return [f.first_run]
    return [r for r, at in line.items() if low - SLACK <= at <= high + SLACK]


def _within(line: dict[int, int], f: Finding, at: int) -> bool:
    low, high = (line.get(r) for r in f.starts)
    return low is not None and high is not None and low <= at <= high


def _before_point(items: list[Finding], series: dict) -> Point | None:
    """The last run before the cause's change (an upgrade's: the previous major's last run)."""
    for f in items:
        own = series.get(f.key)
        found = next((p for p in own.points if p.run.id == f.before_run), None) if own is not None else None
        if found is not None:
            return found
        for s in series.values():
            for p in s.points:
                if p.run.id == f.before_run:
                    return p
    return None


def _also(store: HistoryStore, a: Analysis, groups: list[list[Finding]], runs, directions) -> dict[int, list]:
    """For each cause: what else moved at its start, in the not-gated series of its findings' places and of their
    variants as a whole (waits, WAL) on its line (a second, small analysis: the gate's own reads only the gated
    series)."""
    places = {(f.key.scenario, f.key.variant, f.key.pool, f.key.clients, f.key.point) for items in groups
              for f in items}
    variants = {place[:2] for place in places}
    gated = {s.key for s in a.series}
    gated_stored = {k._replace(server="") for k in gated}
    other = analyse(store, order=a.order, method=a.method, directions=directions, runs=runs,
                    select=lambda k: (k.scenario, k.variant) in variants
                    and (k.pool == "" or (k.scenario, k.variant, k.pool, k.clients, k.point) in places)
                    and k._replace(server="") not in gated_stored,
                    quiet=lambda k: True)
    ranks = line_ranks(other)
    out: dict[int, list] = {}
    for i, items in enumerate(groups):
        f = items[0]
        line = ranks.get((f.key.scenario, f.key.server), {})
        at = [line[r] for g in items for r in g.starts if r in line]
        if not at:
            continue
        low, high = min(at) - SLACK, max(at) + SLACK
        out[i] = [((g.key.location, m.metric), m) for g in other.groups
                  if g.key.scenario == f.key.scenario and quiet_line(g.key.server) == quiet_line(f.key.server)
                  and g.key.server == f.key.server and g.key.variant in {x.key.variant for x in items}
                  and low <= line.get(g.after_run.run.id, -99) <= high for m in g.moved
                  if m.way is not Way.BETTER and g.key._replace(metric=m.metric) not in gated]
    return out


def _at(ranks: dict, f: Finding) -> tuple[int, int] | None:
    line = ranks.get((f.key.scenario, f.key.server), {})
    low, high = (line.get(r) for r in f.starts)
    return None if low is None or high is None else (low, high)


def _same_line(a: Finding, b: Finding) -> bool:
    return (a.key.scenario, a.key.server) == (b.key.scenario, b.key.server)


def _count(metric: str) -> bool:
    """Counts (transactions, statements executed) mostly restate a throughput's move: listed after the rest."""
    return CATALOGUE.figure(metric).kind is Kind.COUNT
