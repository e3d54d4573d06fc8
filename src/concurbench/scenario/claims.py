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

    def applies_to(self, server) -> bool:
        return not self.servers or server is None or any(server_matches(server, s) for s in self.servers)

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


@dataclass
class Verdict:
    claim: Claim
    server: str | None
    passed: bool | None  # None: not evaluated, because a variant it names was not run
    left: float | None
    right: float | None
    error: str = ""

    def as_dict(self) -> dict:
        return {"claim": self.claim.text, "description": self.claim.description, "server": self.server,
                "passed": self.passed, "left": self.left, "right": self.right, "error": self.error}


def evaluate(claims: list[Claim], results: list[dict], skipped: set[str] | frozenset = frozenset()) -> list[Verdict]:
    """Evaluate every claim against the results of each server in the run.

    Claims naming a variant in `skipped` (left out with --variant), or reading a run that did not
    end ok (interrupted, or incomplete: a worker process sent no results), are reported as not evaluated.
    """
    servers: list = []
    for r in results:
        if r.get("server") not in servers:
            servers.append(r.get("server"))
    verdicts = []
    for server in servers or [None]:
        mine = [r for r in results if r.get("server") == server]
        for claim in claims:
            left_out = [r.variant for r in claim.refs() if r.variant in skipped]
            if not claim.applies_to(server):
                verdicts.append(Verdict(claim, server, None, None, None,
                                        f"not evaluated: the claim is about {', '.join(claim.servers)} only"))
            elif left_out:
                verdicts.append(Verdict(claim, server, None, None, None,
                                        f"not evaluated: {', '.join(sorted(set(left_out)))} was not run"))
            else:
                verdicts.append(_one(claim, mine, server))
    return verdicts


def _one(claim: Claim, results: list[dict], server) -> Verdict:
    try:
        unfinished = [run for run in (_run(ref, results) for ref in claim.refs()) if run.get("status", "ok") != "ok"]
        if unfinished:
            runs = ", ".join(dict.fromkeys(f"{_label(run)} is {run['status']}" for run in unfinished))
            return Verdict(claim, server, None, None, None, f"not evaluated: the run of {runs}")
        left = _value(claim.left, results)
        right = _value(claim.right, results)
    except LookupError as exc:
        return Verdict(claim, server, False, None, None, str(exc))
    return Verdict(claim, server, bool(OPERATORS[claim.op](left, right)), left, right)


def _value(side: Side, results: list[dict]) -> float:
    if side.ref is None:
        return side.factor
    return side.factor * lookup(side.ref, results)


def _label(run: dict) -> str:
    return run["variant"] + (f"@{run['point']}" if run.get("point") is not None else "")


def _run(ref: Ref, results: list[dict]) -> dict:
    """The result a reference reads (its variant at its sweep point)."""
    runs = [r for r in results if r["variant"] == ref.variant]
    if not runs:
        raise LookupError(f"no results for variant '{ref.variant}' (was it run?)")
    points = sorted({r["point"] for r in runs if r["point"] is not None})
    if ref.point is None:
        if len(runs) > 1:
            raise LookupError(f"variant '{ref.variant}' ran at {points}: say which with @N, @min or @max")
        run = runs[0]
    else:
        want = points[0] if ref.point == "min" else points[-1] if ref.point == "max" else int(ref.point)
        matching = [r for r in runs if r["point"] == want]
        if not matching:
            raise LookupError(f"variant '{ref.variant}' has no sweep point {ref.point} (it ran at {points})")
        run = matching[0]
    return run


def lookup(ref: Ref, results: list[dict]) -> float:
    from ..report.metrics import row_metrics

    run = _run(ref, results)
    pools = run["pools"]
    pool = ref.pool or next((p for p, d in pools.items() if d["measure"]), next(iter(pools)))
    if pool not in pools:
        raise LookupError(f"variant '{ref.variant}' has no pool '{pool}' (it has {', '.join(pools)})")
    metrics = row_metrics(run, pool)
    value = metrics.get(ref.metric)
    if value is None:
        from .yamlpos import suggest

        hint = suggest(ref.metric, metrics) or f" (some metrics: {', '.join(list(metrics)[:8])})"
        raise LookupError(f"no value for metric '{ref.metric}' of {ref}{hint}")
    return float(value)
