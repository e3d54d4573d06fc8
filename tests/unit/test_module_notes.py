"""Every module opens with a note, and modules of one name (a `base.py`, a `postgres.py` in several folders)
say in their first line which one they are: the first lines are all different, so a reader of a traceback or
a search result knows the module without its path."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "concurbench"


def first_lines() -> dict[Path, str]:
    notes = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        note = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        notes[path.relative_to(PACKAGE)] = note.splitlines()[0].strip() if note else ""
    return notes


def test_every_module_has_a_note():
    missing = [str(path) for path, line in first_lines().items() if not line]
    assert not missing, f"modules without a note: {missing}"


def test_modules_of_one_name_say_which_they_are():
    by_name = defaultdict(list)
    for path, line in first_lines().items():
        by_name[path.name].append((path, line))
    alike = []
    for name, modules in by_name.items():
        lines = [line for _, line in modules]
        if len(set(lines)) < len(lines):
            alike.append(name)
    assert not alike, f"modules of one name whose first lines are the same: {alike}"
    assert sum(len(m) > 1 for m in by_name.values()) >= 10  # the test has something to compare
