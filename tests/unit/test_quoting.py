"""The one quoting module (engines/quoting.py): hostile names and texts come out as one name or one literal, or
are refused; the text a server reads back is the text given."""

from __future__ import annotations

import sqlite3

import pytest

from concurbench.engines.quoting import (pg_literal, pg_name, pg_setting, pg_shown_name, simple_name, tsql_like_prefix,
                                         tsql_literal, tsql_name)

HOSTILE = ["accounts", "a]b", "a]]; DROP TABLE x; --", 'x"y', "it's", "' OR 1=1 --", "[dbo].[t]", "naïve", " lead",
           "back\\slash", "per%cent_", "line\nbreak"]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_tsql_name_is_one_bracketed_name_whatever_it_holds(name):
    quoted = tsql_name(name)
    assert quoted.startswith("[") and quoted.endswith("]")
    inner = quoted[1:-1]
    assert "]" not in inner.replace("]]", "")  # every ] inside is doubled: nothing closes the name early
    assert inner.replace("]]", "]") == name


@pytest.mark.parametrize("text", HOSTILE)
def test_literals_read_back_as_the_text_given(text):
    """SQLite reads '' as PostgreSQL and SQL Server do (a doubled quote is one quote), so it reads the literals back."""
    assert tsql_literal(text).startswith("N'")
    for literal in (tsql_literal(text)[1:], pg_literal(text)):
        assert sqlite3.connect(":memory:").execute(f"SELECT {literal}").fetchone()[0] == text


@pytest.mark.parametrize("name", HOSTILE)
def test_a_postgres_name_reads_back_as_the_name_given(name):
    with sqlite3.connect(":memory:") as conn:  # SQLite takes double-quoted identifiers as PostgreSQL does
        conn.execute(f"CREATE TABLE {pg_name(name)} (id integer)")
        assert conn.execute("SELECT name FROM sqlite_master").fetchone()[0] == name


def test_what_cannot_be_one_name_or_literal_is_refused():
    for bad in ("", "a\x00b", "x" * 129):
        with pytest.raises(ValueError):
            tsql_name(bad)
    for bad in ("", "a\x00b"):
        with pytest.raises(ValueError):
            pg_name(bad)
    for quote in (tsql_literal, pg_literal):
        with pytest.raises(ValueError):
            quote("a\x00b")
    for bad in ("work_mem; DROP TABLE x", "a b", "'x'", "", "1abc", "a..b"):
        with pytest.raises(ValueError):
            pg_setting(bad)
    assert pg_setting("auto_explain.log_analyze") == "auto_explain.log_analyze"
    for bad in ("a-b", "a b", "", "x;DROP"):
        with pytest.raises(ValueError):
            simple_name(bad)


def test_a_like_prefix_takes_its_wildcards_literally_and_a_shown_name_is_bare_when_plain():
    assert tsql_like_prefix("/d/concurbench_x-") == "/d/concurbench[_]x-%"
    assert tsql_like_prefix("a[1]%") == "a[[]1][%]%"
    assert pg_shown_name("bench") == "bench" and pg_shown_name("Bench") == '"Bench"'
    assert pg_shown_name('a"b') == '"a""b"'
