"""`history show` and `history check`: the store's series with their change points, and the CI gate."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from ..errors import ConfigError
from ..history import gate, render
from ..history.analysis import ORDERS, analyse
from ..history.charts import html_page, write_charts
from ..history.detect import Method
from ..history.store import open_store
from ..report.render import markdown, terminal
from .console import err, out
from .exits import EXIT_RUN_FAILED
from .history import STORE_HELP, parse_pairs

FORMATS = ("table", "md", "json", "csv", "html")
WAYS = ("higher", "lower", "neutral")


def selection(func):
    """The options `show` and `check` share: which store and series, in which order, with which detector."""
    options = [
        click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP),
        click.option("--scenario", default=None, metavar="NAME", help="Only this scenario's series."),
        click.option("--metric", "metrics", multiple=True, metavar="GLOB",
                     help="Only metrics matching this glob (tps, latency.*, 'statements.*.mean_ms'); repeatable."),
        click.option("--order", type=click.Choice(ORDERS), default="time", show_default=True,
                     help="time: one series per server version, runs in the order they started; version: one "
                          "series through every server version in version order."),
        click.option("--alpha", type=click.FloatRange(1e-9, 0.5), default=Method.alpha, show_default=True,
                     help="The p-value a change must reach."),
        click.option("--min-change", type=click.FloatRange(0, 100), default=Method.min_change * 100,
                     show_default=True, help="The smallest move, in percent, that is reported."),
        click.option("--window", type=click.IntRange(6, 1000), default=Method.window, show_default=True,
                     help="Runs per window of the search, and the most runs either side a test compares."),
        click.option("--confirm", type=click.IntRange(2, 100), default=Method.confirm, show_default=True,
                     help="Runs after a change that confirm it (fewer: a candidate)."),
        click.option("--min-after", type=click.IntRange(1, 100), default=Method.min_after, show_default=True,
                     help="The fewest newest runs that can show a candidate."),
        click.option("--direction", "directions", multiple=True, metavar="GLOB=higher|lower|neutral",
                     help="Which way is better for the metrics matching GLOB (overrides the built-in rule)."),
    ]
    return functools.reduce(lambda f, option: option(f), reversed(options), func)


def _analysis(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions,
              values=False):
    if min_after > confirm:
        raise ConfigError(f"--min-after {min_after} is more than --confirm {confirm}")
    method = Method(window=window, alpha=alpha, min_change=min_change / 100, confirm=confirm, min_after=min_after)
    ways = parse_pairs(directions, "--direction", WAYS)
    with open_store(store) as s:
        return analyse(s, scenario=scenario, metrics=tuple(metrics), order=order, method=method, directions=ways,
                       values=values)


@click.command(name="show")
@selection
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to FILE instead of standard output.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also draw each series with a change point (PNG and SVG) into this folder.")
@click.option("--all", "everything", is_flag=True,
              help="List every series and every run in the tables (not only series with a change, the newest 20 runs).")
def show(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions, fmt, output,
         plots_dir, everything) -> None:
    """Every series of the store with its points and change points: where a metric moved beyond its
    noise, in which run, version and commit, by how much, and how sure that is."""
    a = _analysis(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions,
                  values=fmt == "json")
    if fmt == "table" and output is None:
        terminal(render.report(a, everything=everything), out)
    else:
        if fmt == "json":
            text = render.json_text(a)
        elif fmt == "csv":
            text = render.as_csv(a)
        elif fmt == "html":
            text = html_page(a, render.report(a, everything=everything))
        else:
            text = markdown(render.report(a, everything=everything))
        _write(output, text)
    if plots_dir is not None:
        written = write_charts(a, plots_dir)
        err.print(f"charts: {len(written) // 2} series with a change point, in {plots_dir}", highlight=False)


@click.command(name="check")
@selection
@click.option("--newest", type=click.IntRange(min=1), default=gate.DEFAULT_NEWEST, show_default=True, metavar="K",
              help="Check change points whose first run after is among the newest K runs of their series.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a JUnit XML report (a test case per series).")
@click.option("--summary", "summary_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append the Markdown summary to FILE (for a CI step summary: $GITHUB_STEP_SUMMARY).")
def check(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions, newest,
          junit_file, summary_file) -> None:
    """Exit 1 when a confirmed or candidate change point among the newest runs moved a metric the bad way
    (throughput down; latency, lag, errors, per-transaction figures up), 0 otherwise."""
    a = _analysis(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions)
    summary = gate.markdown_summary(a, newest)
    out.print(summary, highlight=False, markup=False, soft_wrap=True)
    if junit_file is not None:
        _write(junit_file, gate.junit(a, newest))
    if summary_file is not None:
        _write(summary_file, summary + "\n", append=True)
    if gate.regressions(a, newest):
        sys.exit(EXIT_RUN_FAILED)


def _write(path: Path | None, text: str, append: bool = False) -> None:
    if path is None:
        click.echo(text, nl=False)
        return
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
    err.print(f"wrote {path}", highlight=False, soft_wrap=True)
