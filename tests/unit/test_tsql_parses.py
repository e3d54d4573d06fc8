"""Every T-SQL text of the SQL Server scenarios parses with sqlglot's T-SQL dialect.

Covered: each batch (split on GO lines by `concurbench.engines.odbc.split_batches`, as the engine
runs them) of every file under sql/mssql/, and every SQL string of every scenarios/mssql/*.yaml:
setup and teardown (top level, `quick:` and variants), pool transactions and `init`, probes,
background sessions' `sql` and `release_when`. `${name}` is replaced by the scenario's parameter
(a file takes the parameters of the scenarios that name it) and `:name` by a literal 1, as the
engine would bind it. Files named by `file:` steps must exist. Also every query of every SQL
Server sampler, and what the engine reads about the server (version and configuration facts).

Parsing is strict (`error_level=RAISE`), and a statement sqlglot did not really understand fails
too: sqlglot falls back to an opaque `Command` for syntax it lacks, reads an unknown keyword
statement as a bare column name, and reads `IF cond BREAK` as `IF (cond AS BREAK)`. Such results
are accepted only for the T-SQL statements listed below, each with the reason.

Where sqlglot cannot parse valid T-SQL, the statement is reduced to a form it can parse, and the
removed part is checked on its own:

- `UPDATE TOP (n) target ...`: sqlglot's T-SQL dialect has no TOP in UPDATE (T-SQL has
  `UPDATE [ TOP ( expression ) [ PERCENT ] ] ...`; see "UPDATE (Transact-SQL)"). The clause is
  dropped and `n` is parsed as `SELECT n`.
- `WAITFOR DELAY 'hh:mm:ss[.mmm]'`: sqlglot has no WAITFOR. It becomes `SELECT '...'`, and the time
  text must have the form "WAITFOR (Transact-SQL)" allows.

Procedure and view bodies are parsed (sqlglot reads CREATE PROCEDURE ... AS BEGIN ... END and
WHILE / IF blocks statement by statement), so they need no reduction. Its block nesting is not
exact (a statement after an inner `END;` may land in the inner block), so this checks statements,
not control flow. Dynamic SQL is checked as well: a string literal assigned to an nvarchar(max)
variable in a DECLARE (our convention for batches run by sp_executesql) and a literal first
argument of sp_executesql are parsed as T-SQL, and its literal parameter list as a DECLARE.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from ruamel.yaml import YAML
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from concurbench.engines.odbc import split_batches

ROOT = Path(__file__).resolve().parents[2]
SQL_DIR = ROOT / "sql" / "mssql"
SCENARIO_DIR = ROOT / "scenarios" / "mssql"
PARAM_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Statements sqlglot keeps as an opaque Command (it logs "contains unsupported syntax") that are
# accepted by their first words. Empty of entries our SQL does not use: add one with its reason.
COMMAND_PREFIXES: tuple[str, ...] = (
    "ALTER DATABASE",  # ALTER DATABASE ... SET option: not modelled by sqlglot
    "ALTER INDEX",  # ALTER INDEX ... REBUILD / REORGANIZE: not modelled by sqlglot
)
# Keyword statements without arguments that sqlglot reads as a bare column name.
KEYWORD_STATEMENTS = {"CHECKPOINT", "BREAK", "CONTINUE", "RECONFIGURE"}
# Statements sqlglot reads as an anonymous function call.
FUNCTION_STATEMENTS = {"RAISERROR"}
STATEMENT_TYPES = (exp.Select, exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Declare,
                   exp.Set, exp.Execute, exp.ExecuteSql, exp.IfBlock, exp.WhileBlock, exp.Transaction, exp.Commit,
                   exp.Rollback, exp.TruncateTable, exp.Union, exp.EndStatement)

_UPDATE_TOP = re.compile(r"\bUPDATE\s+TOP\s*\((?P<expr>[^()]*)\)\s*(?:PERCENT\s+)?", re.IGNORECASE)
_WAITFOR = re.compile(r"\bWAITFOR\s+(?:DELAY|TIME)\s+(?P<text>'[^']*')", re.IGNORECASE)
_WAIT_TEXT = re.compile(r"^'\d{1,2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?'$")
_BIND = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


# -- reductions and substitutions ---------------------------------------------------------------------
def _outside_literals(sql: str, fn) -> str:
    """Apply `fn` to the parts of `sql` outside string literals, [identifiers] and comments."""
    out, i, n, start = [], 0, len(sql), 0
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif ch in "'[\"":
            close = "]" if ch == "[" else ch
            end = i + 1
            while end < n:
                if sql[end] == close:
                    if end + 1 < n and sql[end + 1] == close:
                        end += 2
                        continue
                    break
                end += 1
            end = min(n, end + 1)
        else:
            i += 1
            continue
        out.append(fn(sql[start:i]))
        out.append(sql[i:end])
        i = start = end
    out.append(fn(sql[start:]))
    return "".join(out)


def bind_markers(sql: str) -> str:
    """`:name` (a pool parameter) -> 1, outside literals, as the engine binds a value there."""
    return _outside_literals(sql, lambda part: _BIND.sub("1", part))


def substitute(text: str, params: dict, where: str) -> str:
    def one(m: re.Match) -> str:
        if m.group(1) not in params:
            raise AssertionError(f"{where}: unknown parameter ${{{m.group(1)}}} (parameters: {sorted(params)})")
        return str(params[m.group(1)])

    return PARAM_REF.sub(one, text)


def reduce_for_sqlglot(sql: str) -> tuple[str, list[str]]:
    """The statement with the constructs sqlglot lacks rewritten, and the extra texts to parse."""
    extra: list[str] = []

    def update_top(m: re.Match) -> str:
        extra.append(f"SELECT {m.group('expr')}")
        return "UPDATE "

    def waitfor(m: re.Match) -> str:
        assert _WAIT_TEXT.match(m.group("text")), f"WAITFOR time {m.group('text')} is not hh:mm[:ss[.mmm]]"
        return f"SELECT {m.group('text')}"

    reduced = _outside_literals(sql, lambda part: _UPDATE_TOP.sub(update_top, part))
    # WAITFOR's argument is itself a literal, so this one runs on the whole text (inside a dynamic
    # SQL literal it rewrites text that is parsed as T-SQL later anyway).
    reduced = _WAITFOR.sub(waitfor, reduced)
    return reduced, extra


# -- strict parsing ------------------------------------------------------------------------------------
def _statements(node):
    """Statement-level nodes of a parsed statement, descending into procedure, IF and WHILE bodies."""
    if isinstance(node, exp.Block):
        for item in node.expressions:
            yield from _statements(item)
        return
    yield node
    if isinstance(node, exp.Create) and isinstance(node.expression, exp.Block):
        yield from _statements(node.expression)
    if isinstance(node, exp.IfBlock):
        for branch in ("true", "false"):
            if isinstance(node.args.get(branch), exp.Expression):
                yield from _statements(node.args[branch])
    if isinstance(node, exp.WhileBlock) and isinstance(node.args.get("body"), exp.Expression):
        yield from _statements(node.args["body"])


def _check_statement(node, where: str) -> None:
    if node is None:
        raise AssertionError(f"{where}: sqlglot produced an empty statement (a keyword it does not know?)")
    text = node.sql(dialect="tsql")[:120]
    if isinstance(node, exp.Command):
        words = " ".join(node.sql(dialect="tsql").split()).upper()
        assert words.startswith(COMMAND_PREFIXES), (
            f"{where}: sqlglot did not understand this statement and kept it as text: {text!r}")
        return
    if isinstance(node, exp.Column):
        assert node.sql().upper() in KEYWORD_STATEMENTS, f"{where}: a bare name is not a statement: {text!r}"
        return
    if isinstance(node, exp.Anonymous):
        assert str(node.this).upper() in FUNCTION_STATEMENTS, f"{where}: a function call is not a statement: {text!r}"
        return
    assert isinstance(node, STATEMENT_TYPES), f"{where}: unexpected {type(node).__name__} statement: {text!r}"
    if isinstance(node, (exp.IfBlock, exp.WhileBlock)):
        assert not isinstance(node.this, exp.Alias), (
            f"{where}: sqlglot read the word after the condition as an alias ({text!r}); write the body as "
            f"BEGIN ... END;")


def _is_text(node) -> bool:
    """A string literal, N'...' included (sqlglot's National is not a Literal)."""
    return isinstance(node, exp.National) or (isinstance(node, exp.Literal) and node.is_string)


def _dynamic_sql(tree) -> list[str]:
    """Dynamic SQL held in literals: DECLARE @x nvarchar(max) = N'...' and sp_executesql N'...'."""
    found = []
    for item in tree.find_all(exp.DeclareItem):
        kind, default = item.args.get("kind"), item.args.get("default")
        if (isinstance(kind, exp.DataType) and kind.this == exp.DataType.Type.NVARCHAR
                and "MAX" in kind.sql().upper() and _is_text(default)):
            found.append(str(default.this))
    for call in tree.find_all(exp.ExecuteSql, exp.Execute):
        name = call.this.sql().lower() if isinstance(call.this, exp.Expression) else ""
        if not name.endswith("sp_executesql"):
            continue
        args = list(call.expressions)
        if args and _is_text(args[0]):
            found.append(str(args[0].this))
        if len(args) > 1 and _is_text(args[1]):
            found.append(f"DECLARE {args[1].this}")
    return found


def check_tsql(sql: str, where: str, depth: int = 0) -> int:
    """Parse `sql` strictly; returns the number of statements checked (nested dynamic SQL included)."""
    reduced, extra = reduce_for_sqlglot(sql)
    try:
        trees = sqlglot.parse(reduced, read="tsql", error_level=ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as exc:
        raise AssertionError(f"{where}: sqlglot cannot parse it: {exc}\n--- reduced text ---\n{reduced}") from None
    count = 0
    for tree in trees:
        if tree is None:
            continue
        for node in _statements(tree):
            _check_statement(node, where)
            count += 1
        if depth < 3:
            for inner in _dynamic_sql(tree):
                count += check_tsql(inner, f"{where} (dynamic SQL)", depth + 1)
    for text in extra:
        try:
            sqlglot.parse(text, read="tsql", error_level=ErrorLevel.RAISE)
        except sqlglot.errors.SqlglotError as exc:
            raise AssertionError(f"{where}: the expression in UPDATE TOP (...) does not parse: {exc}") from None
    assert count, f"{where}: no statement found"
    return count


# -- what to check -------------------------------------------------------------------------------------
def _yaml():
    yaml = YAML(typ="safe")
    return yaml


def _scenarios() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        doc = _yaml().load(path.read_text(encoding="utf-8"))
        assert isinstance(doc, dict), f"{path}: not a mapping"
        out.append((path, doc))
    return out


def _texts(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]


def _steps(value, where: str, files: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Inline SQL of a setup/teardown value; `file:` steps go to `files`."""
    out = []
    items = [value] if isinstance(value, (str, dict)) else (value or [])
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append((f"{where}[{i}]", item))
        elif isinstance(item, dict) and "sql" in item:
            out.append((f"{where}[{i}]", str(item["sql"])))
        elif isinstance(item, dict) and "file" in item:
            files.append((f"{where}[{i}]", str(item["file"])))
    return out


def _probes(value, where: str) -> list[tuple[str, str]]:
    return [(f"{where}.{p.get('name', i)}", str(p["sql"])) for i, p in enumerate(value or [])
            if isinstance(p, dict) and "sql" in p]


def scenario_sql(doc: dict) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(where, sql) of every inline SQL text of a scenario, and (where, path) of its files."""
    texts: list[tuple[str, str]] = []
    files: list[tuple[str, str]] = []
    sections = [("", doc)]
    if isinstance(doc.get("quick"), dict):
        sections.append(("quick.", doc["quick"]))
    for prefix, node in sections:
        for key in ("setup", "teardown"):
            texts += _steps(node.get(key), f"{prefix}{key}", files)
        texts += _probes(node.get("probes"), f"{prefix}probes")
    for vname, variant in (doc.get("variants") or {}).items():
        base = f"variants.{vname}"
        for key in ("setup", "teardown"):
            texts += _steps(variant.get(key), f"{base}.{key}", files)
        texts += _probes(variant.get("probes"), f"{base}.probes")
        for pname, pool in (variant.get("pools") or {}).items():
            transaction = pool.get("transaction")
            items = [transaction] if isinstance(transaction, str) else (transaction or [])
            for i, item in enumerate(items):
                sql = item if isinstance(item, str) else item.get("sql")
                name = f"stmt{i + 1}" if isinstance(item, str) else item.get("name", f"stmt{i + 1}")
                texts.append((f"{base}.pools.{pname}.transaction.{name}", str(sql)))
            texts += [(f"{base}.pools.{pname}.init", t) for t in _texts(pool.get("init"))]
        for i, bg in enumerate(variant.get("background") or []):
            name = bg.get("name", i)
            texts += [(f"{base}.background.{name}.sql", t) for t in _texts(bg.get("sql"))]
            texts += [(f"{base}.background.{name}.release_when", t) for t in _texts(bg.get("release_when"))]
    return texts, files


def _resolve(scenario: Path, rel: str) -> Path | None:
    for base in [scenario.parent, *scenario.parents]:
        if (base / rel).is_file():
            return (base / rel).resolve()
    return None


def _cases():
    inline, file_params, missing = [], {}, []
    for path, doc in _scenarios():
        params = dict(doc.get("parameters") or {})
        texts, files = scenario_sql(doc)
        seen = set()
        for where, sql in texts:
            if sql in seen:  # YAML anchors repeat the same text under several variants
                continue
            seen.add(sql)
            inline.append(pytest.param(path.name, where, sql, params, id=f"{path.stem}:{where}"))
        for where, rel in files:
            target = _resolve(path, rel)
            if target is None:
                missing.append(f"{path.name}: {where}: no file {rel}")
            else:
                file_params.setdefault(target, {}).update(params)
    batches = []
    for sql_file in sorted(SQL_DIR.glob("*.sql")):
        text = sql_file.read_text(encoding="utf-8")
        for line, batch in split_batches(text):
            batches.append(pytest.param(sql_file, line, batch, file_params.get(sql_file.resolve(), {}),
                                        id=f"{sql_file.name}:{line}"))
    return inline, batches, missing


INLINE, BATCHES, MISSING = _cases()


def test_there_is_something_to_check():
    assert list(SQL_DIR.glob("*.sql")), "no files under sql/mssql"
    assert list(SCENARIO_DIR.glob("*.yaml")), "no scenarios under scenarios/mssql"
    assert len(BATCHES) >= 10 and len(INLINE) >= 10


def test_files_named_by_scenarios_exist():
    assert not MISSING, "\n".join(MISSING)


def test_every_sql_file_is_used_by_a_scenario():
    used = set()
    for path, doc in _scenarios():
        for _where, rel in scenario_sql(doc)[1]:
            target = _resolve(path, rel)
            if target:
                used.add(target)
    unused = [p.name for p in sorted(SQL_DIR.glob("*.sql")) if p.resolve() not in used]
    assert not unused, f"not named by any scenario (so its ${{parameters}} are unknown): {unused}"


@pytest.mark.parametrize("sql_file, line, batch, params", BATCHES)
def test_sql_file_batch_parses(sql_file, line, batch, params):
    where = f"{sql_file.relative_to(ROOT)}, batch at line {line}"
    check_tsql(substitute(batch, params, where), where)


@pytest.mark.parametrize("scenario, where, sql, params", INLINE)
def test_scenario_sql_parses(scenario, where, sql, params):
    label = f"{scenario}: {where}"
    check_tsql(bind_markers(substitute(sql, params, label)), label)


# -- the checks themselves catch mistakes ---------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "UPDATE TOP (1) dbo.t WITH (TABLOCKX) SET id = = id + 1;",  # broken after the reduced clause
    "UPDATE TOP (1 +) dbo.t SET id = id + 1;",  # broken inside TOP (...)
    "SELEC 1;",  # a misspelt keyword
    "CHEKPOINT;",  # a misspelt keyword statement (a bare name)
    "IF @x > 1 BREAK;",  # sqlglot misreads it as an alias
    "CREATE OR ALTER PROCEDURE dbo.p AS BEGIN SET NOCOUNT ON; SELECT 1 FROM; END;",  # broken procedure body
    "DECLARE @b nvarchar(max) = N'INSERT INTO #t VALUES (1;';",  # broken dynamic SQL
    "EXEC sys.sp_executesql @b, N'@x nvarchar(max', @x = N'1';",  # broken parameter list
    "WAITFOR DELAY '5 seconds';",  # not a time
    "UPDATE STATISTICS dbo.t;",  # kept as text by sqlglot and not on the allowlist
])
def test_check_rejects_broken_tsql(sql):
    with pytest.raises(AssertionError):
        check_tsql(sql, "broken on purpose")


def test_reductions_and_markers():
    reduced, extra = reduce_for_sqlglot("UPDATE TOP (1) dbo.t WITH (TABLOCKX) SET id = id + 1; WAITFOR DELAY '00:00:00.500';")
    assert reduced == "UPDATE dbo.t WITH (TABLOCKX) SET id = id + 1; SELECT '00:00:00.500';"
    assert extra == ["SELECT 1"]
    assert bind_markers("SELECT :aid, ':x', [a:b] FROM t WHERE b = :b2 -- :c") == \
        "SELECT 1, ':x', [a:b] FROM t WHERE b = 1 -- :c"
    assert check_tsql("CREATE OR ALTER PROCEDURE dbo.p AS BEGIN SET NOCOUNT ON; "
                      "DECLARE @b nvarchar(max) = N'CREATE TABLE #t (a int); INSERT INTO #t (a) VALUES (1);'; "
                      "EXEC sys.sp_executesql @b; END;", "sample") >= 5


# -- the samplers' queries ------------------------------------------------------------------------------
def _sampler_sql() -> list:
    """Every query of every SQL Server sampler: class attributes holding a SELECT (a `{database}` in one is
    a quoted name) and the counter samplers' query()."""
    from concurbench.samplers.mssql import MSSQL_SAMPLERS

    out = []
    for cls in MSSQL_SAMPLERS:
        texts = {attr: getattr(cls, attr) for attr in dir(cls)
                 if attr.isupper() and isinstance(getattr(cls, attr), str)
                 and getattr(cls, attr).lstrip().upper().startswith("SELECT")}
        if callable(getattr(cls, "query", None)):
            texts["query()"] = cls.query()
        for attr, sql in sorted(texts.items()):
            out.append(pytest.param(sql.replace("{database}", "[bench]"), id=f"{cls.name}.{attr}"))
    return out


SAMPLER_SQL = _sampler_sql()


def test_every_sampler_has_queries_to_check():
    names = {p.id.split(".")[0] for p in SAMPLER_SQL}
    assert {"mssql_requests", "mssql_lock_waits", "mssql_version_store", "tempdb_allocation", "mssql_waits",
            "tempdb_latches", "mssql_counters", "index_physical_stats", "snapshot_transactions"} <= names


@pytest.mark.parametrize("sql", SAMPLER_SQL)
def test_sampler_query_parses(sql):
    assert check_tsql(sql, "sampler query") == 1


# -- what the engine reads about the server -------------------------------------------------------------
def _server_sql() -> list:
    from concurbench.engines import odbc

    return [pytest.param(sql, id=f"server_facts[{i}]") for i, sql in enumerate(odbc.SERVER_FACTS)] + \
        [pytest.param(odbc.server_info_query(), id="server_info")]


@pytest.mark.parametrize("sql", _server_sql())
def test_server_facts_queries_parse(sql):
    assert check_tsql(sql, "server facts") == 1
