"""No control flow on the words of a message: a status, a reason, a verdict, an outcome, a kind, a target or an order
is compared as a type (an enum member, a field), never by its text, so improving a sentence or renaming a word
changes no behaviour. The test reads every module of the package and fails on a comparison (==, !=, in) or a
startswith/endswith between a text (a literal, or a module's text constant) and a value whose name says it is a
message's, a status's, a kind's, a target's, an order's or a metric record's scope's words."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "concurbench"
WORDY = re.compile(r"\b(reason|reasons|message|messages|error|why|status|outcome|verdict|cause|says|detail|words|kind|"
                   r"target|order|scope)\b", re.I)
# The places that must read words, and why: runs already written carry only their words (the one migration that
# reads them); a driver that gives one code (HYT00) for a login timeout and a query timeout alike; the probe's
# advice, chosen by the server's own error words (its message, not ours); Docker's container states; a setting's
# type as PostgreSQL names it (pg_settings.vartype); the kind of object a statement's SQL names (CREATE TRIGGER,
# DROP TYPE: SQL's own words, read by the probe). One is owed: the compiled loop's parameter spec
# (workload/fastloop.py) is reworked with the C seam (issue 48, item 5) and still reads DistributionKind, a StrEnum,
# by its words.
ALLOWED = {("results/migrate.py", "reason"), ("engines/odbc.py", "message"), ("probe/postgres.py", "words"),
           ("probe/mssql.py", "words"), ("provisioners/docker.py", "status"), ("engines/pg_settings.py", "kind"),
           ("probe/touches.py", "kind"), ("probe/postgres.py", "kind"), ("probe/mssql_touch.py", "kind"),
           ("workload/fastloop.py", "kind")}


def texts(tree: ast.Module) -> set[str]:
    """The module's constants that hold text, one to a line (`OK = "ok"`) or several (`OK, FAILED = "ok", "failed"`)."""
    out = set()
    for n in tree.body:
        if not isinstance(n, ast.Assign):
            continue
        for t in n.targets:
            pairs = zip(t.elts, n.value.elts) if isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple) and \
                len(t.elts) == len(n.value.elts) else [(t, n.value)]
            out |= {name.id for name, value in pairs if isinstance(name, ast.Name) and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)}
    return out


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
    module.write_text('THIN = "too few"\nOK, FAILED = "ok", "failed"\n\ndef f(v):\n'
                      '    if v.reason.startswith((THIN, "both")):\n        return 1\n'
                      '    return v.status == "ok" or v.status == FAILED\n')
    assert len(word_compares_at(module)) == 3


def test_the_check_finds_a_kind_a_target_and_an_order_compared_by_their_words(tmp_path):
    """It can fail on the words added to it: a background kind, a target's name and a series order, each compared by
    its text, are caught; the same compared as enum members are not."""
    module = tmp_path / "kinds.py"
    module.write_text('def f(spec, options, order, Kind):\n'
                      '    if spec.kind == "hold_transaction" or options.target != "dsn":\n'
                      '        return 1\n'
                      '    if order in ("time", "version"):\n'
                      '        return 2\n'
                      '    return spec.kind is Kind.STATEMENT\n')
    found = word_compares_at(module)
    assert sorted(line.split(": ", 1)[1] for line in found) == [
        "options.target != 'dsn'", "order in ('time', 'version')", "spec.kind == 'hold_transaction'"], found


def word_compares_at(path: Path) -> list[str]:
    global PACKAGE
    saved, PACKAGE = PACKAGE, path.parent
    try:
        return word_compares(path)
    finally:
        PACKAGE = saved


def test_the_check_finds_a_records_scope_compared_by_its_words(tmp_path):
    """A metric record's scope is a Scope: compared by its word ("pool") it is caught, as a member it is not."""
    module = tmp_path / "scopes.py"
    module.write_text('def f(m, Scope):\n'
                      '    if m.scope == "pool":\n'
                      '        return 1\n'
                      '    return m.scope is Scope.SAMPLER\n')
    found = word_compares_at(module)
    assert [line.split(": ", 1)[1] for line in found] == ["m.scope == 'pool'"], found
