"""Version conditions: `versions: ">=15"` on a SQL step, a probe, a pool statement or a claim.

A condition is one or more comparisons joined by commas, all of which must hold:

    ">=15"        PostgreSQL 15 and later          "<15"      before 15
    "14"          any 14.x (also `versions: 14`)   "!=16"     anything but 16.x
    ">=15, <18"   15, 16 and 17                    ">=16.4"   16.4 and later

A comparison looks at as many parts of the server's version as it names: `>=15` at the major,
`<16.4` at the major and the minor, so `<=15` takes every 15.x. SQL Server versions are years
(`">=2022"`). The server's version is the one it reports (`14.23`, `2022-CU18`: 2022).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .yamlpos import Checker, describe, join

_CLAUSE = re.compile(r"^(>=|<=|==|!=|>|<)?\s*(\d+(?:\.\d+){0,2})$")
_HEAD = re.compile(r"^\s*(\d+(?:\.\d+)*)")
_TESTS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
          "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
EXAMPLES = '">=15", "<15", "14" or ">=15, <18"'


@dataclass(frozen=True)
class VersionSpec:
    """A parsed condition: (operator, version parts) clauses, all of which must hold."""

    text: str
    clauses: tuple[tuple[str, tuple[int, ...]], ...]

    def __str__(self) -> str:
        return self.text

    def matches(self, version: tuple[int, ...]) -> bool:
        return all(_TESTS[op](version[:len(parts)], parts) for op, parts in self.clauses)


def parse_versions(value) -> VersionSpec:
    """A condition as a scenario writes it (text, or a bare major number); ValueError says why not."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"must be a version condition such as {EXAMPLES}, got {describe(value)}")
    text = str(value).strip()
    clauses = []
    for piece in text.split(","):
        match = _CLAUSE.match(piece.strip())
        if not match:
            raise ValueError(f"'{piece.strip() or text}' is not a version comparison: write a condition "
                             f"such as {EXAMPLES}")
        clauses.append((match.group(1) or "==", tuple(int(p) for p in match.group(2).split("."))))
    return VersionSpec(text, tuple(clauses))


def read_condition(check: Checker, item: dict, path: str) -> VersionSpec | None:
    """The item's `versions:` condition, or None when it has none (or a wrong one, which is reported)."""
    if item.get("versions") is None:
        return None
    try:
        return parse_versions(item["versions"])
    except ValueError as exc:
        check.add(item, "versions", join(path, "versions"), str(exc))
        return None


def version_parts(version) -> tuple[int, ...] | None:
    """`14.23` -> (14, 23), `18beta1` -> (18,), `2022-CU18` -> (2022,); None when it starts with no number."""
    match = _HEAD.match(str(version or ""))
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def applies(spec: VersionSpec | None, version: tuple[int, ...]) -> bool:
    """Whether an item with this condition (None: none) is for a server of this version."""
    return spec is None or spec.matches(version)

