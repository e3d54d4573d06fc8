"""Scenario files: loading, validation and the frozen model."""

from .loader import load_scenario
from .model import Scenario, Variant, Pool

__all__ = ["load_scenario", "Scenario", "Variant", "Pool"]
