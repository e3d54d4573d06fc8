"""No control flow on the words of a message: a status, a reason, a verdict or an outcome is compared as a type (an
enum member, a field), never by its text, so improving a sentence changes no behaviour. The test reads every
module of the package and fails on a comparison (==, !=, in) or a startswith/endswith between a text (a literal,
or a module's text constant) and a value whose name says it is a message's or a status's words."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "concurbench"
WORDY = re.compile(r"\b(reason|reasons|message|messages|error|why|status|outcome|verdict|cause|says|detail|words)\b",
                   re.I)
# The places that must read words, and why: runs already written carry only their words (the one migration that
# reads them); a driver that gives one code (HYT00) for a login timeout and a query timeout alike; the probe's
# advice, chosen by the server's own error words (its message, not ours); Docker's container states.
ALLOWED = {("results/migrate.py", "reason"), ("engines/odbc.py", "message"), ("probe/postgres.py", "words"),
           ("probe/mssql.py", "words"), ("provisioners/docker.py", "status")}


def texts(tree: ast.Module) -> set[str]:
    """The module's constants that hold text."""
    return {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def is_text(node: ast.AST, constants: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(is_text(e, constants) for e in node.elts)
    return False


def word_compares(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = texts(tree)
    rel = path.relative_to(PACKAGE).as_posix()
    found = []
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
            pairs = [(node.left, node.comparators[0]), (node.comparators[0], node.left)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith") and node.args:
            pairs = [(node.func.value, node.args[0])]
        for value, text in pairs:
            match = WORDY.search(ast.unparse(value))
            if match and is_text(text, constants) and (rel, match.group(1).lower()) not in ALLOWED:
                found.append(f"src/concurbench/{rel}:{node.lineno}: {ast.unparse(node)}")
                break
    return found


def test_no_module_branches_on_the_words_of_a_message():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) for line in word_compares(path)]
    assert not found, "compare a type (an enum member, a field), not words:\n" + "\n".join(found)


def test_the_check_finds_a_comparison_of_words(tmp_path):
    """It can fail: a module that branches on a reason's start and on a status's word is caught."""
    module = tmp_path / "wordy.py"
    module.write_text('THIN = "too few"\n\ndef f(v):\n    if v.reason.startswith((THIN, "both")):\n        return 1\n'
                      '    return v.status == "ok"\n')
    assert len(word_compares_at(module)) == 2


def word_compares_at(path: Path) -> list[str]:
    global PACKAGE
    saved, PACKAGE = PACKAGE, path.parent
    try:
        return word_compares(path)
    finally:
        PACKAGE = saved
