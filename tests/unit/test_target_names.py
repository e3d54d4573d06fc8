"""No module but the targets' registry asks a target by its name: what a target can do is its TargetSpec's
(provisioners/registry.py) or its provisioner's answer (provisioners/base.py), so adding a target, or one that
behaves as another, changes no caller. The test reads every module of the package and fails on a comparison
(==, !=, in, is, a match case, startswith/endswith) with a target's name (a literal, or a module constant that
holds one) or with one of the registry's TargetSpecs; provisioners/registry.py is the one place that may."""

from __future__ import annotations

import ast
from pathlib import Path

from concurbench.provisioners import registry

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "concurbench"
REGISTRY = "provisioners/registry.py"
NAMES = set(registry.TARGETS)
SPECS = {name for name, value in vars(registry).items() if isinstance(value, registry.TargetSpec)}  # EMBEDDED, DSN...


def named_texts(tree: ast.Module) -> set[str]:
    """The module's constants that hold a target's name, alone or in a tuple, list or set."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and names_a_target(node.value, set(), set()):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def spec_imports(tree: ast.Module) -> set[str]:
    """The names a module binds to the registry's TargetSpecs (`from ..provisioners.registry import DSN as X`) and
    to the registry itself (`from ..provisioners import registry`), as `registry.DSN` reaches them."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            out |= {alias.asname or alias.name for alias in node.names
                    if module.endswith("provisioners.registry") and alias.name in SPECS
                    or module.endswith("provisioners") and alias.name == "registry"}
        elif isinstance(node, ast.Import):
            out |= {alias.asname for alias in node.names if alias.name.endswith("provisioners.registry") and alias.asname}
    return out


def names_a_target(node: ast.AST, constants: set[str], specs: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Name):
        return node.id in constants or node.id in specs
    if isinstance(node, ast.Attribute):  # DSN.name, registry.DSN
        return names_a_target(node.value, constants, specs)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(names_a_target(e, constants, specs) for e in node.elts)
    return False


def target_compares(path: Path, package: Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants, specs = named_texts(tree), spec_imports(tree)
    rel = path.relative_to(package).as_posix()
    found = []
    for node in ast.walk(tree):
        sides: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith"):
            sides = list(node.args)
        elif isinstance(node, ast.match_case):
            sides = [p.value for p in ast.walk(node.pattern) if isinstance(p, ast.MatchValue)]
        if any(names_a_target(side, constants, specs) for side in sides):
            line = node.pattern.lineno if isinstance(node, ast.match_case) else node.lineno
            found.append(f"src/concurbench/{rel}:{line}: {ast.unparse(node).splitlines()[0]}")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def test_no_module_but_the_registry_compares_a_target_by_its_name():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).as_posix() != REGISTRY
             for line in target_compares(path)]
    assert not found, ("ask the TargetSpec (provisioners/registry.py) or the provisioner what the target can do, "
                       "not its name:\n" + "\n".join(found))


def test_the_check_finds_a_target_asked_by_its_name(tmp_path):
    """It can fail: a literal, a constant holding names, a registry spec (imported, or through the registry), its
    name and a match case are caught; a target's name that is only passed on or shown is not."""
    module = tmp_path / "asks.py"
    module.write_text(
        'from concurbench.provisioners import registry\n'
        'from concurbench.provisioners.registry import DSN as GUEST, TargetOptions\n'
        'LOCAL = ("embedded", "docker")\n\n'
        'def f(options, spec):\n'
        '    if options.target == "dsn":\n'
        '        return 1\n'
        '    if spec.name in LOCAL or spec is GUEST or spec.name != GUEST.name:\n'
        '        return 2\n'
        '    match options.target:\n'
        '        case "binaries":\n'
        '            return 3\n'
        '    if spec == registry.DOCKER:\n'
        '        return 4\n'
        '    return TargetOptions(target="dsn"), f"the {spec.name} server"\n')
    found = target_compares(module, tmp_path)
    assert [line.split(":")[1] for line in found] == ["6", "8", "8", "8", "11", "13"], found
