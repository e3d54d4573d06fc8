"""What a figure means: its unit, which way is better, and its kind. The types of the metric catalogue.

A Figure is one entry: a metric name or a glob of names as reports, summary.csv, claims and the
history write them (`tps`, `latency.p99_ms`, `statements.*.mean_ms`, `waits.*`), its unit, the way
that is better (Better.HIGHER, LOWER, or NEUTRAL: shown, never gated), and its Kind:

  HEADLINE    what a run is for: throughput, latency mean and tail, schedule lag, the share of
              transactions that failed, retried, ran late or were skipped; a claim's figure.
              The history's gate watches these unless told otherwise.
  DIAGNOSTIC  figures that explain a headline one: per-statement latency, WAL per transaction,
              sampler rates.
  COUNT       how many times something happened in the window (a whole number: ties are common).
  SIZE        bytes, pages or rows held.
  SHARE       a part of a whole, between 0 and 1 (wait-event shares).

Pools and samplers declare their figures next to the code that makes them; results/catalogue.py
puts them into the one Catalogue every reader asks. Nobody guesses a direction from a name.

A Metric is one measured figure as a record: its name, value, unit and Scope, and the Place it was
measured (variant, pool, clients, server, repeat). Whatever measures a figure makes its record here
(a pool's in results/metrics.py, a sampler's on its class, a probe's and a claim's where they are run
and judged); results/metric.py says more.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, NamedTuple


class Better(StrEnum):
    HIGHER = "higher"
    LOWER = "lower"
    NEUTRAL = "neutral"  # no better way: shown, never gated unless a direction is given


class Way(StrEnum):
    """How a move of a figure reads, given which way is better (stored in JSON as these words)."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"  # no move at all
    NEUTRAL = "neutral"  # the figure has no better way


def way_of(better: Better, change: float | None) -> Way:
    """How a move of `change` (signed; None: up from exactly 0) reads for a figure better `better`."""
    if better is Better.NEUTRAL:
        return Way.NEUTRAL
    if change == 0:
        return Way.SAME
    rose = change is None or change > 0
    return Way.WORSE if rose == (better is Better.LOWER) else Way.BETTER


class Kind(StrEnum):
    HEADLINE = "headline"
    DIAGNOSTIC = "diagnostic"
    COUNT = "count"
    SIZE = "size"
    SHARE = "share"


@dataclass(frozen=True)
class Figure:
    """One catalogue entry. `window`: a rate over the measurement window whose one run carries an error of
    its own (claims and the history use the window's standard error when a run has one repeat)."""

    pattern: str
    unit: str
    better: Better
    kind: Kind
    about: str = ""
    window: bool = False
    known: bool = True  # False: a name the catalogue does not declare (shown as a diagnostic, never gated)

    def matches(self, metric: str) -> bool:
        return metric == self.pattern or fnmatchcase(metric, self.pattern)

    @property
    def discrete(self) -> bool:
        """Whole numbers (counts): many runs may give the very same value."""
        return self.kind is Kind.COUNT


def unknown(metric: str) -> Figure:
    return Figure(metric, "", Better.NEUTRAL, Kind.DIAGNOSTIC, known=False)


class Catalogue:
    """Figures in the order declared; a name takes the first entry that matches it (exact names before
    globs, so `latency.p99_ms` may say more than `latency.*`)."""

    def __init__(self, figures):
        self.figures = tuple(figures)
        self._exact = {}
        for f in self.figures:
            if not any(ch in f.pattern for ch in "*?["):
                self._exact.setdefault(f.pattern, f)
        self._globs = tuple(f for f in self.figures if f.pattern not in self._exact or self._exact[f.pattern] is not f)
        self._cache: dict[str, Figure] = {}

    def figure(self, metric: str) -> Figure:
        """The entry for a metric name (an unknown name: a neutral diagnostic, `known` False)."""
        hit = self._cache.get(metric)
        if hit is None:
            hit = self._exact.get(metric) or next((f for f in self._globs if f.matches(metric)), None) \
                or unknown(metric)
            self._cache[metric] = hit
        return hit

    def better(self, metric: str) -> Better:
        return self.figure(metric).better

    def declares(self, metric: str) -> bool:
        return self.figure(metric).known

    def names(self) -> list[str]:
        return [f.pattern for f in self.figures]


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

    @property
    def place(self) -> "Place":
        return Place(self.variant, self.pool, self.clients, self.server, self.repeat)

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


class Place(NamedTuple):
    """Where figures were measured: the key of their records (pool "" for the variant run as a whole)."""

    variant: str
    pool: str
    clients: int
    server: str | None
    repeat: int

    def records(self, figures: dict[str, Any], scope: Scope, catalogue: "Catalogue | None" = None) -> tuple:
        """Figures (name -> value, in their order) as records here, each with the unit `catalogue` declares
        for it ("" where it declares none)."""
        return tuple(Metric(name, value, unit_of(catalogue, name), scope, *self) for name, value in figures.items())


def unit_of(catalogue: "Catalogue | None", name: str) -> str:
    """The unit a catalogue declares for a figure, "" where it declares none."""
    if catalogue is None:
        return ""
    figure = catalogue.figure(name)
    return figure.unit if figure.known else ""
