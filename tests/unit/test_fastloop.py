"""The compiled loop's Python side, without a server: choosing the loop, the simple protocol's
pieces, and sessions of one pool sharing their statistics in a worker. A test that needs the
extension skips with the reason where it cannot run, and fails instead under CI=true."""

from __future__ import annotations

from pathlib import Path

import pytest
from needs import need_compiled

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

    need_compiled()
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


def test_a_missing_compiled_loop_skips_its_tests_with_the_reason_and_fails_them_under_ci(monkeypatch):
    """A stand-in for a machine without the extension (unavailable() made to say why): the parity tests skip there
    with the reason, and fail instead when CI=true, where .ci/run builds the extension."""
    monkeypatch.setattr(fastloop, "unavailable", lambda engine: "not built")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not built"):
        need_compiled()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the compiled loop cannot run: not built"):
        need_compiled()


def _session(**dists) -> Session:
    from concurbench.scenario.distributions import Distribution, parse_distribution

    params = tuple((name, d if isinstance(d, Distribution) else parse_distribution(d)) for name, d in dists.items())
    return Session("", Pool("p", 4, (Statement("one", "SELECT 1"),), params=params), 2, 7, [0] * 4, 2)


@pytest.mark.parametrize("low, high", [(1, 10), (-5000, 5000), (1, 1 << 32), (0, 1 << 32), (1, 100_000),
                                       (-(1 << 40), 1 << 40), (-(1 << 63), (1 << 63) - 2), (3, 3)])
def test_the_compiled_loop_draws_uniform_parameters_as_python_does(low, high):
    """The C loop continues the session's random.Random: the same texts, transaction for transaction, as the
    Python drawers, for spans below, at and above 32 bits, negative bounds and a span of one."""
    from concurbench.engines import postgres as pg
    from concurbench.scenario.distributions import Distribution

    need_compiled()
    s = _session(a=f"uniform({low}, {high})", b=Distribution("constant", ("O'Brien",)), c="uniform(1, 10)")
    spec = fastloop.draw_spec(s)
    assert spec is not None and [d[0] for d in spec[1]] == [0, 1, 0]
    got = fastloop._fastloop.draws(spec, 2000)  # more than one twister block (624 words)
    want = [tuple(pg._text(draw()) for _name, draw in s.drawers) for _ in range(2000)]
    assert got == want
    assert {row[1] for row in got} == {b"O'Brien"}
    if high - low < 100:
        assert {int(row[0]) for row in got} == set(range(low, high + 1))


def test_python_draws_when_any_parameter_needs_it():
    """zipfian and sequence draws stay in Python for the whole session (they share its generator and order)."""
    assert fastloop.draw_spec(_session(a="uniform(1, 10)", b="zipfian(1, 50, 1.2)")) is None
    assert fastloop.draw_spec(_session(a="uniform(1, 10)", b="sequence(1)")) is None
    assert fastloop.draw_spec(_session()) is None
    assert fastloop.draw_spec(_session(a="uniform(0, 18446744073709551615)")) is None  # beyond 64-bit integers
    spec = fastloop.draw_spec(_session(a="constant(5)"))
    assert spec == (None, ((1, 0, 0, 0, b"5"),))  # no uniform draw: no generator state


def test_a_malformed_draw_spec_is_refused():
    need_compiled()
    state, draws = fastloop.draw_spec(_session(a="uniform(1, 10)"))
    with pytest.raises(ValueError, match="position"):
        fastloop._fastloop.draws((state[:-1] + (625,), draws), 1)
    with pytest.raises(ValueError, match="getstate"):
        fastloop._fastloop.draws((state[:10], draws), 1)
    with pytest.raises(ValueError, match="twister state"):
        fastloop._fastloop.draws((None, draws), 1)
