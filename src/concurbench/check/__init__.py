"""Verdicts on a scenario's `expect` claims, and the sequential check that decides them."""

from .evaluate import evaluate
from .plan import CheckPolicy, Sequential

__all__ = ["CheckPolicy", "Sequential", "evaluate"]
