"""`run`: one scenario from provisioning to cleanup, its tables printed, its run directory the last line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import api
from ..api import Target
from ..check import CheckPolicy
from ..check.rounds import BUSY_MAX_REPEATS, DEFAULT_MAX_REPEATS, parse_budget
from ..errors import ConcurbenchError, ConfigError
from ..report.render import terminal
from ..results.shards import Shard, refuse_with_check
from ..running.load import load_scenario
from .console import err, out
from .errors import fail
from .exits import EXIT_HISTORY_NOT_ADDED, EXIT_RUN_FAILED, check_exit_code
from .history import add_to_history, history_options, parse_labels, parse_pairs
from .options import parse_params, target_options
from .probe import default_json, probe_all
from .progress import Progress
from .stored import write_and_list_plots


@click.command()
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--quick", is_flag=True, help="Use the scenario's `quick` overrides (a short run).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where run directories are written.")
@target_options()
@click.option("--keep", is_flag=True, help="Leave the server running at the end and print how to connect.")
@click.option("--probe", "probe_first", is_flag=True,
              help="Probe the target first (`concurbench probe`); stop with its table and exit 1 when a check fails.")
@click.option("--processes", type=click.IntRange(min=1), default=None,
              help="Worker processes for the client sessions [default: one per CPU].")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Override a scenario parameter.")
@click.option("--variant", "variants", multiple=True, metavar="NAME", help="Run only these variants.")
@click.option("--skip-unrunnable", is_flag=True,
              help="On a server concurbench does not own, run the variants it can and skip the others (each with why; "
                   "claims on them are not evaluated) instead of refusing the run at start.")
@click.option("--check", is_flag=True, help="Judge the scenario's `expect` claims and repeat runs until they are "
              "decided; exit 3 when a claim fails, 4 when one is left undecided.")
@click.option("--max-repeats", type=click.IntRange(min=2), default=None,
              help=f"--check: the most runs of a variant point it may take to decide a claim [default: "
                   f"{DEFAULT_MAX_REPEATS}, or {BUSY_MAX_REPEATS} when the machine is busy].")
@click.option("--check-budget", default="15m", show_default=True, metavar="DURATION",
              help="--check: no round of extra repeats starts that would end after this time (e.g. 10m, 1h).")
@click.option("--plots", is_flag=True, help="Also write charts (PNG and SVG) under the run directory's plots/.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run every variant N times, interleaved (A B, then B A); reports give means with 95% intervals.")
@click.option("--shard", "shard_text", default=None, metavar="I/N",
              help="Run only shard I of N of this run (a deterministic share of server x variant x point x "
              "repeat); `concurbench merge` joins the shards' run directories. Not with --check.")
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="Drive each variant run's load from the load hosts of the cluster at ADDRESS (`concurbench cluster "
                   "start`; docs/distributed.md); the server is provisioned here as without it.")
@click.option("--host-weight", "host_weights", multiple=True, metavar="NAME=WEIGHT",
              help="--cluster: deal a host this weight of every pool's clients [default: 1 each, round-robin].")
@history_options
def run(scenario: Path, quick: bool, out_dir: Path, target: Target, processes: int | None, params: tuple[str, ...],
        variants: tuple[str, ...], check: bool, max_repeats: int | None, check_budget: str, plots: bool, repeat: int,
        shard_text: str | None, probe_first: bool, history: str | None, labels: tuple[str, ...],
        skip_unrunnable: bool, cluster: str | None, host_weights: tuple[str, ...]) -> None:
    """Run SCENARIO and print its comparison tables; the last line is the run directory."""
    progress = Progress(err)
    try:
        run_labels = parse_labels(labels)
        policy = CheckPolicy(max(max_repeats or DEFAULT_MAX_REPEATS, repeat), parse_budget(check_budget),
                             busy_max_repeats=None if max_repeats else BUSY_MAX_REPEATS) if check else None
        weights = parse_weights(host_weights, cluster)
        model = load_scenario(scenario, quick=quick, overrides=parse_params(params))
        shard = Shard.parse(shard_text) if shard_text is not None else None
        refuse_with_check(shard, check)  # before the probe, which would be for nothing
        if probe_first and not probe_all(model, target=target, variants=variants,
                                         json_path=default_json(out_dir, model.name)):
            progress.close()
            err.print("[red]error:[/red] the probe failed: nothing was run (see the table above)", highlight=False)
            sys.exit(EXIT_RUN_FAILED)
        outcome = api.run(model, target=target, out_dir=out_dir, listener=progress, processes=processes,
                          variants=variants, repeat=repeat, check=policy, shard=shard, skip_unrunnable=skip_unrunnable,
                          cluster=cluster, host_weights=weights)
    except ConcurbenchError as exc:
        progress.close()
        fail(exc)
        return
    finally:
        progress.close()
    if outcome.results:
        terminal(outcome.report, out)
        if plots:
            try:
                write_and_list_plots(outcome.run_dir)
            except ConcurbenchError as exc:
                err.print(f"[yellow]no charts:[/yellow] {exc.message}", highlight=False, soft_wrap=True)
    if target.keep:
        for hint in outcome.kept():
            err.print(f"kept running: {hint}", highlight=False, soft_wrap=True)
    files = outcome.files_left()
    if files:
        err.print(f"[yellow]left on the server:[/yellow] the observers' files {', '.join(files)} (SQL Server cannot "
                  f"delete a file for a client); delete them there (rm -f -- {' '.join(files)}), or run `concurbench "
                  f"gc --target dsn --dsn ... --yes` on the server's machine", highlight=False, soft_wrap=True)
    if outcome.error is not None:
        err.print(f"[red]error:[/red] {outcome.error.message}", highlight=False, soft_wrap=True)
    code = check_exit_code(outcome.claims) if check and outcome.error is None else None
    added = True
    if history is not None and outcome.run_dir is not None:
        added = add_to_history(history, outcome.run_dir, run_labels)
    out.print(str(outcome.run_dir), soft_wrap=True)
    if outcome.error is not None:
        sys.exit(outcome.error.exit_code)
    if code:
        sys.exit(code)
    if not added:
        sys.exit(EXIT_HISTORY_NOT_ADDED)


def parse_weights(pairs: tuple[str, ...], cluster: str | None) -> dict[str, float]:
    """--host-weight NAME=WEIGHT pairs (ConfigError: not a pair, not a number above 0, or no --cluster)."""
    if pairs and cluster is None:
        raise ConfigError("--host-weight applies with --cluster ADDRESS only")
    weights = {}
    for name, text in parse_pairs(pairs, "--host-weight").items():
        try:
            weight = float(text)
        except ValueError:
            weight = 0.0
        if not weight > 0:
            raise ConfigError(f"--host-weight {name}={text}: the weight must be a number above 0")
        weights[name] = weight
    return weights
