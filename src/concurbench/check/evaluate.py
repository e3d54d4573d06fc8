"""Judge a scenario's `expect` claims on the runs measured so far: pass, fail, inconclusive, not evaluated.

Every claim on every server is one member of a family. Each member with data enough is tested
(check/sides.py gives each side's runs; stats.test_runs pairs them by round where it can), the
family's p-values are Holm-corrected together at the level of this look (`Look`: the share of the
error rate a sequential check spends at it). A verdict once given stands: a check that runs more
repeats only asks about the claims still open. Each tested claim shows the interval its verdict
used, at the level Holm and the look gave it, and an open one how many runs a side would decide it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .. import stats
from ..results.machine import MachineLoad
from ..results.model import Cause, ClaimEstimate, ClaimVerdict, ServerInfo, VariantRun
from ..scenario.claims import Claim, server_matches
from ..stats import Verdict
from .sides import MIN_RUNS, NEVER_SEEN, NotEvaluated, NotFound, SideData, bounded_exp, side_data

LEFT_OUT_OF_QUICK = "not evaluated in quick runs"
ABOUT_OTHERS = "not evaluated: the claim is about"
LEFT_OUT = "left out with --variant"  # why a variant the user did not choose has no run
NOT_CHOSEN = f"not evaluated: {LEFT_OUT}"
BUSY = "the machine was busy"  # how an open claim's reason names a busy machine (with_machine)


@dataclass(frozen=True)
class Skip:
    """Why a variant a claim reads has no run: its cause (NOT_CHOSEN, NOT_RUN) and the words for the reason."""

    cause: Cause
    why: str


def left_out() -> Skip:
    """A variant the user did not choose with --variant."""
    return Skip(Cause.NOT_CHOSEN, LEFT_OUT)


def check_outcome(verdicts: list[ClaimVerdict]) -> tuple[int, int]:
    """(failed, undecided) for `--check`: undecided counts inconclusive and not evaluated claims, except
    those left out on purpose (`left_out`): by the scenario (in quick runs, or on servers the claim is not
    about) or by the user (on variants --variant did not choose)."""
    failed = sum(1 for v in verdicts if v.verdict is Verdict.FAIL)
    undecided = sum(1 for v in verdicts if v.verdict in (Verdict.INCONCLUSIVE, Verdict.NOT_EVALUATED)
                    and not v.left_out)
    return failed, undecided


def with_differences(verdicts: list[ClaimVerdict], servers: list[ServerInfo]) -> list[ClaimVerdict]:
    """Each verdict on a server that ran without some of the scenario's settings (`--server-settings as-is`)
    says so at the end of its reason: "...; ran with shared_buffers 128MB, the scenario wants 256MB"."""
    ran = {s.version_short: s.differences_text(why=False) for s in servers if s.differences}
    if not ran:
        return list(verdicts)
    out = []
    for v in verdicts:
        text = ran.get(v.server) if v.server is not None or len(servers) != 1 else next(iter(ran.values()))
        if text and f"ran with {text}" not in v.reason:
            v = replace(v, reason="; ".join(filter(None, (v.reason, f"ran with {text}"))))
        out.append(v)
    return out


def with_machine(verdicts: list[ClaimVerdict], machine: MachineLoad | None) -> list[ClaimVerdict]:
    """On a busy machine, each claim left open by the test (not one with too few observations) says so at the
    end of its reason, with the figures, and what would likely decide it: a quieter machine, or
    `--max-repeats N` with the runs a side its difference and spread call for."""
    if machine is None or not machine.busy:
        return list(verdicts)
    out = []
    for v in verdicts:
        if v.verdict is Verdict.INCONCLUSIVE and v.p_value is not None:
            more = f" or --max-repeats {v.runs_needed}" if v.runs_needed is not None else ""
            v = replace(v, reason=f"{v.reason}; {BUSY} ({machine.short()}): a quieter machine{more} would likely "
                                  f"decide it")
        out.append(v)
    return out


@dataclass(frozen=True)
class Look:
    """One look at the claims: its number, of a check that looks after `first`, first + 1, ... `last` runs
    a side (one look when first >= last)."""

    index: int = 1
    first: int = 1
    last: int = 1

    @property
    def of(self) -> int:
        return max(1, self.last - self.first + 1)

    def level_for(self, family: int) -> float:
        """This look's level for a claim with 1/family of the error rate; a look beyond the plan spends nothing."""
        levels = stats.look_levels(self.first, self.last, stats.ALPHA / family)
        return levels[self.index - 1] if self.index <= len(levels) else 0.0

    def describe(self) -> str:
        return "one look" if self.of == 1 else f"look {self.index} of {self.of}, spending over looks"


