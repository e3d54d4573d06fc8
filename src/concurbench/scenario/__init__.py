"""Scenario files: loading, validation and the frozen model. Above engines/, errors and util only; the
loader takes the samplers it checks names against (concurbench.scenarios binds it to their registry)."""

from .model import Pool, Scenario, Variant

__all__ = ["Scenario", "Variant", "Pool"]
