"""The check's state is written only inside check/: the runner asks `Sequential.next_round` what to run and hands
it what it measured (`record`, `final`), and no module outside check/ sets, changes or deletes what the check keeps
(which claims were skipped, what stands, the plan, the rounds run, the last look). The test reads every module of
the package outside check/ and fails on a write to one of Sequential's attributes on anything but `self`: an
assignment, an augmented one, a `del`, an item set in one of its containers, a mutating call on one, or setattr."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from concurbench.check.rounds import Sequential

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "concurbench"
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "remove",
            "discard"}


def state_names() -> set[str]:
    """Sequential's fields, and what its methods set on self (check/rounds.py)."""
    tree = ast.parse((PACKAGE / "check" / "rounds.py").read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == Sequential.__name__]
    set_on_self = {t.attr for n in ast.walk(cls) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                   for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                   if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return {f.name for f in dataclasses.fields(Sequential)} | set_on_self


STATE = state_names()


def _state_of_another(node: ast.AST) -> bool:
    """`x.attr` for one of the check's attributes, on anything but self (seq.skipped, self.sequential.busy)."""
    return isinstance(node, ast.Attribute) and node.attr in STATE and \
        not (isinstance(node.value, ast.Name) and node.value.id == "self")


def state_writes(path: Path, package: Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(package).as_posix()
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in STATE:
            found.append(f"src/concurbench/{rel}:{node.lineno}: {ast.unparse(node)}")
            continue
        written = [t.value if isinstance(t, ast.Subscript) else t for t in targets]
        if any(_state_of_another(t) for t in written):
            found.append(f"src/concurbench/{rel}:{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def test_the_state_names_are_the_checks_own():
    assert {"skipped_variants", "decided", "durations", "looks_taken", "busy", "repeat", "verdicts", "judged"} <= STATE


def test_no_module_outside_check_writes_the_checks_state():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).parts[0] != "check"
             for line in state_writes(path)]
    assert not found, "ask check/ (Sequential.next_round, record, final) instead of writing its state:\n" + \
        "\n".join(found)


def test_the_check_finds_a_write_to_the_checks_state(tmp_path):
    """It can fail: the old runner's `seq.skipped = ...` (now `skipped_variants`), and each other kind of write, are caught; reading the
    state and writing one's own attributes are not."""
    module = tmp_path / "runner.py"
    module.write_text(
        "def decide(self, seq, results):\n"
        "    seq.skipped_variants = self.skipped(results)\n"
        "    self.sequential.looks_taken += 1\n"
        "    seq.decided[(0, None)] = None\n"
        "    seq.durations.update({})\n"
        "    setattr(seq, 'busy', True)\n"
        "    del seq.verdicts\n"
        "    self.busy = seq.busy and seq.max_repeats > len(seq.verdicts)\n"
        "    return seq.next_round(results, skipped={}, busy=False, servers=[], running=set())\n")
    found = state_writes(module, tmp_path)
    assert sorted(int(line.split(":")[1]) for line in found) == [2, 3, 4, 5, 6, 7], found
