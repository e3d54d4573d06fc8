"""`claims`: every scenario's claims checked on every server version, as one table (Markdown and HTML).

Exit codes, as `run --check`: 0 every claim passed everywhere, 1 a run failed, 2 usage, 3 a claim
failed somewhere, 4 a claim was left undecided somewhere (inconclusive, or not evaluated).
"""

from __future__ import annotations

import platform
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from ..check import CheckPolicy
from ..check.plan import DEFAULT_MAX_REPEATS, parse_budget
from ..errors import ConfigError
from ..provisioners.registry import make_provisioner
from ..report.by_version import claims_by_version
from ..report.html import report_page
from ..report.render import markdown
from ..results.store import load_run
from ..running.runner import Runner
from ..running.load import load_scenario
from .console import err
from .exits import EXIT_RUN_FAILED, check_exit_code
from .history import add_to_history, history_options, parse_pairs
from .options import dsn_options, target_of
from .progress import Progress

DEFAULT_VERSIONS = "14,15,16,17,18"


@click.command(name="claims")
@click.argument("scenarios", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--from", "stored", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              metavar="RUN_DIR", help="Build the table from stored runs instead of running the scenarios.")
@click.option("--server-version", "versions", default=None, metavar="V[,V...]",
              help="The server versions every scenario runs on, side by side [default: 14,15,16,17,18; the dsn "
                   "target's server is the one version].")
@click.option("--target", default="binaries", show_default=True, help="Where the servers come from.")
@dsn_options
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
def claims(scenarios: tuple[Path, ...], stored: tuple[Path, ...], versions: str | None, target: str, dsn: str | None,
           password_env: str | None, allow_server_changes: bool, server_settings: str, quick: bool, max_repeats: int,
           check_budget: str, out_dir: Path, output: Path | None, html_file: Path | None, history: str | None,
           labels: tuple[str, ...]) -> None:
    """Check every SCENARIO's claims on every server version and write one claims-by-version table."""
    run_labels = parse_pairs(labels, "--label")
    if bool(scenarios) == bool(stored):
        raise ConfigError("give scenario files to run, or --from RUN_DIR... to tabulate stored runs (not both)")
    if target == "dsn" and versions:
        raise ConfigError("--server-version does not apply to --target dsn: the server is the version it is")
    wanted = [v.strip() for v in (versions or DEFAULT_VERSIONS).split(",") if v.strip()] if target != "dsn" else [None]
    where = {"dsn": dsn, "password_env": password_env, "allow_server_changes": allow_server_changes,
             "server_settings": server_settings}
    runs, failed = [], False
    if stored:
        runs = [load_run(path) for path in stored]
    else:
        policy = CheckPolicy(max_repeats, parse_budget(check_budget))
        models = [load_scenario(path, quick=quick) for path in scenarios]  # every file checked before any run
        for model in models:
            run, error = _run(model, wanted, target, where, out_dir, policy)
            runs.append(run)
            if history is not None and run.path is not None:
                add_to_history(history, run.path, run_labels)
            if error is not None:
                failed = True
                err.print(f"[red]error:[/red] {model.name}: {error.message}", highlight=False, soft_wrap=True)
    host = runs[0].host if runs else {}
    cpu = ", ".join(str(x) for x in (host.get("cpu_model"), f"{host.get('cpu_count')} CPUs", host.get("machine")) if x)
    lines = [f"Made {_span(runs)} on {host.get('hostname') or platform.node()} ({cpu}), target "
             f"{runs[0].target if runs else target}" + (", quick forms" if any(r.scenario.quick for r in runs) else
                                                         ", full forms"),
             "Command: concurbench claims " + " ".join(sys.argv[2:])]
    report = claims_by_version(runs, lines=lines)
    text = markdown(report).rstrip("\n") + "\n"
    _write(output, text)
    if html_file is not None:
        _write(html_file, report_page(report))
    code = check_exit_code([v for r in runs for v in r.claims])
    if failed:
        sys.exit(EXIT_RUN_FAILED)
    if code:
        sys.exit(code)


def _span(runs) -> str:
    """When the runs were made, and how long they took from the first start to the last end."""
    times = [datetime.fromisoformat(t) for r in runs for t in (r.started, r.ended) if t]
    if not times:
        return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    first, last = min(times), max(times)
    minutes = round((last - first).total_seconds() / 60)
    return f"{first.strftime('%Y-%m-%d %H:%M')} to {last.strftime('%H:%M UTC')} ({minutes // 60} h {minutes % 60:02d} min)"


def _run(model, versions: list[str | None], target: str, where: dict, out_dir: Path, policy: CheckPolicy):
    progress = Progress(err)
    provisioners = [make_provisioner(model.engine, dict(model.settings), target_of(
        target, v, image=None, host_network=False, model=model, progress=progress, **where)) for v in versions]
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        outcome = Runner(model, provisioners, out_dir=out_dir, progress=progress, target=target,
                         check=policy).run()
    finally:
        progress.close()
        signal.signal(signal.SIGTERM, previous)
    if outcome.status == "interrupted":
        raise KeyboardInterrupt
    return outcome.run, outcome.error


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _write(path: Path | None, text: str) -> None:
    if path is None:
        click.echo(text, nl=False)
        return
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the table: {exc}", cause=exc) from exc
    err.print(f"wrote {path}", highlight=False, soft_wrap=True)