ONE_LOOK = Look()


class _Member:
    """One claim (the scenario's claim number `claim_id`) on one server while the family is judged."""

    def __init__(self, claim: Claim, claim_id: int, server):
        self.claim = claim
        self.claim_id = claim_id
        self.server = server
        self.left: SideData | float | None = None  # a number of the claim is a float
        self.right: SideData | float | None = None
        self.test: stats.Test | None = None
        self.reason = ""
        self.cause = Cause.TESTED  # why it is not tested, when `reason` says so
        self.verdict: ClaimVerdict | None = None  # set when the member is settled without a test


def judge_claims(claims: list[Claim], runs: list[VariantRun], *, skipped: dict[str, Skip] | None = None,
             quick: bool = False, look: Look = ONE_LOOK,
             decided: dict[tuple, ClaimVerdict] | None = None) -> list[ClaimVerdict]:
    """Verdicts for every claim on every server of `runs` (all repeats, not folded).

    `claims` are the scenario's `expect` in order (a verdict's claim_id is its place there); `skipped` names
    variants that were not run (left out with --variant, unsupported, interrupted) with why; `decided` holds
    verdicts of earlier looks that stand, by (claim_id, server); `look` is this look, with its share of the
    error rate (said in the reasons).
    """
    skipped = dict(skipped or {})
    decided = dict(decided or {})
    servers: list = []
    for r in runs:
        if r.server not in servers:
            servers.append(r.server)
    members: list[_Member] = []
    for server in servers or [None]:
        mine = [r for r in runs if r.server == server]
        for claim_id, claim in enumerate(claims):
            member = _Member(claim, claim_id, server)
            members.append(member)
            if not claim.applies_to(server):
                member.verdict = _settled(member, f"{ABOUT_OTHERS} {claim.about} only", Cause.OTHER_SERVER)
                continue
            previous = decided.get((claim_id, server))
            if previous is not None and previous.verdict in (Verdict.PASS, Verdict.FAIL):
                member.verdict = previous
                continue
            _prepare(member, mine, skipped, quick, runs)
    testable = [m for m in members if m.verdict is None and m.test is not None and not m.reason]
    steps = stats.step_down([m.test.two_sided for m in testable], look.level_for)
    family = len(testable)
    for member, (ok, level) in zip(testable, steps):
        p = member.test.two_sided
        verdict = stats.decide(member.claim.form.op, member.test, p if ok else None, level or 0.0)
        member.verdict = _verdict(member, verdict, p, level, look, family)
    for member in members:
        if member.verdict is None:
            member.verdict = _verdict(member, Verdict.INCONCLUSIVE, None, None, look, family)
    return [m.verdict for m in members]


