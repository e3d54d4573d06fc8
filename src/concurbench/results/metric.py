"""One metric record: a figure by name, with its value, unit and scope, and the key that places it.

    Metric("tps", 812.4, "1/s", Scope.POOL, variant="advisory", pool="lockers", clients=8, server="18.6", repeat=1)
    Metric("wal.bytes_per_txn", 96.0, "B", Scope.SAMPLER, variant="advisory", pool="", clients=9, ...)

A variant run's figures become records once (`measured`), from what its pools, samplers and probes
measured: a pool's figures under its pool (scope pool), each sampler's summary as the sampler names its
figures (`Sampler.flat`: `wal.bytes_per_txn`, `waits.Lock:tuple`; scope sampler), a probe's rows
(`probes.NAME.WHEN.COLUMN`; scope probe) and the measurement window (`elapsed_s`; scope run) under pool
"". The unit is the one the figure's declaration gives (the pools' in results/metrics.py, each sampler's
on its class, the run's here); what a figure means beyond its unit (which way is better, its kind) stays
the catalogue's (results/catalogue.py). A sampler that gave no summary is a SamplerFailure (samplers/base.py),
not a figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from ..figures import Better, Catalogue, Figure, Kind
from ..samplers.base import Sampler, SamplerFailure, is_number
from ..samplers.registry import SAMPLERS
from .metrics import POOL_FIGURES

# the figures of a variant run as a whole (besides its pools' and its samplers')
RUN_FIGURES = (
    Figure("elapsed_s", "s", Better.LOWER, Kind.DIAGNOSTIC,
           "the measurement window used (the result of a variant that runs a fixed count of transactions)"),
    Figure("probes.*.rows", "rows", Better.NEUTRAL, Kind.COUNT, "rows a probe returned"),
    Figure("probes.*", "", Better.NEUTRAL, Kind.DIAGNOSTIC, "a number a probe's first row gave"),
)


class Scope(StrEnum):
    """What a figure is a figure of (the words stored)."""

    POOL = "pool"
    RUN = "run"
    SAMPLER = "sampler"
    PROBE = "probe"
    CLAIM = "claim"


@dataclass(frozen=True)
class Metric:
    """One figure where it was measured. `pool` is "" for a figure of the variant run as a whole, whose
    `clients` are then all its pools' together. `value` is as measured: a number, None where the figure was
    not measured (a rate of nothing), or a pool's text (its error messages)."""

    name: str
    value: Any
    unit: str
    scope: Scope
    variant: str
    pool: str
    clients: int
    server: str | None
    repeat: int

    def __post_init__(self):
        object.__setattr__(self, "scope", Scope(self.scope))

    def as_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "unit": self.unit, "scope": self.scope.value,
                "variant": self.variant, "pool": self.pool, "clients": self.clients, "server": self.server,
                "repeat": self.repeat}

    @classmethod
    def from_dict(cls, data: dict) -> "Metric":
        """A stored record; KeyError or ValueError when it is not one (the caller names where)."""
        return cls(str(data["name"]), data["value"], str(data.get("unit") or ""), Scope(data["scope"]),
                   str(data["variant"]), str(data.get("pool") or ""), int(data["clients"]), data.get("server"),
                   int(data.get("repeat") or 1))


def measured(run) -> tuple[Metric, ...]:
    """A variant run's figures as records (see above): each pool's, then the samplers', the probes' and the
    run's own. `run` is a results.model.VariantRun."""
    total = sum(int(p.clients or 0) for p in run.pools.values())

    def record(name: str, value, unit: str, scope: Scope, pool: str = "", clients: int = total) -> Metric:
        return Metric(name, value, unit, scope, run.variant, pool, clients, run.server, run.repeat)

    out: list[Metric] = []
    for pool in run.pools.values():
        flat: dict = {}
        _flatten(pool.metrics, "", flat)
        out += [record(name, value, _unit(_POOLS, name), Scope.POOL, pool.name, int(pool.clients or 0))
                for name, value in flat.items()]
    transactions = sum(p.metrics.get("transactions") or 0 for p in run.pools.values()) or None
    samplers = [(SAMPLERS.get(name) or _unregistered(name), summary) for name, summary in run.samplers.items()
                if isinstance(summary, dict)]
    for cls, summary in sorted(samplers, key=lambda s: s[0].figures_rank):
        out += [record(figure, value, _unit(_sampler_figures(cls), figure), Scope.SAMPLER)
                for figure, value in cls.flat(summary, transactions).items()]
    for name, times in run.probes.items():
        for when, rows in times.items():
            figure = f"probes.{name}.{when}.rows"
            out.append(record(figure, len(rows), _unit(_RUN, figure), Scope.PROBE))
            out += [record(f"probes.{name}.{when}.{column}", value, "", Scope.PROBE)
                    for column, value in (rows[0].items() if rows else []) if is_number(value)]
    out.append(record("elapsed_s", run.elapsed_s, "s", Scope.RUN))
    return tuple(out)


_POOLS = Catalogue(POOL_FIGURES)
_RUN = Catalogue(RUN_FIGURES)


@lru_cache(maxsize=None)
def _sampler_figures(cls: type[Sampler]) -> Catalogue:
    return Catalogue(cls.figures)


@lru_cache(maxsize=None)
def _unregistered(name: str) -> type[Sampler]:
    """A sampler a stored run names that this concurbench does not know: its numbers, by its name."""
    return type(f"Unknown_{name}", (Sampler,), {"name": name})


def _unit(catalogue: Catalogue, name: str) -> str:
    figure = catalogue.figure(name)
    return figure.unit if figure.known else ""


def _flatten(node, prefix: str, out: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = node
