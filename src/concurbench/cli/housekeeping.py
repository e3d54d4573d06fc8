"""Housekeeping commands: `doctor` (what this machine can use) and `gc` (clean up after killed runs)."""

from __future__ import annotations

import sys
from enum import StrEnum

import click
from rich.table import Table

from ..errors import ConfigError
from ..housekeeping import gc, remote
from ..housekeeping.gc import GcOutcome
from ..housekeeping.doctor import run_checks
from ..provisioners.base import home_dir
from ..provisioners.dsn import engine_of
from ..provisioners.registry import DSN, TargetOptions, make_provisioner
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


class Where(StrEnum):
    """What `gc --target` cleans up: this machine's leftovers, or what killed runs left on a server concurbench does
    not own."""

    LOCAL = "local"
    DSN = DSN.name


@click.command(name="gc")
@click.option("--dry-run", is_flag=True, help="List what would be removed, and remove nothing.")
@click.option("--force", is_flag=True, help="Also stop servers whose run is still going.")
@click.option("--target", type=click.Choice([w.value for w in Where]), default=Where.LOCAL.value, show_default=True,
              help="local: this machine's servers, containers and caches; dsn: what killed runs left on the server "
                   "--dsn names (listed; removed with --yes).")
@click.option("--dsn", default=None, help="Connection URL or string of the server (--target dsn).")
@click.option("--password-env", default=None, metavar="VAR", help="Take the password from this environment variable.")
@click.option("--engine", type=click.Choice(["postgres", "mssql"]), default=None,
              help="The dsn server's engine (default: from the form of --dsn).")
@click.option("--yes", is_flag=True, help="--target dsn: remove what is listed (without it, gc only lists).")
def gc_command(dry_run: bool, force: bool, target: str, dsn: str | None, password_env: str | None,
               engine: str | None, yes: bool) -> None:
    """Stop servers and remove containers left by killed runs, and half-written cache folders; with --target dsn,
    list (and with --yes remove) what killed runs left on a server concurbench does not own."""
    where_to = Where(target)
    if where_to is Where.DSN:
        sweeper = dsn_sweeper(dsn, password_env, engine)
        actions = remote.collect(sweeper, remove=yes and not dry_run)
        where = sweeper.safe
    else:
        actions = gc.collect(dry_run=dry_run, force=force)
        where = str(home_dir())
    if not actions:
        out.print(f"nothing to clean up on {where}" if where_to is Where.DSN else f"nothing to clean up under {where}")
        return
    for action in actions:
        notes = f" ({'; '.join(action.notes)})" if action.notes else ""
        out.print(f"{action.outcome}: {action.kind} {action.name}: {action.detail}{notes}", soft_wrap=True)
    if where_to is Where.DSN and not yes:
        out.print("nothing was removed: add --yes to remove what is listed")
    if any(a.outcome is GcOutcome.FAILED for a in actions):
        sys.exit(1)


def dsn_sweeper(dsn: str | None, password_env: str | None, engine: str | None) -> remote.Sweeper:
    """The dsn provisioner of the server --dsn names, for its leftovers (ConfigError without --dsn)."""
    if not dsn:
        raise ConfigError("gc --target dsn needs --dsn: the server to look at (a postgresql:// or mssql:// URL, or a "
                          "connection string)")
    options = TargetOptions(target=DSN.name, dsn=dsn, password_env=password_env)
    return make_provisioner(engine or engine_of(dsn), {}, options)