def _prepare(member: _Member, runs: list[VariantRun], skipped: dict[str, Skip], quick: bool,
             every: list[VariantRun]) -> None:
    """Settle the member without a test, or give it its sides and test; `runs` are its server's, `every` all the
    run's (a side that names a server reads that server's)."""
    claim = member.claim
    missing = sorted({r.variant for r in claim.refs() if r.variant in skipped})
    if quick and claim.skip_quick:
        member.verdict = _settled(member, f"{LEFT_OUT_OF_QUICK}: {claim.skip_quick}", Cause.QUICK)
        return
    if missing and all(skipped[v].cause is Cause.NOT_CHOSEN for v in missing):
        member.verdict = _settled(member, f"{NOT_CHOSEN} ({', '.join(missing)})", Cause.NOT_CHOSEN)
        return
    if missing:
        why = "; ".join(f"{v}: {skipped[v].why}" for v in missing)
        member.verdict = _settled(member, f"not evaluated: {why}", Cause.NOT_RUN)
        return
    try:
        member.left = _side(claim.form.left, runs, every)
        member.right = _side(claim.form.right, runs, every)
    except NotEvaluated as exc:
        member.verdict = _settled(member, f"not evaluated: {exc}", Cause.NOT_RUN)
        return
    except NotFound as exc:
        member.verdict = _settled(member, f"not evaluated: {exc}", Cause.NO_FIGURE)
        return
    sides = [s for s in (member.left, member.right) if isinstance(s, SideData)]
    untested = [s for s in sides if s.reason]
    if untested:
        member.reason = "; ".join(dict.fromkeys(s.reason for s in untested))
        member.cause = Cause.THIN if any(s.cause is Cause.THIN for s in untested) else untested[0].cause
        return
    if claim.form.op not in ("==", "!=") and len(sides) == 2 and all(s.zero for s in sides):
        member.reason, member.cause = f"{NEVER_SEEN} in every run: nothing was seen to compare", Cause.NEVER_SEEN
        return
    form = claim.form
    member.test = stats.test_runs(_runs(member.left, form.left.factor), _runs(member.right, form.right.factor))
    if member.test.p_greater is None:
        member.reason, member.cause = "no uncertainty could be estimated for a side", Cause.NO_UNCERTAINTY


def _side(side, runs: list[VariantRun], every: list[VariantRun]) -> SideData | float:
    if side.ref is None:
        return float(side.factor)  # a number of the claim (the factor is the number)
    return side_data(side.ref, on_server(side.ref, runs, every))


def on_server(ref, runs: list[VariantRun], every: list[VariantRun]) -> list[VariantRun]:
    """The runs a reference reads: those of the server it names, else `runs` (the claim's server's)."""
    if ref.server is None:
        return runs
    named = [r for r in every if r.server is not None and server_matches(r.server, ref.server)]
    if not named:
        raise NotFound(f"{ref} names server {ref.server}, and this run has none (its servers: "
                       f"{', '.join(dict.fromkeys(str(r.server) for r in every)) or 'none'})")
    return named


def _runs(side: SideData | float, factor: float) -> stats.Runs | float:
    return side if isinstance(side, float) else side.runs.scaled(factor)


def _settled(member: _Member, reason: str, cause: Cause) -> ClaimVerdict:
    """Not evaluated, and why (a cause of LEFT_OUT_CAUSES: on purpose, which a check does not count as undecided)."""
    claim = member.claim
    return ClaimVerdict(claim.text, Verdict.NOT_EVALUATED, claim.description, member.server, reason=reason,
                        cause=cause, claim_id=member.claim_id, form=claim.form, claim_key=claim.key)


