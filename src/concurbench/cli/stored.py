"""Commands over stored run directories: `report` renders one again, `results` lists them."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import ConfigError


def _load(run_dir: Path):
    from ..results.store import load_run

    if not (run_dir / "manifest.json").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no manifest.json)")
    try:
        return load_run(run_dir)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{run_dir}: cannot read the run: {exc}") from exc


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
    from ..report.render import markdown, terminal
    from ..report.tables import build_report
    from .main import err, out

    manifest, summary = _load(run_dir)
    text = ""
    if fmt == "html":
        text = _html(run_dir, manifest, summary)
        plots = False  # written for the page already
    elif fmt == "table":
        if output is None:
            terminal(build_report(manifest, summary), out)
        else:
            text = _table_text(build_report(manifest, summary))
    elif fmt == "md":
        text = markdown(build_report(manifest, summary)) + "\n"
    elif fmt == "csv":
        text = (run_dir / "summary.csv").read_text()
    else:
        text = json.dumps({"manifest": manifest, **summary}, indent=2) + "\n"
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
    import io

    from rich.console import Console

    from ..report.render import terminal

    buffer = io.StringIO()
    terminal(rep, Console(file=buffer, width=200, highlight=False, color_system=None))
    return buffer.getvalue()


def _html(run_dir: Path, manifest: dict, summary: dict) -> str:
    """The page, with the charts written first under RUN_DIR/plots/ when matplotlib is there."""
    import importlib.util

    from ..errors import ConcurbenchError
    from ..report.html import NO_MATPLOTLIB, html_page
    from ..report.plots import write_plots
    from .main import err

    if importlib.util.find_spec("matplotlib") is None:
        err.print(f"[yellow]no charts:[/yellow] {NO_MATPLOTLIB}", highlight=False, soft_wrap=True)
        return html_page(run_dir, manifest, summary, plots=None)
    try:
        paths = write_plots(run_dir)
    except ConcurbenchError as exc:
        err.print(f"[yellow]no charts:[/yellow] {exc.message}", highlight=False, soft_wrap=True)
        return html_page(run_dir, manifest, summary, plots=None, no_charts_reason=exc.message)
    err.print(f"{len(paths)} charts in {run_dir / 'plots'}", highlight=False, soft_wrap=True)
    return html_page(run_dir, manifest, summary, plots=paths)


def write_and_list_plots(run_dir: Path) -> None:
    from ..report.plots import write_plots
    from .main import err

    paths = write_plots(run_dir)
    err.print(f"{len(paths)} charts in {run_dir / 'plots'}", highlight=False, soft_wrap=True)


@click.command(name="results")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path),
                default=Path("results"))
def results(directory: Path) -> None:
    """List the stored runs under DIRECTORY (default ./results)."""
    from rich.table import Table

    from .main import out

    table = Table("when (UTC)", "scenario", "target", "server", "variants", "status", "claims", "directory")
    runs = sorted(p for p in directory.glob("*/manifest.json")) if directory.is_dir() else []
    for path in runs:
        try:
            manifest = json.loads(path.read_text())
            summary = json.loads((path.parent / "summary.json").read_text())
        except (OSError, ValueError):
            table.add_row("?", "?", "?", "?", "?", "unreadable", "", str(path.parent))
            continue
        servers = ", ".join(s.get("version_short", "?") for s in manifest.get("servers") or []) or "–"
        claims = summary.get("claims") or []
        passed = sum(1 for c in claims if c["passed"])
        table.add_row(manifest.get("started", "")[:19].replace("T", " "), manifest["scenario"]["name"]
                      + (" (quick)" if manifest["scenario"].get("quick") else ""), str(manifest.get("target")),
                      servers, str(len({r["variant"] for r in summary.get("results", [])})), manifest.get("status", "?"),
                      f"{passed}/{len(claims)}" if claims else "–", str(path.parent))
    out.print(table)
    if not runs:
        out.print(f"no runs under {directory}")
