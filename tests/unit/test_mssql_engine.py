"""SQL Server engine helpers that need no server: drivers, connection strings, GO batches, error classes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from concurbench.engines import odbc
from concurbench.engines.odbc import (CONNECTION, DEADLOCK, DRIVER_17, DRIVER_18, FREETDS, LOCK_NOT_AVAILABLE, OTHER,
                                       SERIALIZATION, classify, classify_error, classify_error_number,
                                       connection_string, detect_driver, error_key, error_number_from_pyodbc,
                                       nocount, safe_connection_string, server_info_query, split_batches)
from concurbench.errors import EngineError


class FakePyodbcError(Exception):
    """no SQL Server here: stands in for pyodbc.Error, whose args are (sqlstate, message)."""


DEADLOCK_MSG = ("[40001] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Transaction (Process ID 53) was "
                "deadlocked on lock resources with another process and has been chosen as the deadlock victim. "
                "Rerun the transaction. (1205) (SQLExecDirectW)")


def test_module_imports_without_pyodbc():
    """Importing the engine does not import pyodbc (it is loaded lazily, inside functions)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(odbc))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top for a in n.names] + [getattr(n, "module", None) or "" for n in top]
    assert not any("pyodbc" in name for name in names)


def test_installed_drivers_without_pyodbc(monkeypatch):
    """no SQL Server here: pyodbc is made unimportable, and the list is empty."""
    monkeypatch.setitem(sys.modules, "pyodbc", None)
    assert odbc.installed_drivers() == []


def test_connect_without_pyodbc(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyodbc", None)
    with pytest.raises(EngineError, match="pyodbc is not installed"):
        odbc.connect("Driver={x};")


# -- drivers -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("installed, expected", [
    ([FREETDS, DRIVER_17, DRIVER_18], DRIVER_18),
    ([FREETDS, DRIVER_17], DRIVER_17),
    (["PostgreSQL Unicode", FREETDS], FREETDS),
    (["SQLite3", "ODBC Driver 17 for SQL Server"], DRIVER_17),
])
def test_detect_driver_preference(installed, expected):
    assert detect_driver(installed) == expected


@pytest.mark.parametrize("installed", [[], ["PostgreSQL Unicode", "SQLite3"]])
def test_detect_driver_none(installed):
    with pytest.raises(EngineError) as info:
        detect_driver(installed)
    text = str(info.value)
    assert "msodbcsql18" in text and "tdsodbc" in text
    for name in installed:
        assert name in text
    if not installed:
        assert "none" in text


# -- connection strings ------------------------------------------------------------------------------
def _pairs(s: str) -> dict:
    return {k: v for k, v in odbc._split_conn(s)}


def test_connection_string_driver18():
    s = connection_string(DRIVER_18, "localhost", 14330, "sa", "Secret#1", database="bench")
    p = _pairs(s)
    assert p["Driver"] == "{ODBC Driver 18 for SQL Server}"
    assert p["Server"] == "localhost,14330"
    assert p["Encrypt"] == "yes" and p["TrustServerCertificate"] == "yes"
    assert p["Database"] == "bench" and p["UID"] == "sa" and p["PWD"] == "Secret#1" and p["APP"] == "concurbench"
    assert p["ConnectTimeout"] == "10"
    assert s.endswith(";")


def test_connection_string_driver18_validating_certificate():
    p = _pairs(connection_string(DRIVER_18, "db", 1433, "sa", "pw", trust_server_certificate=False))
    assert p["Encrypt"] == "yes" and "TrustServerCertificate" not in p
    assert "Database" not in p


def test_connection_string_driver17_encrypt_optional():
    p = _pairs(connection_string(DRIVER_17, "db", 1433, "sa", "pw"))
    assert "Encrypt" not in p and "TrustServerCertificate" not in p and "ConnectTimeout" not in p
    p = _pairs(connection_string(DRIVER_17, "db", 1433, "sa", "pw", encrypt=True))
    assert p["Encrypt"] == "yes" and p["TrustServerCertificate"] == "yes"
    p = _pairs(connection_string(DRIVER_18, "db", 1433, "sa", "pw", encrypt=False))
    assert p["Encrypt"] == "no" and "TrustServerCertificate" not in p


def test_connection_string_freetds():
    p = _pairs(connection_string(FREETDS, "10.0.0.5", 1433, "sa", "pw", database="tempdb"))
    assert p["Server"] == "10.0.0.5" and p["Port"] == "1433" and p["TDS_Version"] == "7.4"
    assert "Encrypt" not in p and "," not in p["Server"]


