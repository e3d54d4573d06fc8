"""`expect` claims: comparisons over a run's metrics, written as text in the scenario.

    holder: elapsed_s >= 3 * none: elapsed_s
    advisory@max: statements.lock.mean_ms < for_update@max: statements.lock.mean_ms
    for_share_many: multixact.created > 0
    bystander_beside_advisory/bystanders: tps > 1.1 * bystander_beside_for_update/bystanders: tps

A reference is `VARIANT[@POINT][/POOL][ on SERVER]: METRIC`: POINT is a sweep client count, `min` or `max`
(needed when the variant sweeps), POOL defaults to the variant's first measured pool, SERVER names the
server version whose runs the side reads (as `servers:` names one: `2019`, `16`; without it, the server
the claim is judged on), and METRIC is a name as reports and summary.csv use it:

    dynamic_memopt: elapsed_s < dynamic_memopt on 2019: elapsed_s      # with servers: ["2022"]

Either side may be scaled by a number (`3 * ref`, `ref * 0.5`) or be a plain number. This module parses
claims; check/ judges them.

A claim's key names it wherever it is kept (a run's verdicts, the report by version, the history's series):
the `id:` the scenario gives it, else its parsed form written one way (`ClaimForm.text`: one space around
the operator and the `*`, a factor of 1 left out, numbers as short as they read back), so reordering the
claims, rewording a description or re-spacing a check keeps it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .versions import VersionSpec, version_parts

_OP = re.compile(r"\s(<=|>=|==|!=|<|>)\s")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_REF = re.compile(r"^(?P<variant>[A-Za-z0-9][A-Za-z0-9_.-]*?)(?:@(?P<point>\d+|min|max))?"
                  r"(?:/(?P<pool>[A-Za-z0-9_.-]+))?(?:\s+on\s+(?P<server>[A-Za-z0-9][A-Za-z0-9_.-]*))?"
                  r"\s*:\s*(?P<metric>[A-Za-z0-9_.:%-]+)$")


@dataclass(frozen=True)
class Ref:
    variant: str
    point: str | None
    pool: str | None
    metric: str
    server: str | None = None  # the server version whose runs it reads (None: the one the claim is judged on)

    def __str__(self) -> str:
        out = self.variant + (f"@{self.point}" if self.point else "") + (f"/{self.pool}" if self.pool else "")
        return f"{out}{f' on {self.server}' if self.server else ''}: {self.metric}"


@dataclass(frozen=True)
class Side:
    factor: float
    ref: Ref | None  # None: the side is the number `factor`


@dataclass(frozen=True)
class ClaimForm:
    """What a claim says, parsed: its sides and the operator between them (a side is a scaled reference or a
    number, the bound)."""

    left: Side
    op: str
    right: Side

    def refs(self) -> list[Ref]:
        return [s.ref for s in (self.left, self.right) if s.ref is not None]

    @property
    def text(self) -> str:
        """The form written one way (the key of a claim without an `id:`): `a: tps > 1.1 * b: tps`."""
        return f"{_side_text(self.left)} {self.op} {_side_text(self.right)}"


def _side_text(side: Side) -> str:
    factor = _number_text(side.factor)
    if side.ref is None:
        return factor
    return str(side.ref) if side.factor == 1.0 else f"{factor} * {side.ref}"


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


@dataclass(frozen=True)
class Claim:
    """One `expect` claim: its text as the scenario wrote it, its form parsed once, and what the scenario
    says about it (`id` is its `id:`, "" when it has none; `key` is what names it)."""

    text: str
    form: ClaimForm
    description: str = ""
    servers: tuple[str, ...] = ()  # evaluated only on these server versions (`servers: ["2022"]`); () = all
    skip_quick: str = ""  # why the claim is not judged in quick runs (its effect is too small for them)
    versions: VersionSpec | None = None  # or on the versions meeting a condition (`versions: ">=15"`)
    id: str = ""

    @property
    def key(self) -> str:
        """What names the claim: its `id:`, else its form written one way."""
        return self.id or self.form.text

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
        return self.form.refs()


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
    return Claim(text.strip(), ClaimForm(_side(text[: op.start()]), op.group(1), _side(text[op.end():])), description)


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
        raise ValueError(f"'{text.strip()}' is not a reference like 'variant[@point][/pool][ on server]: metric'")
    return Ref(m.group("variant"), m.group("point"), m.group("pool"), m.group("metric"), m.group("server"))


def claim_form(claim: ClaimForm) -> dict:
    """A claim's form as a run stores it beside its text: its sides and operator."""
    def side(s: Side) -> dict:
        ref = None if s.ref is None else {"variant": s.ref.variant, "point": s.ref.point, "pool": s.ref.pool,
                                          "metric": s.ref.metric, **({"server": s.ref.server} if s.ref.server else {})}
        return {"factor": s.factor, "ref": ref}
    return {"left": side(claim.left), "op": claim.op, "right": side(claim.right)}


def claim_of(form: dict) -> ClaimForm:
    """The ClaimForm a stored form gives (claim_form's inverse); ValueError when the form is not one."""
    def side(d) -> Side:
        ref = d["ref"]
        return Side(float(d["factor"]), None if ref is None else Ref(str(ref["variant"]), ref.get("point"),
                                                                     ref.get("pool"), str(ref["metric"]),
                                                                     ref.get("server")))
    try:
        if form["op"] not in ("<", "<=", ">", ">=", "==", "!="):
            raise ValueError(f"unknown operator {form['op']!r}")
        return ClaimForm(side(form["left"]), form["op"], side(form["right"]))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a claim's sides and operator ({type(exc).__name__}: {exc})") from None
