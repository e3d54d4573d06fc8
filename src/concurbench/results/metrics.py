"""Turn a pool's raw measurements into the metrics a PoolResult keeps (`tps`, `latency`, `statements`...).

Reports, CSV and claims read them flattened into dotted names by VariantRun.flat_metrics:
`tps`, `latency.p95_ms`, `statements.lock.mean_ms`, `errors.deadlock`, `wal.bytes_per_txn`,
`multixact.created`, `waits.Lock:transactionid` (share of sampled sessions).
"""

from __future__ import annotations

from ..engines.classes import ALL as ERROR_CLASSES
from ..workload.stats import PoolStats


def pool_metrics(stats: PoolStats, elapsed_s: float) -> dict:
    stats.flush()
    lat = stats.txn
    out = {
        "sessions": stats.sessions,
        "transactions": stats.transactions,
        "tps": round(stats.transactions / elapsed_s, 3) if elapsed_s > 0 else None,
        "failed": stats.failed,
        "retries": stats.retries,
        "errors": {k: stats.errors.get(k, 0) for k in ERROR_CLASSES},
        "latency": _latency(lat),
        "statements": {name: {"count": s.count, **_latency(s)} for name, s in stats.statements.items()},
        "statements_executed": stats.statements_executed,
        "error_messages": dict(stats.error_messages.most_common(5)),
    }
    if stats.lag.count or stats.skipped:  # a rate-driven pool: its schedule lag, late and skipped transactions
        lag = _latency(stats.lag)
        out["lag"] = {k: lag[k] for k in ("mean_ms", "p99_ms", "max_ms")}
        out["late"] = stats.late
        out["skipped"] = stats.skipped
    return out


def _latency(lat) -> dict:
    def r(value):
        return None if value is None else round(value, 4)

    return {"mean_ms": r(lat.mean_ms()), "p50_ms": r(lat.percentile_ms(50.0)), "p95_ms": r(lat.percentile_ms(95.0)),
            "p99_ms": r(lat.percentile_ms(99.0)), "max_ms": r(lat.max_ms())}
