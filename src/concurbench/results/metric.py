"""One metric record per figure, made where the figure is measured, and the records of runs stored before them.

    Metric("tps", 812.4, "1/s", Scope.POOL, variant="advisory", pool="lockers", clients=8, server="18.6", repeat=1)
    Metric("wal.bytes_per_txn", 96.0, "B", Scope.SAMPLER, variant="advisory", pool="", clients=9, ...)

The record (Metric, Scope, and the Place that keys it) is figures.py's, so that what measures a figure makes
its record: a pool's figures under its pool (scope pool; results/metrics.py `pool_records`), each sampler's
summary as the sampler names its figures (`Sampler.records`: `wal.bytes_per_txn`, `waits.Lock:tuple`; scope
sampler), a probe's rows (`probe_records`: `probes.NAME.WHEN.COLUMN`; scope probe) and the measurement window
(`run_records`: `elapsed_s`; scope run) under pool "", and a claim's estimate where it is judged (scope claim).
The variant run carries them as one tuple (VariantRun.metrics), which is what every reader reads. The unit is
the one the figure's declaration gives; what a figure means beyond its unit (which way is better, its kind)
stays the catalogue's (results/catalogue.py). A sampler that gave no summary is a SamplerFailure
(samplers/base.py), not a figure.

`from_figures` makes the records of a variant run stored before records were (formats 1 and 2: its pools'
nested figures and its samplers' summaries), the one place that walks those nested shapes.
"""

from __future__ import annotations

from functools import lru_cache

from ..figures import Better, Catalogue, Figure, Kind, Metric, Place, Scope
from ..samplers.base import Sampler, SamplerFailure, is_number, sampler_records
from ..samplers.registry import SAMPLERS
from .metrics import POOLS

__all__ = ["Metric", "Place", "Scope", "SamplerFailure", "RUN_FIGURES", "probe_records", "run_records",
           "from_figures"]

# the figures of a variant run as a whole (besides its pools' and its samplers')
RUN_FIGURES = (
    Figure("elapsed_s", "s", Better.LOWER, Kind.DIAGNOSTIC,
           "the measurement window used (the result of a variant that runs a fixed count of transactions)"),
    Figure("probes.*.rows", "rows", Better.NEUTRAL, Kind.COUNT, "rows a probe returned"),
    Figure("probes.*", "", Better.NEUTRAL, Kind.DIAGNOSTIC, "a number a probe's first row gave"),
)
_RUN = Catalogue(RUN_FIGURES)


def probe_records(probes: dict[str, dict[str, list[dict]]], place: Place) -> tuple[Metric, ...]:
    """Probes' rows (probe -> when -> rows) as records: how many rows each gave, and each number of its first."""
    figures: dict = {}
    for name, times in probes.items():
        for when, rows in times.items():
            figures[f"probes.{name}.{when}.rows"] = len(rows)
            figures.update({f"probes.{name}.{when}.{column}": value
                            for column, value in (rows[0].items() if rows else []) if is_number(value)})
    return place.records(figures, Scope.PROBE, _RUN)


def run_records(elapsed_s: float, place: Place) -> tuple[Metric, ...]:
    """The variant run's own figure: the measurement window it used."""
    return place.records({"elapsed_s": elapsed_s}, Scope.RUN, _RUN)


def from_figures(run, pools: dict[str, dict]) -> tuple[Metric, ...]:
    """The records of a variant run stored before records (formats 1 and 2), or built by hand with its figures
    the older way: `pools` maps each pool to its nested figures (`{"tps": .., "latency": {"p95_ms": ..}}`), the
    samplers' summaries, probes and window are the run's (a results.model.VariantRun)."""
    total = sum(int(p.clients or 0) for p in run.pools.values())
    whole = Place(run.variant, "", total, run.server, run.repeat)
    out: list[Metric] = []
    for name, figures in pools.items():
        flat: dict = {}
        _flatten(figures, "", flat)
        clients = int(run.pools[name].clients or 0) if name in run.pools else 0
        out += Place(run.variant, name, clients, run.server, run.repeat).records(flat, Scope.POOL, POOLS)
    transactions = sum((figures or {}).get("transactions") or 0 for figures in pools.values()) or None
    classes = {name: SAMPLERS.get(name) or _unregistered(name) for name in run.samplers}
    out += sampler_records(classes, run.samplers, transactions, whole)
    out += probe_records(run.probes, whole)
    out += run_records(run.elapsed_s, whole)
    return tuple(out)


@lru_cache(maxsize=None)
def _unregistered(name: str) -> type[Sampler]:
    """A sampler a stored run names that this concurbench does not know: its numbers, by its name."""
    return type(f"Unknown_{name}", (Sampler,), {"name": name})


def _flatten(node, prefix: str, out: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = node
