"""Which existing objects of a SQL Server database a scenario's SQL would drop, replace, alter or empty, for a
probe of a database that is not concurbench's: the probe names each one instead of saying "ok" where the run
would destroy a user's table.

The scenario's setup and teardown, and each variant's, are read as the engine sends them (split on GO lines,
odbc.split_batches), without comments; statements inside string literals count too (dynamic SQL runs).
What they touch is found by the statements' own words: DROP <kind> [IF EXISTS] name[, name...], DROP INDEX
name ON table, TRUNCATE TABLE name, ALTER TABLE/VIEW/PROCEDURE/FUNCTION/TRIGGER/SEQUENCE/SCHEMA name,
CREATE OR ALTER <kind> name. Each name is looked up in the database the connection is in: OBJECT_ID for
schema-scoped objects (resolved as the server resolves them, against the login's default schema), TYPE_ID,
SCHEMA_ID, and sys.indexes for an index; temporary objects (#name) are skipped.

Sources (Microsoft Learn): DROP TABLE, DROP VIEW, DROP PROCEDURE, DROP FUNCTION, DROP TRIGGER, DROP SEQUENCE,
DROP SYNONYM, DROP TYPE, DROP SCHEMA, DROP INDEX (`index_name ON table`), TRUNCATE TABLE, CREATE OR ALTER;
OBJECT_ID, TYPE_ID, SCHEMA_ID, sys.objects (type_desc), sys.indexes.
"""

from __future__ import annotations

import re

from ..engines.odbc import split_batches
from .common import labelled

_NAME = r"(?:\[(?:[^\]]|\]\])+\]|\"[^\"]+\"|[\w@$#]+)"
_QUALIFIED = rf"{_NAME}(?:\s*\.\s*{_NAME}){{0,2}}"
_KINDS = r"TABLE|VIEW|PROCEDURE|PROC|FUNCTION|TRIGGER|SEQUENCE|SYNONYM|TYPE|SCHEMA"
_DROP = re.compile(rf"\bDROP\s+(?P<kind>{_KINDS})\s+(?:IF\s+EXISTS\s+)?(?P<names>{_QUALIFIED}(?:\s*,\s*{_QUALIFIED})*)",
                   re.I)
_DROP_INDEX = re.compile(rf"\bDROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(?P<index>{_NAME})\s+ON\s+(?P<table>{_QUALIFIED})", re.I)
_ALTER = re.compile(rf"\b(?P<how>CREATE\s+OR\s+ALTER|ALTER)\s+(?P<kind>TABLE|VIEW|PROCEDURE|PROC|FUNCTION|TRIGGER|"
                    rf"SEQUENCE|SCHEMA)\s+(?P<names>{_QUALIFIED})", re.I)
_TRUNCATE = re.compile(rf"\bTRUNCATE\s+TABLE\s+(?P<names>{_QUALIFIED})", re.I)
OBJECT = "SELECT LOWER(type_desc) AS kind FROM sys.objects WHERE object_id = OBJECT_ID(?)"
TYPE = "SELECT N'type' AS kind WHERE TYPE_ID(?) IS NOT NULL"
SCHEMA = "SELECT N'schema' AS kind WHERE SCHEMA_ID(?) IS NOT NULL"
INDEX = "SELECT N'index' AS kind FROM sys.indexes WHERE object_id = OBJECT_ID(?) AND name = ?"


def touched(sql: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(what is done, kind, lookup) of each object the SQL names: ("dropped", "TABLE", ("dbo.accounts",))."""
    out = []
    for _, batch in split_batches(sql):
        text = _without_comments(batch)
        for m in _DROP.finditer(text):
            out += [("dropped", m.group("kind").upper(), (n,)) for n in _names(m.group("names"))]
        for m in _DROP_INDEX.finditer(text):
            out.append(("dropped", "INDEX", (m.group("table"), _unquote(m.group("index")))))
        for m in _ALTER.finditer(text):
            how = "replaced" if m.group("how").upper().startswith("CREATE") else "altered"
            out.append((how, m.group("kind").upper(), (m.group("names"),)))
        for m in _TRUNCATE.finditer(text):
            out.append(("emptied", "TABLE", (m.group("names"),)))
    return [(how, kind, lookup) for how, kind, lookup in out if not lookup[0].lstrip("[\"").startswith("#")]


def would_touch(conn, scenario, variants) -> list[str]:
    """Every existing object of the connection's database the scenario's setup and teardown (and the variants')
    would drop, replace, alter or empty: "dbo.accounts (user_table): dropped by setup (sql/...)"."""
    steps = [*labelled("setup", scenario.setup)]
    for variant in variants:
        steps += [*labelled(f"{variant.name}: setup", variant.setup), *labelled(f"{variant.name}: teardown",
                                                                                variant.teardown)]
    steps += labelled("teardown", scenario.teardown)
    kinds: dict[str, str | None] = {}  # what each name is in the database (None: nothing there)
    ways: dict[str, list[str]] = {}
    for where, step in steps:
        for how, kind, lookup in touched(step.sql):
            shown = lookup[0] if kind != "INDEX" else f"{lookup[1]} on {lookup[0]}"
            if shown not in kinds:
                kinds[shown] = _kind(conn, kind, lookup)
            said = f"{how} by {where}"
            if kinds[shown] is not None and said not in ways.setdefault(shown, []):
                ways[shown].append(said)
    return [f"{name} ({kinds[name]}): {', '.join(said)}" for name, said in ways.items() if said]


def _kind(conn, kind: str, lookup: tuple[str, ...]) -> str | None:
    if kind == "TYPE":
        sql = TYPE
    elif kind == "SCHEMA":
        sql = SCHEMA
    elif kind == "INDEX":
        sql = INDEX
    else:
        sql = OBJECT
    row = conn.execute(sql, *lookup).fetchone()
    return str(row[0]) if row else None


def _names(text: str) -> list[str]:
    return [n.strip() for n in re.findall(rf"{_QUALIFIED}", text)]


def _unquote(name: str) -> str:
    if name.startswith("[") and name.endswith("]"):
        return name[1:-1].replace("]]", "]")
    return name.strip('"')


def _without_comments(batch: str) -> str:
    """The batch without -- and /* */ comments (nested), string literals and quoted names kept."""
    out, i, n, quote, depth = [], 0, len(batch), "", 0
    while i < n:
        ch = batch[i]
        if depth:
            if batch.startswith("/*", i):
                depth, i = depth + 1, i + 2
            elif batch.startswith("*/", i):
                depth, i = depth - 1, i + 2
                out.append(" ")
            else:
                i += 1
            continue
        if quote:
            out.append(ch)
            if ch == quote:
                quote = ""
            i += 1
            continue
        if batch.startswith("--", i):
            end = batch.find("\n", i)
            i = n if end < 0 else end
            continue
        if batch.startswith("/*", i):
            depth, i = 1, i + 2
            continue
        if ch in "'\"[":
            quote = "]" if ch == "[" else ch
        out.append(ch)
        i += 1
    return "".join(out)
