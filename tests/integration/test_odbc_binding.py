"""How pyodbc declares parameters to a real ODBC driver, read from unixODBC's trace of SQLBindParameter.

pyodbc binds Python's None as SQL_VARCHAR with a column size of 1 (`GetNullInfo` in its params.cpp
sets ColumnSize = 1 whatever the type). On SQL Server, ISNULL returns the type of its first
argument, so `DB_ID(ISNULL(?, DB_NAME()))` bound to None cut the database name to one character and
the index_physical_stats sampler found no database. No SQL Server can run here, but the driver
manager and a real driver can: these tests run pyodbc with the psqlODBC driver against the test
PostgreSQL, with unixODBC's trace turned on (ODBCSYSINI pointing at a copy of the system's
odbcinst.ini with an [ODBC] Trace section, in a subprocess, since unixODBC reads it once per
process), and read the types pyodbc declared.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from needs import import_pyodbc

pyodbc = import_pyodbc()

pytestmark = pytest.mark.integration
DRIVER = "PostgreSQL Unicode"

if DRIVER not in pyodbc.drivers():
    pytest.skip(f"the psqlODBC driver ({DRIVER!r}, Debian package odbc-postgresql) is not installed",
                allow_module_level=True)


def _system_odbcinst() -> Path:
    out = subprocess.run(["odbcinst", "-j"], capture_output=True, text=True, check=True).stdout
    return Path(re.search(r"DRIVERS\.*:\s*(\S+)", out).group(1))


def traced_binds(conn_str: str, code: str) -> tuple[list[dict], dict]:
    """Run `code` (with `conn`, a pyodbc connection, and `report(dict)`) in a Python subprocess with
    unixODBC tracing on; return the SQLBindParameter calls traced and what the code reported.
    (The folder is a short one of its own: unixODBC 2.3 silently writes no trace to a long TraceFile path.)"""
    folder = Path(tempfile.mkdtemp(prefix="odbc"))
    try:
        trace = folder / "trace.log"
        (folder / "odbcinst.ini").write_text(_system_odbcinst().read_text()
                                             + f"\n[ODBC]\nTrace=Yes\nTraceFile={trace}\n")
        (folder / "odbc.ini").write_text("")
        script = "import json, sys, pyodbc\n" \
                 "conn = pyodbc.connect(sys.argv[1], autocommit=True)\n" \
                 "def report(value):\n    print('REPORT ' + json.dumps(value))\n" + textwrap.dedent(code)
        env = {**os.environ, "ODBCSYSINI": str(folder)}
        done = subprocess.run([sys.executable, "-c", script, conn_str], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert trace.is_file(), f"unixODBC wrote no trace to {trace}"
        reported = [json.loads(line[len("REPORT "):]) for line in done.stdout.splitlines()
                    if line.startswith("REPORT ")]
        return _bind_entries(trace.read_text(errors="replace")), (reported[-1] if reported else {})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _bind_entries(text: str) -> list[dict]:
    """The `Entry:` fields of every SQLBindParameter call in a unixODBC trace."""
    out = []
    for block in re.split(r"\n(?=\[ODBC\])", text):
        if "[SQLBindParameter.c]" in block.splitlines()[0] and "Entry:" in block:
            fields = dict(re.findall(r"^\s*([A-Za-z][A-Za-z ]*?) = (.*)$", block, re.M))
            out.append(fields)
    return out


def null_binds(binds: list[dict]) -> list[dict]:
    """Parameters bound without a value buffer: pyodbc's None."""
    return [b for b in binds if b.get("Rgb Value") == "(nil)"]


@pytest.fixture()
def odbc_database(server, admin):
    """A database of its own, with stand-ins for the few T-SQL names the sampler's queries use (DB_ID,
    OBJECT_ID, sys.indexes), reached through psqlODBC."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    import psycopg

    admin.execute("DROP DATABASE IF EXISTS odbc_binding")
    admin.execute("CREATE DATABASE odbc_binding")
    parts = conninfo_to_dict(server[1].conninfo)
    with psycopg.connect(make_conninfo(server[1].conninfo, dbname="odbc_binding"), autocommit=True) as conn:
        conn.execute("CREATE FUNCTION db_id() RETURNS int LANGUAGE sql AS 'SELECT 5'")
        conn.execute("CREATE FUNCTION db_id(text) RETURNS int LANGUAGE sql "
                     "AS $$SELECT CASE WHEN $1 = current_database() THEN 5 END$$")
        conn.execute("CREATE FUNCTION object_id(text) RETURNS int LANGUAGE sql "
                     "AS $$SELECT CASE WHEN $1 = '[dbo].[ghost_demo]' THEN 42 END$$")
        conn.execute("CREATE SCHEMA sys")
        conn.execute("CREATE TABLE sys.indexes (object_id int, index_id int, name text)")
        conn.execute("INSERT INTO sys.indexes VALUES (42, 1, 'PK_ghost_demo')")
    try:
        yield (f"Driver={{{DRIVER}}};Server={parts.get('host', '127.0.0.1')};Port={parts.get('port', 5432)};"
               f"Database=odbc_binding;Uid={parts['user']};Pwd={{{parts.get('password', '')}}};")
    finally:
        admin.execute("DROP DATABASE IF EXISTS odbc_binding WITH (FORCE)")


def test_pyodbc_declares_none_as_a_varchar_of_length_one(odbc_database):
    """The real driver manager's record of what pyodbc declared for `None` and for a string."""
    binds, reported = traced_binds(odbc_database, """
        row = conn.execute("SELECT ?, ?", None, "concurbench").fetchone()
        report({"row": list(row)})
    """)
    assert reported == {"row": [None, "concurbench"]}
    (null,) = null_binds(binds)
    assert null["SQL Type"].endswith("SQL_VARCHAR") and null["Col Def"] == "1"
    (text,) = [b for b in binds if b is not null]
    assert int(text["Col Def"]) >= len("concurbench")  # a string is declared at least as long as it is


def test_index_physical_stats_binds_no_null_parameter(odbc_database):
    """The sampler's own resolution of its table, through pyodbc and a real driver (PostgreSQL stands in
    for DB_ID, OBJECT_ID and sys.indexes): no parameter is bound as NULL, so none is declared varchar(1).
    The old query bound the absent database as None inside ISNULL(?, DB_NAME())."""
    binds, reported = traced_binds(odbc_database, """
        from concurbench.samplers.mssql import IndexPhysicalStats
        from concurbench.scenario.model import SamplerSpec

        sampler = IndexPhysicalStats(SamplerSpec("index_physical_stats", (("table", "dbo.ghost_demo"),)))
        try:
            sampler.prepare(conn, 16_000_000)
            report({"ids": [sampler.database_id, sampler.object_id], "indexes": sampler.index_names})
        except Exception as exc:
            report({"error": str(exc)})
    """)
    assert binds, "no SQLBindParameter call was traced"
    assert null_binds(binds) == [], null_binds(binds)
    assert reported == {"ids": [5, 42], "indexes": {"1": "PK_ghost_demo"}}
