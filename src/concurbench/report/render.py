"""Render a Report as Markdown (for blog posts and report.md) or as rich tables on a terminal."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table as RichTable

from ..results.model import Run
from .tables import Report, build_report

REPORT_MD = "report.md"


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def numeric_columns(table) -> list[bool]:
    """A column is right-aligned when every filled cell of it reads as a number."""
    out = []
    for i, _ in enumerate(table.columns):
        cells = [str(r[i]) for r in table.rows if str(r[i]) not in ("", "–")]
        out.append(bool(cells) and all(c[:1].isdigit() or c[:1] == "-" for c in cells))
    return out


def markdown(report: Report) -> str:
    out = [f"# {report.title}", ""]
    out += [f"- {line}" for line in report.lines]
    out.append("")
    for table in report.tables:
        if not table.rows:
            continue
        out += [f"## {table.title}", ""]
        out.append("| " + " | ".join(table.columns) + " |")
        out.append("|" + "|".join("---:" if num else "---" for num in numeric_columns(table)) + "|")
        for row in table.rows:
            out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
        out.append("")
        for note in table.notes:
            out += [f"_{note}_", ""]
    if report.warnings:
        out += ["## Warnings", ""] + [f"- {w}" for w in report.warnings] + [""]
    return "\n".join(out)


def write_report(run: Run, report: Report) -> Path:
    """Write `report` (the run's, as printed) as report.md into the run's directory."""
    path = Path(run.path) / REPORT_MD
    path.write_text(markdown(report), encoding="utf-8")
    return path


class RunReport:
    """The Report of one run, built once, the first time it is asked for; report.md is written from it and
    the terminal prints it. `write` fits the store's `save_run(run, also=...)`, so the tables are built
    after the data are written; a run the store moved to its fallback directory has the same tables
    (they do not show the run's directory)."""

    def __init__(self) -> None:
        self.report: Report | None = None

    def of(self, run: Run) -> Report:
        if self.report is None:
            self.report = build_report(run)
        return self.report

    def write(self, run: Run) -> Path:
        return write_report(run, self.of(run))


def terminal(report: Report, console) -> None:
    console.print(f"[bold]{report.title}[/bold]")
    for line in report.lines:
        console.print(f"  {line}", highlight=False)
    for table in report.tables:
        if not table.rows:
            continue
        rt = RichTable(title=table.title, title_justify="left", header_style="bold")
        for col, num in zip(table.columns, numeric_columns(table)):
            rt.add_column(col, justify="right" if num else "left", overflow="fold")
        for row in table.rows:
            rt.add_row(*[str(c) for c in row])
        console.print(rt)
        for note in table.notes:
            console.print(f"  [dim]{note}[/dim]", highlight=False)
    for w in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
