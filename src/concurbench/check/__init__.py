"""Verdicts on a scenario's `expect` claims, and the sequential check that decides them."""

from .evaluate import check_outcome, evaluate, with_differences, with_machine
from .plan import CheckPolicy, Sequential

__all__ = ["CheckPolicy", "Sequential", "check_outcome", "evaluate", "with_differences", "with_machine"]
