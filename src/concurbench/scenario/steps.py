"""`setup:` and `teardown:` of a scenario or a variant: SQL text, or a list of steps, each SQL text or a
mapping with `sql` or `file` and an optional `versions:` condition."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import ConfigError
from .context import Context, expand
from .model import SqlStep
from .versions import read_condition
from .yamlpos import describe, join, read_text


def read_steps(ctx: Context, node, key: str, path: str) -> tuple[SqlStep, ...]:
    value = node.get(key) if isinstance(node, dict) else None
    if value is None:
        return ()
    if isinstance(value, str):
        return (SqlStep(value, "inline"),)
    if not isinstance(value, list):
        ctx.check.add(node, key, path, f"must be SQL text or a list of steps, got {describe(value)}")
        return ()
    steps = []
    for i, item in enumerate(value):
        sub = join(path, i)
        if isinstance(item, str):
            steps.append(SqlStep(item, "inline"))
        elif isinstance(item, dict):
            ctx.check.known_keys(item, sub, ["sql", "file", "versions"])
            versions = read_condition(ctx.check, item, sub)
            if ("sql" in item) == ("file" in item):
                ctx.check.add(value, i, sub, "needs exactly one of 'sql' or 'file'")
            elif "sql" in item:
                steps.append(SqlStep(str(item["sql"]), "inline", versions))
            else:
                step = _file_step(ctx, item, join(sub, "file"))
                if step:
                    steps.append(replace(step, versions=versions))
        else:
            ctx.check.add(value, i, sub, f"must be SQL text or a mapping with 'sql' or 'file', got {describe(item)}")
    return tuple(steps)


def _file_step(ctx: Context, item, path: str) -> SqlStep | None:
    """A `file:` step: the file next to the scenario or in a folder above it, with ${name} replaced."""
    if not isinstance(item["file"], str) or not item["file"].strip():
        ctx.check.add(item, "file", path, f"must be a file name, got {describe(item['file'])}")
        return None
    rel = Path(item["file"])
    for base in [ctx.path.resolve().parent, *ctx.path.resolve().parents]:
        candidate = base / rel
        if candidate.is_file():
            try:
                text = read_text(candidate, "SQL file")
            except ConfigError as exc:
                ctx.check.add(item, "file", path, exc.message)
                return None
            ctx.files.append(candidate)
            return SqlStep(expand(text, ctx.params, lambda m: ctx.check.add(item, "file", path, f"{candidate}: {m}")),
                           str(rel))
    ctx.check.add(item, "file", path, f"no file '{rel}' next to the scenario or in a folder above it")
    return None
