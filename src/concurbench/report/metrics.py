"""Turn raw measurements into the named metrics reports, CSV and claims all use.

Names are dotted paths: `tps`, `latency.p95_ms`, `statements.lock.mean_ms`, `errors.deadlock`,
`wal.bytes_per_txn`, `multixact.created`, `waits.Lock:transactionid` (share of sampled sessions).
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
    return out


def _latency(lat) -> dict:
    def r(value):
        return None if value is None else round(value, 4)

    return {"mean_ms": r(lat.mean_ms()), "p50_ms": r(lat.percentile_ms(50.0)), "p95_ms": r(lat.percentile_ms(95.0)),
            "p99_ms": r(lat.percentile_ms(99.0)), "max_ms": r(lat.max_ms())}


def row_metrics(result: dict, pool: str) -> dict:
    """Flat metrics for one measured pool of one variant run, sampler figures included."""
    pm = result["pools"][pool]
    flat: dict = {}
    _flatten(pm["metrics"], "", flat)
    samplers = result.get("samplers", {})
    txns = sum(p["metrics"]["transactions"] for p in result["pools"].values()) or None
    wal = samplers.get("wal") or {}
    if wal.get("bytes") is not None:
        flat["wal.bytes"] = wal["bytes"]
        flat["wal.bytes_per_txn"] = round(wal["bytes"] / txns, 1) if txns else None
        if wal.get("records") is not None:
            flat["wal.records"] = wal["records"]
            flat["wal.fpi"] = wal.get("fpi")
    for name, summary in samplers.items():
        if name in ("wal", "wait_events") or not isinstance(summary, dict):
            continue
        for key, value in summary.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                flat[f"{name}.{key}"] = value
    waits = (samplers.get("wait_events") or {}).get("share") or {}
    for key, value in waits.items():
        flat[f"waits.{key}"] = value
    for name, times in (result.get("probes") or {}).items():
        for when, rows in times.items():
            flat[f"probes.{name}.{when}.rows"] = len(rows)
            for column, value in (rows[0].items() if rows else []):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    flat[f"probes.{name}.{when}.{column}"] = value
    flat["elapsed_s"] = result["elapsed_s"]
    return flat


def _flatten(node, prefix: str, out: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = node


def top_waits(result: dict, n: int = 3) -> list[tuple[str, float]]:
    share = ((result.get("samplers") or {}).get("wait_events") or {}).get("share") or {}
    return list(share.items())[:n]
