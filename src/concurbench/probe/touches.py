"""What a scenario's SQL would do to objects by name: drop, replace, alter, empty or write them.

The probe of a database that is not concurbench's (provisioners/owned.py) reads every statement the
run would send (the setup and teardown, each variant's, held transactions' and timed statements,
the pools' transactions and the probe queries) and names the objects each touches, so that the
engine's side can say which of them exist in the database: those are the user's, and the run would
drop or change them. Statements are read, never run. The reading is by each statement's leading
words, as both engines spell them (DROP ... IF EXISTS, CREATE OR REPLACE / CREATE OR ALTER,
TRUNCATE TABLE, INSERT INTO, UPDATE, DELETE FROM, MERGE INTO, COPY ... FROM); a name built at run
time (dynamic SQL) is not seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..engines.sqlsplit import split_sql


class Verb(StrEnum):
    DROP = "drop"
    REPLACE = "replace"
    ALTER = "alter"
    EMPTY = "empty"  # TRUNCATE
    WRITE = "write"  # INSERT, UPDATE, DELETE, MERGE, COPY FROM


@dataclass(frozen=True)
class Touch:
    verb: Verb
    kind: str  # table, view, function, ...; "relation" for what a write names
    name: str  # as written: schema-qualified or not, quoted or not, a routine's argument list kept
    where: str  # the statement's origin and line
    on: str | None = None  # a trigger's table


KINDS = (r"MATERIALIZED\s+VIEW|FOREIGN\s+TABLE|TABLE|VIEW|SEQUENCE|INDEX|FUNCTION|PROCEDURE|PROC|ROUTINE|AGGREGATE|"
         r"TYPE|DOMAIN|EXTENSION|SCHEMA|TRIGGER|SYNONYM|RULE")
NAME = r"(?:\"[^\"]+\"|\[[^\]]+\]|[\w$#@]+)(?:\s*\.\s*(?:\"[^\"]+\"|\[[^\]]+\]|[\w$#@]+))*"
PATTERNS = (
    (Verb.DROP, re.compile(rf"^DROP\s+(?P<kind>{KINDS})\s+(?:CONCURRENTLY\s+)?(?:IF\s+EXISTS\s+)?(?P<names>.+)$",
                           re.I | re.S)),
    (Verb.REPLACE, re.compile(rf"^CREATE\s+OR\s+(?:REPLACE|ALTER)\s+(?:TEMP(?:ORARY)?\s+|RECURSIVE\s+|TRUSTED\s+|"
                              rf"PROCEDURAL\s+|CONSTRAINT\s+)*(?P<kind>{KINDS})\s+(?P<names>{NAME})", re.I | re.S)),
    (Verb.ALTER, re.compile(rf"^ALTER\s+(?P<kind>{KINDS})\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(?P<names>{NAME})",
                            re.I | re.S)),
    (Verb.EMPTY, re.compile(r"^TRUNCATE\s+(?:TABLE\s+)?(?:ONLY\s+)?(?P<names>.+)$", re.I | re.S)),
    (Verb.WRITE, re.compile(rf"^(?:WITH\b.*?\)\s*)?(?:INSERT\s+INTO|MERGE\s+INTO|UPDATE(?:\s+ONLY)?|"
                            rf"DELETE\s+FROM(?:\s+ONLY)?)\s+(?P<names>{NAME})", re.I | re.S)),
    (Verb.WRITE, re.compile(rf"^COPY\s+(?P<names>{NAME})(?:\s*\([^)]*\))?\s+FROM\b", re.I | re.S)),
)
TAIL = re.compile(r"\s+(CASCADE|RESTRICT)\s*$", re.I)
TRIGGER_ON = re.compile(rf"^(?P<name>{NAME})\s+ON\s+(?P<table>{NAME})", re.I | re.S)
COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


def touches(sql: str, label: str, lines: bool = True) -> list[Touch]:
    """Every object the script's statements name with a verb above, in order; `label` says where the script is
    (with each statement's line when `lines`)."""
    found = []
    for line, statement in split_sql(sql):
        text = COMMENTS.sub(" ", statement).strip().rstrip(";").strip()
        for verb, pattern in PATTERNS:
            match = pattern.match(text)
            if match is None:
                continue
            kind = " ".join((match.groupdict().get("kind") or "relation").lower().split())
            kind = {"proc": "procedure"}.get(kind, kind)
            found += _each(verb, kind, match.group("names"), f"{label}, line {line}" if lines else label)
            break
    return found


def _each(verb: Verb, kind: str, names: str, where: str) -> list[Touch]:
    names = TAIL.sub("", names.strip())
    if kind in ("trigger", "rule"):
        on = TRIGGER_ON.match(names)
        return [Touch(verb, kind, on.group("name"), where, on=on.group("table"))] if on else []
    return [Touch(verb, kind, name, where) for name in split_names(names) if name]


def split_names(text: str) -> list[str]:
    """`a, b(int, text), "c,d"` -> a; b(int, text); "c,d": commas inside parentheses or quotes do not split."""
    out, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"[":
            quote = "]" if ch == "[" else ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    out.append("".join(current).strip())
    return out


def scenario_touches(scenario, variants) -> list[Touch]:
    """What every statement a run of these variants sends would touch, in the order the run sends it."""
    found = _steps("setup", scenario.setup)
    for variant in variants:
        found += _steps(f"{variant.name}: setup", variant.setup)
        for spec in variant.background:
            for sql in spec.sql:
                found += touches(sql, f"{variant.name}: background {spec.name}", lines=False)
        for pool in variant.pools:
            for statement in pool.transaction:
                found += touches(statement.sql, f"{variant.name}: pool {pool.name}, {statement.name}", lines=False)
        found += _steps(f"{variant.name}: teardown", variant.teardown)
    return found + _steps("teardown", scenario.teardown)


def _steps(label: str, steps) -> list[Touch]:
    return [t for step in steps for t in touches(step.sql, label if step.origin == "inline" else
                                                 f"{label} {step.origin}")]
