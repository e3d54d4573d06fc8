"""The metric catalogue: one table of every figure a run reports, what its unit is, which way is better
and its kind (figures.py). History, compare, reports and claims ask it; nothing else decides a
metric's direction.

    CATALOGUE.figure("latency.p99_ms")   # Figure(unit "ms", better LOWER, kind HEADLINE)
    claim_figure(key, form)                # a claim's measured figure: `>` better higher, a headline

The pools' figures are declared in results/metrics.py, a variant run's own in results/metric.py, each
sampler's on its class (samplers/); a sampler added to the registry brings its figures with it.
"""

from __future__ import annotations

from ..figures import Better, Catalogue, Figure, Kind
from ..samplers.registry import SAMPLERS
from ..scenario.claims import ClaimForm
from .metrics import POOL_FIGURES
from .metric import RUN_FIGURES

CATALOGUE = Catalogue([*POOL_FIGURES, *RUN_FIGURES, *(f for cls in SAMPLERS.values() for f in cls.figures)])

_OP_BETTER = {"<": Better.LOWER, "<=": Better.LOWER, ">": Better.HIGHER, ">=": Better.HIGHER}


def claim_figure(name: str, form: ClaimForm | None, description: str = "") -> Figure:
    """A claim's measured figure (left over right, or its left side), named `name` (its key): a headline,
    better on the side the claim's parsed form wants (`<` lower, `>` higher; `==` and `!=` want neither).
    Without a form (a claim whose form was never stored) it is an unknown figure."""
    if form is None:
        return Figure(name, "", Better.NEUTRAL, Kind.HEADLINE, "a claim's figure", known=False)
    unit = "×" if form.right.ref is not None else ""
    return Figure(name, unit, _OP_BETTER.get(form.op, Better.NEUTRAL), Kind.HEADLINE,
                  description or "a claim's measured figure")
