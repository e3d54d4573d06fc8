"""The compiled loop's Python side, without a server: choosing the loop, the simple protocol's
pieces, and sessions of one pool sharing their statistics in a worker."""

from __future__ import annotations

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
