"""Commands over stored run directories: `report` renders one again, `results` lists them."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..errors import ConcurbenchError, ConfigError
from ..report.html import NO_MATPLOTLIB, html_page
from ..report.render import markdown, terminal
from ..report.tables import build_report
from ..results import frame
from ..results.model import Run, RunStatus
from ..results.store import csv_text, load_run
from ..stats import Verdict
from .console import err, out


@click.command(name="report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "md", "csv", "json", "html"]), default="table",
              show_default=True, help="table: the terminal tables; md: Markdown; csv: summary rows; json: the "
              "summary; html: one self-contained page with the tables and the charts.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report to FILE instead of standard output.")
@click.option("--plots", is_flag=True, help="Also write charts (PNG and SVG) under RUN_DIR/plots/.")
def report(run_dir: Path, fmt: str, output: Path | None, plots: bool) -> None:
    """Render a stored run again."""
    run = load_run(run_dir)
    text = ""
    if fmt == "html":
        text = _html(run)
        plots = False  # written for the page already
    elif fmt == "table":
        if output is None:
            terminal(build_report(run), out)
        else:
            text = _table_text(build_report(run))
    elif fmt == "md":
        text = markdown(build_report(run)) + "\n"
    elif fmt == "csv":
        text = csv_text(run)
    else:
        text = json.dumps(run.as_dict(), indent=2, default=str) + "\n"
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{output}: cannot write the report: {exc}", cause=exc) from exc
        err.print(f"wrote {output}", highlight=False, soft_wrap=True)
    elif fmt != "table":
        click.echo(text, nl=False)
    if plots:
        write_and_list_plots(run_dir)


def _table_text(rep) -> str:
    """The terminal tables as plain text, 200 columns wide, for a file."""
    buffer = io.StringIO()
    terminal(rep, Console(file=buffer, width=200, highlight=False, color_system=None))
    return buffer.getvalue()


def _html(run: Run) -> str:
    """The page, with the charts written first under RUN_DIR/plots/ (without them, saying why, where matplotlib is
    missing: an install that left out concurbench's dependencies)."""
    if importlib.util.find_spec("matplotlib") is None:
        err.print(f"[yellow]no charts:[/yellow] {NO_MATPLOTLIB}", highlight=False, soft_wrap=True)
        return html_page(run, plots=None)
    try:
        from ..report.plots import write_plots  # charts need matplotlib and pandas: loaded when drawn

        paths = write_plots(run.path)
    except ConcurbenchError as exc:
        err.print(f"[yellow]no charts:[/yellow] {exc.message}", highlight=False, soft_wrap=True)
        return html_page(run, plots=None, no_charts_reason=exc.message)
    err.print(f"{chart_count(paths)} in {run.path / 'plots'}", highlight=False, soft_wrap=True)
    return html_page(run, plots=paths)


def write_and_list_plots(run_dir: Path) -> None:
    from ..report.plots import write_plots  # as in _html

    paths = write_plots(run_dir)
    err.print(f"{chart_count(paths)} in {run_dir / 'plots'}", highlight=False, soft_wrap=True)


@click.command(name="results")
@click.argument("directories", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="table: one line per run; csv, json: the tidy metric rows of every run (one row per run, "
              "server, variant, point, pool, repeat and metric), the run directory as the first column.")
def results(directories: tuple[Path, ...], fmt: str) -> None:
    """List the stored runs under DIRECTORY... (default ./results); a DIRECTORY may also be one run."""

    found = _run_dirs(directories or (Path("results"),))
    if fmt == "table":
        _list_runs(found, directories or (Path("results"),), out)
        return
    runs = []
    for path in found:
        try:
            runs.append((path, load_run(path)))
        except ConfigError as exc:
            err.print(f"[yellow]skipped:[/yellow] {exc.message}", highlight=False, soft_wrap=True)
    rows = frame.of_runs(runs)
    if fmt == "csv":
        click.echo(rows.to_csv(index=False), nl=False)
    else:  # through pandas' JSON for its nulls (NaN, <NA>), then plain json for readable paths
        click.echo(json.dumps(json.loads(rows.to_json(orient="records")), indent=2))


def _run_dirs(directories: tuple[Path, ...]) -> list[Path]:
    """The run directories in or under each of `directories`, in name (time) order, each once."""
    found: list[Path] = []
    for directory in directories:
        if (directory / "manifest.json").is_file():
            candidates = [directory]
        else:
            candidates = sorted(p.parent for p in directory.glob("*/manifest.json")) if directory.is_dir() else []
        found.extend(p for p in candidates if p not in found)
    return found


def _list_runs(runs: list[Path], directories: tuple[Path, ...], out) -> None:
    table = Table("when (UTC)", "scenario", "target", "server", "variants", "status", "claims", "directory")
    notes = []
    for path in runs:
        try:
            run = load_run(path)
        except ConfigError as exc:
            table.add_row("?", "?", "?", "?", "?", "unreadable", "", str(path))
            notes.append(f"unreadable: {exc.message}")
            continue
        servers = ", ".join(s.version_short for s in run.servers) or "–"
        passed = sum(1 for c in run.claims if c.verdict is Verdict.PASS)
        table.add_row(run.started[:19].replace("T", " "), run.scenario.name + (" (quick)" if run.scenario.quick else ""),
                      str(run.target), servers, str(len({r.variant for r in run.variant_runs})), run.status,
                      f"{passed}/{len(run.claims)}" if run.claims else "–", str(path))
        if run.status in (RunStatus.RUNNING, RunStatus.KILLED):  # say what finished: the directory keeps it
            finished = ", ".join(r.label for r in run.variant_runs) or "none"
            notes.append(f"{run.status}: {path}: {run.error}; finished: {finished}")
    out.print(table)
    for note in notes:
        out.print(note, highlight=False, soft_wrap=True)
    if not runs:
        out.print(f"no runs under {', '.join(map(str, directories))}")


def chart_count(paths: list[Path]) -> str:
    """`N charts` (image files), and the over-time tables written beside them when there are any."""
    tables = sum(1 for p in paths if p.suffix == ".csv")
    return f"{len(paths) - tables} charts" + (f" and {tables} over-time tables" if tables else "")
