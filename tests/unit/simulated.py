"""Simulated runs shaped like real ones, for the tests of the decision rule (no server).

A run's window is a per-100 ms series of completed transactions. Its shape is one of:
  - steady: an AR(1) series around the level (neighbouring intervals correlated, as a load's are);
  - step: nothing completes for about the first half of the window (a designed stall: readers queued
    behind a lock, a snapshot released halfway), then the level; where the stall ends moves from run
    to run (by 1% of the window, sd: 20 ms of a 2 s window);
  - decay: the level falls over the window (dead row versions piling up), to a third of its start.
Runs differ by more than their windows say: every round has a drift shared by the arms that run in it
(the machine was busier or quieter for that minute), and every run a spread of its own. On a quiet
2-core machine, quick row-lock runs measured 3.5-18% between runs, shared between arms to a
correlation of 0.06 to 0.82 (docs/claims.md).
"""

from __future__ import annotations

import math
import random

from concurbench import stats as S
from concurbench.check.evaluate import Look

BUCKETS = 20  # 2 s windows of 100 ms intervals, as a quick run's


def window(rng: random.Random, shape: str, level: float, buckets: int = BUCKETS, noise: float = 0.1,
           phi: float = 0.5) -> list[float]:
    """A run's per-interval series at about `level` per interval (for `step`, after the stall)."""
    e = rng.gauss(0, noise)
    out = []
    stall_end = buckets // 2 + round(rng.gauss(0, 0.01 * buckets)) if shape == "step" else 0
    for i in range(buckets):
        e = phi * e + math.sqrt(1 - phi * phi) * rng.gauss(0, noise)
        if shape == "step" and i < stall_end:
            out.append(0.0)
            continue
        decay = math.exp(-1.1 * i / buckets) if shape == "decay" else 1.0
        out.append(max(0.0, level * decay * (1 + e)))
    return out


def run(rng: random.Random, shape: str, level: float, buckets: int = BUCKETS) -> float:
    """The run's figure: transactions per interval over its window."""
    series = window(rng, shape, level, buckets)
    return sum(series) / len(series)


def check(rng: random.Random, shapes: tuple[str, str], ratio: float, claim_factor: float, drift: float,
          spread: float, *, max_runs: int = 5, claims: int = 1, paired: bool = True,
          levels: tuple[float, ...] | None = None) -> list[tuple[str, int] | None]:
    """One simulated `--check` of `claims` claims `a > claim_factor * b`, the arms' levels in the ratio `ratio`
    (with a `step` arm against a `steady` one the stall halves the figure besides): interleaved rounds up
    to `max_runs`, a look after every round from the second at the check's levels (or `levels`), Holm
    over the open claims; a verdict once given stands. Unpaired, the rounds are not matched up.
    Returns each claim's (verdict, runs a side when given), or None where none was given."""
    data = [([], []) for _ in range(claims)]
    verdicts: list[tuple[str, int] | None] = [None] * claims
    for n in range(1, max_runs + 1):
        shared = math.exp(rng.gauss(0, drift))
        for k in range(claims):
            for side, (shape, level) in enumerate(((shapes[0], 100.0 * ratio), (shapes[1], 100.0))):
                data[k][side].append(run(rng, shape, level * shared * math.exp(rng.gauss(0, spread))))
        if n < 2:
            continue
        open_ = [k for k in range(claims) if verdicts[k] is None]
        tests = [_test(data[k], claim_factor, n, paired) for k in open_]
        look = Look(n - 1, 2, max_runs)
        level_for = look.level_for if levels is None else (lambda m, level=levels[n - 2]: level / m)
        for k, verdict in zip(open_, S.decide_family([(">", t) for t in tests], level_for)):
            if verdict != S.INCONCLUSIVE:
                verdicts[k] = (verdict, n)
        if all(verdicts):
            break
    return verdicts


def _test(sides, factor: float, n: int, paired: bool) -> S.Test:
    a, b = sides
    rounds = tuple(range(1, n + 1))
    other = rounds if paired else tuple(range(101, 101 + n))  # rounds that do not line up: no pairs
    return S.test_runs(S.Runs(tuple(a), rounds), S.Runs(tuple(b), other).scaled(factor))


def rates(outcomes: list[tuple[str, int] | None], want: str) -> tuple[float, float, float]:
    """(share decided the way `want` says, share decided the other way, mean runs a side when decided `want`)."""
    right = [o for o in outcomes if o and o[0] == want]
    wrong = sum(1 for o in outcomes if o and o[0] != want)
    runs = sum(o[1] for o in right) / len(right) if right else math.nan
    return len(right) / len(outcomes), wrong / len(outcomes), runs
