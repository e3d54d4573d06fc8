"""`expect:`, the scenario's claims: each a text (claims.py parses it) or a mapping with `check`,
`claim`, `id`, `servers`, `versions` and `skip_quick`, and each reference checked against the variants;
two claims of one key (the same `id:`, or the same form without one) are refused."""

from __future__ import annotations

from dataclasses import replace

from ..util import suggest
from .claims import Claim, parse_claim
from .versions import read_condition
from .yamlpos import Checker, describe, join

CLAIM_KEYS = ["check", "claim", "id", "servers", "versions", "skip_quick"]


def read_expect(check: Checker, doc, variants) -> tuple[Claim, ...]:
    value = doc.get("expect")
    if value is None:
        return ()
    if not isinstance(value, list):
        check.add(doc, "expect", "expect", f"must be a list of claims, got {describe(value)}")
        return ()
    known = {v.name: v for v in variants}
    out = []
    keys: dict[str, int] = {}  # a claim's key -> its place
    for i, item in enumerate(value):
        sub = join("expect", i)
        text, description, where, fields = item, "", (value, i), {}
        if isinstance(item, dict):
            description, fields = _claim_keys(check, item, sub)
            text, where = item.get("check"), (item, "check")
        if not isinstance(text, str):
            check.add(*where, sub, f"a claim is text such as 'holder: elapsed_s >= 3 * none: elapsed_s', "
                                   f"got {describe(text)}")
            continue
        try:
            claim = replace(parse_claim(text, description), **fields)
        except ValueError as exc:
            check.add(*where, sub, str(exc))
            continue
        _check_refs(check, claim, known, where, sub)
        if claim.key in keys:
            check.add(*where, sub, f"claim {keys[claim.key] + 1} has the key '{claim.key}' already (the same "
                                   f"{'id' if claim.id else 'sides and operator'}); give one of them an `id:` of "
                                   f"its own, or drop it")
            continue
        keys[claim.key] = i
        out.append(claim)
    return tuple(out)


def _claim_keys(check: Checker, item, sub: str) -> tuple[str, dict]:
    """A claim written as a mapping: its description, and the fields of Claim its other keys set."""
    check.known_keys(item, sub, CLAIM_KEYS, required=("check",))
    versions = read_condition(check, item, sub)
    skip_quick = item.get("skip_quick", "")
    if not isinstance(skip_quick, str) or (skip_quick == "" and "skip_quick" in item):
        check.add(item, "skip_quick", join(sub, "skip_quick"),
                  "must say why the claim is left out of quick runs, e.g. 'the effect is too small to decide "
                  "in 2 s windows'")
        skip_quick = ""
    ident = item.get("id", "")
    if not isinstance(ident, (str, int)) or isinstance(ident, bool) or ("id" in item and not str(ident).strip()):
        check.add(item, "id", join(sub, "id"), f"must be a short name that keeps the claim's history when its check "
                                               f"is rewritten, such as 'reuse-faster', got {describe(ident)}")
        ident = ""
    servers = item.get("servers", [])
    servers = [servers] if isinstance(servers, (str, int)) else servers
    if not isinstance(servers, list) or not all(isinstance(v, (str, int)) for v in servers):
        check.add(item, "servers", join(sub, "servers"),
                  f"must be a list of server versions such as [\"2022\"], got {describe(servers)}")
        servers = []
    return str(item.get("claim") or ""), {"servers": tuple(str(v) for v in servers), "versions": versions,
                                          "skip_quick": skip_quick, "id": str(ident).strip()}


def _check_refs(check: Checker, claim: Claim, known: dict, where: tuple, sub: str) -> None:
    """Each variant, sweep point and pool the claim names exists."""
    for ref in claim.refs():
        variant = known.get(ref.variant)
        if variant is None:
            check.add(*where, sub, f"no variant named '{ref.variant}'{suggest(ref.variant, known)}")
            continue
        if ref.point and ref.point not in ("min", "max") and int(ref.point) not in variant.sweep:
            check.add(*where, sub, f"variant '{ref.variant}' does not run at {ref.point} clients "
                                   f"(sweep: {', '.join(str(p) for p in variant.sweep)})")
        if ref.pool and ref.pool not in {p.name for p in variant.pools}:
            check.add(*where, sub, f"variant '{ref.variant}' has no pool '{ref.pool}'"
                                   f"{suggest(ref.pool, [p.name for p in variant.pools])}")
