"""The package's layers: each imports only from those below it, in the order docs/development.md's map gives
(cli/ at the top, errors.py at the bottom). Every import counts, also one inside a function (an import hidden
there to dodge a cycle is the same arrow)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "concurbench"


def documented_order() -> list[str]:
    """The layers' names from the map, top first (a folder or a root module, without `/` or `.py`)."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    layout = re.search(r"## Layout.*?```(.*?)```", text, re.S).group(1)
    return [m.group(1) for m in re.finditer(r"^  ([a-z_]+)(?:/|\.py)", layout, re.M)]


def layer_of(module: str) -> str:
    """`concurbench.running.runner` -> running; `concurbench.api` -> api."""
    return module.split(".")[1]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every concurbench module the file imports, absolute or relative, anywhere in it."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "concurbench":  # `from .. import x`: x is a layer or a root module
                found += [(node.lineno, f"concurbench.{alias.name}") for alias in node.names]
            elif target.startswith("concurbench."):
                found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("concurbench.")]
    return found


def wrong_way(order: list[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(order)}
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and len(rel.parts) == 1:
            continue  # the package's face: it hands the API's names on, loading them when first used
        mine = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for line, module in imports(path):
            theirs = layer_of(module)
            if theirs in rank and theirs != mine and rank[theirs] < rank[mine]:
                out.append(f"src/concurbench/{rel}:{line} imports {module}: {mine} may not import {theirs}, "
                           f"which the map puts above it")
    return out


def test_every_layer_of_the_package_is_in_the_map():
    order = documented_order()
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | \
        {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert set(order) == layers and len(order) == len(set(order))


def test_no_import_runs_up_a_layer():
    problems = wrong_way(documented_order())
    assert not problems, "\n".join(problems)


def test_the_layer_check_fails_on_an_import_that_runs_up(tmp_path):
    """The check itself can fail: with the map upside down, the runner's imports all run the wrong way."""
    upside_down = list(reversed(documented_order()))
    assert any(p.startswith("src/concurbench/running/runner.py") for p in wrong_way(upside_down))
