"""The CI gate on the history: a change point among the newest runs that moved a metric the bad way.

A change counts when its first run after is among the newest `newest` runs of its series, confirmed
or still a candidate, and one of the metrics that moved with it moved in its worse direction
(throughput down; latency, lag, errors, per-transaction figures up; `directions` overrides). With
the default detector a step shows as a candidate from the second run after it and is confirmed from
the third (a short stretch only when each of its runs is outside the old level's band), so `newest`
5 keeps a change failing the CI runs that see it for five runs; docs/history.md gives the rates.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .analysis import Analysis, ChangeGroup, Series, relative
from .render import label, level_cell, run_cell

DEFAULT_NEWEST = 5


def recent(a: Analysis, newest: int) -> list[ChangeGroup]:
    """The change groups whose first run after is among the newest `newest` runs of their series."""
    by_key = {s.key: s for s in a.series}
    out = []
    for g in a.groups:
        series = by_key[g.key]
        included = series.included
        if g.after_run in included[-newest:]:
            out.append(g)
    return out


def regressions(a: Analysis, newest: int) -> list[ChangeGroup]:
    return [g for g in recent(a, newest) if g.worse]


def markdown_summary(a: Analysis, newest: int) -> str:
    bad = regressions(a, newest)
    other = [g for g in recent(a, newest) if not g.worse]
    out = ["## concurbench history check", "",
           f"{len(a.series)} series of {len(a.runs)} runs in {a.store}, ordered by {a.order}; the newest "
           f"{newest} runs of each series checked.", ""]
    if not bad:
        out += ["**No regression**: no change point among the newest runs moved a metric the bad way.", ""]
    else:
        out += [f"**{len(bad)} regression{'s' if len(bad) != 1 else ''}**", "",
                "| Status | Series | Metric | Before | After | Change | p | First run after |",
                "|---|---|---|---:|---:|---:|---:|---|"]
        for g in bad:
            for m in g.worse:
                out.append(f"| {g.status} | {_md(label(g.key))} | {_md(m.metric)} | {level_cell(m.before)} | "
                           f"{level_cell(m.after)} | {relative(m.change)} | {m.p:.2g} | {_md(run_cell(g.after_run))} |")
        out.append("")
    if other:
        out += ["Other recent changes (better, or in metrics without a better direction):", ""]
        out += [f"- {g.status}: {label(g.key)}: " + ", ".join(f"{m.metric} {relative(m.change)} ({m.way})"
                                                               for m in g.moved) for g in other]
        out.append("")
    return "\n".join(out)


def junit(a: Analysis, newest: int) -> str:
    """One test case per series; a failure for each series whose metric regressed among the newest runs."""
    failing: dict[tuple, list[str]] = {}
    for g in regressions(a, newest):
        for m in g.worse:
            failing.setdefault((g.key.scenario, g.key.variant, g.key.pool, g.key.point, g.key.server, m.metric),
                               []).append(f"{g.status} change {relative(m.change)} (p {m.p:.2g}): before "
                                          f"{level_cell(m.before)}, after {level_cell(m.after)}; first run after: "
                                          f"{run_cell(g.after_run)}")
    cases = []
    for s in a.series:
        name = f"{label(s.key)}: {s.key.metric}"
        problems = failing.get(_case_key(s), [])
        body = "".join(f"<failure message={quoteattr(p)}>{escape(p)}</failure>" for p in problems)
        cases.append(f"  <testcase classname={quoteattr('history.' + s.key.scenario)} name={quoteattr(name)}>"
                     f"{body}</testcase>")
    failures = sum(1 for s in a.series if failing.get(_case_key(s)))
    return ("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
            f"<testsuite name=\"concurbench history check\" tests=\"{len(a.series)}\" failures=\"{failures}\">\n"
            + "\n".join(cases) + "\n</testsuite>\n")


def _case_key(s: Series) -> tuple:
    return (s.key.scenario, s.key.variant, s.key.pool, s.key.point, s.key.server, s.key.metric)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")