def test_connection_string_braces_values():
    s = connection_string(DRIVER_18, "h", 1, "sa", "a;b}c{d", app=" spaced ")
    assert "PWD={a;b}}c{d};" in s
    assert "APP={ spaced };" in s
    assert _pairs(s)["PWD"] == "{a;b}}c{d}"
    assert odbc.odbc_value("plain!#%") == "plain!#%"


def test_safe_connection_string_removes_password():
    s = connection_string(DRIVER_18, "h", 1, "sa", "x;PWD=y}", database="d")
    safe = safe_connection_string(s)
    assert "PWD" not in safe and "x;" not in safe
    assert "UID=sa;" in safe and "Database=d;" in safe and safe.startswith("Driver={ODBC Driver 18")
    assert safe_connection_string("Driver={x};pwd=abc;Server=h") == "Driver={x};Server=h;"


# -- batches -----------------------------------------------------------------------------------------
def test_split_batches_basic():
    text = "CREATE TABLE t (id int);\nGO\n\nINSERT t VALUES (1);\ngo\nSELECT 1\n"
    assert split_batches(text) == [(1, "CREATE TABLE t (id int);"), (4, "INSERT t VALUES (1);"), (6, "SELECT 1")]


def test_split_batches_go_count_and_comment():
    text = "INSERT t DEFAULT VALUES;\n  Go 3   -- three rows\nSELECT 2;\nGO -- done"
    assert split_batches(text) == [(1, "INSERT t DEFAULT VALUES;")] * 3 + [(3, "SELECT 2;")]


def test_split_batches_go_zero_rejected():
    with pytest.raises(ValueError, match="line 2"):
        split_batches("SELECT 1\nGO 0\n")


def test_split_batches_go_inside_string_and_identifiers():
    text = "SELECT 'a\nGO\nb' AS x, [c\nGO\n]] d] AS y, \"e\nGO\" AS z, N'it''s\nGO'\nGO\nSELECT 3"
    batches = split_batches(text)
    assert len(batches) == 2
    assert batches[0][0] == 1 and batches[0][1].count("GO") == 4
    assert batches[1] == (9, "SELECT 3")


def test_split_batches_nested_block_comment():
    text = "/* outer /* inner\nGO\n*/ still comment\nGO\n*/\nSELECT 1\nGO\nSELECT 2"
    batches = split_batches(text)
    assert batches == [(6, text.split("\nGO\nSELECT 2")[0]), (8, "SELECT 2")]


def test_split_batches_goto_and_go_in_line():
    text = "IF 1 = 1 GOTO done\nGOTO done;\ndone:\nSELECT 'GO'; -- GO\nGO"
    assert split_batches(text) == [(1, text[:-3])]


def test_split_batches_drops_comment_only_batches_and_line_comment_go():
    text = "-- header\nGO\n/* nothing */\nGO\nSELECT 1 -- GO\n-- GO\nGO\n"
    assert split_batches(text) == [(5, "SELECT 1 -- GO\n-- GO")]


def test_split_batches_crlf():
    assert split_batches("SELECT 1\r\nGO\r\nSELECT 2\r\n") == [(1, "SELECT 1"), (3, "SELECT 2")]


def test_nocount():
    assert nocount("SELECT 1") == "SET NOCOUNT ON;\nSELECT 1"
    assert nocount("set nocount on; SELECT 1") == "set nocount on; SELECT 1"


# -- errors ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("number, expected", [
    (1205, DEADLOCK),
    (3960, SERIALIZATION),
    (3961, SERIALIZATION),
    (3966, SERIALIZATION),
    (41302, SERIALIZATION),
    (1222, LOCK_NOT_AVAILABLE),
    (233, CONNECTION),
    (10054, CONNECTION),
    (10060, CONNECTION),
    (2627, OTHER),  # primary key violation
    (208, OTHER),  # invalid object name
    (None, OTHER),
])
def test_classify_error_number(number, expected):
    assert classify_error_number(number) == expected


@pytest.mark.parametrize("number, state, message, expected", [
    (None, "08S01", "Communication link failure", CONNECTION),
    (None, "08001", "TCP Provider: Error code 0x2749", CONNECTION),
    (None, "HYT00", "Login timeout expired", CONNECTION),
    (None, "HYT00", "Query timeout expired", OTHER),
    (None, "40001", "", DEADLOCK),
    (2627, "23000", "Violation of PRIMARY KEY", OTHER),
    (1222, "HY000", "Lock request time out period exceeded.", LOCK_NOT_AVAILABLE),
])
def test_classify_error_with_sqlstate(number, state, message, expected):
    assert classify_error(number, state, message) == expected


