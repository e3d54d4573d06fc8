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
@click.option("--format", "fmt", type=click.Choice(["table", "md", "csv", "json"]), default="table",
              show_default=True, help="table: the terminal tables; md: Markdown; csv: summary rows; json: the summary.")
@click.option("--plots", is_flag=True, help="Also write charts (PNG and SVG) under RUN_DIR/plots/.")
def report(run_dir: Path, fmt: str, plots: bool) -> None:
    """Render a stored run again."""
    from ..report.render import markdown, terminal
    from ..report.tables import build_report
    from .main import out

    manifest, summary = _load(run_dir)
    if fmt == "table":
        terminal(build_report(manifest, summary), out)
    elif fmt == "md":
        click.echo(markdown(build_report(manifest, summary)))
    elif fmt == "csv":
        click.echo((run_dir / "summary.csv").read_text(), nl=False)
    else:
        click.echo(json.dumps({"manifest": manifest, **summary}, indent=2))
    if plots:
        write_and_list_plots(run_dir)


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
