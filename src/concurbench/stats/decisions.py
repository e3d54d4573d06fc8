"""Verdicts: PASS, FAIL or INCONCLUSIVE, with the error rate held over claims and over looks.

A verdict is directional: PASS when the difference is significant in the claim's direction, FAIL when
it is significant the other way, each direction at half the level (a two-sided test). Where the truth
sits exactly on the claim's boundary, as two identical variants do for `a > b`, either verdict is a
false alarm (a CI gate would fail on a FAIL), so the two together are held to the level. A claim's
interval is shown at 1 - its level (95% for one claim at one look): it leaves out the boundary exactly
when the verdict decides.

Over looks: a sequential check looks at the claims after every round of runs, from the second.
The error rate is spent over the planned looks with the power family of Kim and DeMets,
alpha(t) = ALPHA * t ** SPENDING_POWER at information fraction t (runs so far over the most the
check may run), and each look is tested at the part newly spent at it (`look_levels`: 0.13%, 0.52%,
1.4% and 2.95% for looks after 2, 3, 4 and 5 runs, two-sided). By the union bound the chance of any wrong verdict
over all looks stays at most ALPHA whatever the correlation between looks, which matters here: with
runs as the unit a look's t statistic has 1 to 4 degrees of freedom, and group-sequential boundaries
computed for normal statistics (O'Brien-Fleming-type, tried first) let 5.5-6.6% wrong verdicts through
in simulation. The power 4 keeps early looks for overwhelming effects and gives the last look
most of the rate; docs/claims.md has the simulated power of other choices.

Over claims: Holm's step-down at every look (`step_down`): of the m claims still open, the one with
the smallest p-value is tested at the look's level over m, the next over m - 1, and so on until one is
not decided. A claim decided at an earlier look leaves the family, so the others share its part.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Callable

from .estimates import ALPHA
from .tdist import t_quantile
from .significance import Test


class Verdict(StrEnum):
    """The verdict on a claim. The decision rule gives PASS, FAIL or INCONCLUSIVE; NOT_EVALUATED is a claim
    that was never tested (no data, a variant left out, a server it is not about). The members are the
    words themselves (`Verdict.PASS == "pass"`), so JSON and text show the words."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    NOT_EVALUATED = "not evaluated"


PASS, FAIL, INCONCLUSIVE = Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE  # the decision rule's outcomes
MAX_RUNS_ESTIMATED = 100  # beyond this many runs a side, `runs_to_decide` says only "more than"


def holm(p_values: list[float | None]) -> list[float | None]:
    """Bonferroni-Holm adjusted p-values of a family (None: a claim that could not be tested, left out).

    A claim is significant with the others at level `a` when its adjusted p-value is at most `a`;
    the chance of any false rejection in the family is then at most `a`, whatever the dependence.
    """
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    family = len(order)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (family - rank) * p))
        out[i] = running
    return out


def decide(op: str, test: Test, p: float | None, level: float) -> Verdict:
    """PASS, FAIL or INCONCLUSIVE for `left op right`, given the claim's two-sided p-value and the level it
    is tested at (its share of the error rate at this look).

    A significant difference decides an inequality by its sign. Equality can only be shown exactly:
    `==` passes when both sides are exact (a number, or repeats that all agree) and equal, and fails
    when they differ significantly; `!=` the other way round.
    """
    if test.p_greater is None:
        return INCONCLUSIVE
    if test.se == 0 and test.diff == 0:
        return PASS if op in ("==", ">=", "<=") else FAIL
    if p is None or p > level:
        return INCONCLUSIVE
    greater = test.diff > 0
    if op in (">", ">="):
        return PASS if greater else FAIL
    if op in ("<", "<="):
        return FAIL if greater else PASS
    return FAIL if op == "==" else PASS


def decide_family(items: list[tuple[str, Test]], level_for: Callable[[int], float] | float) -> list[Verdict]:
    """Verdicts of a family of claims `(op, test)` looked at together (Holm's step-down): `level_for(m)` is
    the look's level for a claim with 1/m of the error rate, or a number `a` for one look at a / m."""
    if not callable(level_for):
        total = level_for
        level_for = lambda m: total / m  # noqa: E731 - one look: Holm's own a / m
    steps = step_down([test.two_sided for _, test in items], level_for)
    return [decide(op, test, test.two_sided if ok else None, level if level is not None else 0.0)
            for (op, test), (ok, level) in zip(items, steps)]


# Looks ---------------------------------------------------------------------------------------------------

def spent(fraction: float, alpha: float = ALPHA) -> float:
    """The error rate spent by information fraction `fraction` (the power family, ALPHA * t ** 4)."""
    return alpha * min(1.0, max(0.0, fraction)) ** SPENDING_POWER


SPENDING_POWER = 4


def look_levels(first: int, last: int, alpha: float = ALPHA) -> tuple[float, ...]:
    """The (two-sided) level of each look of a check that looks after `first`, first + 1, ..., `last` runs a
    side: what the spending function newly spends at it. One look (first >= last) tests at `alpha`."""
    if first >= last:
        return (alpha,)
    out, before = [], 0.0
    for n in range(first, last + 1):
        now = spent(n / last, alpha)
        out.append(now - before)
        before = now
    return tuple(out)


def step_down(p_values: list[float | None], level_for: Callable[[int], float]) -> list[tuple[bool, float | None]]:
    """Holm's step-down at one look: (decided, the level the claim was tested at) for each p-value.

    `level_for(m)` is this look's level for a claim with 1/m of it (the look's level over m). The
    smallest p-value is tested at level_for(m), the next at level_for(m - 1), and so on; the first that
    is not decided stops the rest (each is shown the level of its rank). None: not tested.
    """
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    family = len(order)
    out: list[tuple[bool, float | None]] = [(False, None)] * len(p_values)
    going = True
    for rank, (p, i) in enumerate(order):
        level = level_for(family - rank)
        going = going and p <= level
        out[i] = (going, level)
    return out


def runs_to_decide(test: Test, alpha, *, limit: int = MAX_RUNS_ESTIMATED) -> int | None:
    """Runs a side that would decide the claim if the difference and the spread per run stay as measured:
    the first n above the runs so far at which the difference would clear the two-sided level `alpha`
    (a number, or a function of n: the level a check that ran to n would test at). None beyond `limit`,
    or without a spread to scale."""
    if test.se is None or test.se == 0 or not test.rounds or math.isinf(test.diff) or test.diff == 0:
        return None
    per_run = test.se * math.sqrt(test.rounds)  # the spread of one round's figure (or pair)
    for n in range(max(2, test.rounds + 1), limit + 1):
        level = alpha(n) if callable(alpha) else alpha
        if abs(test.diff) / (per_run / math.sqrt(n)) >= t_quantile(1 - level / 2, _df_at(test, n)):
            return n
    return None


def _df_at(test: Test, n: int) -> float:
    """Degrees of freedom the test would have with n runs a side: they grow with the runs, as they did."""
    if test.df is None or math.isinf(test.df):
        return math.inf
    return max(1.0, test.df * (n - 1) / max(1, test.rounds - 1)) if test.rounds > 1 else float(n - 1)

