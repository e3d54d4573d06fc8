"""The hosts' reports made one: every pool's statistics merged exactly (histograms added, counts summed,
series added bucket by bucket: the hosts' windows start together, so bucket i is the same 100 ms on every
host), and a per-host breakdown (sessions, transactions, tps, latency percentiles from that host's own
merged histograms, CPU used, waiting for a CPU, schedule lag, clock) so a host that is itself the bottleneck
shows."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..scenario.model import Pool
from ..workload.stats import PoolStats
from .hosts import LoadHost

OK, LOST = "ok", "lost"  # a host's status in the breakdown


@dataclass
class Merged:
    """What the reporting hosts measured, as one load generator's result would hold it."""

    pools: dict[str, PoolStats]
    worker_cpu_s: list[float] = field(default_factory=list)
    worker_wall_s: list[float] = field(default_factory=list)
    worker_wait_s: list[float | None] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    workers: int = 0
    reported: int = 0
    stopped: str | None = None
    loop: str = "python"
    interrupted: bool = False


def merge(pools: list[Pool], reports: dict[str, dict]) -> Merged:
    """The reports (host -> run_share's dict) merged, hosts in name order."""
    out = Merged({p.name: PoolStats(p.name) for p in pools})
    for host in sorted(reports):
        report = reports[host]
        for name, data in report["pools"].items():
            out.pools[name].merge(PoolStats.from_dict(data))
        out.worker_cpu_s += report["worker_cpu_s"]
        out.worker_wall_s += report["worker_wall_s"]
        out.worker_wait_s += report["worker_wait_s"]
        out.messages += [f"load host {host}: {m}" for m in report["messages"]]
        out.workers += report["workers"]
        out.reported += report["reported"]
        out.stopped = out.stopped or (f"load host {host}: {report['stopped']}" if report.get("stopped") else None)
        out.loop = report["loop"]
        out.interrupted = out.interrupted or bool(report.get("interrupted"))
    return out


def host_row(host: LoadHost, sessions: int, pools: list[Pool], report: dict | None, elapsed_s: float,
             lost: str | None = None) -> dict:
    """One host's line of the breakdown; `report` None (and `lost` its reason) for a host that sent none."""
    row = {"host": host.name, "address": host.address, "status": LOST if report is None else OK, "why": lost,
           "sessions": sessions, "cpus": host.cpus, "clock_offset_ms": round(host.offset_ns / 1e6, 3),
           "clock_uncertainty_ms": round(host.rtt_ns / 2e6, 3)}
    if report is None:
        return row
    measured = PoolStats("measured")
    lag = PoolStats("lag")
    for pool in pools:
        data = report["pools"].get(pool.name)
        if data is None:
            continue
        stats = PoolStats.from_dict(data)
        if pool.measure:
            measured.merge(PoolStats.from_dict({**data, "pool": "measured"}))
        if stats.lag.count:
            lag.lag.merge(stats.lag)
    cpu, wall = sum(report["worker_cpu_s"]), max(report["worker_wall_s"] or [0.0])
    waited = [w for w in report["worker_wait_s"] if w is not None]
    row.update({
        "transactions": measured.transactions,
        "tps": round(measured.transactions / elapsed_s, 3) if elapsed_s > 0 else None,
        "p50_ms": _ms(measured.txn.percentile_ms(50.0)), "p95_ms": _ms(measured.txn.percentile_ms(95.0)),
        "p99_ms": _ms(measured.txn.percentile_ms(99.0)),
        "cpu_s": round(cpu, 3), "cpus_used": round(cpu / wall, 3) if wall > 0 else None,
        "cpu_wait_s": round(sum(waited), 3) if waited else None,
        "lag_mean_ms": _ms(lag.lag.mean_ms()), "lag_p99_ms": _ms(lag.lag.percentile_ms(99.0)),
        "workers": report["workers"], "reported": report["reported"], "start_late_ms": round(report["late_ns"] / 1e6, 3),
        "start_monotonic_ns": report.get("start_perf_ns"),  # CLOCK_MONOTONIC: comparable between hosts of one machine
        "txn_hist": measured.txn.to_dict()["hist"],  # the measured pools' latencies (HdrHistogram, encoded)
    })
    return row


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
