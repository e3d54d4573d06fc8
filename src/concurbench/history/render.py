"""An analysis as a report (terminal, Markdown, HTML tables), JSON and CSV, with the store's findings.

The report lists the findings first (open ones: new, then acknowledged; the resolved are counted), then
the change points, the series and the runs. The JSON holds every series with every point, a list
`findings` (each with `id`, `state`, its series, `first_run`, `change`, `p`, the level before, the
reason and when it was acted on) and a list `change_points`: each with `scenario`, `variant`, `pool`,
`clients`, `metric` (the lead metric), `run` (the run id of the first run after the change),
`version`, `change` (relative), `p`, `status` (confirmed or candidate), `way` (worse, better or
neutral), the runs on either side, the levels before and after, whether the scenario or the release
changed there, and `metrics`: every metric of that location that moved with it.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from datetime import datetime

from ..errors import ConfigError
from ..report.tables import Report, Table, figure
from ..results.model import RunStatus
from .analysis import ALL_SERVERS, Analysis, ChangeGroup, Moved, Point, Series, major, relative
from .expect import WINDOW
from .findings import OPEN, Expectation, Finding, FindingKind, FindingState
from .level import Level
from .records import SeriesKey

RECENT_RUNS = 20  # the runs table of a report lists this many of the newest runs


def label(key: SeriesKey) -> str:
    """`scenario · variant/pool · N clients · server`."""
    where = key.variant + (f"/{key.pool}" if key.pool else "")
    parts = [key.scenario, where]
    if key.point >= 0 or key.clients:
        parts.append(f"{key.clients} client{'s' if key.clients != 1 else ''}")
    if key.server != ALL_SERVERS:
        parts.append(key.server)
    return " · ".join(parts)


def run_cell(p: Point) -> str:
    r = p.run.record
    bits = [r.run_id, p.server]
    if r.commit:
        bits.append(r.commit[:10] + ("+" if r.dirty else ""))
    bits += [f"{k}={v}" for k, v in sorted(r.labels.items())]
    bits.append(r.started[:16].replace("T", " "))
    return ", ".join(bits)


def level_cell(level: Level) -> str:
    if level.low is None:
        return f"{figure(level.mean)}" + (" (1 run)" if level.n == 1 else "")
    runs = f" ({level.n} runs)" if level.n else ""
    return f"{figure(level.mean)} [{figure(level.low)}, {figure(level.high)}]{runs}"


def report(a: Analysis, findings: list[Finding] = (), *, everything: bool = False,
           expectations: list[Expectation] = ()) -> Report:
    """Lines, the open findings, the change points, the series (those with a change or a run left out;
    `everything`: all), the runs (the newest RECENT_RUNS; `everything`: all)."""
    confirmed = sum(1 for g in a.groups if g.confirmed)
    candidates = len(a.groups) - confirmed
    lines = [f"Store: {a.store}; {len(a.runs)} run{'s' if len(a.runs) != 1 else ''}"
             + (f" from {a.runs[0].record.started[:10]} to {a.runs[-1].record.started[:10]}" if a.runs else ""),
             f"{len(a.series)} series, ordered by {a.order}; {confirmed} confirmed change"
             f"{'s' if confirmed != 1 else ''} and {candidates} candidate{'s' if candidates != 1 else ''}",
             f"Method: e-divisive means in windows of {a.method.window} runs, each change tested at p <= "
             f"{a.method.alpha:g} and a move of at least {a.method.min_change:.0%}; confirmed after "
             f"{a.method.confirm} runs, a candidate before (from {a.method.min_after})"]
    if not a.groups:
        lines.append("No change point: every series stayed within its noise.")
    opened = [f for f in findings if f.state in OPEN]
    lines.insert(0, f"Findings: {sum(f.state is FindingState.NEW for f in findings)} new, "
                    f"{sum(f.state is FindingState.ACKNOWLEDGED for f in findings)} acknowledged, "
                    f"{sum(f.state is FindingState.RESOLVED for f in findings)} resolved"
                    + ("" if opened else " (none open)"))
    tables = [findings_table(a, findings), changes_table(a), series_table(a, everything), runs_table(a, everything)]
    if expectations:
        tables.insert(1, expectations_table(expectations))
    busy = sum(1 for r in a.runs if r.record.busy)
    if busy:
        lines.append(f"{busy} run{'s were' if busy != 1 else ' was'} made on a busy machine (others kept a large "
                     f"share of its CPUs busy while the run's load paused): on lines of their own, marked with the share "
                     f"others took, such as `16 (busy 50%)`")
    return Report("History", lines, tables)


def findings_table(a: Analysis, findings: list[Finding]) -> Table:
    """The open findings, new first: what `history check` holds red (new) or was told about."""
    table = Table("Open findings", ["Finding", "State", "Series", "Metric", "First run after", "Before", "After",
                                    "Change", "Now", "p", "Reason"])
    runs = {r.id: r for r in a.runs}
    order = {FindingState.NEW: 0, FindingState.ACKNOWLEDGED: 1}
    for f in sorted((f for f in findings if f.state in OPEN), key=lambda f: (order[f.state], f.id or 0)):
        run = runs.get(f.first_run)
        where = run.record.run_id + ", " + run.record.started[:16].replace("T", " ") if run else f"run #{f.first_run}"
        if f.first_low is not None and f.first_high is not None and f.first_low != f.first_high:
            where += f" (could start {_run_name(runs, f.first_low)} to {_run_name(runs, f.first_high)})"
        kind = f" (upgrade: {major(f.key.server)} vs {f.baseline})" if f.kind is FindingKind.UPGRADE else ""
        table.rows.append([f.name, f.state.value + kind, label(f.key), f.key.metric, where, level_cell(f.before),
                           figure(f.after_mean), relative(f.change),
                           "–" if f.now_change is None else relative(f.now_change), f"{f.p:.2g}",
                           (f.reason or "") + (f" ({f.acted[:10]})" if f.acted else "")])
    resolved = sum(f.state is FindingState.RESOLVED for f in findings)
    if resolved:
        table.notes.append(f"{resolved} resolved finding{'s' if resolved != 1 else ''} (the metric came back) not "
                           f"listed; --format json has them.")
    table.notes.append("`concurbench history ack FINDING --reason TEXT` acknowledges a new finding. Now: its size as "
                       "the newest runs show it.")
    return table


def expectations_table(expectations: list[Expectation]) -> Table:
    """Changes announced beforehand: what each covers and whether its window lapsed."""
    table = Table("Expected changes", ["Expectation", "Covers", "Reason", "Added", "Window"])
    for e in expectations:
        table.rows.append([f"E{e.id}", f"changes starting at the first {WINDOW} runs of {e.what} on a line", e.reason,
                           e.added[:10], f"lapsed {e.lapsed[:16].replace('T', ' ')}" if e.lapsed else "open"])
    return table


def _run_name(runs: dict, run: int) -> str:
    r = runs.get(run)
    return r.record.run_id if r else f"run #{run}"


def since(a: Analysis, when: str) -> Analysis:
    """The analysis as shown from `when` on (a date, a time or a run id): its change points and runs from
    then; the series keep every point (the detection read them all)."""
    start = _start(a, when)
    return replace(a, runs=[r for r in a.runs if r.record.started >= start],
                   groups=[g for g in a.groups if g.after_run.run.record.started >= start])


def findings_since(a: Analysis, findings: list[Finding], when: str) -> list[Finding]:
    start = _start(a, when)
    runs = {r.id: r.record.started for r in a.runs}
    return [f for f in findings if runs.get(f.first_run, "") >= start or f.state is FindingState.NEW]


def _start(a: Analysis, when: str) -> str:
    """`when` as a time the runs' start times compare with: a run id's start, or the date or time given."""
    for r in a.runs:
        if r.record.run_id == when:
            return r.record.started
    try:
        datetime.fromisoformat(when)
    except ValueError:
        raise ConfigError(f"--since {when!r}: give a date (2026-12-01), a time (2026-12-01T02:00) or a run id of "
                          f"the store") from None
    return when


def changes_table(a: Analysis) -> Table:
    table = Table("Change points", ["Status", "Series", "Metric", "Last run before", "First run after", "Before",
                                    "After", "Change", "p", "Also moved"])
    for g in a.groups:
        lead = g.lead
        also = "; ".join(f"{m.metric} {relative(m.change)}" for m in g.moved[1:])
        status = g.status + (" (scenario changed)" if g.scenario_changed else "")
        table.rows.append([status, label(g.key), f"{lead.metric} ({lead.way})", run_cell(g.before_run),
                           run_cell(g.after_run), level_cell(lead.before), level_cell(lead.after),
                           relative(lead.change), f"{lead.p:.2g}", also])
    return table


def series_table(a: Analysis, everything: bool = False) -> Table:
    shown = [s for s in a.series if everything or s.changes or len(s.included) < len(s.points)]
    title = "Series" if everything else "Series with a change point or a run left out"
    table = Table(title, ["Series", "Metric", "Runs", "Left out", "Newest", "Changes"])
    for s in shown:
        included = s.included
        newest = s.points[-1] if s.points else None
        table.rows.append([label(s.key), s.key.metric, str(len(included)), str(len(s.points) - len(included)),
                           _value(newest) if newest else "–", str(len(s.changes))])
    table.notes.append("Left out: runs that failed or ended early, shown but not used to find changes.")
    if len(shown) < len(a.series):
        table.notes.append(f"{len(a.series) - len(shown)} more series without a change point (--all lists them; "
                           f"--format json or csv has every point).")
    return table


def runs_table(a: Analysis, every_run: bool) -> Table:
    shown = a.runs if every_run else a.runs[-RECENT_RUNS:]
    title = "Runs" if every_run or len(a.runs) <= RECENT_RUNS else f"The newest {RECENT_RUNS} runs"
    table = Table(title, ["Run", "Started", "Scenario", "Servers", "Commit", "Labels", "Host", "Machine", "Status"])
    for r in reversed(shown):
        rec = r.record
        table.rows.append([rec.run_id, rec.started[:19].replace("T", " "), rec.scenario + (" (quick)" if rec.quick
                                                                                              else ""),
                           ", ".join(rec.servers), (rec.commit[:10] + ("+" if rec.dirty else "")) or "–",
                           ", ".join(f"{k}={v}" for k, v in sorted(rec.labels.items())) or "–",
                           rec.host + (f" ({rec.cpu_model})" if rec.cpu_model else ""), _machine(rec), rec.status])
    return table


def _machine(rec) -> str:
    """How busy the machine was: others' CPUs while the run's load paused (busy: a line of its own)."""
    others = (rec.machine or {}).get("others")
    if others is None:
        return "–"
    return f"{'busy: ' if rec.busy else ''}others {others:.2f} of {rec.machine.get('cpus') or '?'} CPUs"


def _value(p) -> str:
    if p.low is None:
        return figure(p.mean)
    return f"{figure(p.mean)} [{figure(p.low)}, {figure(p.high)}]"


# JSON and CSV --------------------------------------------------------------------------------------------

def as_json(a: Analysis, findings: list[Finding] = (), expectations: list[Expectation] = ()) -> dict:
    runs = {r.id: r.record.run_id for r in a.runs}
    return {"store": a.store, "order": a.order, "findings": [finding_json(f, runs) for f in findings],
            "expectations": [{"id": f"E{e.id}", "commit": e.commit, "release": e.release, "reason": e.reason,
                              "added": e.added, "lapsed": e.lapsed} for e in expectations],
            "method": {"window": a.method.window, "alpha": a.method.alpha, "min_change": a.method.min_change,
                       "confirm": a.method.confirm, "min_after": a.method.min_after},
            "runs": [_run_json(r) for r in a.runs],
            "series": [_series_json(s) for s in a.series],
            "change_points": [change_json(g) for g in a.groups]}


def finding_json(f: Finding, runs: dict[int, str]) -> dict:
    k = f.key
    return {"id": f.name, "state": f.state.value, "scenario": k.scenario, "variant": k.variant, "pool": k.pool,
            "clients": k.clients, "point": k.point, "line": k.server, "metric": k.metric,
            "first_run": runs.get(f.first_run), "before_run": runs.get(f.before_run), "change": f.change, "p": f.p,
            "before": f.before.as_dict(), "after_mean": f.after_mean, "found": f.found, "reason": f.reason,
            "acted": f.acted, "resolved_run": runs.get(f.resolved_run) if f.resolved_run else None,
            "kind": f.kind.value, "baseline": f.baseline,
            "could_start": [runs.get(r) for r in f.starts], "now_change": f.now_change,
            "now_run": runs.get(f.now_run) if f.now_run else None,
            "min_change": f.min_change, "better": None if f.better is None else f.better.value, "family": f.family,
            "alpha": f.alpha, "confirmation": f.confirmation}


def change_json(g: ChangeGroup) -> dict:
    lead = g.lead
    return {"scenario": g.key.scenario, "variant": g.key.variant, "pool": g.key.pool, "clients": g.key.clients,
            "point": g.key.point, "server": g.key.server, "metric": lead.metric, "run": g.after_run.run.record.run_id,
            "version": g.after_run.server, "change": lead.change, "p": lead.p, "status": g.status, "way": lead.way,
            "scenario_changed": g.scenario_changed, "release_changed": g.release_changed,
            "before_run": _point_ref(g.before_run),
            "after_run": _point_ref(g.after_run), "before": lead.before.as_dict(), "after": lead.after.as_dict(),
            "metrics": [_moved_json(m) for m in g.moved]}


def _moved_json(m: Moved) -> dict:
    return {"metric": m.metric, "change": m.change, "p": m.p, "way": m.way, "before": m.before.as_dict(),
            "after": m.after.as_dict()}


def _point_ref(p: Point) -> dict:
    r = p.run.record
    return {"run": r.run_id, "version": p.server, "commit": r.commit, "labels": dict(r.labels),
            "started": r.started}


def _run_json(r) -> dict:
    rec = r.record
    return {"run": rec.run_id, "scenario": rec.scenario, "scenario_sha256": rec.scenario_sha256,
            "parameters": rec.parameters, "quick": rec.quick, "started": rec.started, "ended": rec.ended,
            "status": rec.status, "error": rec.error, "host": rec.host, "cpu_model": rec.cpu_model,
            "harness": rec.harness, "commit": rec.commit, "dirty": rec.dirty, "target": rec.target,
            "servers": rec.servers, "labels": rec.labels, "machine": rec.machine, "settings": rec.settings,
            "kind": rec.kind.value, "added": r.added}


def _series_json(s: Series) -> dict:
    changes = {s.included[c.index].run.record.run_id: c for c in s.changes}
    values = json.loads("[" + ",".join(p.vals or "null" for p in s.points) + "]")  # one parse for the series
    return {"scenario": s.key.scenario, "variant": s.key.variant, "pool": s.key.pool, "clients": s.key.clients,
            "point": s.key.point, "server": s.key.server, "metric": s.key.metric,
            "points": [_point_json(p, v) for p, v in zip(s.points, values)],
            "change_points": [{"run": run, "status": c.status, "change": c.change, "p": c.p}
                              for run, c in changes.items()]}


def _point_json(p: Point, values) -> dict:
    record, half = p.run.record, p.half
    low, high = (p.given_low, p.given_high) if half is None else (p.mean - half, p.mean + half)
    return {"run": record.run_id, "version": p.server, "status": p.status, "run_status": record.status,
            "included": p.status == RunStatus.OK and record.status == RunStatus.OK, "mean": p.mean, "low": low, "high": high,
            "n": p.n, "values": values, "scenario_changed": p.scenario_changed,
            **({"count": p.count, "exposure": p.exposure} if p.exposure else {})}


CSV_COLUMNS = ("scenario", "variant", "pool", "clients", "point", "server", "metric", "run", "version", "started",
               "commit", "status", "included", "mean", "low", "high", "n", "scenario_changed", "change_status",
               "change", "p")


def as_csv(a: Analysis) -> str:
    """One row per point; a point that is the first after a change point carries that change."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for s in a.series:
        changes = {s.included[c.index].run.id: c for c in s.changes}
        for p in s.points:
            c = changes.get(p.run.id) if p.included else None
            writer.writerow({"scenario": s.key.scenario, "variant": s.key.variant, "pool": s.key.pool,
                             "clients": s.key.clients, "point": s.key.point, "server": s.key.server,
                             "metric": s.key.metric, "run": p.run.record.run_id, "version": p.server,
                             "started": p.run.record.started, "commit": p.run.record.commit,
                             "status": p.status if p.run.record.status == RunStatus.OK else p.run.record.status,
                             "included": int(p.included), "mean": p.mean, "low": p.low,
                             "high": p.high, "n": p.n, "scenario_changed": int(p.scenario_changed),
                             "change_status": c.status if c else "", "change": c.change if c else "",
                             "p": c.p if c else ""})
    return buf.getvalue()


def json_text(a: Analysis, findings: list[Finding] = (), expectations: list[Expectation] = ()) -> str:
    """Compact (one line): a store of a thousand runs is hundreds of thousands of points, and the indented
    form takes the pure-Python encoder, several times slower; pipe it to `jq .` to read it."""
    return json.dumps(as_json(a, findings, expectations), default=str, separators=(",", ":")) + "\n"
