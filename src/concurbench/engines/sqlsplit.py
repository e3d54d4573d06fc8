"""Split a PostgreSQL script into statements at top-level semicolons.

Quotes ('...', "..."), dollar quotes ($tag$...$tag$), comments (-- and nested /* */) and
parentheses are respected, so function bodies stay whole. Each statement is then sent on its own,
which lets VACUUM or CREATE DATABASE sit in a setup file beside other statements.
"""

from __future__ import annotations

import re

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def split_sql(text: str) -> list[tuple[int, str]]:
    """Statements with the line each starts on (1-based); empty statements are dropped."""
    out: list[tuple[int, str]] = []
    i, n = 0, len(text)
    start = 0
    while i < n:
        ch = text[i]
        if ch == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif ch == "/" and text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif ch in ("'", '"'):
            i += 1
            while i < n:
                if text[i] == ch:
                    if i + 1 < n and text[i + 1] == ch:
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif ch == "$":
            m = _DOLLAR.match(text, i)
            if m and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
                tag = m.group(0)
                end = text.find(tag, m.end())
                i = n if end < 0 else end + len(tag)
            else:
                i += 1
        elif ch == ";":
            _add(out, text, start, i)
            i += 1
            start = i
        else:
            i += 1
    _add(out, text, start, n)
    return out


def _add(out: list, text: str, start: int, end: int) -> None:
    chunk = text[start:end]
    if not _meaningful(chunk):
        return
    lead = len(chunk) - len(chunk.lstrip())
    line = text.count("\n", 0, start + lead) + 1
    out.append((line, chunk.strip()))


def _meaningful(chunk: str) -> bool:
    stripped = re.sub(r"--[^\n]*", "", chunk)
    stripped = re.sub(r"/\*.*?\*/", "", stripped, flags=re.S)
    return bool(stripped.strip())
