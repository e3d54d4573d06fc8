"""Repeated runs folded into one result per (server, variant, point), and the run's warnings.

A run with `--repeat N` stores N results for each variant and point (`repeat` 1..N). Reports,
claims and charts read the folded result: its numbers are the means over the repeats, and
`repeat_stats` holds, per measured pool, each flat metric's mean, standard deviation and 95%
confidence half-width. A result that ran once is passed through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ..results.metric import Metric
from ..results.model import PoolResult, RunStatus, VariantRun
from ..stats import estimate

CV_LIMIT = 0.10  # spread between repeats above which a metric is flagged
SPREAD_METRICS = ("tps", "latency.p50_ms", "latency.p95_ms", "latency.p99_ms", "elapsed_s")
TAIL_SAMPLES = 10  # a percentile needs this many transactions beyond it to be worth printing
BUSY_LIMIT = 0.85  # share of one CPU above which a worker process limits the load it can drive


@dataclass(frozen=True)
class Folded(VariantRun):
    """The repeats of one (server, variant, point) as one variant run: numbers are means over the
    repeats; `repeat_stats` holds, per pool, each flat metric's mean, sd and 95% half-width."""

    repeats: int = 1
    repeat_stats: dict = field(default_factory=dict)


def key(result: VariantRun) -> tuple:
    return (result.server, result.variant, result.point)


def collapse(results: list[VariantRun]) -> list[VariantRun]:
    """One result per (server, variant, point), in the order each first appeared."""
    groups: dict[tuple, list[VariantRun]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return [runs[0] if len(runs) == 1 else fold(runs) for runs in groups.values()]


def fold(runs: list[VariantRun]) -> Folded:
    first = runs[0]
    pools = {}
    for name, pool in first.pools.items():
        # histograms of one repeat would mislead beside the means: stats left out
        pools[name] = PoolResult(name, pool.measure, pool.clients, None, pool.unavailable)
    values = {f.name: getattr(first, f.name) for f in fields(VariantRun)}
    values.update(
        status=next((r.status for r in runs if r.status != RunStatus.OK), RunStatus.OK),
        elapsed_s=_mean([r.elapsed_s for r in runs]),
        worker_cpu_s=[c for r in runs for c in r.worker_cpu_s],
        worker_wall_s=[c for r in runs for c in r.worker_wall_s],
        messages=[m for r in runs for m in r.messages],
        sampler_errors=[m for r in runs for m in r.sampler_errors],
        sampler_failures=[f for r in runs for f in r.sampler_failures],
        samplers=_nested_mean([r.samplers for r in runs]) or {},
        pools=pools, metrics=_mean_records(runs))
    return Folded(**values, repeats=len(runs), repeat_stats={
        name: _flat_stats([r.figures(name) for r in runs if name in r.pools]) for name in first.pools})


def _mean_records(runs: list[VariantRun]) -> tuple[Metric, ...]:
    """Each figure's mean over the repeats that have it (a number; another value is the first's), kept as the
    first repeat's record, in the order the figures first appear."""
    same: dict[tuple, list[Metric]] = {}
    for r in runs:
        for m in r.metrics:
            same.setdefault((m.scope, m.pool, m.name), []).append(m)
    return tuple(replace(records[0], value=_nested_mean([m.value for m in records])) for records in same.values())


def _flat_stats(rows: list[dict]) -> dict:
    names: list[str] = []
    for row in rows:
        names.extend(k for k in row if k not in names)
    stats = {}
    for name in names:
        values = [row.get(name) for row in rows]
        if all(_number(v) for v in values):
            stats[name] = estimate(values).as_dict()
    return stats


def _nested_mean(nodes: list):
    """Means of the numbers at the same place in each node; other values come from the first."""
    present = [n for n in nodes if n is not None]
    if not present:
        return None
    head = present[0]
    if isinstance(head, dict):
        keys: list = []
        for n in present:
            if isinstance(n, dict):
                keys.extend(k for k in n if k not in keys)
        return {k: _nested_mean([n.get(k) for n in present if isinstance(n, dict)]) for k in keys}
    if all(_number(n) for n in present):
        mean = _mean(present)
        return round(mean, 4) if isinstance(mean, float) else mean
    return head


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mean(values: list):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return sum(values) / len(values)


def cell_stats(result: VariantRun, pool: str, metric: str) -> dict | None:
    stats = result.repeat_stats if isinstance(result, Folded) else {}
    return (stats.get(pool) or {}).get(metric)


def warnings(results: list[VariantRun]) -> list[str]:
    """Warnings a reader needs before trusting the figures: spread, thin tails, a busy load generator."""
    out = []
    for r in collapse(results):
        for name, pool in r.pools.items():
            if not pool.measure:
                continue
            spread = [(metric, s) for metric in SPREAD_METRICS
                      for s in [cell_stats(r, name, metric)] if s and s["cv"] is not None and s["cv"] > CV_LIMIT]
            if spread:
                listed = ", ".join(f"{metric} {s['cv']:.0%}" for metric, s in spread)
                out.append(f"{r.label}/{name}: large spread between {spread[0][1]['n']} repeats (coefficient of "
                           f"variation above {CV_LIMIT:.0%}): {listed}; treat these means with care")
            txns = r.own(name).get("transactions") or 0
            thin = [p for p in (95, 99) if 0 < txns < TAIL_SAMPLES * 100 / (100 - p)]
            if thin:
                need = int(TAIL_SAMPLES * 100 / (100 - thin[0]))
                out.append(f"{r.label}/{name}: p{'/p'.join(map(str, thin))} from {txns:,.0f} transactions per run; "
                           f"p{thin[0]} needs {need:,} for {TAIL_SAMPLES} samples beyond it")
        busy = busiest_worker(r)
        if busy is not None and busy >= BUSY_LIMIT:
            out.append(f"{r.label}: a worker process was busy {busy:.0%} of the time: the load generator, not the "
                       f"server, may have limited throughput (more --processes, or fewer clients per process)")
    return out


def busiest_worker(result: VariantRun) -> float | None:
    """The largest share of one CPU a worker process used during its load loop."""
    shares = [c / w for c, w in zip(result.worker_cpu_s, result.worker_wall_s) if w]
    return max(shares) if shares else None


def client_cpu(result: VariantRun) -> float | None:
    """CPUs the load generator used on average over its load loops (sum over worker processes)."""
    cpu, wall = result.worker_cpu_s, result.worker_wall_s
    if not cpu or not wall or len(cpu) != len(wall):
        return None
    runs = result.repeats if isinstance(result, Folded) else 1
    return sum(cpu) / (sum(wall) / len(wall)) / max(1, runs)
