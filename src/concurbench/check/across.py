"""Two releases of a server side by side: is the new one worse than the old by more than a minimum change?

A comparison names a figure of the scenario (`VARIANT[@POINT][/POOL]: METRIC`), which way it is better
and the smallest move that counts. In a run on two servers, the old release and the new, interleaved
and paired by round (`api.side_by_side`), each comparison is the claim `new >= (1 - m) * old` (throughput:
higher is better) or `new <= (1 + m) * old` (latency), judged as a claim of the scenario would be: the
runs are the unit, each round's ratio of new over old is one observation (stats.test_runs), tested by
their trimmed mean (a fifth of the rounds left out at each end, Yuen's test: a round that something else
on the machine disturbed weighs little), and the verdict is directional: FAIL when the new release is
worse than old by more than m at the verdict's level (the suspicion is confirmed), PASS when it is
significantly less worse than that (not confirmed), INCONCLUSIVE while the rounds cannot tell.

The decision is sequential (check/rounds.py's Sequential, whose rounds, looks and time budget it keeps):
after every EVERY-th round and the last (`schedule`), the open comparisons are looked at; more rounds run
of only the variant points they read, while some stay open and the rounds and the budget allow. The error
rate is ALPHA two-sided over the whole run, spent over the planned looks (stats.spent) and shared by Holm's
step-down among the comparisons still open: a release with no change at all is found worse at most
ALPHA / 2 of the time, however many comparisons and looks, and less the further it is from the minimum
change (no change at all is a whole minimum change away from the boundary).

Both servers restart (same data, same settings) at even steps of the most rounds, so that the rounds run
on STARTS instances of each (`renews`; the runner asks before each round). A server instance carries an
offset of its own (where its memory lies, how its processes met the machine's caches) for as long as it
runs: one instance a release puts the whole offset into every round's ratio alike, where the rounds'
spread cannot show it. Rounds on three instances a release average three such offsets (the rounds stay
the unit of the test), and the verdict says how many starts its rounds ran on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import stats
from ..figures import Better
from ..results.model import Cause, ClaimEstimate, ClaimVerdict, VariantRun
from ..scenario.claims import ClaimForm, Ref, Side
from ..stats import Verdict
from .evaluate import Look
from .rounds import Next, Sequential, Stop, claim_points
from .sides import MIN_RUNS, NotEvaluated, NotFound, SideData, bounded_exp, side_data

ALPHA = 0.02  # two-sided, over the comparisons and looks of one run: at most 1% of no-change releases found worse
# the rounds a side-by-side run may take, unless told: with 10 (a plain mean, a look after every round) a 10%
# step was red on the first night in half of the real trials on a quiet machine; with 24, trimmed, a look
# every 4th round, in 12 of 15 whose steps were 2-10% (docs/history.md). A release with no change decides
# nothing early and takes them all: about 2.5 s a round for a 1 s variant point.
ROUNDS = 24
BUSY_ROUNDS = 32  # ... on a busy machine (decided before the first look, from the machine alone)
TRIM = 0.2  # each round's new over old tested by the trimmed mean of the rounds: a fifth left out at each end
EVERY = 4  # a look after every 4th round and at the last: fewer looks, so each (the last above all) has more of
# the error rate (with 24 rounds the last look tests at 52% of it, against 16% looking after every round)
STARTS = 3  # the instances of each server the most rounds are spread over: both restart at even steps (24 rounds:
# before rounds 9 and 17). Two starts of one server differ by a little, which no pairing by round takes out: new
# over old moved by about 1.5% between runs with one start each, 0.76% with three (docs/history.md)


@dataclass(frozen=True)
class Comparison:
    """One figure of two releases compared: worse on the new by more than `min_change` (a fraction)?"""

    ref: Ref
    better: Better
    min_change: float

    def __post_init__(self):
        if self.better is Better.NEUTRAL:
            raise ValueError(f"{self.ref}: a figure without a better way cannot be worse on a release")

    @property
    def op(self) -> str:
        return ">=" if self.better is Better.HIGHER else "<="

    @property
    def factor(self) -> float:
        """The bound on new over old: 1 - m for a figure that is better higher, 1 + m for one better lower."""
        return 1 - self.min_change if self.better is Better.HIGHER else 1 + self.min_change

    def text(self, old: str, new: str) -> str:
        return f"{self.ref} on {new} {self.op} {self.factor:g} * on {old}"

    @property
    def form(self) -> ClaimForm:
        """The claim it is, with both sides the one figure (the new release on the left, the old on the right)."""
        return ClaimForm(Side(1.0, self.ref), self.op, Side(self.factor, self.ref))


@dataclass
class AcrossServers(Sequential):
    """The looks of a side-by-side run: Sequential's rounds, budget and looks, judging the comparisons of the
    `new` server against the `old` instead of the scenario's claims. A verdict's claim_id is its comparison's
    place in `comparisons`; its server is `new`."""

    old: str = ""
    new: str = ""
    comparisons: tuple[Comparison, ...] = ()
    alpha: float = ALPHA
    trim: float = TRIM
    every: int = EVERY
    instances: int = STARTS  # 1: each server runs the whole run as started

    def schedule(self, busy: bool | None = None) -> tuple[int, ...]:
        """The rounds after which it looks: every `every`-th from the first it may judge, and the last (on a busy
        machine when `busy`, or as the plan stands when None)."""
        cap = self.max_repeats if busy is None else \
            max(self.policy.busy_max_repeats or 0, self.policy.max_repeats) if busy else self.policy.max_repeats
        first, last = max(self.first, MIN_RUNS), max(cap, self.first, MIN_RUNS)
        return tuple(sorted({r for r in range(first, last + 1) if r % self.every == 0} | {last}))

    @property
    def renew_every(self) -> int:
        """The rounds each instance runs: the most rounds (as the plan stands) over the instances wanted."""
        return max(1, math.ceil(self.max_repeats / max(1, self.instances)))

    def renews(self, repeat: int) -> bool:
        """Whether both servers restart before this round: after every `renew_every` rounds."""
        return self.instances > 1 and repeat > 1 and (repeat - 1) % self.renew_every == 0

    def starts(self, rounds: int) -> int:
        """The instances of each server that this many rounds ran on."""
        return 1 + (rounds - 1) // self.renew_every if self.instances > 1 and rounds > 0 else 1

    def look(self, index: int) -> Look:
        """The look with this number, of those the schedule plans (its level: `level`)."""
        return Look(index, 1, len(self.schedule()))

    def level(self, look: Look, family: int) -> float:
        """This look's two-sided level for a comparison with 1/family of the run's error rate: what the spending
        function newly spends at its round (one beyond those planned spends nothing)."""
        rounds = self.schedule()
        if look.index > len(rounds):
            return 0.0
        alpha = self.alpha / max(1, family)
        before = rounds[look.index - 2] if look.index > 1 else 0
        return stats.spent(rounds[look.index - 1] / rounds[-1], alpha) - stats.spent(before / rounds[-1], alpha)

    def next_round(self, runs: list[VariantRun], *, skipped, busy: bool, servers: list, running: set[str]) -> Next:
        """As Sequential's, but a look only after the rounds the schedule names; between them one more round of
        what the last look left open (before the first, of every comparison)."""
        planned = busy if self.looks_taken == 0 else None
        if self.repeat < MIN_RUNS or self.repeat in self.schedule(planned):
            return super().next_round(runs, skipped=skipped, busy=busy, servers=servers, running=running)
        if self.looks_taken:
            wanted = self.wanted(self.verdicts, runs)
        else:
            new = [r for r in runs if r.server == self.new]
            wanted = {key: {self.old, self.new} for c in self.comparisons for key in claim_points(c.form, new)}
        wanted = {key: where for key, where in wanted.items() if key[0] in running}
        if not wanted:
            return Next(self.repeat, {}, Stop.SETTLED)
        if not self.affordable(wanted):
            return Next(self.repeat, {}, Stop.BUDGET)
        self.repeat += 1
        return Next(self.repeat, wanted)

    def judge(self, runs: list[VariantRun]) -> list[ClaimVerdict]:
        self.looks_taken += 1
        look = self.look(self.looks_taken)
        old = [r for r in runs if r.server == self.old]
        new = [r for r in runs if r.server == self.new]
        out: list[ClaimVerdict | None] = [None] * len(self.comparisons)
        tested: list[tuple[int, Comparison, SideData, SideData, stats.Test]] = []
        for i, c in enumerate(self.comparisons):
            stood = self.decided.get((i, self.new))
            if stood is not None:
                out[i] = stood
                continue
            try:
                left, right = side_data(c.ref, new), side_data(c.ref, old)
            except NotEvaluated as exc:
                out[i] = self._open(i, c, Verdict.NOT_EVALUATED, f"not evaluated: {exc}", Cause.NOT_RUN)
                continue
            except NotFound as exc:
                out[i] = self._open(i, c, Verdict.NOT_EVALUATED, f"not evaluated: {exc}", Cause.NO_FIGURE)
                continue
            untested = [s for s in (left, right) if s.reason]
            if untested:
                cause = Cause.THIN if any(s.cause is Cause.THIN for s in untested) else untested[0].cause
                out[i] = self._open(i, c, Verdict.INCONCLUSIVE, "; ".join(dict.fromkeys(s.reason for s in untested)),
                                    cause, left, right)
                continue
            test = stats.test_runs(left.runs, right.runs.scaled(c.factor), trim=self.trim)
            if test.p_greater is None:
                out[i] = self._open(i, c, Verdict.INCONCLUSIVE, "no uncertainty could be estimated for a side",
                                    Cause.NO_UNCERTAINTY, left, right)
                continue
            tested.append((i, c, left, right, test))
        family = len(tested)
        steps = stats.step_down([t.two_sided for *_, t in tested], lambda m: self.level(look, m))
        for (i, c, left, right, test), (ok, level) in zip(tested, steps):
            p = test.two_sided
            verdict = stats.decide(c.op, test, p if ok else None, level or 0.0)
            out[i] = self._tested(i, c, left, right, test, verdict, p, level or 0.0, look, family)
            if verdict in (Verdict.PASS, Verdict.FAIL):
                self.decided[(i, self.new)] = out[i]
        self.verdicts, self.judged = list(out), len(runs)  # the last look's, for `final`
        return list(out)

    def wanted(self, verdicts: list[ClaimVerdict], runs: list[VariantRun]) -> dict[tuple, set]:
        """(variant, point) pairs to run once more on both servers, for comparisons more rounds could settle."""
        out: dict[tuple, set] = {}
        for v in verdicts:
            if v.verdict is not Verdict.INCONCLUSIVE or v.cause in (Cause.THIN, Cause.NEVER_SEEN) or v.form is None:
                continue
            for key in claim_points(v.form, [r for r in runs if r.server == self.new]):
                if min(_count(runs, server, key) for server in (self.old, self.new)) < self.max_repeats:
                    out.setdefault(key, set()).update((self.old, self.new))
        return out

    # -- verdicts
    def _open(self, i: int, c: Comparison, verdict: Verdict, reason: str, cause: Cause,
              left: SideData | None = None, right: SideData | None = None) -> ClaimVerdict:
        return ClaimVerdict(c.text(self.old, self.new), verdict, _description(c), self.new,
                            left.shown() if left else None, right.shown() if right else None, reason, cause=cause,
                            claim_id=i, form=c.form)

    def _tested(self, i: int, c: Comparison, left: SideData, right: SideData, test: stats.Test, verdict: Verdict,
                p: float, level: float, look: Look, family: int) -> ClaimVerdict:
        """The verdict with new over old (its 95% interval, and the interval at the verdict's level, which
        leaves out the bound 1 -/+ m exactly when the verdict decides)."""
        plain = stats.test_runs(left.runs, right.runs, trim=self.trim)  # new against old, unscaled: the ratio shown
        ratio, interval = _ratio(plain, stats.ALPHA), _ratio(plain, level) if level else None
        shown = f"{ratio.value:.3f} [{ratio.low:.3f}, {ratio.high:.3f}]" if ratio and ratio.low is not None else "–"
        how = f"{plain.rounds} rounds" + (", paired by round" if plain.paired else f", {plain.note}" if plain.note else "")
        trimmed = plain.paired and self.trim and int(self.trim * plain.rounds)
        how += f", {self.trim:.0%} trimmed" if trimmed else ""
        starts = self.starts(plain.rounds)
        how += f", {starts} starts of each server" if starts > 1 else ""
        bound = f"the minimum change of {c.min_change:.0%}"
        if verdict is Verdict.FAIL:
            reason = f"{self.new} worse than {self.old} by more than {bound}: new / old {shown} ({how})"
        elif verdict is Verdict.PASS:
            reason = f"{self.new} not worse than {self.old} by {bound}: new / old {shown} ({how})"
        else:
            reason = f"within the noise of {bound}: new / old {shown} ({how})"
        reason += (f"; p = {p:.2g} against {level:.2g} (its share of {self.alpha:.0%}: Holm over {family} "
                   f"comparison{'s' if family != 1 else ''}, {look.describe()})")
        return ClaimVerdict(c.text(self.old, self.new), verdict, _description(c), self.new, left.shown(),
                            right.shown(), reason, ratio=ratio, p_value=p, level=level or None, interval=interval,
                            cause=Cause.TESTED, claim_id=i, form=c.form)


def _ratio(test: stats.Test, alpha: float) -> ClaimEstimate | None:
    """New over old with its interval at 1 - alpha (None off the log scale, where the ratio is not what was
    tested, or without an interval)."""
    if test.scale != "log" or test.se is None or math.isinf(test.diff):
        return None
    low, high = test.interval(alpha)
    return ClaimEstimate(math.exp(test.diff), math.exp(low), bounded_exp(high), method="new / old",
                         confidence=1 - alpha)


def _description(c: Comparison) -> str:
    way = "higher" if c.better is Better.HIGHER else "lower"
    return f"side by side: the new release against the old ({c.ref.metric}: {way} is better)"


def _count(runs: list[VariantRun], server: str, key: tuple) -> int:
    return sum(1 for r in runs if r.server == server and (r.variant, r.point) == key)

