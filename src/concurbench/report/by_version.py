"""Claims by server version: one table per scenario, a row per claim, a column per server version.

Each cell is the verdict with the measured ratio (left over right) and its 95% interval, or the left
side's value where the comparison was not a ratio; the reasons of cells that are not PASS follow
the table as notes, so a reader sees what changes between versions and why.
"""

from __future__ import annotations

from ..results.model import ClaimVerdict, Run
from .tables import Report, Table, figure


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in str(version).replace("-", ".").split("."))


def cell(v: ClaimVerdict | None) -> str:
    if v is None:
        return "–"
    word = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE", "not evaluated": "n/a"}[v.verdict]
    shown = v.ratio if v.ratio is not None else v.left
    if shown is None or v.verdict == "not evaluated":
        return word
    unit = "×" if v.ratio is not None else ""
    if shown.low is None or shown.high is None:
        return f"{word} {figure(shown.value)}{unit}"
    return f"{word} {figure(shown.value)}{unit} [{figure(shown.low)}, {figure(shown.high)}]"


def claims_by_version(runs: list[Run], *, title: str = "Claims by server version", lines: list[str] = ()) -> Report:
    tables = []
    for run in runs:
        versions = sorted({s.version_short for s in run.servers}, key=_version_key)
        claims: list[str] = []
        for v in run.claims:
            if v.claim not in claims:
                claims.append(v.claim)
        by = {(v.claim, v.server): v for v in run.claims}
        table = Table(f"{run.scenario.name}{' (quick)' if run.scenario.quick else ''}", ["#", "Claim", *versions])
        for n, claim in enumerate(claims, 1):
            table.rows.append([str(n), claim, *[cell(by.get((claim, version))) for version in versions]])
            reasons: dict[str, list[str]] = {}  # a reason once, with every version it was given on
            for version in versions:
                v = by.get((claim, version))
                if v is not None and v.verdict != "pass":
                    reasons.setdefault(_without_figures(v.reason), []).append(version)
            for reason, where in reasons.items():
                table.notes.append(f"{n} on {', '.join(where)}: {reason}")
        if run.path is not None:
            table.notes.append(f"run directory: {run.path}")
        tables.append(table)
    legend = ("Cells: the verdict, then the claim's left side over its right side (factors included, so above 1 "
              "means `>` holds) with its 95% interval, marked ×; where the two were not compared as a ratio, the "
              "left side's value. n/a: not evaluated on that version; the reasons follow each table.")
    return Report(title, [*lines, legend], tables)


def _without_figures(reason: str) -> str:
    """A reason with the p-values left out, so versions that failed to decide for the same cause share one note."""
    return reason.split("; adjusted p = ")[0]
