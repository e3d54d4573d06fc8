"""Split a PostgreSQL script into statements at top-level semicolons.

Quotes ('...', "..."), dollar quotes ($tag$...$tag$), comments (-- and nested /* */) and
parentheses are respected, so function bodies stay whole. Each statement is then sent on its own,
which lets VACUUM or CREATE DATABASE sit in a setup file beside other statements.
"""

from __future__ import annotations

import re

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def split_sql(text: str) -> list[tuple[int, str]]:
    """Statements with the line each starts on (1-based); empty or comment-only ones are dropped."""
    out: list[tuple[int, str]] = []
    i, n = 0, len(text)
    start = 0
    first = -1  # offset of the current statement's first character outside comments
    while i < n:
        ch = text[i]
        if ch == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if ch == "/" and text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            continue
        if ch == ";":
            if first >= 0:
                out.append((text.count("\n", 0, first) + 1, text[start:i].strip()))
            i += 1
            start, first = i, -1
            continue
        if first < 0 and not ch.isspace():
            first = i
        if ch in ("'", '"'):
            escapes = ch == "'" and i > 0 and text[i - 1] in "eE" and (i < 2 or not _word(text[i - 2]))
            i += 1
            while i < n:
                if escapes and text[i] == "\\":
                    i += 2
                    continue
                if text[i] == ch:
                    if i + 1 < n and text[i + 1] == ch:
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif ch == "$":
            m = _DOLLAR.match(text, i)
            if m and not (i > 0 and _word(text[i - 1])):
                tag = m.group(0)
                end = text.find(tag, m.end())
                i = n if end < 0 else end + len(tag)
            else:
                i += 1
        else:
            i += 1
    if first >= 0:
        out.append((text.count("\n", 0, first) + 1, text[start:].strip()))
    return out


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
