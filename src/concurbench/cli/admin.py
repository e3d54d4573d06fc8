"""Housekeeping commands: `doctor` (what this machine can use) and `gc` (clean up after killed runs)."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from ..housekeeping import gc
from ..housekeeping.doctor import run_checks
from ..provisioners.base import home_dir
from .console import out


@click.command()
@click.option("--offline", is_flag=True, help="Skip the network check (PyPI for new PostgreSQL majors).")
def doctor(offline: bool) -> None:
    """Show what this machine can run (embedded, binaries, Docker, ODBC) and how to fix what is missing."""
    checks = run_checks(network=not offline)
    table = Table(title=f"concurbench doctor (home {home_dir()})", title_justify="left")
    for column in ("Check", "Status", "Detail", "Fix"):
        table.add_column(column, overflow="fold")
    for check in checks:
        table.add_row(check.name, "[green]ok[/green]" if check.ok else "[red]no[/red]", check.detail, check.fix)
    out.print(table)
    missing = sum(not c.ok for c in checks)
    out.print(f"{len(checks) - missing} of {len(checks)} checks ok" + (f"; see the Fix column for the other "
                                                                       f"{missing}" if missing else ""))


@click.command(name="gc")
@click.option("--dry-run", is_flag=True, help="List what would be removed, and remove nothing.")
@click.option("--force", is_flag=True, help="Also stop servers whose run is still going.")
def gc_command(dry_run: bool, force: bool) -> None:
    """Stop servers and remove containers left by killed runs, and half-written cache folders."""
    actions = gc.collect(dry_run=dry_run, force=force)
    if not actions:
        out.print(f"nothing to clean up under {home_dir()}")
        return
    for action in actions:
        notes = f" ({'; '.join(action.notes)})" if action.notes else ""
        out.print(f"{action.outcome}: {action.kind} {action.name}: {action.detail}{notes}", soft_wrap=True)
    if any(a.outcome == "failed" for a in actions):
        sys.exit(1)
