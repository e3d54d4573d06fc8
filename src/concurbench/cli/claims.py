"""`claims`: every scenario's claims checked on every server version, as one table (Markdown and HTML).

Exit codes, as `run --check`: 0 every claim passed everywhere, 1 a run failed, 2 usage, 3 a claim
failed somewhere, 4 a claim was left undecided somewhere (inconclusive, or not evaluated).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..engines.registry import SPECS
from .. import api
from ..api import Target
from ..check import CheckPolicy
from ..check.rounds import DEFAULT_MAX_REPEATS, parse_budget
from ..errors import ConfigError
from ..report.html import report_page
from ..report.render import markdown
from .console import err
from .exits import EXIT_HISTORY_NOT_ADDED, EXIT_RUN_FAILED, check_exit_code
from .history import add_to_history, history_options, parse_labels
from .options import target_options
from .progress import Progress


DEFAULT_VERSIONS = "; ".join(f"{s.display} {','.join(s.versions)}" for s in SPECS.values())


@click.command(name="claims")
@click.argument("scenarios", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--from", "stored", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              metavar="RUN_DIR", help="Build the table from stored runs instead of running the scenarios.")
@target_options(default=api.CLAIMS_TARGET, versions_help=(
    "The server versions every scenario runs on, side by side [default: the scenario's server.versions on docker "
    f"and binaries, else the engine's: {DEFAULT_VERSIONS}; the dsn target's server is the one version]."))
@click.option("--quick", is_flag=True, help="Use the scenarios' `quick` forms.")
@click.option("--max-repeats", type=click.IntRange(min=2), default=DEFAULT_MAX_REPEATS, show_default=True,
              help="The most runs of a variant point the check may take to decide a claim.")
@click.option("--check-budget", default="30m", show_default=True, metavar="DURATION",
              help="Time budget of each scenario's check.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where the run directories are written.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the table as Markdown to FILE (default: standard output).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the table as one self-contained HTML page.")
@history_options
def claims(scenarios: tuple[Path, ...], stored: tuple[Path, ...], target: Target, quick: bool, max_repeats: int,
           check_budget: str, out_dir: Path, output: Path | None, html_file: Path | None, history: str | None,
           labels: tuple[str, ...]) -> None:
    """Check every SCENARIO's claims on every server version and write one claims-by-version table."""
    run_labels = parse_labels(labels)
    not_added = []

    def after(run, error) -> None:
        if history is not None and run.path is not None and not add_to_history(history, run.path, run_labels):
            not_added.append(run.path)
        if error is not None:
            err.print(f"[red]error:[/red] {run.scenario.name}: {error.message}", highlight=False, soft_wrap=True)

    progress = Progress(err)
    try:
        table = api.claims(scenarios, stored=stored, target=target, quick=quick, out_dir=out_dir, listener=progress,
                           check=CheckPolicy(max_repeats, parse_budget(check_budget)) if scenarios else None,
                           on_run=after,
                           command="concurbench claims " + " ".join(sys.argv[2:]))
    finally:
        progress.close()
    _write(output, markdown(table.report).rstrip("\n") + "\n")
    if html_file is not None:
        _write(html_file, report_page(table.report))
    code = check_exit_code(table.verdicts)
    if table.errors:
        sys.exit(EXIT_RUN_FAILED)
    if code:
        sys.exit(code)
    if not_added:
        sys.exit(EXIT_HISTORY_NOT_ADDED)


def _write(path: Path | None, text: str) -> None:
    if path is None:
        click.echo(text, nl=False)
        return
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the table: {exc}", cause=exc) from exc
    err.print(f"wrote {path}", highlight=False, soft_wrap=True)
