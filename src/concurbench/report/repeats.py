"""Repeated runs folded into one result per (server, variant, point), and the run's warnings.

A run with `--repeat N` stores N results for each variant and point (`repeat` 1..N). Reports,
claims and charts read the folded result: its numbers are the means over the repeats, and
`repeat_stats` holds, per measured pool, each flat metric's mean, standard deviation and 95%
confidence half-width. A result that ran once is passed through unchanged.
"""

from __future__ import annotations

from .metrics import row_metrics
from .stats import estimate

CV_LIMIT = 0.10  # spread between repeats above which a metric is flagged
SPREAD_METRICS = ("tps", "latency.p50_ms", "latency.p95_ms", "latency.p99_ms", "elapsed_s")
TAIL_SAMPLES = 10  # a percentile needs this many transactions beyond it to be worth printing
BUSY_LIMIT = 0.85  # share of one CPU above which a worker process limits the load it can drive


def key(result: dict) -> tuple:
    return (result.get("server"), result["variant"], result["point"])


def collapse(results: list[dict]) -> list[dict]:
    """One result per (server, variant, point), in the order each first appeared."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return [runs[0] if len(runs) == 1 else fold(runs) for runs in groups.values()]


def fold(runs: list[dict]) -> dict:
    first = runs[0]
    out = dict(first)
    out["repeats"] = len(runs)
    out["status"] = next((r["status"] for r in runs if r["status"] != "ok"), "ok")
    out["elapsed_s"] = _mean([r["elapsed_s"] for r in runs])
    out["worker_cpu_s"] = [c for r in runs for c in r.get("worker_cpu_s") or []]
    out["worker_wall_s"] = [c for r in runs for c in r.get("worker_wall_s") or []]
    out["messages"] = [m for r in runs for m in r.get("messages") or []]
    out["sampler_errors"] = [m for r in runs for m in r.get("sampler_errors") or []]
    out["samplers"] = _nested_mean([r.get("samplers") or {} for r in runs])
    pools = {}
    for name, data in first["pools"].items():
        same = [r["pools"][name] for r in runs if name in r["pools"]]
        pools[name] = {**data, "metrics": _nested_mean([p["metrics"] for p in same])}
        pools[name].pop("stats", None)  # histograms of one repeat would mislead beside the means
    out["pools"] = pools
    out["repeat_stats"] = {
        name: _flat_stats([row_metrics(r, name) for r in runs if name in r["pools"]]) for name in first["pools"]}
    return out


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


def cell_stats(result: dict, pool: str, metric: str) -> dict | None:
    return ((result.get("repeat_stats") or {}).get(pool) or {}).get(metric)


def warnings(results: list[dict]) -> list[str]:
    """Warnings a reader needs before trusting the figures: spread, thin tails, a busy load generator."""
    out = []
    for r in collapse(results):
        label = r["variant"] + (f"@{r['point']}" if r["point"] is not None else "") + (
            f" ({r['server']})" if r.get("server") else "")
        for pool, data in r["pools"].items():
            if not data.get("measure", True):
                continue
            spread = [(metric, s) for metric in SPREAD_METRICS
                      for s in [cell_stats(r, pool, metric)] if s and s["cv"] is not None and s["cv"] > CV_LIMIT]
            if spread:
                listed = ", ".join(f"{metric} {s['cv']:.0%}" for metric, s in spread)
                out.append(f"{label}/{pool}: large spread between {spread[0][1]['n']} repeats (coefficient of "
                           f"variation above {CV_LIMIT:.0%}): {listed}; treat these means with care")
            txns = data["metrics"].get("transactions") or 0
            thin = [p for p in (95, 99) if 0 < txns < TAIL_SAMPLES * 100 / (100 - p)]
            if thin:
                need = int(TAIL_SAMPLES * 100 / (100 - thin[0]))
                out.append(f"{label}/{pool}: p{'/p'.join(map(str, thin))} from {txns:,.0f} transactions per run; "
                           f"p{thin[0]} needs {need:,} for {TAIL_SAMPLES} samples beyond it")
        busy = busiest_worker(r)
        if busy is not None and busy >= BUSY_LIMIT:
            out.append(f"{label}: a worker process was busy {busy:.0%} of the time: the load generator, not the "
                       f"server, may have limited throughput (more --processes, or fewer clients per process)")
    return out


def busiest_worker(result: dict) -> float | None:
    """The largest share of one CPU a worker process used during its load loop."""
    cpu = result.get("worker_cpu_s") or []
    wall = result.get("worker_wall_s") or []
    shares = [c / w for c, w in zip(cpu, wall) if w]
    return max(shares) if shares else None


def client_cpu(result: dict) -> float | None:
    """CPUs the load generator used on average over its load loops (sum over worker processes)."""
    cpu = result.get("worker_cpu_s") or []
    wall = result.get("worker_wall_s") or []
    if not cpu or not wall or len(cpu) != len(wall):
        return None
    runs = max(1, result.get("repeats") or 1)
    return sum(cpu) / (sum(wall) / len(wall)) / runs
