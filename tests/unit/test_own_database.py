"""A database of concurbench's own (provisioners/owned.py) and what a scenario's statements would touch
(probe/touches.py), without a server: the marker, the plan's decisions, the refusal's words, the scanner."""

from __future__ import annotations

from concurbench.provisioners.dsn import engine_of
from concurbench.provisioners.owned import DatabasePlan, Marker, Ownership, comment_sql, marker_text, parse_marker, \
    refusal
from concurbench.probe.touches import Verb, split_names, touches


def test_the_marker_says_temporary_or_kept_and_nothing_else_is_a_marker():
    assert parse_marker(marker_text(temporary=True)).temporary
    assert not parse_marker(marker_text(temporary=False)).temporary
    assert parse_marker("concurbench database") == Marker(False, "concurbench database")  # a DBA's, by hand
    for text in (None, "", "default administrative connection database", "our concurbench database"):
        assert parse_marker(text) is None


def test_a_hostile_database_name_is_quoted_in_the_marking_statement():
    assert comment_sql('a"b; DROP TABLE x', temporary=True).startswith('COMMENT ON DATABASE "a""b; DROP TABLE x" IS ')


def test_only_a_database_the_run_creates_or_a_temporary_one_is_dropped_at_the_end():
    def plan(ownership, marker=None):
        return DatabasePlan("db", ownership, named=False, marker=marker, may_create=True)
    temporary, kept = Marker(True, marker_text(True)), Marker(False, marker_text(False))
    assert plan(Ownership.CREATE).drops_at_end(keep=False) and not plan(Ownership.CREATE).drops_at_end(keep=True)
    assert plan(Ownership.OWN, temporary).drops_at_end(keep=False)
    assert not plan(Ownership.OWN, kept).drops_at_end(keep=False)
    assert not plan(Ownership.EMPTY).drops_at_end(keep=False)


def test_what_is_refused_and_the_ways_forward():
    foreign = DatabasePlan("app", Ownership.FOREIGN, named=True, objects=tuple(f"table public.t{i}" for i in range(5)),
                           object_count=9, may_create=False)
    assert foreign.refused
    text = refusal(foreign, "postgresql://bench@db:5432/app", "bench", "postgres")
    assert "holds objects concurbench did not create (table public.t0, table public.t1, table public.t2, table " \
           "public.t3, table public.t4 and 4 more)" in text
    assert "role bench needs ALTER ROLE bench CREATEDB" in text and "or name an empty database" in text
    missing = DatabasePlan("concurbench", Ownership.CREATE, named=False, may_create=False)
    assert missing.refused and "ALTER SERVER ROLE dbcreator ADD MEMBER [lab]" in refusal(missing, "x", "lab", "mssql")
    busy = DatabasePlan("concurbench", Ownership.OWN, named=False, marker=Marker(True, "t"), sessions=("w0 (pid 7)",))
    assert busy.refused and "another concurbench run" in refusal(busy, "x", "bench", "postgres")
    assert not DatabasePlan("concurbench", Ownership.CREATE, named=False, may_create=True).refused


def test_the_scanner_names_what_each_statement_drops_replaces_alters_empties_or_writes():
    sql = """-- a comment DROP TABLE nothing;
DROP TABLE IF EXISTS accounts, "Odd,Name" CASCADE;
DROP FUNCTION IF EXISTS lock_share_range(integer, integer), f();
CREATE OR REPLACE FUNCTION s.g(a int) RETURNS int LANGUAGE sql AS $$ DELETE FROM inner_only; SELECT 1 $$;
CREATE OR ALTER PROCEDURE dbo.churn AS SELECT 1;
ALTER TABLE ONLY public.accounts ADD COLUMN note text;
TRUNCATE TABLE a, b;
INSERT INTO accounts SELECT 1;
UPDATE ONLY accounts SET n = 1;
DELETE FROM [dbo].[members] WHERE 1 = 0;
DROP TRIGGER IF EXISTS t ON accounts;
CREATE TABLE fresh (id int);
SELECT 1"""
    found = [(t.verb, t.kind, t.name, t.on) for t in touches(sql, "setup x.sql")]
    assert found == [
        (Verb.DROP, "table", "accounts", None), (Verb.DROP, "table", '"Odd,Name"', None),
        (Verb.DROP, "function", "lock_share_range(integer, integer)", None), (Verb.DROP, "function", "f()", None),
        (Verb.REPLACE, "function", "s.g", None), (Verb.REPLACE, "procedure", "dbo.churn", None),
        (Verb.ALTER, "table", "public.accounts", None), (Verb.EMPTY, "relation", "a", None),
        (Verb.EMPTY, "relation", "b", None), (Verb.WRITE, "relation", "accounts", None),
        (Verb.WRITE, "relation", "accounts", None), (Verb.WRITE, "relation", "[dbo].[members]", None),
        (Verb.DROP, "trigger", "t", "accounts")]
    assert touches("DROP TABLE x", "teardown")[0].where == "teardown, line 1"
    assert split_names('a, b(int, text), "c,d", [e,f]') == ["a", "b(int, text)", '"c,d"', "[e,f]"]


def test_the_engine_of_a_dsn_is_told_by_its_form():
    assert engine_of("postgresql://bench@db/app") == engine_of("host=db dbname=app user=bench") == "postgres"
    assert engine_of("mssql://sa@db:1433/bench") == engine_of("Driver={FreeTDS};Server=db,1433;UID=sa") == "mssql"
