"""Both engines meet the Engine protocol (engines/base.py) name for name and parameter for parameter, and
the capabilities one of them lacks are there, doing nothing (no server: the SQL Server side is checked on
its own module only, as SQL Server cannot run here)."""

from __future__ import annotations

import inspect

import psycopg
import psycopg.errors
import pytest

from concurbench.engines.base import ChangePolicy
from concurbench.engines import postgres, sqlserver
from concurbench.engines.base import Engine
from concurbench.engines.registry import SPECS, get_engine


def members() -> dict[str, inspect.Signature | type]:
    """The protocol's functions (their signatures without `self`) and its attributes (their types)."""
    out: dict[str, inspect.Signature | type] = {}
    for name, value in vars(Engine).items():
        if inspect.isfunction(value) and not name.startswith("_"):
            signature = inspect.signature(value)
            out[name] = signature.replace(parameters=list(signature.parameters.values())[1:])
    out.update({name: str for name in Engine.__annotations__})
    return out


def shape(signature: inspect.Signature) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_engine_has_every_member_with_the_protocols_parameters(name):
    engine = get_engine(name)
    wanted = members()
    assert {"connect", "configurator", "flush_statistics", "is_connection_error", "BEGIN"} <= set(wanted)
    for member, spec in wanted.items():
        assert hasattr(engine, member), f"{name} lacks {member}"
        found = getattr(engine, member)
        if isinstance(spec, type):
            assert isinstance(found, spec), (name, member)
        else:
            assert shape(inspect.signature(found)) == shape(spec), (name, member)


def test_the_capabilities_an_engine_lacks_do_nothing():
    assert postgres.configurator(ChangePolicy(), "host=127.0.0.1") is None
    untouched = object()  # any call on it would raise AttributeError
    assert sqlserver.flush_statistics(untouched, 16_000_000) is None
    assert postgres.flush_statistics(untouched, 140_000) is None  # before 15: nothing to ask the server


def test_postgres_tells_a_lost_connection_from_a_failed_statement():
    assert postgres.is_connection_error(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not postgres.is_connection_error(psycopg.errors.DeadlockDetected("deadlock detected"))


def test_sql_servers_sessions_named_quotes_each_name_stand_in(monkeypatch):
    """Stand-in for SQL Server (none can run here): the query counts other sessions by program name, each
    name a quoted literal, and no names asks the server nothing."""
    sent = []
    monkeypatch.setattr(sqlserver, "scalar", lambda conn, sql: sent.append(sql) or 2)
    assert sqlserver.sessions_named(None, ["concurbench:a", "it's"]) == 2
    assert sent == ["SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE program_name IN (N'concurbench:a', N'it''s') "
                    "AND session_id <> @@SPID"]
    assert sqlserver.sessions_named(None, []) == 0 and len(sent) == 1
