"""A check's result as people and CI read it: one line per cause in the terminal and the Markdown step
summary, one test case per cause in the JUnit report; the detail of each finding is in `history show`.
A line names the run where the cause starts (its server version, and the version before when the
release changed there; its commit and labels), the findings by location with their moves (as found,
and as the newest runs show them where that differs: "-41.9% then, -10.2% now"), what else changed at
that run (the machine, the server's settings, concurbench, the scenario file) and what else moved there
(docs/history.md shows some from its nightly replay). An upgrade's line starts "upgrade: 17 vs 16".
The summary also names tonight's runs made on a busy machine (judged on a line of their own), the
lines nothing can judge yet and why, and the expectations whose window lapsed.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .analysis import major, relative
from .findings import finding_name
from .causes import FindingGroup
from .gate import GateResult
from .records import SeriesKey

MOST_ALSO = 5  # what else moved: at most this many metrics named in a cause's line
SAME = 0.005  # a present size within half a point of the size found is told once


def cause_line(cause: FindingGroup) -> str:
    """One line: the run where the change starts (version, commit, labels), its findings by location."""
    p = cause.run
    r = p.run.record
    where = [p.server + (f" after {cause.before_server}" if cause.before_server else "")]
    if r.commit:
        where.append(f"commit {r.commit[:10]}{'+' if r.dirty else ''}")
    where += [f"{k}={v}" for k, v in sorted(r.labels.items())]
    by_location: dict[tuple, list[str]] = {}
    for f in cause.findings:
        by_location.setdefault(f.key.location, []).append(f"{f.key.metric} {_size(f, cause.change.get(f.id))}")
    parts = [f"{_place(cause.findings[[f.key.location for f in cause.findings].index(loc)].key)} {', '.join(moved)}"
             for loc, moved in by_location.items()]
    upgrade = cause.upgrade
    head = f"upgrade: {major(p.server)} vs {upgrade.baseline}, " if upgrade is not None else ""
    line = f"{head}from run {r.run_id} ({', '.join(where)}) [{_ids(cause)}]: {'; '.join(parts)}"
    if cause.evidence:
        line += ". Changed at that run: " + "; ".join(cause.evidence)
    if cause.also:
        places = {f.key.location for f in cause.findings}
        line += ". Also moved there: " + ", ".join(
            (f"{_place(SeriesKey(*a.where, ''))} " if len(places) > 1 or a.where not in places else "")
            + f"{a.moved.metric} {relative(a.moved.change)}" for a in cause.also[:MOST_ALSO])
    return line


def _size(f, now: float | None) -> str:
    """A finding's move as found, and as the newest runs show it where that differs."""
    then = relative(f.change)
    if now is None or f.change is None or abs(now - f.change) < SAME:
        return then
    return f"{then} then, {relative(now)} now"


def markdown_summary(result: GateResult) -> str:
    a = result.analysis
    runs = f"those with a run among {', '.join(result.checked)}" if result.checked else "every one: no --run given"
    out = ["## concurbench history check", "",
           f"{result.gated} gated series checked ({runs}; gated: {result.spec.source}), of {len(a.series)} series "
           f"of {len(a.runs)} runs in {a.store}, ordered by {a.order}. A finding is new until someone acknowledges "
           f"it (`concurbench history ack`) or the metric comes back.", ""]
    if result.busy:
        out += ["Made on a busy machine (judged against the runs of their line made so, never mixed into a quiet "
                "level): " + "; ".join(result.busy), ""]
    if not result.red:
        out += ["**No regression**: no new finding on a series that ran in this check.", ""]
    else:
        count = len(result.causes)
        out += [f"**Regression: {len(result.red)} new finding{'s' if len(result.red) != 1 else ''} from "
                f"{count} cause{'s' if count != 1 else ''}**", ""]
        out += [f"- {_md(cause_line(c))}" for c in result.causes]
        out.append("")
    made_ack = [f for f in result.made if f.reason]
    if made_ack:
        out += [f"Found and acknowledged as expected: {', '.join(f'{f.name} {f.key.metric}' for f in made_ack)}", ""]
    if result.resolved:
        out += ["Resolved by this check (the metric came back): "
                + ", ".join(f"{f.name} {f.key.metric}" for f in result.resolved), ""]
    if result.stale:
        out += [f"Not red: {len(result.stale)} new finding{'s' if len(result.stale) != 1 else ''} on series without a "
                f"run in this check ({', '.join(f.name for f in result.stale[:10])})", ""]
    for line in result.machines:
        out += [f"New machine: {line}.", ""]
    for u in result.unjudged:
        out += [f"No baseline: {u.scenario} on {u.line} ({u.runs} run{'s' if u.runs != 1 else ''}): {u.why}.", ""]
    for e in result.lapsed:
        out += [f"Expectation for {e.what} ({e.reason}): its window passed; later changes are judged as any other.", ""]
    return "\n".join(out)


def junit(result: GateResult) -> str:
    """A test case per cause, failed; one passing case when there is none."""
    cases = []
    for c in result.causes:
        line = cause_line(c)
        cases.append(f"  <testcase classname={quoteattr('history.' + c.findings[0].key.scenario)} "
                     f"name={quoteattr('regression from run ' + c.run.run.record.run_id)}>"
                     f"<failure message={quoteattr(line)}>{escape(line)}</failure></testcase>")
    if not cases:
        cases.append(f"  <testcase classname=\"history\" name={quoteattr(f'{result.gated} gated series')}/>")
    failures = len(result.causes)
    return ("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
            f"<testsuite name=\"concurbench history check\" tests=\"{len(cases)}\" failures=\"{failures}\">\n"
            + "\n".join(cases) + "\n</testsuite>\n")


def _place(key: SeriesKey) -> str:
    where = key.variant + (f"/{key.pool}" if key.pool else "")
    return where + (f" · {key.clients} client{'s' if key.clients != 1 else ''}" if key.clients else "")


def _ids(cause: FindingGroup) -> str:
    names = [finding_name(n) for n in sorted(f.id or 0 for f in cause.findings)]
    return names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}" if _consecutive(cause) else ", ".join(names)


def _consecutive(cause: FindingGroup) -> bool:
    ids = sorted(f.id or 0 for f in cause.findings)
    return ids == list(range(ids[0], ids[0] + len(ids)))


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")
