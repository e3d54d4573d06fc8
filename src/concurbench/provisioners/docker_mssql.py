"""SQL Server in a container of the docker target: when it is ready for the run, creating the run's
database, and removing files the observers left in it.

SQL Server accepts logins before its databases have finished recovery: a CREATE DATABASE (which
copies model), a DBCC SHRINKFILE in tempdb or a login to the run's database sent then fails (a
login to a database still being recovered fails with error 4060). The server is ready when
sys.databases says ONLINE for tempdb, model and the run's database, once it exists (it is created
after the first start, and recovered again after every restart).

Every connection opened here is closed: pyodbc's `with connect()` commits but leaves the connection
open.

Sources (Microsoft Learn): sys.databases (state_desc), "Database states" (ONLINE, RESTORING,
RECOVERING, RECOVERY_PENDING, SUSPECT, EMERGENCY, OFFLINE; only ONLINE is available).
"""

from __future__ import annotations

import shlex

from ..engines.quoting import tsql_literal, tsql_name
from ..engines import odbc
from .containers import DATABASE

SYSTEM = ("tempdb", "model")


class NotReady(Exception):
    """The server answered, and a database the run needs is not ONLINE yet."""


def ready_query(database: str = DATABASE) -> str:
    names = ", ".join(tsql_literal(name) for name in (*SYSTEM, database))
    return f"SELECT name, state_desc FROM sys.databases WHERE name IN ({names})"


def not_online(rows, database: str = DATABASE) -> list[str]:
    """What keeps the server from being ready, from (name, state_desc) rows; [] when nothing does."""
    states = {str(name): str(state) for name, state in rows}
    waiting = [f"{name} is {states.get(name, 'not listed yet')}" for name in SYSTEM if states.get(name) != "ONLINE"]
    if database in states and states[database] != "ONLINE":
        waiting.append(f"{database} is {states[database]}")
    return waiting


def probe(conn_str: str, timeout: int, database: str = DATABASE) -> None:
    """Return when the server is ready; raise (NotReady, or the driver's error) while it is not."""
    conn = odbc.connect(conn_str, autocommit=True, timeout=timeout)
    try:
        rows = conn.execute(ready_query(database)).fetchall()
    finally:
        conn.close()
    waiting = not_online(rows, database)
    if waiting:
        raise NotReady("not ready: " + "; ".join(waiting))


def create_database(conn_str: str, database: str = DATABASE) -> None:
    conn = odbc.connect(conn_str, autocommit=True, timeout=10)
    try:
        conn.execute(f"IF DB_ID({tsql_literal(database)}) IS NULL CREATE DATABASE {tsql_name(database)}")
    finally:
        conn.close()


def remove_command(patterns: list[str]) -> list[str]:
    """`sh -c "rm -f -- ..."` for files an observer wrote: absolute paths whose file name has one `*`
    wildcard after a fixed start (`/data/concurbench_plans_0_*.xel`); everything else is quoted."""
    words = []
    for pattern in patterns:
        folder, _, name = pattern.rpartition("/")
        if not pattern.startswith("/") or "*" in folder or name.count("*") != 1 or name.index("*") < 3:
            raise ValueError(f"not a pattern of files an observer writes: {pattern!r}")
        words.append("*".join(shlex.quote(part) if part else "" for part in pattern.split("*")))
    return ["sh", "-c", "rm -f -- " + " ".join(words)]
