"""Render a Comparison: a terminal table, Markdown for a pull-request comment, JSON, JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from rich.markup import escape
from rich.table import Table

from ..figures import Way
from ..stats import Estimate
from .compare import Comparison, REPEAT_HINT, Row, RunInfo

LEGEND = ("Change: contender against baseline; green better, red worse, dim not significant (Welch's t-test, "
          "p ≥ 0.05).")
UNTESTED = " Untested: a side ran once, so there is no significance test; " + REPEAT_HINT + "."


def legend(comparison: Comparison) -> str:
    return LEGEND + (UNTESTED if any(r.significant is None for r in comparison.rows) else "")


def num(value: float | None) -> str:
    if value is None:
        return "–"
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.1f}"
    if a >= 1 or a == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def value_cell(e: Estimate) -> str:
    return num(e.mean) if e.half is None else f"{num(e.mean)} ± {num(e.half)}"


def change_cell(row: Row) -> str:
    if row.pct is not None:
        return f"{row.pct:+.1f}%"
    diff = row.contender.mean - row.baseline.mean
    return "±0" if diff == 0 else f"{diff:+g} (from 0)"


def significance_cell(row: Row) -> str:
    if row.significant is None:
        return f"untested (n={row.baseline.n}/{row.contender.n})"
    p = _p(row.p_value)
    if row.p_adjusted is not None and row.p_adjusted != row.p_value:
        p += f", {_p(row.p_adjusted)} corrected"
    return p if row.significant else f"not significant ({p})"


def _p(value: float) -> str:
    return "p<0.001" if value < 0.001 else f"p={value:.3f}"


def _tables(comparison: Comparison) -> list[tuple[str, list[str], list[tuple[list[str], Row]]]]:
    """One table per (group, variant): its title, the key columns that vary, and its rows."""
    tables: dict[tuple, list[Row]] = {}
    for row in comparison.rows:
        tables.setdefault((row.group, row.variant), []).append(row)
    out = []
    for (group, variant), rows in tables.items():
        cols = [("Server", "server"), ("Clients", "point"), ("Pool", "pool")]
        varying = [(name, attr) for name, attr in cols if len({getattr(r, attr) for r in rows}) > 1]
        fixed = [(name, attr) for name, attr in cols if (name, attr) not in varying and getattr(rows[0], attr)
                 is not None]
        title = (f"{group}: {variant}" if group and group != variant else variant)
        details = [f"{rows[0].point} clients" if attr == "point" else f"{name.lower()} {getattr(rows[0], attr)}"
                   for name, attr in fixed]
        title += f" ({', '.join(details)})" if details else ""
        body = [([("–" if getattr(r, attr) is None else str(getattr(r, attr))) for _, attr in varying], r)
                for r in rows]
        out.append((title, [name for name, _ in varying], body))
    return out


def _run_line(role: str, info: RunInfo) -> str:
    servers = ", ".join(info.servers) or "?"
    repeats = f"{info.repeats} repeat{'s' if info.repeats != 1 else ''}"
    return (f"{role}: {info.path.name}, {info.scenario}{' (quick)' if info.quick else ''}, server {servers}, "
            f"{repeats}, host {info.host}, status {info.status}")


def _gate_line(comparison: Comparison) -> str:
    s = comparison.summary
    if not s.gated:
        return "No --fail-above threshold: nothing gated."
    if not s.regressions:
        return f"No regressions beyond the thresholds ({s.compared} metrics compared)."
    untested = f", {s.untested_regressions} untested ({REPEAT_HINT})" if s.untested_regressions else ""
    return f"{s.regressions} regression{'s' if s.regressions != 1 else ''} beyond the thresholds{untested}."


def regression_text(row: Row) -> str:
    p = "untested" if row.significant is None else significance_cell(row)
    return (f"{row.where}: {row.metric} {num(row.baseline.mean)} → {num(row.contender.mean)} "
            f"({change_cell(row)}, threshold {row.threshold:g}%; {p})")


def terminal(comparison: Comparison, console) -> None:
    b, c = comparison.baseline, comparison.contender
    console.print(f"[bold]Compare: {escape(b.scenario)}[/bold]" + (f" ({escape(b.title)})" if b.title else ""))
    for role, info in (("baseline", b), ("contender", c)):
        console.print("  " + escape(_run_line(role, info)), highlight=False)
    console.print(f"  [dim]{escape(legend(comparison))}[/dim]", highlight=False)
    for title, cols, body in _tables(comparison):
        table = Table(title=escape(title), title_justify="left", header_style="bold")
        for name in cols:
            table.add_column(name)
        table.add_column("Metric")
        for name in ("Baseline", "Contender", "Change"):
            table.add_column(name, justify="right")
        table.add_column("Significance")
        table.add_column("Verdict")
        for keys, row in body:
            colour = {Way.BETTER: "green", Way.WORSE: "red"}.get(row.verdict)
            change = escape(change_cell(row))
            if colour:
                change = f"[{colour}]{change}[/{colour}]"
            if row.significant is False:
                change = f"[dim]{change}[/dim]"
            label = escape(row.label)
            if row.regression:
                label = f"[bold red]{label}[/bold red]"
            elif row.significant is False or row.verdict is Way.NEUTRAL:
                label = f"[dim]{label}[/dim]"
            table.add_row(*[escape(k) for k in keys], escape(row.metric), value_cell(row.baseline),
                          value_cell(row.contender), change, escape(significance_cell(row)), label)
        console.print(table)
    colour = "red" if comparison.regressions else "green"
    console.print(f"[{colour}]{escape(_gate_line(comparison))}[/{colour}]", highlight=False)
    for row in comparison.regressions:
        console.print("  [red]regression:[/red] " + escape(regression_text(row)), highlight=False)


def markdown(comparison: Comparison) -> str:
    b, c = comparison.baseline, comparison.contender
    out = [f"## concurbench compare: {b.scenario}", ""]
    out += [f"- {_md(_run_line(role, info))}" for role, info in (("Baseline", b), ("Contender", c))]
    out += ["", f"_{_md(legend(comparison))}_", ""]
    for title, cols, body in _tables(comparison):
        out += [f"### {_md(title)}", ""]
        out.append("| " + " | ".join(cols + ["Metric", "Baseline", "Contender", "Change", "Significance"]) + " |")
        out.append("|" + "---|" * len(cols) + "---|---:|---:|---:|---|")
        for keys, row in body:
            change = f"{change_cell(row)} {row.label}"
            change = f"**{change}**" if row.regression else change
            out.append("| " + " | ".join(_md(x) for x in keys + [row.metric, value_cell(row.baseline),
                                                                   value_cell(row.contender)])
                       + f" | {_md(change)} | {_md(significance_cell(row))} |")
        out.append("")
    out += ["**Regressions**", "", _gate_line(comparison), ""]
    out += [f"- {_md(regression_text(row))}" for row in comparison.regressions]
    if comparison.regressions:
        out.append("")
    if comparison.warnings:
        out += ["**Warnings**", ""] + [f"- {_md(w)}" for w in comparison.warnings] + [""]
    return "\n".join(out)


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_json(comparison: Comparison) -> str:
    return json.dumps(comparison.as_dict(), indent=2)


def junit(comparison: Comparison) -> str:
    """JUnit XML: one testcase per compared metric, a failure for each regression."""
    rows = comparison.rows
    suite = ET.Element("testsuite", name="concurbench-compare", tests=str(len(rows)),
                       failures=str(len(comparison.regressions)), errors="0", skipped="0")
    for row in rows:
        classname = (f"{comparison.baseline.scenario}.{row.variant}" + (f"@{row.point}" if row.point is not None
                     else "") + f"/{row.pool}" + (f":{row.server}" if row.server else ""))
        case = ET.SubElement(suite, "testcase", classname=classname, name=row.metric, time="0")
        detail = (f"baseline {value_cell(row.baseline)} (n={row.baseline.n}), contender "
                  f"{value_cell(row.contender)} (n={row.contender.n}), change {change_cell(row)}, "
                  f"{significance_cell(row)}, {row.label}")
        if row.regression:
            failure = ET.SubElement(case, "failure", type="regression", message=regression_text(row))
            failure.text = detail
        else:
            ET.SubElement(case, "system-out").text = detail
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
