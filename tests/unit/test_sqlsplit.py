"""split_sql: statements split at top-level semicolons only, with the line each one starts on."""

from __future__ import annotations

from pathlib import Path


from concurbench.engines.sqlsplit import split_sql

REPO = Path(__file__).resolve().parents[2]


def statements(text: str) -> list[str]:
    return [sql for _line, sql in split_sql(text)]


def test_simple_split_with_lines():
    text = "CREATE TABLE t (a int);\nINSERT INTO t VALUES (1);\n\nSELECT * FROM t;\n"
    assert split_sql(text) == [(1, "CREATE TABLE t (a int)"), (2, "INSERT INTO t VALUES (1)"),
                               (4, "SELECT * FROM t")]


def test_last_statement_without_semicolon():
    assert split_sql("SELECT 1;\nSELECT 2") == [(1, "SELECT 1"), (2, "SELECT 2")]


def test_start_line_skips_leading_blank_lines_and_indentation():
    text = "\n\n   SELECT 1;\n\n\n\t  SELECT\n  2;"
    assert split_sql(text) == [(3, "SELECT 1"), (6, "SELECT\n  2")]


def test_several_statements_on_one_line():
    assert split_sql("SELECT 1; SELECT 2;SELECT 3") == [(1, "SELECT 1"), (1, "SELECT 2"), (1, "SELECT 3")]


def test_semicolons_inside_single_quoted_strings():
    text = "INSERT INTO t VALUES ('a;b');\nINSERT INTO t VALUES ('it''s; fine');\nSELECT 3"
    assert split_sql(text) == [(1, "INSERT INTO t VALUES ('a;b')"), (2, "INSERT INTO t VALUES ('it''s; fine')"),
                               (3, "SELECT 3")]


def test_semicolons_inside_double_quoted_identifiers():
    assert statements('CREATE TABLE "odd;name" ("x;y" int); SELECT 1') == [
        'CREATE TABLE "odd;name" ("x;y" int)', "SELECT 1"]


def test_string_spanning_lines_counts_lines():
    text = "SELECT 'line1;\nline2;\nline3';\nSELECT 2;"
    assert split_sql(text) == [(1, "SELECT 'line1;\nline2;\nline3'"), (4, "SELECT 2")]


def test_dollar_quoted_function_bodies():
    text = (
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; SELECT 2; $$;\n"
        "CREATE FUNCTION g(n int) RETURNS void LANGUAGE plpgsql AS $fn$\n"
        "BEGIN\n"
        "    PERFORM 1;  -- a comment; inside\n"
        "    RAISE NOTICE '$$ is not the end here; %', n;\n"
        "END\n"
        "$fn$;\n"
        "SELECT g(1);\n"
    )
    out = split_sql(text)
    assert [line for line, _ in out] == [1, 2, 8]
    assert out[0][1] == "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; SELECT 2; $$"
    assert out[1][1].startswith("CREATE FUNCTION g(n int)")
    assert out[1][1].endswith("END\n$fn$")
    assert "PERFORM 1;" in out[1][1] and "RAISE NOTICE" in out[1][1]
    assert out[2][1] == "SELECT g(1)"


def test_dollar_tag_must_match():
    text = "DO $a$ BEGIN PERFORM '$b$;'; END $a$; SELECT 1"
    assert statements(text) == ["DO $a$ BEGIN PERFORM '$b$;'; END $a$", "SELECT 1"]


def test_positional_parameters_and_dollars_in_identifiers_are_not_quotes():
    assert statements("PREPARE p AS SELECT $1; SELECT a$b$c FROM t; SELECT 2") == [
        "PREPARE p AS SELECT $1", "SELECT a$b$c FROM t", "SELECT 2"]


def test_line_comments():
    # a semicolon in a -- comment does not split; a leading comment stays with the statement after it,
    # and the line reported is the one where the statement's code starts
    text = "-- header; with a semicolon\nSELECT 1; -- trailing; comment\nSELECT 2;"
    assert split_sql(text) == [(2, "-- header; with a semicolon\nSELECT 1"),
                               (3, "-- trailing; comment\nSELECT 2")]


def test_block_comments_including_nested():
    text = "SELECT /* a; b */ 1;\n/* outer /* inner; */ still; comment */ SELECT 2;"
    out = statements(text)
    assert out[0] == "SELECT /* a; b */ 1"
    assert out[1] == "/* outer /* inner; */ still; comment */ SELECT 2"
    assert len(out) == 2


def test_empty_statements_and_comment_only_chunks_are_dropped():
    text = ";;\n  ;\nSELECT 1;;\n-- just a comment;\n/* and a block; */;\n  \n"
    assert split_sql(text) == [(3, "SELECT 1")]


def test_empty_script():
    assert split_sql("") == []
    assert split_sql("   \n\n ") == []
    assert split_sql("-- nothing here") == []


def test_unterminated_quote_keeps_the_rest_together():
    assert statements("SELECT 1; SELECT 'open; SELECT 2") == ["SELECT 1", "SELECT 'open; SELECT 2"]
    assert statements("SELECT 1; DO $x$ BEGIN; END;") == ["SELECT 1", "DO $x$ BEGIN; END;"]


def test_shipped_setup_file():
    text = (REPO / "sql" / "postgres" / "row-lock-setup.sql").read_text()
    out = split_sql(text)
    # a statement led by comments keeps them (the server ignores them); look at what follows
    bodies = [(line, "\n".join(l for l in sql.splitlines() if not l.startswith("--")).strip()) for line, sql in out]
    assert [body.split()[0:2] for _, body in bodies] == [
        ["DROP", "TABLE"], ["CREATE", "TABLE"], ["INSERT", "INTO"], ["VACUUM", "ANALYZE"], ["CREATE", "OR"]]
    function = bodies[-1][1]
    assert function.startswith("CREATE OR REPLACE FUNCTION lock_share_range")
    assert function.endswith("$fn$")
    assert "PERFORM 1 FROM accounts WHERE aid = first_aid + i FOR SHARE;" in function
    lines = text.splitlines()
    for (line, _sql), (_, body) in zip(out, bodies):
        assert lines[line - 1].strip().startswith(body.splitlines()[0].strip())


def test_nested_comment_only_chunk_is_dropped():
    assert split_sql("SELECT 1; /* outer /* inner */ still a comment */") == [(1, "SELECT 1")]


def test_escape_string_with_backslash_quote():
    assert statements("SELECT E'it\\'s; here'; SELECT 2") == ["SELECT E'it\\'s; here'", "SELECT 2"]
