"""`concurbench probe`, and the probe `run --probe` starts with: probe each server of the target (api.probe,
which builds them without the scenario's settings), print one table per server and write them all as JSON.

The JSON file: {"format": "concurbench-probe/1", "ok": bool, "probes": [one report per server]}; each
report names the scenario, target, connection (never a password), server version, elapsed seconds
and its checks, each {"check", "status" (ok | failed | skipped), "server_says", "fix"}."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.table import Table

from .. import api
from ..api import Target
from ..errors import ConcurbenchError
from ..probe import ProbeReport
from ..probe.report import FORMAT
from ..running.load import load_scenario
from .console import err, out
from .exits import EXIT_RUN_FAILED
from .options import parse_params, target_options
from .progress import Progress

STATUS = {"ok": "[green]ok[/green]", "failed": "[red]failed[/red]", "skipped": "[yellow]skipped[/yellow]"}


def default_json(out_dir: Path, name: str) -> Path:
    return out_dir / f"probe-{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"


def probe_all(model, *, target: Target, variants, json_path: Path) -> bool:
    """Probe every server the run would use (api.probe); print the tables and write the JSON; True when nothing
    failed. ConfigError (a bad option) before any server is touched."""
    progress = Progress(err)
    try:
        reports = api.probe(model, target=target, variants=variants, listener=progress)
    finally:
        progress.close()
    for report in reports:
        show(report)
    good = all(r.ok for r in reports)
    try:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"format": FORMAT, "ok": good, "probes": [r.as_dict() for r in reports]},
                                        indent=2) + "\n")
    except OSError as exc:
        raise ConcurbenchError(f"cannot write the probe's JSON to {json_path}: {exc.strerror or exc}", exc) from exc
    out.print(str(json_path), soft_wrap=True)
    return good


def show(report: ProbeReport) -> None:
    where = ", ".join(filter(None, (report.connection, f"server {report.server}" if report.server else "")))
    table = Table(title=f"probe of {report.scenario} on {report.target} ({where})", title_justify="left")
    for column in ("Check", "Status", "Server says", "Fix"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(check.check, STATUS.get(check.status, check.status), check.server_says, check.fix)
    out.print(table)
    count = {status: sum(c.status == status for c in report.checks) for status in STATUS}
    out.print(f"{count['ok']} ok, {count['skipped']} skipped (not tried, see why), {count['failed']} failed"
              + (" (see the Fix column)" if count["failed"] else "") + f", in {report.elapsed_s:.1f} s", highlight=False)


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--quick", is_flag=True, help="Probe the scenario with its `quick` overrides.")
@target_options()
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Override a scenario parameter.")
@click.option("--variant", "variants", multiple=True, metavar="NAME", help="Probe only these variants.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the table as JSON to FILE [default: OUT/probe-SCENARIO-TIME.json].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where the JSON goes when --json is not given.")
def probe(scenario: Path, quick: bool, target: Target, params: tuple[str, ...], variants: tuple[str, ...],
          json_path: Path | None, out_dir: Path) -> None:
    """Check in about a minute, with no load, that SCENARIO can run on the target: connect, read each
    sampler, start and stop each background session, run the setup and probe queries in a transaction
    that is rolled back, plan the server settings without applying them, check permissions and count the
    connections the run opens at once against what the server gives. Prints one table; the last line is
    the JSON file. Exit 1 when a check failed; nothing is left on the server."""
    model = load_scenario(scenario, quick=quick, overrides=parse_params(params))
    json_path = json_path or default_json(out_dir, model.name)
    if not probe_all(model, target=target, variants=variants, json_path=json_path):
        sys.exit(EXIT_RUN_FAILED)
