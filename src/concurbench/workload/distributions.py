"""Drawing a pool's parameters once per transaction, from the distributions scenario/distributions.py parses."""

from __future__ import annotations

import bisect
import math
import random
from itertools import accumulate
from typing import Callable

from ..scenario.distributions import CONSTANT, SEQUENCE, UNIFORM, ZIPFIAN, Distribution

# Ranges up to this size use an exact cumulative table; larger ones use rejection sampling.
_TABLE_LIMIT = 200_000


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
    if kind is CONSTANT:
        value = args[0]
        return lambda: value
    if kind is UNIFORM:
        return _uniform(rng, *args)
    if kind is ZIPFIAN:
        low, high, s = args[0], args[1], float(args[2])
        n = high - low + 1
        draw = _zipf_table(n, s) if n <= _TABLE_LIMIT else _zipf_rejection(n, s)
        offset = low - 1
        return lambda: draw(rng) + offset
    if kind is SEQUENCE:
        start = args[0]
        span = (args[1] - start + 1) if len(args) == 2 else None
        counter = iter(range(session, 1 << 62, max(sessions, 1)))
        if span is None:
            return lambda: start + next(counter)
        return lambda: start + next(counter) % span
    raise ValueError(f"unknown distribution {kind}")
