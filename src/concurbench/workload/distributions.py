"""Parameter distributions drawn once per transaction.

Written as in a scenario: ``constant(5)``, ``uniform(1, 100000)``, ``zipfian(1, 100, 1.1)`` (the
distribution of pgbench's ``random_zipfian``: P(k) proportional to 1/k^s over min..max),
``sequence(1)`` or ``sequence(1, 1000)`` (values unique across all sessions of a pool, wrapping
at max).
"""

from __future__ import annotations

import bisect
import math
import random
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Callable

_CALL = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*$", re.S)

ARITY = {"constant": (1, 1), "uniform": (2, 2), "zipfian": (3, 3), "sequence": (1, 2)}

# Ranges up to this size use an exact cumulative table; larger ones use rejection sampling.
_TABLE_LIMIT = 200_000


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
        from ..scenario.yamlpos import suggest
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


def zipf_probabilities(n: int, s: float) -> list[float]:
    """P(k) for k = 1..n when P(k) is proportional to k^-s."""
    weights = [k ** -s for k in range(1, n + 1)]
    total = math.fsum(weights)
    return [w / total for w in weights]


def _zipf_table(n: int, s: float) -> Callable[[random.Random], int]:
    cumulative = list(accumulate(k ** -s for k in range(1, n + 1)))
    total = cumulative[-1]

    def draw(rng: random.Random) -> int:
        return bisect.bisect_right(cumulative, rng.random() * total) + 1

    return draw


def _zipf_rejection(n: int, s: float) -> Callable[[random.Random], int]:
    """Devroye's rejection method for the Zipf law, truncated at n (the method pgbench uses)."""
    b = 2.0 ** (s - 1.0)

    def draw(rng: random.Random) -> int:
        while True:
            u = 1.0 - rng.random()  # in (0, 1]
            v = rng.random()
            try:
                x = math.floor(u ** (-1.0 / (s - 1.0)))
            except OverflowError:  # C's pow gives inf here, which is rejected below
                continue
            if x < 1 or x > n:
                continue
            t = (1.0 + 1.0 / x) ** (s - 1.0)
            if v * x * (t - 1.0) / (b - 1.0) <= t / b:
                return int(x)

    return draw


def _uniform(rng: random.Random, low: int, high: int) -> Callable[[], int]:
    """rng.randint(low, high), value for value: the same rejection sampling on getrandbits, without
    randint's argument checks (a fifth of the time, drawn once per parameter and transaction)."""
    span = high - low + 1
    bits = span.bit_length()
    getrandbits = rng.getrandbits

    def draw() -> int:
        r = getrandbits(bits)
        while r >= span:
            r = getrandbits(bits)
        return low + r

    return draw


def make_drawer(dist: Distribution, rng: random.Random, session: int = 0, sessions: int = 1) -> Callable[[], object]:
    """A zero-argument function returning the next value for one session."""
    kind, args = dist.kind, dist.args
    if kind == "constant":
        value = args[0]
        return lambda: value
    if kind == "uniform":
        return _uniform(rng, *args)
    if kind == "zipfian":
        low, high, s = args[0], args[1], float(args[2])
        n = high - low + 1
        draw = _zipf_table(n, s) if n <= _TABLE_LIMIT else _zipf_rejection(n, s)
        offset = low - 1
        return lambda: draw(rng) + offset
    if kind == "sequence":
        start = args[0]
        span = (args[1] - start + 1) if len(args) == 2 else None
        counter = iter(range(session, 1 << 62, max(sessions, 1)))
        if span is None:
            return lambda: start + next(counter)
        return lambda: start + next(counter) % span
    raise ValueError(f"unknown distribution {kind}")
