"""The compiled loop's Python side, without a server: choosing the loop, the simple protocol's
pieces, and sessions of one pool sharing their statistics in a worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from concurbench.errors import RunError
from concurbench.scenario.model import Pool, Statement
from concurbench.workload import fastloop
from concurbench.workload.session import Session
from concurbench.workload.stats import PoolStats


def test_inline_pieces_split_the_statement_at_its_placeholders():
    assert fastloop.inline_pieces(b"SELECT 1", ()) == (b"SELECT 1",)
    assert fastloop.inline_pieces(b"SELECT $1, $2, $1", (3, 0)) == (b"SELECT ", 3, b", ", 0, b", ", 3, b"")
    # a placeholder beyond the parameters stays text, as do dollar quotes
    assert fastloop.inline_pieces(b"SELECT $2 || $$x$$", (5,)) == (b"SELECT $2 || $$x$$",)


def test_loop_names_resolve_or_fail_clearly():
    assert fastloop.resolve("python", "postgres") == "python"
    assert fastloop.resolve("auto", "mssql") == "python"
    with pytest.raises(RunError, match="PostgreSQL only"):
        fastloop.resolve("compiled", "mssql")
    with pytest.raises(RunError, match="unknown event loop 'fast'"):
        fastloop.resolve("fast", "postgres")
    want = "compiled" if fastloop.unavailable("postgres") is None else "python"
    assert fastloop.resolve("auto", "postgres") == want


def test_sessions_of_a_pool_share_one_stats_and_settle_any_number_of_times():
    pool = Pool("p", 2, (Statement("one", "SELECT 1"),))
    shared = PoolStats("p")
    a, b = (Session("", pool, i, 1, [0, 0], i, stats=shared) for i in range(2))
    assert shared.sessions == 2 and a.stats is b.stats is shared
    a.counted, b.counted = 5, 7
    a.settle_stats()
    a.settle_stats()
    b.settle_stats()
    assert shared.transactions == 12
    b.counted = 9  # a session settled early (done) and again at the end
    b.settle_stats()
    assert shared.transactions == 14
    alone = Session("", pool, 0, 1, [0], 0)
    assert alone.stats is not shared and alone.stats.sessions == 1


def test_the_compiled_loop_binds_to_psycopgs_own_libpq():
    """The PQ* functions come from the libpq psycopg's pq module links, checked by version; a module
    without them or another version is refused, and a refused bind leaves the good one in place."""
    import sys

    import psycopg

    if fastloop.unavailable("postgres"):
        pytest.skip(fastloop.unavailable("postgres"))
    bound = fastloop.bind()
    assert "libpq" in bound.rsplit("/", 1)[-1]
    mapped = {line.split()[-1] for line in open("/proc/self/maps") if "libpq" in line}
    assert any(Path(m).resolve() == Path(bound).resolve() for m in mapped)
    module = sys.modules[psycopg.pq.PGconn.__module__].__file__
    with pytest.raises(RuntimeError, match="PQsendQuery not found"):
        fastloop._fastloop.bind(fastloop._fastloop.__file__, psycopg.pq.version())
    with pytest.raises(RuntimeError, match="psycopg reports"):
        fastloop._fastloop.bind(module, psycopg.pq.version() + 1)
    with pytest.raises(RuntimeError, match="not loaded"):
        fastloop._fastloop.bind("/nonexistent/pq.so", psycopg.pq.version())
    assert fastloop._fastloop.bind(module, psycopg.pq.version()) == bound


def test_an_extension_built_from_other_sources_is_refused_not_called(monkeypatch):
    """A stand-in for a stale build (an editable install whose Python code moved on while its .so did not): the
    loop it would run takes other arguments, so `auto` falls back to the Python loop and `compiled` says why."""
    if fastloop._fastloop is None:
        pytest.skip("the extension is not built here")
    assert fastloop._fastloop.INTERFACE == fastloop.INTERFACE  # the real build matches its sources
    stale = type("Stale", (), {"bind": staticmethod(fastloop._fastloop.bind)})  # no INTERFACE: built before it
    monkeypatch.setattr(fastloop, "_fastloop", stale)
    monkeypatch.setattr(fastloop, "_bound", [])
    assert "built from other sources" in fastloop.unavailable("postgres")
    assert fastloop.resolve("auto", "postgres") == "python"
    with pytest.raises(RunError, match="rebuild it with `pip install -e .`"):
        fastloop.resolve("compiled", "postgres")
