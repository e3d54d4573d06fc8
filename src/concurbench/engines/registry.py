"""Engines by the names scenarios use (`engine: postgres` or `engine: mssql`).

An engine is a module with: connect(conninfo, application_name=...), first_line(exc),
run_script(conn, sql, origin), query_rows(conn, sql, what), server_info(conn, names),
statement_channel(conn, statements, params, protocol), BEGIN and COMMIT (the words an atomic pool
wraps its statements in), and init(conn, sql) for a pool's per-session statements.
"""

from __future__ import annotations

import importlib

ENGINES = {"postgres": "postgres", "mssql": "sqlserver"}


def get_engine(name: str):
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name}")
    return importlib.import_module(f"{__package__}.{ENGINES[name]}")
