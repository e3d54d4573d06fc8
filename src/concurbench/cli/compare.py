"""`compare`: two stored runs of one scenario, metric by metric, with a gate for CI.

Exit codes: 0 no regression, 1 a regression beyond a --fail-above threshold, 2 refused or bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .console import err, out

from ..errors import ConfigError


def _thresholds(ctx, param, values: tuple[str, ...]):
    from ..report.compare import Thresholds

    try:
        return Thresholds.parse(values)
    except ConfigError as exc:
        raise click.BadParameter(exc.message, ctx=ctx, param=param) from None


@click.command(name="compare")
@click.argument("baseline_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("contender_dir", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--servers", default=None, metavar="OLD,NEW",
              help="Compare two servers of a version matrix: OLD's results as the baseline, NEW's as the "
                   "contender (of one run, when CONTENDER_DIR is left out).")
@click.option("--fail-above", "fail_above", multiple=True, metavar="[METRIC=]PERCENT", callback=_thresholds,
              help="Exit 1 when a metric got worse by more than PERCENT, significantly (or untested, with single "
                   "runs). `10` applies to every metric; `latency.p99_ms=20` (a glob) to the metrics it matches.")
@click.option("--metric", "metrics", multiple=True, metavar="GLOB",
              help="Compare these metrics instead of the defaults (tps, latency mean/p50/p95/p99, statement "
                   "means, and elapsed_s for fixed-count variants), e.g. 'statements.*.p95_ms'.")
@click.option("--format", "fmt", type=click.Choice(["table", "md", "json"]), default="table", show_default=True,
              help="table: terminal tables; md: Markdown for a pull-request comment; json: every figure.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write JUnit XML: one test case per compared metric, a failure per regression.")
@click.option("--force", is_flag=True,
              help="Compare runs of different scenarios, format versions or server matrices anyway.")
def compare(baseline_dir: Path, contender_dir: Path | None, servers: str | None, fail_above,
            metrics: tuple[str, ...], fmt: str, junit_file: Path | None, force: bool) -> None:
    """Compare CONTENDER_DIR with BASELINE_DIR, two runs of one scenario; or, with --servers OLD,NEW,
    two servers of one version-matrix run (their variants ran interleaved, so drift cancels out).

    Exit 1 when a metric regressed beyond a --fail-above threshold, 2 when the runs cannot be compared.
    Run both with --repeat 3 or more for a significance test; single runs are compared untested."""
    from rich.markup import escape

    from ..report.compare import compare_runs
    from ..report.compare_render import junit, markdown, terminal, to_json

    pair = [v.strip() for v in servers.split(",")] if servers else []
    if servers is not None and (len(pair) != 2 or not all(pair)):
        raise ConfigError(f"--servers {servers}: expected two server versions, OLD,NEW (such as 16,17)")
    if contender_dir is None and not pair:
        raise ConfigError("compare needs CONTENDER_DIR, or --servers OLD,NEW to compare two servers of one run")
    comparison = compare_runs(baseline_dir, contender_dir or baseline_dir, metrics=list(metrics),
                              fail_above=fail_above, force=force, baseline_server=pair[0] if pair else None,
                              contender_server=pair[1] if pair else None)
    for warning in comparison.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}", markup=True, highlight=False, soft_wrap=True)
    if fmt == "table":
        terminal(comparison, out)
    elif fmt == "md":
        click.echo(markdown(comparison))
    else:
        click.echo(to_json(comparison))
    if junit_file is not None:
        try:
            junit_file.write_text(junit(comparison), encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--junit {junit_file}: cannot write the file: {exc}", cause=exc) from exc
    if comparison.regressions:
        sys.exit(1)
