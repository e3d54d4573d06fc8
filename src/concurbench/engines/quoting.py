"""Names and texts written into SQL, for both engines: the one place each quoting rule lives.

Everything concurbench puts into a statement as text (a database's name, a setting's value, a
trace's path, a marker) goes through these; anything a driver can bind as a parameter is bound
instead. Each quoter refuses what the server could not take as one name or one literal (NUL, an
empty name, a T-SQL name over 128 characters) with a ValueError, rather than write something else.

- T-SQL: a name in brackets with `]` doubled (QUOTENAME's rule); a Unicode literal `N'...'` with
  `'` doubled; a LIKE pattern whose `[`, `%` and `_` match themselves (bracketed, as the LIKE page
  says).
- PostgreSQL: a name in double quotes with `"` doubled (a quoted identifier keeps its case); a
  literal in single quotes with `'` doubled (standard_conforming_strings, on since 9.1, keeps a backslash
  as it is); a setting's name as ALTER SYSTEM takes it (letters, digits, `_` and the `.` of a
  library's settings: no quoting, so anything else is refused).

Sources: Microsoft Learn, QUOTENAME, "Database identifiers" (128 characters), LIKE (wildcard
characters as literals); PostgreSQL documentation, "Lexical Structure" (quoted identifiers, string
constants), ALTER SYSTEM.
"""

from __future__ import annotations

import re

_SIMPLE = re.compile(r"^[A-Za-z0-9_]+$")
_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$")
_PLAIN_PG = re.compile(r"^[a-z_][a-z0-9_$]*$")
TSQL_NAME_MAX = 128


def simple_name(name: str, what: str = "name") -> str:
    """`name` when it is letters, digits and underscores only (the names scenarios may give observers and
    the like), else ValueError saying what it is."""
    if not isinstance(name, str) or not _SIMPLE.match(name):
        raise ValueError(f"{what} must be letters, digits and underscores, got {name!r}")
    return name


def tsql_name(name: str) -> str:
    """A bracket-quoted T-SQL identifier: `a]b` -> `[a]]b]`."""
    if not isinstance(name, str) or not name or "\x00" in name or len(name) > TSQL_NAME_MAX:
        raise ValueError(f"not a valid identifier: {name!r}")
    return "[" + name.replace("]", "]]") + "]"


def tsql_literal(text: object) -> str:
    """A T-SQL Unicode string literal: `it's` -> `N'it''s'`."""
    return "N" + _quoted(text)


def tsql_like_prefix(text: str) -> str:
    """A T-SQL LIKE pattern matching the strings that start with `text` (its `[`, `%` and `_` taken literally)."""
    return text.replace("[", "[[]").replace("%", "[%]").replace("_", "[_]") + "%"


def pg_name(name: str) -> str:
    """A double-quoted PostgreSQL identifier: `a"b` -> `"a""b"`."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"not a valid identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def pg_shown_name(name: str) -> str:
    """A PostgreSQL name as a statement shown to a person writes it: bare when it is a plain lower-case name, else
    quoted (pg_name)."""
    return name if _PLAIN_PG.match(name or "") else pg_name(name)


def pg_literal(text: object) -> str:
    """A PostgreSQL string literal: `it's` -> `'it''s'`."""
    return _quoted(text)


def pg_setting(name: str) -> str:
    """A setting's name for ALTER SYSTEM (`work_mem`, `auto_explain.log_analyze`), or ValueError."""
    if not isinstance(name, str) or not _SETTING.match(name):
        raise ValueError(f"not a setting name: {name!r}")
    return name


def _quoted(value: object) -> str:
    """A string literal in single quotes with `'` doubled, the rule both engines share."""
    text = str(value)
    if "\x00" in text:
        raise ValueError("a string literal cannot hold NUL")
    return "'" + text.replace("'", "''") + "'"
