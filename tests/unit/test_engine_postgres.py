"""PostgreSQL engine helpers that need no server: error classes, error keys, :name rewriting, literal inlining."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest

from concurbench.engines.classes import RETRYABLE
from concurbench.engines.postgres import (CONNECTION, DEADLOCK, LOCK_NOT_AVAILABLE, OTHER,
                                          SERIALIZATION, _inline, _text, classify, classify_sqlstate, error_key,
                                          positional)


@pytest.mark.parametrize("sqlstate, expected", [
    ("40P01", DEADLOCK),
    ("40001", SERIALIZATION),
    ("55P03", LOCK_NOT_AVAILABLE),
    ("08006", CONNECTION),
    ("08003", CONNECTION),
    ("08000", CONNECTION),
    (None, CONNECTION),
    ("", CONNECTION),
    ("23505", OTHER),
    ("42P01", OTHER),
    ("40002", OTHER),  # class 40, but not a retryable one
    ("57014", OTHER),
])
def test_classify_sqlstate(sqlstate, expected):
    assert classify_sqlstate(sqlstate) == expected


def test_error_class_names():
    assert (DEADLOCK, SERIALIZATION, LOCK_NOT_AVAILABLE, CONNECTION, OTHER) == (
        "deadlock", "serialization", "lock_not_available", "connection", "other")
    assert RETRYABLE == {DEADLOCK, SERIALIZATION}


def test_classify_exceptions():
    assert classify(psycopg.errors.DeadlockDetected("deadlock detected")) == DEADLOCK
    assert classify(psycopg.errors.SerializationFailure("could not serialize")) == SERIALIZATION
    assert classify(psycopg.errors.LockNotAvailable("could not obtain lock")) == LOCK_NOT_AVAILABLE
    assert classify(psycopg.errors.UniqueViolation("duplicate key")) == OTHER
    assert classify(psycopg.OperationalError("server closed the connection unexpectedly")) == CONNECTION
    assert classify(ValueError("not a database error")) == OTHER


def test_error_key_masks_numbers_and_keeps_the_first_line():
    exc = psycopg.errors.DeadlockDetected(
        "deadlock detected on relation 16384\nDETAIL: Process 123 waits for ShareLock on transaction 456")
    assert error_key(exc) == "40P01: deadlock detected on relation N"


def test_error_key_groups_messages_that_differ_only_in_numbers():
    a = psycopg.errors.UniqueViolation('duplicate key value violates unique constraint "t_pkey" (id)=(17)')
    b = psycopg.errors.UniqueViolation('duplicate key value violates unique constraint "t_pkey" (id)=(90210)')
    assert error_key(a) == error_key(b)
    assert error_key(a).startswith("23505: ")
    assert "(N)" in error_key(a)
    assert "t_pkey" in error_key(a)


def test_error_key_leaves_digits_inside_words():
    assert error_key(ValueError("row 12 of table t2 v3x 7")) == "ValueError: row N of table t2 v3x N"


def test_error_key_without_sqlstate_uses_the_class_name_and_truncates():
    key = error_key(RuntimeError("x" * 500))
    assert key == "RuntimeError: " + "x" * 200
    assert error_key(RuntimeError("")) == "RuntimeError: "


# -- positional ------------------------------------------------------------------

def test_positional_rewrites_declared_names():
    text, order = positional("UPDATE accounts SET abalance = abalance + :delta WHERE aid = :aid",
                             {"aid", "delta"})
    assert text == b"UPDATE accounts SET abalance = abalance + $1 WHERE aid = $2"
    assert order == ("delta", "aid")


def test_positional_reuses_the_number_of_a_repeated_name():
    text, order = positional("SELECT :b, :a, :b, :a + :b", {"a", "b"})
    assert text == b"SELECT $1, $2, $1, $2 + $1"
    assert order == ("b", "a")


def test_positional_keeps_casts_and_undeclared_names():
    text, order = positional("SELECT :aid::int, '1'::bigint, :other, :aid1, x::text FROM t WHERE a = :aid",
                             {"aid"})
    assert text == b"SELECT $1::int, '1'::bigint, :other, :aid1, x::text FROM t WHERE a = $1"
    assert order == ("aid",)


def test_positional_without_parameters_returns_the_text():
    sql = "SELECT pg_advisory_xact_lock(42)"
    assert positional(sql, set()) == (sql.encode(), ())
    assert positional("SELECT :aid", set()) == (b"SELECT :aid", ())


def test_positional_accepts_any_container_of_names():
    assert positional("SELECT :x", ["x"]) == (b"SELECT $1", ("x",))
    assert positional("SELECT :x", {"x": 1}) == (b"SELECT $1", ("x",))


# -- literal inlining (protocol: simple) ----------------------------------------

def test_text_encodes_values():
    assert _text(None) is None
    assert _text(True) == b"t" and _text(False) == b"f"
    assert _text(42) == b"42"
    assert _text("O'Brien") == b"O'Brien"


def test_inline_quotes_values_and_doubles_quotes():
    assert _inline(b"SELECT $1, $2", [b"O'Brien", b"42"]) == b"SELECT 'O''Brien', '42'"
    assert _inline(b"SELECT $1", [b"''"]) == b"SELECT ''''''"


def test_inline_null_and_repeated_and_two_digit_positions():
    assert _inline(b"SELECT $1 = $1, $2", [b"a", None]) == b"SELECT 'a' = 'a', NULL"
    args = [str(i).encode() for i in range(1, 12)]
    assert _inline(b"SELECT $11, $1", args) == b"SELECT '11', '1'"


def test_positional_then_inline_round_trip():
    text, order = positional("SELECT * FROM t WHERE name = :name AND id = :id", {"id", "name"})
    values = {"id": 7, "name": "it's"}
    inlined = _inline(text, [_text(values[n]) for n in order])
    assert inlined == b"SELECT * FROM t WHERE name = 'it''s' AND id = '7'"
