"""Stores made night by night for the gate's tests (no server): one run a night with a point per (variant,
metric); a step, a release, a busy machine, the server's settings, labels, and rare events kept as a pool
keeps them (a count out of the night's transactions)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from concurbench.history import gate
from concurbench.history.gatefile import GateSpec
from concurbench.history.records import PointRecord, RunRecord, SeriesKey
from concurbench.history.store import open_store

FLAT = {("a", "tps"): 1000.0, ("a", "latency.mean_ms"): 4.0, ("a", "waits.CPU"): 0.5, ("b", "tps"): 500.0,
        ("b", "latency.mean_ms"): 8.0}


def run_record(i: int, server: str = "16.9", commit: str | None = None, *, busy: bool = False,
               settings: dict | None = None, labels: dict | None = None, cpu: str = "cpu") -> RunRecord:
    run_id = f"202612{i // 24 + 1:02d}T{i % 24:02d}0000Z-night"
    machine = {"cpu_model": cpu, "cpus": 2, "others": 1.0 if busy else 0.02, "load_average": 0.1, "busy": busy}
    return RunRecord(run_id, f"d{i}", "demo", "sha", {}, False, f"2026-12-{i // 24 + 1:02d}T{i % 24:02d}:00:00",
                     f"2026-12-{i // 24 + 1:02d}T{i % 24:02d}:10:00", "ok", None, "ci", cpu, "0.1.0",
                     commit or hashlib.sha1(str(i).encode()).hexdigest(), False, "binaries", [server], 2,
                     {"night": str(i), **(labels or {})}, machine, {server: dict(settings or {})})


class Nights:
    """A store filled night by night: each night one run with a point per (variant, metric)."""

    def __init__(self, path: Path, seed: int = 1):
        self.path, self.rng, self.night = path, np.random.default_rng(seed), 0

    def add(self, levels: dict[tuple[str, str], float], server: str = "16.9", spread: float = 0.02,
            commit: str | None = None, spreads: dict[str, float] | None = None, *, busy: bool = False,
            settings: dict | None = None, labels: dict | None = None, rare: dict | None = None,
            cpu: str = "cpu") -> str:
        """One night's run. `rare` maps (variant, metric) to a mean count of a rare event a night, kept with
        the night's transactions (about 60,000, moving with the variant's tps) as its exposure."""
        rec = run_record(self.night, server, commit, busy=busy, settings=settings, labels=labels, cpu=cpu)
        points = []
        for (variant, metric), level in levels.items():
            value = float(level * (1 + (spreads or {}).get(metric, spread) * self.rng.standard_normal()))
            points.append(PointRecord(rec.run_id, SeriesKey("demo", variant, "workers", 4, 4, server, metric), "ok",
                                      value, None, None, None, None, 1, (value,)))
        tps = {p.key.variant: p.mean for p in points if p.key.metric == "tps"}
        for (variant, metric), mean in (rare or {}).items():
            txns = round(60 * tps.get(variant, 1000.0))
            count = float(self.rng.poisson(mean * txns / 60_000))
            points.append(PointRecord(rec.run_id, SeriesKey("demo", variant, "workers", 4, 4, server, metric), "ok",
                                      round(count / txns, 6), None, None, None, None, 1, (round(count / txns, 6),),
                                      count, float(txns)))
        with open_store(self.path, create=True) as s:
            s.add(rec, points)
        self.night += 1
        return rec.run_id

    def stepped(self, variant: str, factor: float, flat: int, after: int, **kwargs) -> list[gate.GateResult]:
        """`flat` nights of FLAT, then `after` nights with `variant` slower by `factor`, each checked."""
        for _ in range(flat):
            self.add(FLAT, **kwargs)
        slow = slower(FLAT, variant, factor)
        return [self.check(self.add(slow, **kwargs)) for _ in range(after)]

    def check(self, run_id: str | None, spec: GateSpec = GateSpec()) -> gate.GateResult:
        with open_store(self.path) as s:
            runs = None if run_id is None else {r.id for r in s.runs() if r.record.run_id == run_id}
            return gate.check(s, spec, runs=runs, checked=[run_id] if run_id else None)


def slower(levels: dict, variant: str, factor: float) -> dict:
    """The levels with one variant's throughput down by `factor` and its latency up as much."""
    out = dict(levels)
    out[(variant, "tps")] = levels[(variant, "tps")] * (1 - factor)
    out[(variant, "latency.mean_ms")] = levels[(variant, "latency.mean_ms")] / (1 - factor)
    return out
