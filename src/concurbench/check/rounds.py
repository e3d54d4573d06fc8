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

The loop is here, and so is all of its state: after each round the runner asks `Sequential.next_round`
with the runs so far (and what the machine and the servers are) and runs what it answers, or stops;
it hands each finished run's time over (`record`) and asks for the verdicts at the end (`final`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

from ..errors import ConfigError
from ..results.model import Cause, ClaimVerdict, VariantRun
from ..scenario.claims import Claim, ClaimForm, server_matches
from ..scenario.model import Scenario
from ..stats import Verdict
from ..util import parse_duration
from .evaluate import Look, Skip, judge_claims
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


class Stop(Enum):
    """Why the check runs no more rounds."""

    SETTLED = "settled"  # no open claim that more runs within --max-repeats could settle
    LIMIT = "limit"  # the rounds reached --max-repeats
    BUDGET = "budget"  # the next round would pass the time budget


@dataclass(frozen=True)
class Taken:
    """A look the check took: its number, of how many planned, the claims it left open, after how many runs."""

    look: int
    of: int
    open: int
    runs: int


@dataclass(frozen=True)
class Next:
    """The check's answer after the runs so far: round `repeat` of these (variant, point) pairs, each on the servers
    named (`wanted`), or none (`stop` says why); the look it took (None before there were two runs a side), and
    whether that look's plan gave it more runs for a busy machine (`widened`)."""

    repeat: int
    wanted: dict[tuple, set] = field(default_factory=dict)
    stop: Stop | None = None
    taken: Taken | None = None
    widened: bool = False


@dataclass
class Sequential:
    """The looks of one check and their state: which level each look uses, what stands, what to run next. The
    runner asks `next_round` and hands over what it measured (`record`, `final`); all of the state is written
    here (tests/unit/test_check_state.py holds that no module outside check/ writes it)."""

    scenario: Scenario
    policy: CheckPolicy
    first: int  # runs every variant gets before the first look (--repeat, at least MIN_RUNS)
    skipped_variants: dict[str, Skip] = field(default_factory=dict)  # variants with no run, and why
    clock: object = time.monotonic
    decided: dict[tuple, ClaimVerdict] = field(default_factory=dict)
    durations: dict[tuple, float] = field(default_factory=dict)  # (server, variant, point) -> seconds of its last run
    looks_taken: int = 0
    busy: bool = False  # the machine was busy before the first look: busy_max_repeats applies
    repeat: int = 0  # the rounds run so far (runs a side of the points they ran); `first` until a round is added
    verdicts: list[ClaimVerdict] = field(default_factory=list)  # the last look's
    judged: int = 0  # how many variant runs the last look saw

    def __post_init__(self):
        self.started = self.clock()
        self.repeat = max(self.repeat, self.first)

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
        verdicts = judge_claims(list(self.scenario.expect), runs, skipped=self.skipped_variants,
                                quick=self.scenario.quick, look=self.look(self.looks_taken), decided=self.decided)
        for v in verdicts:
            if v.verdict in (Verdict.PASS, Verdict.FAIL):
                self.decided.setdefault((v.claim_id, v.server), v)
        self.verdicts, self.judged = verdicts, len(runs)
        return verdicts

    def renews(self, repeat: int) -> bool:
        """Whether every server of the run restarts before this round (a new instance of each): never here."""
        return False

    def record(self, run: VariantRun, seconds: float) -> None:
        """A variant run finished, in this many seconds (what the next round's runs cost)."""
        self.durations[(run.server, run.variant, run.point)] = seconds

    def next_round(self, runs: list[VariantRun], *, skipped: dict[str, Skip], busy: bool, servers: list,
                   running: set[str]) -> Next:
        """After the runs so far: look at the claims (once every point has two runs a side: before that one run
        decides nothing, and every point a claim reads runs a second time), then say what one more round runs, or
        why there is none. `skipped`: the variants with no run, and why; `busy`: others keep a CPU busy now (the plan
        is fixed at the first look); `servers`: the run's servers' versions; `running`: the variants still to run."""
        taken, widened = None, False
        if self.repeat >= MIN_RUNS:
            widened = self.plan(busy)
            self.skipped_variants = dict(skipped)
            verdicts = self.judge(runs)
            wanted = self.wanted(verdicts, runs)
            taken = Taken(self.looks_taken, self.looks, sum(1 for v in verdicts if v.verdict is Verdict.INCONCLUSIVE),
                          self.repeat)
        else:
            wanted = {}
            for claim in self.scenario.expect:
                if self.scenario.quick and claim.skip_quick:
                    continue
                for key in claim_points(claim, runs):
                    wanted.setdefault(key, set()).update(servers)
        wanted = {key: where for key, where in wanted.items() if key[0] in running}
        stop = Stop.SETTLED if not wanted else Stop.LIMIT if self.repeat >= self.max_repeats else \
            None if self.affordable(wanted) else Stop.BUDGET
        if stop is not None:
            return Next(self.repeat, {}, stop, taken, widened)
        self.repeat += 1
        return Next(self.repeat, wanted, None, taken, widened)

    def final(self, runs: list[VariantRun], skipped: dict[str, Skip]) -> list[ClaimVerdict]:
        """The verdicts at the check's end: its last look's when it saw every run, else one more look."""
        if self.looks_taken and len(runs) == self.judged:
            return self.verdicts
        self.skipped_variants = dict(skipped)
        return self.judge(runs)

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


def claim_points(claim: Claim | ClaimForm, runs: list[VariantRun]) -> list[tuple]:
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
