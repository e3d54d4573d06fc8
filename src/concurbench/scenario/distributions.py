"""Parameter distributions as a scenario writes them, parsed and checked (workload/distributions.py
draws them).

Written as in a scenario: ``constant(5)``, ``uniform(1, 100000)``, ``zipfian(1, 100, 1.1)`` (the
distribution of pgbench's ``random_zipfian``: P(k) proportional to 1/k^s over min..max),
``sequence(1)`` or ``sequence(1, 1000)`` (values unique across all sessions of a pool, wrapping
at max).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..util import suggest

_CALL = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*$", re.S)



class DistributionKind(StrEnum):
    """A parameter's distribution, as a scenario writes its name."""

    CONSTANT = "constant"
    UNIFORM = "uniform"
    ZIPFIAN = "zipfian"
    SEQUENCE = "sequence"


CONSTANT, UNIFORM, ZIPFIAN, SEQUENCE = DistributionKind
ARITY = {CONSTANT: (1, 1), UNIFORM: (2, 2), ZIPFIAN: (3, 3), SEQUENCE: (1, 2)}  # arguments: fewest, most


@dataclass(frozen=True)
class Distribution:
    kind: DistributionKind
    args: tuple

    def __post_init__(self):
        object.__setattr__(self, "kind", DistributionKind(self.kind))  # a kind given as its word (tests, scripts)

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(str(a) for a in self.args)})"


def _number(text: str):
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_distribution(value) -> Distribution:
    """Parse a distribution written in a scenario; raises ValueError with a readable reason."""
    if isinstance(value, bool):
        raise ValueError(f"expected a distribution such as uniform(1, 100), got {value}")
    if isinstance(value, (int, float)):
        return Distribution(CONSTANT, (value,))
    match = _CALL.match(str(value))
    if not match:
        raise ValueError(
            f"expected a number or a distribution such as uniform(1, 100) or zipfian(1, 100, 1.1), got '{value}'")
    written, body = match.group(1), match.group(2)
    try:
        kind = DistributionKind(written)
    except ValueError:
        names = [k.value for k in DistributionKind]
        raise ValueError(f"unknown distribution '{written}'{suggest(written, names)}; known: {', '.join(names)}") \
            from None
    if kind is CONSTANT:
        raw = body.strip()
        try:
            args = (_number(raw),)
        except ValueError:
            args = (raw.strip("'\""),)
        return Distribution(kind, args)
    try:
        args = tuple(_number(part) for part in body.split(",")) if body.strip() else ()
    except ValueError:
        raise ValueError(f"{kind}(...) takes numbers, got '{body}'") from None
    low, high = ARITY[kind]
    if not low <= len(args) <= high:
        want = str(low) if low == high else f"{low} or {high}"
        raise ValueError(f"{kind}(...) takes {want} arguments, got {len(args)}")
    if kind in (UNIFORM, ZIPFIAN, SEQUENCE):
        for arg in args[:2]:
            if not isinstance(arg, int):
                raise ValueError(f"{kind}(...) bounds must be integers, got {arg}")
    if kind in (UNIFORM, ZIPFIAN) and args[0] > args[1]:
        raise ValueError(f"{kind}(...) needs min <= max, got {args[0]} > {args[1]}")
    if kind is SEQUENCE and len(args) == 2 and args[0] > args[1]:
        raise ValueError(f"sequence(...) needs start <= max, got {args[0]} > {args[1]}")
    if kind is ZIPFIAN and not 1.001 <= float(args[2]) <= 1000:
        raise ValueError(f"zipfian(...) needs 1.001 <= s <= 1000 (as pgbench), got {args[2]}")
    return Distribution(kind, args)
