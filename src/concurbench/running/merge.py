"""`concurbench merge`: the run directories of one run's shards become one run directory.

The shards are read by the store, joined by results/join.py (which refuses runs that are not shards
of one run), and the merged run's claims are judged on the data of every shard at one look
(check.judge_claims): a shard does not judge them. The claims are the scenario's, so the scenario file
is read again - from where the shards ran it, or `scenario_file` - and must have the shards' SHA-256.
The store writes the merged run (manifest, summary.json, summary.csv, samples/) and report.md is
rendered from it, as after `run`; nothing prints here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..check import judge_claims, with_differences
from ..check.evaluate import Skip, left_out
from ..errors import ConfigError
from ..report.render import write_report
from ..report.tables import Report, build_report
from ..results.join import join
from ..results.model import Cause, Run
from ..results.shards import Plan
from ..results.store import load_run, write_run
from .load import load_scenario
from ..scenario.claims import Claim


@dataclass
class MergeOutcome:
    run: Run
    warnings: list[str] = field(default_factory=list)
    report: Report | None = None  # the tables report.md was written from, to print as they are


def merge_shards(dirs: list[Path], out_dir: Path, *, partial: bool = False,
                 scenario_file: Path | None = None) -> MergeOutcome:
    """Merge the shard run directories `dirs` into the new (or empty) directory `out_dir`."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(f"-o {out_dir}: exists and is not an empty directory; a run directory is written once, "
                          f"so name a new one")
    runs = [load_run(d) for d in dirs]
    joined = join(runs, partial=partial)
    run = joined.run
    claims = _claims(run, scenario_file) if any(r.claims for r in runs) else []
    verdicts = with_differences(judge_claims(claims, run.variant_runs, skipped=_skipped(run, joined.plan),
                                         quick=run.scenario.quick), run.servers) if claims else []
    out_dir.mkdir(parents=True, exist_ok=True)
    run = replace(run, claims=verdicts, path=out_dir)
    write_run(run)
    report = build_report(run)
    write_report(run, report)
    return MergeOutcome(run, joined.warnings, report)


def _claims(run: Run, scenario_file: Path | None) -> list[Claim]:
    """The scenario's claims, from its file as the shards ran it (same SHA-256, parameters and --quick)."""
    info = run.scenario
    file = Path(scenario_file or info.file)
    if not file.is_file():
        raise ConfigError(f"the shards' scenario has claims to judge on the merged data, but its file {file} is not "
                          f"here; pass --scenario FILE (the file the shards ran, SHA-256 {info.sha256[:12]})")
    scenario = load_scenario(file, quick=info.quick, overrides={k: str(v) for k, v in info.parameters.items()})
    if scenario.sha256 != info.sha256:
        raise ConfigError(f"{file}: not the scenario file the shards ran (its SHA-256 is {scenario.sha256[:12]}, "
                          f"theirs {info.sha256[:12]}); pass --scenario with the file they ran")
    return list(scenario.expect)


def _skipped(run: Run, plan: Plan) -> dict[str, Skip]:
    """Variants a claim may name that have no run in the merged data, and why."""
    planned = [name for name, _ in plan.variants]
    ran = {r.variant for r in run.variant_runs}
    out = {}
    for name in run.scenario.variants:
        if name in run.skipped:
            out[name] = Skip(Cause.NOT_RUN, f"skipped by the server: {run.skipped[name]}")
        elif name not in planned:
            out[name] = left_out()
        elif name not in ran:
            out[name] = Skip(Cause.NOT_RUN, "not run: its shards are missing or ended first")
    return out
