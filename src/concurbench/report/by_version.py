"""Claims by server version: one table per scenario, a row per claim (by its key), a column per server version.

Each cell is the verdict with the measured ratio (left over right) and the interval the verdict used
(at the claim's share of the error rate, so a decided cell's interval leaves out 1), the difference
where the comparison was not a ratio, or the left side's value where nothing was compared; the
reasons of cells that are not PASS follow the table as notes, so a reader sees what changes between
versions and why.
"""

from __future__ import annotations

import platform
import re
from datetime import datetime, timezone

from ..results.model import ClaimVerdict, Run
from ..stats import Verdict
from .tables import VERDICT_CELLS, Report, Table, figure

CELLS = {**VERDICT_CELLS, Verdict.NOT_EVALUATED: "n/a"}  # a cell's verdict word


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in str(version).replace("-", ".").split("."))


def cell(v: ClaimVerdict | None) -> str:
    if v is None:
        return "–"
    word = CELLS[v.verdict]
    shown = next((e for e in (v.interval, v.ratio, v.left) if e is not None), None)
    if shown is None or v.verdict is Verdict.NOT_EVALUATED:
        return word
    unit = "×" if shown is v.ratio or shown.method == "left / right" else ""
    prefix = "difference " if shown.method == "left - right" else ""
    if shown.low is None:
        return f"{word} {prefix}{figure(shown.value)}{unit}"
    high = "∞" if shown.high is None else figure(shown.high)
    return f"{word} {prefix}{figure(shown.value)}{unit} [{figure(shown.low)}, {high}]"


def claims_by_version(runs: list[Run], *, title: str = "Claims by server version", lines: list[str] = ()) -> Report:
    tables = []
    for run in runs:
        versions = sorted({s.version_short for s in run.servers}, key=_version_key)
        claims: dict[str, str] = {}  # a claim's key -> its text as the scenario wrote it
        for v in run.claims:
            claims.setdefault(v.key, v.claim)
        by = {(v.key, v.server): v for v in run.claims}
        table = Table(f"{run.scenario.name}{' (quick)' if run.scenario.quick else ''}", ["#", "Claim", *versions])
        for n, (key, text) in enumerate(claims.items(), 1):
            table.rows.append([str(n), text, *[cell(by.get((key, version))) for version in versions]])
            reasons: dict[str, list[str]] = {}  # a reason once, with every version it was given on
            for version in versions:
                v = by.get((key, version))
                if v is not None and v.verdict is not Verdict.PASS:
                    reasons.setdefault(_without_figures(v.reason), []).append(version)
            for reason, where in reasons.items():
                table.notes.append(f"{n} on {', '.join(where)}: {reason}")
        table.notes += [f"on {s.version_short}, settings not as the scenario's (--server-settings as-is): "
                        f"{s.differences_text()}" for s in run.servers if s.differences]
        if run.path is not None:
            table.notes.append(f"run directory: {run.path}")
        tables.append(table)
    legend = ("Cells: the verdict, then the claim's left side over its right side (factors included, so above 1 "
              "means `>` holds), marked ×, with the interval its verdict used: at the claim's share of the 5% error "
              "rate (Holm over the claims, spending over the looks), so it leaves out 1 exactly when the verdict "
              "decides; where the two were not compared as a ratio, their difference. n/a: not evaluated on that "
              "version; the reasons follow each table.")
    return Report(title, [*lines, legend], tables)


def _without_figures(reason: str) -> str:
    """A reason with its p-value and level left out, so versions that failed to decide for the same cause share
    one note."""
    return re.sub(r"; p = [^;]*?\((?:[^()]|\([^()]*\))*\)", "", reason)


def made_lines(runs: list[Run], target: str, command: str | None = None) -> list[str]:
    """The table's first lines: when and where the runs were made, on which target, and by which command."""
    host = runs[0].host if runs else {}
    cpu = ", ".join(str(x) for x in (host.get("cpu_model"), f"{host.get('cpu_count')} CPUs", host.get("machine")) if x)
    forms = "quick forms" if any(r.scenario.quick for r in runs) else "full forms"
    where = f"{host.get('hostname') or platform.node()} ({cpu})"
    lines = [f"Made {_span(runs)} on {where}, target {runs[0].target if runs else target}, {forms}"]
    return lines + ([f"Command: {command}"] if command else [])


def _span(runs: list[Run]) -> str:
    """When the runs were made, and how long they took from the first start to the last end."""
    times = [datetime.fromisoformat(t) for r in runs for t in (r.started, r.ended) if t]
    if not times:
        return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    first, last = min(times), max(times)
    minutes = round((last - first).total_seconds() / 60)
    return (f"{first.strftime('%Y-%m-%d %H:%M')} to {last.strftime('%H:%M UTC')} "
            f"({minutes // 60} h {minutes % 60:02d} min)")
