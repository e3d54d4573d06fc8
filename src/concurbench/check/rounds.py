"""A check that decides by itself: more interleaved runs of what the open claims need, within limits.

`run --check` first runs every variant `--repeat` times (at least twice for the variants claims
name: one run says nothing of the next). It then looks at the claims; while some are inconclusive
and more runs could settle them, it runs one more round of only the variant points those claims
read, interleaved across variants and servers, and looks again, up to `--max-repeats` runs and the
time budget. Rounds run forwards and backwards in turn (plan.in_round), so that the sides of a claim
can be paired round by round. The 5% error rate is spent over the looks the check may take
(stats.look_levels: little at the first looks, most at the last), and Holm's correction spreads each
look's share over the claims, so the chance of any wrong verdict in the whole check stays at most
5%. A verdict given at one look stands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..results.model import Cause, ClaimVerdict, VariantRun
from ..scenario.claims import Claim, ClaimForm, server_matches
from ..scenario.model import Scenario
from ..stats import Verdict
from ..util import parse_duration
from .evaluate import Look, Skip, evaluate
from .sides import MIN_RUNS

DEFAULT_MAX_REPEATS = 5
BUSY_MAX_REPEATS = 8  # on a busy machine, unless --max-repeats was given
DEFAULT_BUDGET_S = 900.0


@dataclass(frozen=True)
class CheckPolicy:
    """How far `--check` may go to decide: runs of a variant point, and wall time of the whole run.

    `busy_max_repeats`, when set, is the runs a variant point may take instead of `max_repeats` when the
    machine is busy (results/machine.py): runs differ more there, and more of them decide what fewer
    cannot. The choice is made once, before the first look, from the machine alone (never from the
    claims' data), so the looks' share of the error rate is planned over the runs the check may take."""

    max_repeats: int = DEFAULT_MAX_REPEATS
    budget_s: float = DEFAULT_BUDGET_S
    busy_max_repeats: int | None = None


@dataclass
class Sequential:
    """The looks of one check: which level each look uses, what stands, what to run next."""

    scenario: Scenario
    policy: CheckPolicy
    first: int  # runs every variant gets before the first look (--repeat, at least MIN_RUNS)
    skipped: dict[str, Skip] = field(default_factory=dict)
    clock: object = time.monotonic
    decided: dict[tuple, ClaimVerdict] = field(default_factory=dict)
    durations: dict[tuple, float] = field(default_factory=dict)  # (server, variant, point) -> seconds of its last run
    looks_taken: int = 0
    busy: bool = False  # the machine was busy before the first look: busy_max_repeats applies

    def __post_init__(self):
        self.started = self.clock()

    @property
    def max_repeats(self) -> int:
        """The runs a variant point may take: the policy's, or its busy_max_repeats on a busy machine."""
        if self.busy and self.policy.busy_max_repeats is not None:
            return max(self.policy.busy_max_repeats, self.policy.max_repeats)
        return self.policy.max_repeats

    def plan(self, busy: bool) -> bool:
        """Fix the plan before the first look: whether the machine is busy. Returns whether that gives the
        check more runs than the policy's max_repeats. After the first look the plan stands as it is."""
        if self.looks_taken == 0:
            before = self.max_repeats
            self.busy = busy
            return self.max_repeats > before
        return False

    def look(self, index: int) -> Look:
        """The look with this number: after max(--repeat, 2) runs a side, then after each round, up to
        --max-repeats (or busy_max_repeats); one beyond those planned spends nothing (it decides nothing new)."""
        first = max(self.first, MIN_RUNS)
        return Look(index, first, max(self.max_repeats, first))

    @property
    def looks(self) -> int:
        return self.look(1).of

    def judge(self, runs: list[VariantRun]) -> list[ClaimVerdict]:
        """One look at the claims: new verdicts join those that stand."""
        self.looks_taken += 1
        verdicts = evaluate(list(self.scenario.expect), runs, skipped=self.skipped, quick=self.scenario.quick,
                            look=self.look(self.looks_taken), decided=self.decided)
        for v in verdicts:
            if v.verdict in (Verdict.PASS, Verdict.FAIL):
                self.decided.setdefault((v.claim_id, v.server), v)
        return verdicts

    def record(self, run: VariantRun, seconds: float) -> None:
        self.durations[(run.server, run.variant, run.point)] = seconds

    def wanted(self, verdicts: list[ClaimVerdict], runs: list[VariantRun]) -> dict[tuple, set]:
        """(variant, point) pairs to run once more on each server named, for claims more runs could settle."""
        out: dict[tuple, set] = {}
        for v in verdicts:
            if v.verdict is not Verdict.INCONCLUSIVE or v.cause in (Cause.THIN, Cause.NEVER_SEEN):
                continue  # more runs would not change these
            for ref in v.form.refs():  # a side that names a server needs more runs on that server
                server = v.server if ref.server is None else next(
                    (r.server for r in runs if r.server is not None and server_matches(r.server, ref.server)), None)
                if server is None and ref.server is not None:
                    continue  # the run has no such server: more runs would not give it one
                key = point_of(ref, [r for r in runs if r.server == server])
                if _count(runs, server, key) < self.max_repeats:
                    out.setdefault(key, set()).add(server)
        return out

    def affordable(self, wanted: dict[tuple, set]) -> bool:
        """Whether one more round fits in the time budget (from how long each of its runs took last)."""
        spent = self.clock() - self.started
        cost = sum(self.durations.get((server, variant, point), 0.0)
                   for (variant, point), servers in wanted.items() for server in servers)
        return spent + cost <= self.policy.budget_s


def points_of(claim: Claim | ClaimForm, runs: list[VariantRun]) -> list[tuple]:
    """The (variant, point) pairs a claim reads, resolved against the points the variants ran at."""
    out = []
    for ref in claim.refs():
        key = point_of(ref, runs)
        if key not in out:
            out.append(key)
    return out


def point_of(ref, runs: list[VariantRun]) -> tuple:
    """The (variant, point) a reference reads, resolved against the points the variant ran at."""
    points = sorted({r.point for r in runs if r.variant == ref.variant and r.point is not None})
    if ref.point is None:
        point = None if not points else points[0] if len(points) == 1 else None
    elif ref.point == "min":
        point = points[0] if points else None
    elif ref.point == "max":
        point = points[-1] if points else None
    else:
        point = int(ref.point)
    return ref.variant, point


def _count(runs: list[VariantRun], server, key: tuple) -> int:
    return sum(1 for r in runs if r.server == server and (r.variant, r.point) == key)


def parse_budget(text: str) -> float:
    """--check-budget: a duration such as 10m, 90s or 1h, in seconds."""
    seconds = parse_duration(text)
    if seconds is None or seconds <= 0:
        raise ConfigError(f"--check-budget {text}: expected a duration such as 10m, 90s or 1h")
    return seconds
