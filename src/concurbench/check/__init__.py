"""Verdicts on a scenario's `expect` claims, and the sequential check that decides them."""

from .evaluate import check_outcome, judge_claims, with_differences, with_machine
from .rounds import CheckPolicy, Sequential

__all__ = ["CheckPolicy", "Sequential", "check_outcome", "judge_claims", "with_differences", "with_machine"]
