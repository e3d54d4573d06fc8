"""Join the run directories of one run's shards (`run --shard I/N`) into one Run.

`join` checks that the runs are shards of one run and returns the merged Run with warnings; writing
it, and judging its claims on all the data, is the caller's (concurbench/merge.py). Refused, with a
ConfigError naming both directories and what differs: a run that is not a shard; different format
versions, scenarios (name or SHA-256), parameters, `--quick`, targets or plans (servers, variants,
points, `--repeat`, number of shards); the same shard twice, or a variant run twice or outside its
shard; one server of the plan run as two different versions; and missing shards, unless `partial`.
Warned: missing shards with `partial`, shards that did not run all of their share (a failed,
interrupted or killed run: a killed shard gives what its journal kept), different hosts, worker
process counts or concurbench versions. A shard still running is refused.

The merged run lists its variant runs in the rule's order (server, repeat, variant, point), its
servers in the plan's order, and in `merged_from` the shards it was made of.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from .model import FORMAT_VERSION, MergedShard, Run, RunStatus, ServerInfo, VariantRun
from .shards import Combination, Plan, Shard, describe

STATUS_ORDER = (RunStatus.OK, RunStatus.INCOMPLETE, RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.KILLED)  # the merged status is the shards' worst


@dataclass
class Joined:
    run: Run
    plan: Plan
    warnings: list[str] = field(default_factory=list)


def join(runs: list[Run], *, partial: bool = False) -> Joined:
    """The shards `runs` as one run (claims left empty: the caller judges them on the merged data)."""
    if not runs:
        raise ConfigError("merge needs the run directory of at least one shard")
    for run in runs:
        if run.shard is None:
            raise ConfigError(f"{run.path}: not a shard (the run was made without --shard); merge joins the run "
                              f"directories of `concurbench run --shard I/N`")
        if run.status == RunStatus.RUNNING:
            raise ConfigError(f"{run.path}: shard {run.shard.label} is {run.error}; merge it once it has ended "
                              f"(a shard killed without ending is merged with what it finished, with a warning)")
    runs = sorted(runs, key=lambda r: r.shard.index)
    first = runs[0]
    for other in runs[1:]:
        differences = _differences(first, other)
        if differences:
            raise ConfigError(f"{first.path} and {other.path} are not shards of one run: {'; '.join(differences)}")
    for a, b in zip(runs, runs[1:]):
        if a.shard.index == b.shard.index:
            raise ConfigError(f"{a.path} and {b.path} are both shard {a.shard.label}: overlapping shards (the same "
                              f"combinations twice); merge each shard once")
    plan = first.shard.plan
    versions = _versions(runs, plan)
    combos = {c: k for k, c in enumerate(plan.combinations())}
    where: dict[Combination, Run] = {}
    keyed: list[tuple[int, VariantRun]] = []
    warnings: list[str] = []
    for run in runs:
        share = Shard(run.shard.index, run.shard.count).combinations(plan)
        members = set(share)
        for result in run.variant_runs:
            combo = _combination(run, result)
            if combo not in members:
                raise ConfigError(f"{run.path}: {combo.label(versions)} is not in shard {run.shard.label} by the "
                                  f"shard rule; the directory was not written by `run --shard {run.shard.label}`")
            if combo in where:
                raise ConfigError(f"{where[combo].path} and {run.path} both hold {combo.label(versions)}: "
                                  f"overlapping shards; merge each combination once")
            where[combo] = run
            keyed.append((combos[combo], result))
        lacking = [c for c in share if c not in where and c.variant not in run.skipped]
        if lacking:
            warnings.append(f"shard {run.shard.label} ({run.path}) ended {run.status} and lacks {len(lacking)} of "
                            f"its {len(share)} combinations: {describe(lacking, versions)}")
    count = first.shard.count
    missing = [i for i in range(1, count + 1) if i not in {r.shard.index for r in runs}]
    if missing:
        lost = [c for i in missing for c in Shard(i, count).combinations(plan)]
        text = (f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{i}/{count}' for i in missing)} "
                f"{'are' if len(missing) > 1 else 'is'} missing ({len(lost)} of {len(combos)} combinations: "
                f"{describe(lost, versions)})")
        if not partial:
            given = "this one" if len(runs) == 1 else f"these {len(runs)}"
            raise ConfigError(f"{text}; merge every shard, or pass --partial to merge {given} anyway")
        warnings.append(f"merged without every shard: {text}")
    warnings += _host_warnings(runs)
    keyed.sort(key=lambda item: item[0])
    return Joined(_merged(runs, plan, versions, [r for _, r in keyed]), plan, warnings)


def _differences(a: Run, b: Run) -> list[str]:
    """What makes `b` a shard of another run than `a` (empty when they belong together)."""
    out = []
    if a.format_version != b.format_version:
        out.append(f"format version {a.format_version} and {b.format_version}")
    sa, sb = a.scenario, b.scenario
    if sa.name != sb.name:
        out.append(f"scenario {sa.name} and {sb.name}")
    elif sa.sha256 != sb.sha256:
        out.append(f"the scenario file differs (SHA-256 {sa.sha256[:12]} and {sb.sha256[:12]})")
    if sa.parameters != sb.parameters:
        changed = sorted(k for k in {*sa.parameters, *sb.parameters} if sa.parameters.get(k) != sb.parameters.get(k))
        out.append("parameters differ: " + ", ".join(f"{k}={sa.parameters.get(k)} and {k}={sb.parameters.get(k)}"
                                                     for k in changed))
    if sa.quick != sb.quick:
        out.append(f"only the {'first' if sa.quick else 'second'} ran with --quick")
    if a.target != b.target:
        out.append(f"target {a.target} and {b.target}")
    pa, pb = a.shard.plan, b.shard.plan
    if a.shard.count != b.shard.count:
        out.append(f"cut into {a.shard.count} and {b.shard.count} shards")
    if pa.servers != pb.servers:
        out.append(f"{pa.servers} and {pb.servers} servers (--server-version)")
    if pa.repeat != pb.repeat:
        out.append(f"--repeat {pa.repeat} and {pb.repeat}")
    if [n for n, _ in pa.variants] != [n for n, _ in pb.variants]:
        out.append(f"variants {', '.join(n for n, _ in pa.variants)} and {', '.join(n for n, _ in pb.variants)} "
                   f"(--variant)")
    elif pa.variants != pb.variants:
        out.append("the variants' sweep points differ")
    return out


def _versions(runs: list[Run], plan: Plan) -> list[str | None]:
    """The version each server of the plan ran as; ConfigError when two shards ran it as different ones."""
    out: list[str | None] = []
    for position in range(plan.servers):
        seen: dict[str, Run] = {}
        for run in runs:
            version = run.shard.servers[position] if position < len(run.shard.servers) else None
            if version is not None:
                seen.setdefault(version, run)
        if len(seen) > 1:
            (va, ra), (vb, rb) = list(seen.items())[:2]
            raise ConfigError(f"{ra.path} and {rb.path} ran server {position + 1} of the plan as {va} and {vb}: "
                              f"their figures are not of one server; run every shard on the same version")
        out.append(next(iter(seen), None))
    return out


def _combination(run: Run, result: VariantRun) -> Combination:
    servers = run.shard.servers
    if result.server not in servers:
        raise ConfigError(f"{run.path}: the variant run {result.label} names a server the shard did not start "
                          f"({', '.join(str(v) for v in servers if v) or 'none'}); not a shard concurbench wrote")
    return Combination(servers.index(result.server), result.repeat, result.variant, result.point)


def _host_warnings(runs: list[Run]) -> list[str]:
    out = []
    hosts: dict[str, list[str]] = {}
    for run in runs:
        hosts.setdefault(str(run.host.get("hostname", "?")), []).append(run.shard.label)
    if len(hosts) > 1:
        out.append("the shards ran on different hosts (" + "; ".join(f"{h}: {', '.join(s)}" for h, s in hosts.items())
                   + "): figures of different shards, and a comparison of servers that ran on different hosts, "
                   "include the difference between the machines")
    processes = {run.processes for run in runs}
    if len(processes) > 1:
        out.append(f"the shards used different numbers of worker processes ({', '.join(map(str, processes))})")
    harness = {str(run.harness.get("version")) for run in runs}
    if len(harness) > 1:
        out.append(f"the shards were run by different concurbench versions ({', '.join(sorted(harness))})")
    return out


def _merged(runs: list[Run], plan: Plan, versions: list[str | None], results: list[VariantRun]) -> Run:
    first = runs[0]
    servers: list[ServerInfo] = []
    for version in versions:
        info = next((s for r in runs for s in r.servers if version is not None and s.version_short == version), None)
        if info is not None:
            servers.append(info)
    status = max((r.status for r in runs), key=lambda s: STATUS_ORDER.index(s) if s in STATUS_ORDER else 0)
    errors = [f"shard {r.shard.label}: {r.error}" for r in runs if r.error]
    hostnames = list(dict.fromkeys(str(r.host.get("hostname", "?")) for r in runs))
    host = dict(first.host) if len(hostnames) == 1 else {**first.host, "hostname": ", ".join(hostnames)}
    skipped: dict[str, str] = {}
    for run in runs:
        for name, why in run.skipped.items():
            skipped.setdefault(name, why)
    return Run(scenario=first.scenario, status=status, error="; ".join(errors) or None, servers=servers,
               target=first.target, host=host, processes=first.processes, repeat=plan.repeat,
               started=min(r.started for r in runs), ended=max(r.ended for r in runs), harness=dict(first.harness),
               variant_runs=results, published=list(first.published), claims=[], skipped=skipped,
               format_version=FORMAT_VERSION,
               merged_from=[MergedShard(r.shard.index, r.shard.count, str(r.path), str(r.host.get("hostname", "")),
                                        r.status, r.started, r.ended) for r in runs])
