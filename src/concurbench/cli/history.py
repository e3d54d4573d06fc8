"""`history`: a store of runs over time, their series and change points, and a CI gate on them.

    concurbench history add RUN_DIR... [--store S] [--label KEY=VALUE ...]
    concurbench history show [--store S] [--scenario NAME] [--metric GLOB] [--order time|version] [--format F]
    concurbench history check [--store S] [--newest K] [--junit FILE] [--summary FILE]

`add` lives here, `show` and `check` in history_report.py (imported when called: `add` stays well under
a second). Exit codes: 0 fine, 1 `check` found a regression, 2 bad input (a path that is not a run
directory, a store that cannot be read or written).
"""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import ConfigError
from ..history.records import read_run
from ..history.store import DEFAULT_STORE, open_store, shown
from .console import err, out
from .lazy import LazyGroup

STORE_HELP = f"The history store: an SQLite file (default {DEFAULT_STORE} here) or a postgresql:// URL."


def parse_pairs(values: tuple[str, ...], what: str, allowed: tuple[str, ...] | None = None) -> dict[str, str]:
    """KEY=VALUE options as a dict; a ConfigError names the one that is not of that form."""
    out_: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} {text!r}: expected KEY=VALUE")
        value = value.strip()
        if allowed is not None and value not in allowed:
            raise ConfigError(f"{what} {text!r}: the value must be one of {', '.join(allowed)}")
        out_[key.strip()] = value
    return out_


def add_runs(store: str | None, run_dirs, labels: dict[str, str]) -> list[tuple[str, bool, int]]:
    """Read every run directory first (a bad one stops all before anything is written), then add each in
    its own transaction: (run id, added, points) per run."""
    read = [read_run(path, labels) for path in run_dirs]
    done = []
    with open_store(store, create=True) as s:
        for record, points in read:
            done.append((record.run_id, s.add(record, points), len(points)))
    return done


def add_to_history(store: str, run_dir: Path, labels: dict[str, str]) -> None:
    """`run --history` and `claims --history`: add the run that just ended; a failure is reported, and the run
    directory stays as it is."""
    try:
        for run_id, added, points in add_runs(store, [run_dir], labels):
            err.print(f"history: {'added' if added else 'already held'} {run_id} ({points} figures) in "
                      f"{shown(store)}", highlight=False, soft_wrap=True)
    except ConfigError as exc:
        err.print(f"[yellow]history:[/yellow] the run was not added: {exc.message}", highlight=False, soft_wrap=True)


def history_options(func):
    """`run` and `claims`: add the run to a history store when it ends."""
    func = click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
                        help="With --history: a label kept with the run (branch, CI run id); repeatable.")(func)
    return click.option("--history", default=None, metavar="PATH|URL",
                        help="Add the run to this history store when it ends (`concurbench history`).")(func)


@click.group(name="history", cls=LazyGroup,
             where={"add": "history:add", "show": "history_report:show", "check": "history_report:check"})
def history() -> None:
    """Runs over time: a store of runs, the change points of every series, and a CI gate on them."""


@click.command(name="add")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="A label kept with the run (branch, CI run id, a server build's commit); repeatable.")
def add(run_dirs: tuple[Path, ...], store: str | None, labels: tuple[str, ...]) -> None:
    """Add RUN_DIRs (run directories, merged shards included) to the history store. A run already there
    changes nothing; every run is added in one transaction of its own."""
    for run_id, added, points in add_runs(store, run_dirs, parse_pairs(labels, "--label")):
        out.print(f"{'added' if added else 'already held'}: {run_id} ({points} figures)", highlight=False)