def test_error_number_from_pyodbc():
    """no SQL Server here: pyodbc errors are built by hand from the messages the drivers print."""
    assert error_number_from_pyodbc(FakePyodbcError("40001", DEADLOCK_MSG)) == 1205
    conflict = FakePyodbcError("42000", "[42000] [Microsoft][ODBC Driver 17 for SQL Server][SQL Server]Snapshot "
                                        "isolation transaction aborted due to update conflict. (3960) (SQLExecDirectW)")
    assert error_number_from_pyodbc(conflict) == 3960
    two = FakePyodbcError("23000", "[23000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Violation of "
                                   "PRIMARY KEY constraint 'PK_t'. (2627) (SQLExecDirectW); [01000] [Microsoft][ODBC "
                                   "Driver 18 for SQL Server][SQL Server]The statement has been terminated. (3621)")
    assert error_number_from_pyodbc(two) == 2627
    login = FakePyodbcError("HYT00", "[HYT00] [Microsoft][ODBC Driver 18 for SQL Server]Login timeout expired (0) "
                                     "(SQLDriverConnect)")
    assert error_number_from_pyodbc(login) is None
    freetds = FakePyodbcError("HY000", "[HY000] [FreeTDS][SQL Server]Lock request time out period exceeded. (1222) "
                                       "(SQLExecDirectW)")
    assert error_number_from_pyodbc(freetds) == 1222
    assert error_number_from_pyodbc(FakePyodbcError("no numbers")) is None


def test_classify_pyodbc_like_errors():
    """no SQL Server here: classification of hand-made pyodbc-style errors."""
    assert classify(FakePyodbcError("40001", DEADLOCK_MSG)) == DEADLOCK
    link = FakePyodbcError("08S01", "[08S01] [Microsoft][ODBC Driver 18 for SQL Server]TCP Provider: Error code "
                                    "0x68 (104) (SQLExecDirectW)")
    assert classify(link) == CONNECTION
    login = FakePyodbcError("HYT00", "[HYT00] [Microsoft][ODBC Driver 18 for SQL Server]Login timeout expired (0) "
                                     "(SQLDriverConnect)")
    assert classify(login) == CONNECTION
    assert classify(ValueError("boom")) == OTHER


def test_error_key_normalises():
    a = FakePyodbcError("40001", DEADLOCK_MSG)
    b = FakePyodbcError("40001", DEADLOCK_MSG.replace("53", "71").replace("Driver 18", "Driver 17"))
    assert error_key(a) == error_key(b)
    key = error_key(a)
    assert key.startswith("1205: Transaction (Process ID N) was deadlocked")
    assert "Microsoft" not in key and "SQLExecDirectW" not in key and not key.endswith("(N)")
    assert error_key(FakePyodbcError("08S01", "[08S01] Communication link failure")).startswith("08S01: ")


def test_server_info_query_names():
    q = server_info_query()
    for prop in ("ProductVersion", "ProductLevel", "ProductUpdateLevel", "Edition", "EngineEdition"):
        assert f"SERVERPROPERTY('{prop}')" in q
    assert "@@VERSION" in q


# -- sp_getapplock failures (issue 22) ---------------------------------------------------------------------
def applock_error(code: int) -> FakePyodbcError:
    """The error dbo.lock_account raises for an sp_getapplock return code, its message formatted from the
    RAISERROR in sql/mssql/row-lock-setup.sql as SQL Server would (%s the resource, %d the code)."""
    setup = (Path(__file__).resolve().parents[2] / "sql" / "mssql" / "row-lock-setup.sql").read_text(encoding="utf-8")
    fmt = re.search(r"RAISERROR \(N'([^']+)', 16, 1, @resource, @status\)", setup).group(1)
    text = fmt.replace("%s", "accounts:42").replace("%d", str(code))
    return FakePyodbcError("42000", f"[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]{text} (50000) "
                                    f"(SQLExecDirectW)")


@pytest.mark.parametrize("code, expected", [(-3, DEADLOCK), (-1, LOCK_NOT_AVAILABLE), (-2, OTHER), (-999, OTHER)])
def test_an_applock_deadlock_victim_counts_as_a_deadlock(code, expected):
    """No SQL Server here: a pyodbc-shaped error 50000 as dbo.lock_account raises it. The old code
    counted a deadlock victim (-3) and a lock timeout (-1) as OTHER, unlike errors 1205 and 1222."""
    assert classify(applock_error(code)) == expected


def test_only_the_procedures_own_error_is_read_for_a_return_code():
    other = FakePyodbcError("42000", "[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]the report "
                                     "returned -3 rows (50000) (SQLExecDirectW)")
    assert classify(other) == OTHER
    assert classify_error(50001, "42000", "sp_getapplock on accounts:1 returned -3") == OTHER
