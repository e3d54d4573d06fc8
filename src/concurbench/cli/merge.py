"""`merge`: the run directories of `run --shard I/N` joined into one run directory.

Exit codes: 0 merged, 1 merged but a shard's run did not end ok, 2 refused or bad usage; with
`--check`, 3 when a claim fails on the merged data and 4 when one is undecided (as `run --check`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from ..results.model import RunStatus
from ..running.merge import merge_shards
from ..report.render import terminal
from .console import err, out
from .exits import EXIT_RUN_FAILED, check_exit_code


@click.command(name="merge")
@click.argument("shard_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The merged run directory to write (a new or empty directory).")
@click.option("--partial", is_flag=True,
              help="Merge although some shards are missing (with a warning naming them).")
@click.option("--check", is_flag=True,
              help="Exit 3 when a claim fails on the merged data, 4 when one is undecided (one look at all of it).")
@click.option("--scenario", "scenario_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The scenario file, when it is not where the shards ran it (it must be the same file: the "
                   "SHA-256 is checked). Needed only to judge claims.")
def merge(shard_dirs: tuple[Path, ...], out_dir: Path, partial: bool, check: bool,
          scenario_file: Path | None) -> None:
    """Join SHARD_DIRS, the run directories of `concurbench run --shard I/N` of one run, into one run
    directory that report, compare and claim checks read as one run; its claims are judged on the data of
    every shard. The last line printed is the merged run directory."""
    outcome = merge_shards(list(shard_dirs), out_dir, partial=partial, scenario_file=scenario_file)
    run = outcome.run
    for warning in outcome.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}", markup=True, highlight=False, soft_wrap=True)
    if run.variant_runs:
        terminal(outcome.report, out)
    if run.status != RunStatus.OK:
        err.print(f"[red]error:[/red] a shard's run ended {run.status}: {escape(run.error or '')}",
                  highlight=False, soft_wrap=True)
    code = check_exit_code(run.claims) if check and run.status == RunStatus.OK else None
    out.print(str(run.path), soft_wrap=True)
    if run.status != RunStatus.OK:
        sys.exit(EXIT_RUN_FAILED)
    if code:
        sys.exit(code)
