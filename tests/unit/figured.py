"""Variant runs built by hand in tests with their pools' figures written nested, as formats 1 and 2 stored them
(`{"tps": .., "latency": {"p95_ms": ..}}`): their records are made from them as a stored run's would be."""

from __future__ import annotations

from dataclasses import replace

from concurbench.results.metric import from_figures
from concurbench.results.model import VariantRun


def figured(run: VariantRun, pools: dict[str, dict]) -> VariantRun:
    """`run` with the records of these pools' figures (pool -> nested figures), its samplers', probes' and window's."""
    return replace(run, metrics=from_figures(run, pools))
