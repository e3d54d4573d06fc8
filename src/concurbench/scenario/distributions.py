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

from ..util import suggest

_CALL = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*$", re.S)

ARITY = {"constant": (1, 1), "uniform": (2, 2), "zipfian": (3, 3), "sequence": (1, 2)}

@dataclass(frozen=True)
class Distribution:
    kind: str
    args: tuple

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
        return Distribution("constant", (value,))
    match = _CALL.match(str(value))
    if not match:
        raise ValueError(
            f"expected a number or a distribution such as uniform(1, 100) or zipfian(1, 100, 1.1), got '{value}'")
    kind, body = match.group(1), match.group(2)
    if kind not in ARITY:
        raise ValueError(f"unknown distribution '{kind}'{suggest(kind, ARITY)}; known: {', '.join(ARITY)}")
    if kind == "constant":
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
    if kind in ("uniform", "zipfian", "sequence"):
        for arg in args[:2]:
            if not isinstance(arg, int):
                raise ValueError(f"{kind}(...) bounds must be integers, got {arg}")
    if kind in ("uniform", "zipfian") and args[0] > args[1]:
        raise ValueError(f"{kind}(...) needs min <= max, got {args[0]} > {args[1]}")
    if kind == "sequence" and len(args) == 2 and args[0] > args[1]:
        raise ValueError(f"sequence(...) needs start <= max, got {args[0]} > {args[1]}")
    if kind == "zipfian" and not 1.001 <= float(args[2]) <= 1000:
        raise ValueError(f"zipfian(...) needs 1.001 <= s <= 1000 (as pgbench), got {args[2]}")
    return Distribution(kind, args)
