"""`history show` and `history check`: the store's series with their change points and findings, and the
CI gate (history/gate.py), with `--side-by-side` its confirmation of a new release the same night
(concurbench/sidebyside.py)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from ..check.across import BUSY_ROUNDS, ROUNDS, STARTS
from ..errors import ConfigError
from ..history import gate, gate_report, render
from ..history.analysis import ORDERS, analyse, figure_of
from ..history.charts import html_page, write_charts
from ..history.detect import Method
from ..history.gatefile import GateSpec, Rule, load_gate
from ..history.store import open_store
from ..figures import Better
from ..report.render import markdown, terminal
from ..results.catalogue import CATALOGUE
from ..util import parse_duration
from .console import err, out
from .progress import Progress
from .exits import EXIT_REGRESSION
from .history import STORE_HELP, parse_pairs

FORMATS = ("table", "md", "json", "csv", "html")
WAYS = ("higher", "lower", "neutral")


def selection(func):
    """The options `show` and `check` share: which store and series, in which order, with which detector."""
    options = [
        click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP),
        click.option("--scenario", default=None, metavar="NAME", help="Only this scenario's series."),
        click.option("--metric", "metrics", multiple=True, metavar="GLOB",
                     help="Only metrics matching this glob (tps, latency.*, 'statements.*.mean_ms'); repeatable. "
                          "`check` gates the metrics named so, whatever their kind, when they have a better way."),
        click.option("--order", type=click.Choice(ORDERS), default="track", show_default=True,
                     help="track: one series per track (the run's `track` label, else the server's major version), "
                          "a new release judged against the one before; time: one series per server version; "
                          "version: one series through every version in version order."),
        click.option("--alpha", type=click.FloatRange(1e-9, 0.5), default=Method.alpha, show_default=True,
                     help="The calibrated p-value a change point must reach to be shown."),
        click.option("--min-change", type=click.FloatRange(0, 100), default=Method.min_change * 100,
                     show_default=True, help="The smallest move, in percent, that is reported (and gated)."),
        click.option("--window", type=click.IntRange(6, 1000), default=Method.window, show_default=True,
                     help="Runs per window of the search, and the most runs either side a test compares."),
        click.option("--confirm", type=click.IntRange(2, 100), default=Method.confirm, show_default=True,
                     help="Runs after a change that confirm it (fewer: a candidate)."),
        click.option("--min-after", type=click.IntRange(1, 100), default=Method.min_after, show_default=True,
                     help="The fewest newest runs that can show a candidate."),
        click.option("--direction", "directions", multiple=True, metavar="GLOB=higher|lower|neutral",
                     help="Which way is better for the metrics matching GLOB (overrides the metric catalogue)."),
    ]
    return functools.reduce(lambda f, option: option(f), reversed(options), func)


def _method(alpha, min_change, window, confirm, min_after) -> Method:
    if min_after > confirm:
        raise ConfigError(f"--min-after {min_after} is more than --confirm {confirm}")
    return Method(window=window, alpha=alpha, min_change=min_change / 100, confirm=confirm, min_after=min_after)


@click.command(name="show")
@selection
@click.option("--since", default=None, metavar="WHEN",
              help="Show the change points, findings and runs from this date (2026-12-01), time or run id on "
                   "(the detection still reads every run).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to FILE instead of standard output.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also draw each series with a change point (PNG and SVG) into this folder.")
@click.option("--all", "everything", is_flag=True,
              help="List every series and every run in the tables (not only series with a change, the newest 20 runs).")
def show(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions, since, fmt,
         output, plots_dir, everything) -> None:
    """Every series of the store with its points and change points, the open findings first: where a metric
    moved beyond its noise, in which run, version and commit, by how much, and how sure that is."""
    method = _method(alpha, min_change, window, confirm, min_after)
    ways = parse_pairs(directions, "--direction", WAYS)
    with open_store(store) as s:
        a = analyse(s, scenario=scenario, metrics=tuple(metrics), order=order, method=method, directions=ways,
                    values=fmt == "json")
        findings = s.findings(scenario)
        expectations = s.expectations()
    a = render.since(a, since) if since else a
    findings = render.findings_since(a, findings, since) if since else findings
    if fmt == "table" and output is None:
        terminal(render.report(a, findings, everything=everything, expectations=expectations), out)
    else:
        if fmt == "json":
            text = render.json_text(a, findings, expectations)
        elif fmt == "csv":
            text = render.as_csv(a)
        elif fmt == "html":
            text = html_page(a, render.report(a, findings, everything=everything, expectations=expectations))
        else:
            text = markdown(render.report(a, findings, everything=everything, expectations=expectations))
        _write(output, text)
    if plots_dir is not None:
        written = write_charts(a, plots_dir)
        err.print(f"charts: {len(written) // 2} series with a change point, in {plots_dir}", highlight=False)


@click.command(name="check")
@selection
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID",
              help="A run this job added (its run directory's name); repeatable. Only series with one of these "
                   "runs can make the check red. Without --run every series counts.")
@click.option("--gate", "gate_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A gate file: which metrics are gated, which way, from what change, at what alpha "
                   "(docs/history.md); default: the metric catalogue's headline figures.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a JUnit XML report (a test case per cause).")
@click.option("--summary", "summary_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append the Markdown summary to FILE (for a CI step summary: $GITHUB_STEP_SUMMARY).")
@click.option("--side-by-side", "side_by_side", is_flag=True,
              help="Then confirm the same night: where a line's newest run is a new server release's first run "
                   "(or a new finding starts at one), run the variants of its gated series (suspected or not) on the "
                   "release before and the new one side by side in one run (interleaved, paired by round, more rounds while undecided) with the "
                   "checked run's target (binaries or docker), scenario file, quick form and parameters. A confirmed "
                   "regression is red tonight; one decided not worse is not (docs/history.md).")
@click.option("--side-by-side-budget", "budget", default="10m", show_default=True, metavar="DURATION",
              help="The time the side-by-side runs may take in all (90s, 10m, 1h): the cheapest informative first "
                   "(fewest variants, largest suspected change); what it leaves is listed.")
@click.option("--side-by-side-rounds", "rounds", type=click.IntRange(2, 100), default=ROUNDS, show_default=True,
              help=f"The most rounds a side-by-side run takes while undecided ({BUSY_ROUNDS / ROUNDS:g} times as "
                   f"many on a busy machine).")
@click.option("--side-by-side-starts", "starts", type=click.IntRange(1, 10), default=STARTS, show_default=True,
              help="The instances of each release a side-by-side run's rounds are spread over: both servers restart "
                   "(same data, same settings) at even steps of the most rounds; 1 keeps each as started.")
@click.option("--side-by-side-host-network", "host_network", is_flag=True,
              help="Docker target: the side-by-side containers use the host's network, as `run --host-network` "
                   "(for a nightly job whose runs need it).")
@click.option("--side-by-side-out", "sbs_out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("results"), show_default=True,
              help="Where the side-by-side runs' directories go (each added to the store as a confirming run, "
                   "never part of a series).")
def check(store, scenario, metrics, order, alpha, min_change, window, confirm, min_after, directions, run_ids,
          gate_file, junit_file, summary_file, side_by_side, budget, rounds, starts, host_network, sbs_out) -> None:
    """Find the regressions among the gated series that had a run in this check and keep them as findings;
    exit 5 while a finding is new on such a series (until `history ack` or the metric comes back), 0 otherwise."""
    method = _method(alpha, min_change, window, confirm, min_after)
    ways = parse_pairs(directions, "--direction", WAYS)
    budget_s = _budget(budget) if side_by_side else 0.0
    night = None
    with open_store(store) as s:
        runs = _runs(s, run_ids)
        spec = _spec(s, gate_file, scenario, metrics, ways)
        result = gate.check(s, spec, runs=runs, checked=list(run_ids) or None, scenario=scenario,
                            metrics=tuple(metrics), order=order, method=method, directions=ways)
        if side_by_side:
            from .. import sidebyside  # the runner and the targets, loaded only when a check runs servers

            progress = Progress(err)
            try:
                night = sidebyside.confirm_night(s, result, runs=runs, budget_s=budget_s, rounds=rounds,
                                                 starts=starts, out_dir=sbs_out, listener=progress,
                                                 directions=ways, host_network=host_network)
            finally:
                progress.close()
            result = night.result
    summary = gate_report.markdown_summary(result) + ("\n" + night.summary() if night else "")
    out.print(summary, highlight=False, markup=False, soft_wrap=True)
    if junit_file is not None:
        _write(junit_file, gate_report.junit(result))
    if summary_file is not None:
        _write(summary_file, summary + "\n", append=True)
    if result.regression:
        sys.exit(EXIT_REGRESSION)


def _budget(text: str) -> float:
    seconds = parse_duration(text)
    if seconds is None or seconds <= 0:
        raise ConfigError(f"--side-by-side-budget {text}: expected a duration such as 10m, 90s or 1h")
    return seconds


def _runs(s, run_ids: tuple[str, ...]) -> set[int] | None:
    """The store's row ids of the runs named (None: none named); a run not in the store is a ConfigError."""
    if not run_ids:
        return None
    held = {r.record.run_id: r.id for r in s.runs()}
    missing = [r for r in run_ids if r not in held]
    if missing:
        raise ConfigError(f"--run: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in the history "
                          f"store {s.name} (add the run first: `concurbench run --history` or `history add`); "
                          f"nothing was checked")
    return {held[r] for r in run_ids}


def _spec(s, gate_file: Path | None, scenario: str | None, metrics, ways: dict[str, str]) -> GateSpec:
    """The gate file (checked against the catalogue and the store's metrics) or the defaults, with the command
    line's --direction and --metric rules first."""
    spec = GateSpec()
    keys = list(s.series(scenario).values())
    if gate_file is not None:
        spec = load_gate(gate_file, CATALOGUE, {k.metric: figure_of(k).better for k in keys})
    rules = [Rule(glob, Better(way)) for glob, way in ways.items()] + [Rule(glob) for glob in metrics]
    spec = spec.with_rules(rules) if rules else spec
    if gate_file is not None and keys and not any(spec.gated(figure_of(k), k.metric, 0.0) for k in keys):
        raise ConfigError(f"{gate_file}: the gate file gates no series of the history store {s.name}"
                          f"{' (headline: false, and no metric it names has a series there with a better direction)' if not spec.headline else ''}"
                          f": a check with it could never be red; name the metrics to gate, or leave headline true "
                          f"(nothing was checked)")
    return spec


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
