"""What the section readers share: the problems found so far, the scenario file, its parameters and
engine, the samplers it may name, and what reading collects (SQL files read, positions of fields)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol

from ..util import suggest
from .model import SamplerSpec
from .yamlpos import Checker

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a scenario's or a variant's name
PARAM_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SamplerClass(Protocol):
    """What the loader needs of a sampler class: its engine, its option names, and a check of the options
    (making one with a spec raises ConfigError when they are wrong)."""

    engine: str
    options: tuple[str, ...]

    def __call__(self, spec: SamplerSpec) -> object: ...


@dataclass(frozen=True)
class Context:
    """One per file read: the readers add to `check`, `files` and `positions`."""

    check: Checker
    path: Path  # the scenario file
    params: dict[str, Any]
    engine: str
    samplers: Mapping[str, SamplerClass]
    files: list[Path] = field(default_factory=list)  # SQL files read, for the scenario's hash
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)  # field path -> (line, column), for running/guards.py


def expand(text: str, params: dict[str, Any], report) -> Any:
    """Text with each ${name} replaced by its parameter; a text that is one reference alone becomes the
    parameter's value (a number stays a number). `report` is told of each unknown name."""
    whole = PARAM_REF.fullmatch(text.strip())
    if whole and whole.group(1) in params:
        return params[whole.group(1)]

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in params:
            report(f"unknown parameter '${{{name}}}'{suggest(name, params)}")
            return match.group(0)
        return str(params[name])

    return PARAM_REF.sub(one, text)
