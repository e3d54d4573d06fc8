"""`validate` and `list`: scenario files checked and listed without touching a server."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from ..errors import ConfigError
from ..running.guards import check_scenario
from ..samplers.registry import SAMPLERS
from ..running.load import load_scenario
from .console import err, out
from .exits import EXIT_USAGE


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--quick", is_flag=True, help="Validate with the `quick` overrides applied as well.")
def validate(files: tuple[Path, ...], quick: bool) -> None:
    """Check scenario files without touching a server; report every problem with file, line and field.
    A variant that would open more sessions than the server's max_connections, this machine's open-file
    limit or its memory allow is a problem too (for the default target and worker processes)."""
    failed = False
    for file in files:
        for q in sorted({False, quick}):
            try:
                s = load_scenario(file, quick=q)
                check_scenario(s)
            except ConfigError as exc:
                failed = True
                err.print(exc.message, highlight=False, soft_wrap=True)
                break
        else:
            points = sum(len(v.sweep) for v in s.variants)
            out.print(f"ok: {file} ({s.name}: {len(s.variants)} variants, {points} runs)")
    if failed:
        sys.exit(EXIT_USAGE)


@click.command(name="list")
@click.argument("path", required=False, type=click.Path(path_type=Path), default=Path("scenarios"))
@click.option("--samplers", "show_samplers", is_flag=True, help="List the samplers scenarios can name.")
def list_(path: Path, show_samplers: bool) -> None:
    """List the scenarios under PATH (default ./scenarios), or the samplers."""
    if show_samplers:
        table = Table("sampler", "engine", "kind", "what it reads")
        for name, cls in SAMPLERS.items():
            table.add_row(name, cls.engine, cls.kind, cls.description)
        out.print(table)
        return

    files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
    table = Table("file", "name", "engine", "variants", "title")
    for file in files:
        try:
            s = load_scenario(file)
            table.add_row(str(file), s.name, s.engine, ", ".join(v.name for v in s.variants), s.title)
        except ConfigError as exc:
            table.add_row(str(file), "[red]invalid[/red]", "", "", f"{len(exc.problems) or 1} problem(s)")
    out.print(table)
