"""The metric catalogue: one table of every figure a run reports, what its unit is, which way is better
and its kind (figures.py). History, compare, reports and claims ask it; nothing else decides a
metric's direction.

    CATALOGUE.figure("latency.p99_ms")   # Figure(unit "ms", better LOWER, kind HEADLINE)
    claim_figure("a: tps > 1.1 * b: tps")  # a claim's measured figure: better higher, a headline

The pools' figures are declared in results/metrics.py, a variant run's own in results/model.py, each
sampler's on its class (samplers/); a sampler added to the registry brings its figures with it.
"""

from __future__ import annotations

from ..figures import Better, Catalogue, Figure, Kind
from ..samplers.registry import SAMPLERS
from ..scenario.claims import parse_claim
from .metrics import POOL_FIGURES
from .model import RUN_FIGURES

CATALOGUE = Catalogue([*POOL_FIGURES, *RUN_FIGURES, *(f for cls in SAMPLERS.values() for f in cls.figures)])

_OP_BETTER = {"<": Better.LOWER, "<=": Better.LOWER, ">": Better.HIGHER, ">=": Better.HIGHER}


def claim_figure(text: str) -> Figure:
    """A claim's measured figure (left over right, or its left side): a headline, better on the side the
    claim's operator wants (`<` lower, `>` higher; `==` and `!=` want neither). The claim is read by the
    scenario's own parser; text that does not parse is an unknown figure."""
    try:
        claim = parse_claim(text)
    except ValueError:
        return Figure(text, "", Better.NEUTRAL, Kind.HEADLINE, "a claim's figure", known=False)
    unit = "×" if claim.right.ref is not None else ""
    return Figure(text, unit, _OP_BETTER.get(claim.op, Better.NEUTRAL), Kind.HEADLINE,
                  claim.description or "a claim's measured figure")