def _verdict(member: _Member, verdict: Verdict, p: float | None, level: float | None, look: Look,
             family: int) -> ClaimVerdict:
    """The verdict with its sides, the 95% interval of left against right, and the same at the level the
    claim was tested at: that interval leaves out the claim's boundary exactly when the verdict decides."""
    claim = member.claim
    test = member.test
    left = _shown(member.left, claim.form.left.factor)
    right = _shown(member.right, claim.form.right.factor)
    needed, cause = None, member.cause
    if member.reason:
        reason = member.reason
    elif test is not None and math.isinf(test.diff) and verdict is not Verdict.INCONCLUSIVE:
        word = "holds" if verdict is Verdict.PASS else "does not hold"
        reason = f"{word}: every run measured more than 0 on one side and exactly 0 on the other" + _runs_a_side(member)
        cause = Cause.EXACT
    elif test is not None and test.se == 0 and verdict is not Verdict.INCONCLUSIVE:
        word = "holds" if verdict is Verdict.PASS else "does not hold"
        reason = f"{word} exactly: every run measured the same" + _runs_a_side(member)
        cause = Cause.EXACT
    elif verdict is Verdict.INCONCLUSIVE:
        more, needed = _more(member, family)
        reason = "the difference is within the noise" + _how(member) + _odds(p, level, look, family) + more
    else:
        word = "holds" if verdict is Verdict.PASS else "the opposite holds"
        reason = f"{word} at 95%" + _how(member) + _odds(p, level, look, family)
    # an exact comparison (every run the same, or a side of zeros) has no interval worth showing
    shown = level if level and p is not None and not member.reason and test.se and not math.isinf(test.diff) else None
    return ClaimVerdict(claim.text, verdict, claim.description, member.server, left, right, reason,
                        ratio=_interval(test, stats.ALPHA) if test and test.scale == "log" else None, p_value=p,
                        level=shown, interval=None if shown is None else _interval(test, shown), runs_needed=needed,
                        cause=cause, claim_id=member.claim_id, form=claim.form, claim_key=claim.key)


def _shown(side, factor: float) -> ClaimEstimate | None:
    """A side as the report shows it: factor times the figure, with its 95% interval where one exists."""
    if side is None:
        return None
    if isinstance(side, float):
        return ClaimEstimate(side, n=None, method="number")
    return side.shown(factor)


def _interval(test: stats.Test | None, alpha: float) -> ClaimEstimate | None:
    """Left over right (log-scale tests) or left minus right (linear ones) with its interval at 1 - alpha."""
    if test is None or test.se is None or math.isinf(test.diff):
        return None
    low, high = test.interval(alpha)
    if test.scale == "log":
        return ClaimEstimate(math.exp(test.diff), math.exp(low), bounded_exp(high), method="left / right",
                             confidence=1 - alpha)
    return ClaimEstimate(test.diff, low, high, method="left - right", confidence=1 - alpha)


def _runs_a_side(member: _Member) -> str:
    counts = sorted({len(s.values) for s in (member.left, member.right) if isinstance(s, SideData)})
    if not counts:
        return ""
    return f" ({'-'.join(map(str, counts))} runs a side)"


def _how(member: _Member) -> str:
    """How the test was made: runs a side, and paired by round or not (and why not)."""
    test = member.test
    parts = [_runs_a_side(member).strip(" ()")] if _runs_a_side(member) else []
    if test.paired:
        parts.append("paired by round")
    elif test.note:
        parts.append(test.note)
    return f" ({'; '.join(parts)})" if parts else ""


def _odds(p: float | None, level: float | None, look: Look, family: int) -> str:
    if p is None or level is None:
        return ""
    return (f"; p = {p:.2g} against {level:.2g} (its share of 5%: Holm over {family} "
            f"claim{'s' if family != 1 else ''}, {look.describe()})")


def _more(member: _Member, family: int) -> tuple[str, int | None]:
    """How many runs a side would decide an open claim, if the difference and the spread stay as measured:
    the phrase for its reason, and the number (None when more than MAX_RUNS_ESTIMATED or not estimable)."""
    test = member.test
    if test is None or test.se is None or not test.rounds or test.diff == 0:
        return "", None

    def alpha_at(n: int) -> float:  # the last look of `--check --max-repeats n`, with 1/family of the error rate
        return stats.look_levels(MIN_RUNS, n, stats.ALPHA / max(1, family))[-1]

    n = stats.runs_to_decide(test, alpha_at)
    if n is None:
        return (f"; more than {stats.MAX_RUNS_ESTIMATED} runs a side would be needed: the difference measured is "
                f"small beside the spread between runs"), None
    return (f"; about {n} runs a side ({n - test.rounds} more) would decide it if the difference stays as measured "
            f"(--max-repeats {n})"), n
