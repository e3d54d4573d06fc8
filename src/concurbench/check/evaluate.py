"""Judge a scenario's `expect` claims on the runs measured so far: pass, fail, inconclusive, not evaluated.

Every claim on every server is one member of a family. Each member with data enough is tested
(check/sides.py builds its two estimates; stats.test_sides compares them), the family's p-values are
Holm-corrected together, and the level of one look is the error rate split over the looks a
sequential check may take (`level`). A verdict once given stands: a check that runs more repeats
only asks about the claims still open.
"""

from __future__ import annotations

import math

from .. import stats
from ..results.model import ClaimEstimate, ClaimVerdict, VariantRun
from ..scenario.claims import Claim
from .sides import NEVER_SEEN, NotEvaluated, NotFound, SideData, paired, side_data

NOT_EVALUATED = "not evaluated"
LEFT_OUT_OF_QUICK = "not evaluated in quick runs"
ABOUT_OTHERS = "not evaluated: the claim is about"
LEFT_OUT = "left out with --variant"  # why a variant the user did not choose has no run
NOT_CHOSEN = f"not evaluated: {LEFT_OUT}"


def check_outcome(verdicts: list[ClaimVerdict]) -> tuple[int, int]:
    """(failed, undecided) for `--check`: undecided counts inconclusive and not evaluated claims, except
    those left out on purpose: by the scenario (in quick runs, or on servers the claim is not about) or
    by the user (on variants --variant did not choose)."""
    failed = sum(1 for v in verdicts if v.verdict == stats.FAIL)
    undecided = sum(1 for v in verdicts if v.verdict in (stats.INCONCLUSIVE, NOT_EVALUATED)
                    and not v.reason.startswith((LEFT_OUT_OF_QUICK, ABOUT_OTHERS, NOT_CHOSEN)))
    return failed, undecided


class _Member:
    """One claim on one server while the family is judged."""

    def __init__(self, claim: Claim, server):
        self.claim = claim
        self.server = server
        self.left: SideData | stats.Estimate | None = None
        self.right: SideData | stats.Estimate | None = None
        self.test: stats.Test | None = None
        self.reason = ""
        self.verdict: ClaimVerdict | None = None  # set when the member is settled without a test


