"""`expect` claims: comparisons over a run's metrics, written as text in the scenario.

    holder: elapsed_s >= 3 * none: elapsed_s
    advisory@max: statements.lock.mean_ms < for_update@max: statements.lock.mean_ms
    for_share_many: multixact.created > 0
    bystander_beside_advisory/bystanders: tps > 1.1 * bystander_beside_for_update/bystanders: tps

A reference is `VARIANT[@POINT][/POOL]: METRIC`: POINT is a sweep client count, `min` or `max`
(needed when the variant sweeps), POOL defaults to the variant's first measured pool, and METRIC is
a name as reports and summary.csv use it. Either side may be scaled by a number (`3 * ref`,
`ref * 0.5`) or be a plain number. On a run over several servers every server must pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..results.model import ClaimEstimate, ClaimVerdict, Unavailable, VariantRun
from .versions import VersionSpec, version_parts
from .yamlpos import suggest

OPERATORS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
             ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
_OP = re.compile(r"\s(<=|>=|==|!=|<|>)\s")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_REF = re.compile(r"^(?P<variant>[A-Za-z0-9][A-Za-z0-9_.-]*?)(?:@(?P<point>\d+|min|max))?"
                  r"(?:/(?P<pool>[A-Za-z0-9_.-]+))?\s*:\s*(?P<metric>[A-Za-z0-9_.:%-]+)$")


@dataclass(frozen=True)
class Ref:
    variant: str
    point: str | None
    pool: str | None
    metric: str

    def __str__(self) -> str:
        out = self.variant + (f"@{self.point}" if self.point else "") + (f"/{self.pool}" if self.pool else "")
        return f"{out}: {self.metric}"


@dataclass(frozen=True)
class Side:
    factor: float
    ref: Ref | None  # None: the side is the number `factor`


@dataclass(frozen=True)
class Claim:
    text: str
    left: Side
    op: str
    right: Side
    description: str = ""
    servers: tuple[str, ...] = ()  # evaluated only on these server versions (`servers: ["2022"]`); () = all
    versions: VersionSpec | None = None  # or on the versions meeting a condition (`versions: ">=15"`)

    def applies_to(self, server) -> bool:
        if server is None:
            return True
        parts = version_parts(server)
        return (not self.servers or any(server_matches(server, s) for s in self.servers)) and (
            self.versions is None or parts is None or self.versions.matches(parts))

    @property
    def about(self) -> str:
        """Which servers the claim is about, for the reason it was not evaluated on another."""
        return " and ".join(filter(None, [", ".join(self.servers), self.versions and f"versions {self.versions}"]))

    def refs(self) -> list[Ref]:
        return [s.ref for s in (self.left, self.right) if s.ref is not None]


def server_matches(version, wanted: str) -> bool:
    """`2022` matches SQL Server `2022-CU14`, `16` matches PostgreSQL `16.4`: the whole version or its head."""
    text, wanted = str(version), str(wanted)
    return text == wanted or text.startswith(wanted + "-") or text.startswith(wanted + ".")


def parse_claim(text: str, description: str = "") -> Claim:
    """Parse one claim; raises ValueError with a readable reason."""
    ops = list(_OP.finditer(text))
    if len(ops) != 1:
        raise ValueError("a claim compares two sides with one of < <= > >= == != (spaces around it), "
                         f"e.g. 'holder: elapsed_s >= 3 * none: elapsed_s'; got '{text}'")
    op = ops[0]
    return Claim(text.strip(), _side(text[: op.start()]), op.group(1), _side(text[op.end():]), description)


def _side(text: str) -> Side:
    text = text.strip()
    if re.fullmatch(_NUMBER, text):
        return Side(float(text), None)
    m = re.fullmatch(rf"({_NUMBER})\s*\*\s*(.+)", text) or None
    if m:
        return Side(float(m.group(1)), _ref(m.group(2)))
    m = re.fullmatch(rf"(.+?)\s*\*\s*({_NUMBER})", text)
    if m:
        return Side(float(m.group(2)), _ref(m.group(1)))
    return Side(1.0, _ref(text))


def _ref(text: str) -> Ref:
    m = _REF.match(text.strip())
    if not m:
        raise ValueError(f"'{text.strip()}' is not a reference like 'variant[@point][/pool]: metric'")
    return Ref(m.group("variant"), m.group("point"), m.group("pool"), m.group("metric"))


def evaluate(claims: list[Claim], results: list[VariantRun],
             skipped: set[str] | frozenset = frozenset()) -> list[ClaimVerdict]:
    """Evaluate every claim against the (repeat-folded) variant runs of each server in the run.

    A claim is "pass" or "fail" on the point values; "not evaluated" when a variant it names was left
    out (`skipped`), when it is about other servers, when a variant run it reads is incomplete or
    failed, or when a metric it reads is unavailable on the server. A reference that finds nothing
    (no such variant, point or metric) fails, with the reason.
    """
    servers: list = []
    for r in results:
        if r.server not in servers:
            servers.append(r.server)
    verdicts = []
    for server in servers or [None]:
        mine = [r for r in results if r.server == server]
        for claim in claims:
            left_out = [r.variant for r in claim.refs() if r.variant in skipped]
            if not claim.applies_to(server):
                verdicts.append(_verdict(claim, server, NOT_EVALUATED,
                                         reason=f"not evaluated: the claim is about {claim.about} only"))
            elif left_out:
                verdicts.append(_verdict(claim, server, NOT_EVALUATED,
                                         reason=f"not evaluated: {', '.join(sorted(set(left_out)))} was not run"))
            else:
                verdicts.append(_one(claim, mine, server))
    return verdicts


NOT_EVALUATED = "not evaluated"


class _NotEvaluated(Exception):
    pass


def _verdict(claim: Claim, server, verdict: str, left=None, right=None, reason: str = "") -> ClaimVerdict:
    return ClaimVerdict(claim.text, verdict, claim.description, server,
                        None if left is None else ClaimEstimate(left), None if right is None else ClaimEstimate(right),
                        reason)


def _one(claim: Claim, results: list[VariantRun], server) -> ClaimVerdict:
    try:
        left = _value(claim.left, results)
        right = _value(claim.right, results)
    except _NotEvaluated as exc:
        return _verdict(claim, server, NOT_EVALUATED, reason=f"not evaluated: {exc}")
    except LookupError as exc:
        return _verdict(claim, server, "fail", reason=str(exc))
    return _verdict(claim, server, "pass" if OPERATORS[claim.op](left, right) else "fail", left, right)


def _value(side: Side, results: list[VariantRun]) -> float:
    if side.ref is None:
        return side.factor
    return side.factor * lookup(side.ref, results)


def lookup(ref: Ref, results: list[VariantRun]) -> float:
    runs = [r for r in results if r.variant == ref.variant]
    if not runs:
        raise LookupError(f"no results for variant '{ref.variant}' (was it run?)")
    points = sorted({r.point for r in runs if r.point is not None})
    if ref.point is None:
        if len(runs) > 1:
            raise LookupError(f"variant '{ref.variant}' ran at {points}: say which with @N, @min or @max")
        run = runs[0]
    else:
        want = points[0] if ref.point == "min" else points[-1] if ref.point == "max" else int(ref.point)
        matching = [r for r in runs if r.point == want]
        if not matching:
            raise LookupError(f"variant '{ref.variant}' has no sweep point {ref.point} (it ran at {points})")
        run = matching[0]
    if run.status in ("incomplete", "failed"):
        raise _NotEvaluated(f"{run.label} is {run.status}: {'; '.join(run.messages) or 'its figures are partial'}")
    pool = ref.pool or run.first_measured().name
    if pool not in run.pools:
        raise LookupError(f"variant '{ref.variant}' has no pool '{pool}' (it has {', '.join(run.pools)})")
    metrics = run.flat_metrics(pool)
    value = metrics.get(ref.metric)
    if isinstance(value, Unavailable):
        raise _NotEvaluated(f"{ref.metric} of {run.label} is {value}")
    if value is None:
        hint = suggest(ref.metric, metrics) or f" (some metrics: {', '.join(list(metrics)[:8])})"
        raise LookupError(f"no value for metric '{ref.metric}' of {ref}{hint}")
    return float(value)
