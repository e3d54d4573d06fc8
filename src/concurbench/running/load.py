"""Scenario files read against every sampler this build has: the loader the commands and the library use.

scenario/ knows only the engines; which samplers exist is the samplers' registry's to say, and this
module joins the two.
"""

from __future__ import annotations

from pathlib import Path

from ..samplers.registry import SAMPLERS
from ..scenario import loader
from ..scenario.model import Scenario


def load_scenario(path: str | Path, *, quick: bool = False, overrides: dict[str, str] | None = None) -> Scenario:
    """Read and validate a scenario file; raises ConfigError listing every problem found."""
    return loader.read_scenario(path, samplers=SAMPLERS, quick=quick, overrides=overrides)