def evaluate(claims: list[Claim], runs: list[VariantRun], *, skipped: dict[str, str] | None = None,
             quick: bool = False, level: float = stats.ALPHA, looks: int = 1,
             decided: dict[tuple, ClaimVerdict] | None = None) -> list[ClaimVerdict]:
    """Verdicts for every claim on every server of `runs` (all repeats, not folded).

    `skipped` names variants that were not run (left out with --variant, unsupported, interrupted)
    with the reason; `decided` holds verdicts of earlier looks that stand; `level` is this look's share
    of the error rate and `looks` how many looks it was split over (said in the reasons).
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
        for claim in claims:
            member = _Member(claim, server)
            members.append(member)
            if not claim.applies_to(server):
                member.verdict = _settled(member, f"{ABOUT_OTHERS} {claim.about} only")
                continue
            previous = decided.get((claim.text, server))
            if previous is not None and previous.verdict in (stats.PASS, stats.FAIL):
                member.verdict = previous
                continue
            _prepare(member, mine, skipped, quick)
    testable = [m for m in members if m.verdict is None and m.test is not None and not m.reason]
    adjusted = stats.holm([m.test.two_sided for m in testable])
    family = len(testable)
    for member, p in zip(testable, adjusted):
        member.verdict = _verdict(member, stats.decide(member.claim.op, member.test, p, level), p, level, family,
                                  looks)
    for member in members:
        if member.verdict is None:
            member.verdict = _verdict(member, stats.INCONCLUSIVE, None, level, family, looks)
    return [m.verdict for m in members]


def _prepare(member: _Member, runs: list[VariantRun], skipped: dict[str, str], quick: bool) -> None:
    claim = member.claim
    left_out = sorted({r.variant for r in claim.refs() if r.variant in skipped})
    if quick and claim.skip_quick:
        member.verdict = _settled(member, f"{LEFT_OUT_OF_QUICK}: {claim.skip_quick}")
        return
    if left_out and all(skipped[v] == LEFT_OUT for v in left_out):
        member.verdict = _settled(member, f"{NOT_CHOSEN} ({', '.join(left_out)})")
        return
    if left_out:
        why = "; ".join(f"{v}: {skipped[v]}" for v in left_out)
        member.verdict = _settled(member, f"not evaluated: {why}")
        return
    try:
        member.left = _side(claim.left, runs)
        member.right = _side(claim.right, runs)
    except NotEvaluated as exc:
        member.verdict = _settled(member, f"not evaluated: {exc}")
        return
    except NotFound as exc:
        member.verdict = _settled(member, f"not evaluated: {exc}")
        return
    sides = [s for s in (member.left, member.right) if isinstance(s, SideData)]
    reasons = [s.reason for s in sides if s.reason]
    if reasons:
        member.reason = "; ".join(dict.fromkeys(reasons))
        return
    if claim.op not in ("==", "!=") and len(sides) == 2 and all(s.zero for s in sides):
        member.reason = f"{NEVER_SEEN} in every run: nothing was seen to compare"
        return
    member.test = _test(claim, member.left, member.right)
    if member.test.p_greater is None:
        member.reason = "no uncertainty could be estimated for a side"


def _side(side, runs: list[VariantRun]):
    if side.ref is None:
        return stats.exact(side.factor)
    return side_data(side.ref, runs)


def _test(claim: Claim, left, right) -> stats.Test:
    """Left against right; sides read from the same variant runs are compared run by run."""
    if isinstance(left, SideData) and isinstance(right, SideData) and left.key == right.key:
        diffs = paired(left, right, claim.left.factor, claim.right.factor)
        if diffs is not None:
            test = stats.difference_test(diffs, stats.exact(0.0))
            positive = all(v > 0 for v in left.values + right.values)
            return stats.Test(test.diff, test.se, test.df, "log" if positive else "linear", test.p_greater,
                              test.p_less)
    return stats.test_sides(_scaled(left, claim.left.factor), _scaled(right, claim.right.factor))


def _scaled(side, factor: float) -> stats.Estimate:
    if isinstance(side, stats.Estimate):
        return side  # a number of the claim (the factor is the number)
    return side.estimate.scaled(factor)


def _settled(member: _Member, reason: str) -> ClaimVerdict:
    claim = member.claim
    return ClaimVerdict(claim.text, NOT_EVALUATED, claim.description, member.server, reason=reason)


def _verdict(member: _Member, verdict: str, p: float | None, level: float, family: int, looks: int) -> ClaimVerdict:
    claim = member.claim
    left = _shown(member.left, claim.left.factor)
    right = _shown(member.right, claim.right.factor)
    ratio = _ratio(member.test)
    if member.reason:
        reason = member.reason
    elif member.test is not None and math.isinf(member.test.diff) and verdict != stats.INCONCLUSIVE:
        word = "holds" if verdict == stats.PASS else "does not hold"
        reason = f"{word}: every run measured more than 0 on one side and exactly 0 on the other" + _runs(member)
    elif member.test is not None and member.test.se == 0 and verdict != stats.INCONCLUSIVE:
        word = "holds" if verdict == stats.PASS else "does not hold"
        reason = f"{word} exactly: every run measured the same" + _runs(member)
    elif verdict == stats.INCONCLUSIVE:
        reason = "the difference is within the noise" + _runs(member) + _odds(p, level, family, looks)
    else:
        word = "holds" if verdict == stats.PASS else "the opposite holds"
        reason = f"{word} at 95%" + _runs(member) + _odds(p, level, family, looks)
    return ClaimVerdict(claim.text, verdict, claim.description, member.server, left, right, reason,
                        ratio=ratio, p_value=p)


def _shown(side, factor: float) -> ClaimEstimate | None:
    """A side as the report shows it: factor times the figure, with its 95% interval where one exists."""
    if side is None:
        return None
    if isinstance(side, stats.Estimate):
        return ClaimEstimate(side.mean, n=None, method="number")
    est = side.estimate
    if est is None:
        return None
    est = est.scaled(factor)
    return ClaimEstimate(est.mean, est.low, est.high, est.n, est.method)


def _ratio(test: stats.Test | None) -> ClaimEstimate | None:
    """Left over right with its 95% interval (from the log-scale test)."""
    if test is None or test.scale != "log" or test.se is None or math.isinf(test.diff):
        return None
    half = 0.0 if test.se == 0 else stats.t_quantile(1 - stats.ALPHA / 2, test.df) * test.se
    return ClaimEstimate(math.exp(test.diff), math.exp(test.diff - half), math.exp(test.diff + half),
                         method="left / right")


def _runs(member: _Member) -> str:
    counts = sorted({len(s.values) for s in (member.left, member.right) if isinstance(s, SideData)})
    if not counts:
        return ""
    return f" ({'-'.join(map(str, counts))} runs a side)"


def _odds(p: float | None, level: float, family: int, looks: int) -> str:
    if p is None:
        return ""
    spread = f" over {looks} looks" if looks > 1 else ""
    return f"; adjusted p = {p:.2g} against {level:.3g} (Holm over {family} claim{'s' if family != 1 else ''}{spread})"
