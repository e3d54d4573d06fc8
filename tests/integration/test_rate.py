"""Rate-driven and timed pools against a real PostgreSQL, once with each event loop.

A pool with `rate:` sends on a schedule and times each transaction from when it was due, so a server
slower than the rate shows its backlog in the latencies; `latency_limit:` counts the late and the
skipped; `start_after:`, `stop_after:` and `phases:` shape the pool's load over the window and leave
their times in the results. Windows are a second or less: these are behaviour checks, not benchmarks.
"""

from __future__ import annotations

import pytest

from concurbench.results.metrics import nested, pool_figures
from concurbench.scenario.model import Phase, Pool, Statement
from concurbench.workload import fastloop
from concurbench.workload.pool import LoadGenerator

pytestmark = pytest.mark.integration


def run(server, pool: Pool, loop: str, duration: float):
    result = LoadGenerator(server[1].conninfo, [pool], warmup=0.1, duration=duration, loop=loop,
                           processes=1).run()
    assert result.loop == loop and result.complete
    return result, result.pools[pool.name]


def pool(sql: str = "SELECT 1", clients: int = 2, **kw) -> Pool:
    return Pool("p", clients, (Statement("s", sql),), **kw)


def per_half(stats, elapsed: float) -> tuple[int, int]:
    """Transactions completed in the first and the second half of the window."""
    counts = stats.series.count
    half = int(round(elapsed / 2 / 0.1))
    return int(counts[:half].sum()), int(counts[half:].sum())


def test_a_rate_is_kept_and_its_lag_reported_apart(server, loop):
    result, stats = run(server, pool(rate=200.0, arrivals="fixed"), loop, 1.0)
    assert 180 <= stats.transactions <= 210  # 200/s over 1 s, one arrival every 5 ms
    metrics = nested(pool_figures(stats, result.elapsed_s))
    assert metrics["late"] == 0 and metrics["skipped"] == 0
    assert metrics["lag"]["mean_ms"] is not None and metrics["lag"]["mean_ms"] < 5
    assert stats.lag.count == stats.transactions
    assert result.events == []  # a rate alone has no timeline


# A wait for a due time rounded up to whole milliseconds, as both loops' waits were before, adds half a millisecond
# to the lag's mean by itself, however quiet the machine. benchmarks/rate_lag.py measured a lag mean of 0.07 ms
# (compiled loop) and 0.10 ms (Python loop) at 1,000/s over 8 clients on a two-core VM, 0.1-0.3 ms in rounds beside
# other heavy work, and 0.52-0.55 ms for both loops when they rounded (docs/load-generator.md). The bound lies
# between them; a busy machine can push one window past it, so the test takes the best of three.
LAG_MEAN_BOUND_MS = 0.45


def best_lag_mean(server, loop: str) -> float:
    """The lowest lag mean of up to three 1 s windows at 1,000/s over 4 clients (stops at one under the bound)."""
    means = []
    for _attempt in range(3):
        _result, stats = run(server, pool("SELECT 1", clients=4, rate=1000.0), loop, 1.0)
        assert stats.lag.count == stats.transactions > 800
        means.append(stats.lag.mean_ms())
        if means[-1] < LAG_MEAN_BOUND_MS:
            break
    return min(means)


def test_a_rate_of_1000_a_second_is_sent_within_a_fraction_of_a_millisecond_of_its_due_times(server, loop):
    assert best_lag_mean(server, loop) < LAG_MEAN_BOUND_MS


@pytest.mark.parametrize("wait", ["timerfd", "epoll_wait"])
def test_the_compiled_loops_fallback_waits_keep_the_rate(server, compiled, monkeypatch, wait):
    """The waits the compiled loop falls back to where epoll_pwait2 does not work, named for the worker processes
    (the parent reads it and hands it to them): a timerfd keeps the due times as precisely, whole milliseconds do not."""
    monkeypatch.setenv(fastloop.WAIT_ENV, wait)
    if wait == "timerfd":
        assert best_lag_mean(server, "compiled") < LAG_MEAN_BOUND_MS
        return
    _result, stats = run(server, pool("SELECT 1", clients=4, rate=1000.0, arrivals="fixed"), "compiled", 1.0)
    assert stats.transactions >= 900 and stats.lag.count == stats.transactions
    assert stats.lag.mean_ms() > 0.3  # a wait rounded up to a millisecond: half of one late on average


def test_latency_runs_from_the_scheduled_start_when_the_server_falls_behind(server, loop):
    # two clients at 50 ms a transaction serve 40/s of the 100/s due: the backlog grows through the
    # window, and every transaction is timed from when it was due, not from when a client got to it
    _result, stats = run(server, pool("SELECT pg_sleep(0.05)", rate=100.0, arrivals="fixed"), loop, 1.0)
    assert stats.transactions <= 45
    assert stats.txn.max_ms() > 400  # a closed loop would show 50 ms
    assert stats.lag.max_ms() > 350


def test_latency_limit_counts_late_and_skipped_transactions(server, loop):
    limit = 0.1
    result, stats = run(server, pool("SELECT pg_sleep(0.05)", rate=100.0, arrivals="fixed", latency_limit=limit),
                        loop, 1.0)
    assert stats.skipped > 20  # ~100 due, ~40 served: those already 100 ms late are never sent
    assert stats.late > 0
    assert stats.lag.max_ms() <= limit * 1000 + 20  # nothing is sent later than the limit (plus a poll)
    metrics = nested(pool_figures(stats, result.elapsed_s))
    assert metrics["skipped"] == stats.skipped and metrics["late"] == stats.late


def test_start_after_and_stop_after_bound_the_pool_and_are_kept_as_events(server, loop):
    result, stats = run(server, pool("SELECT pg_sleep(0.005)", start_after=0.3, stop_after=0.6), loop, 0.9)
    counts = stats.series.count
    assert counts[:3].sum() == 0 and counts[3:6].sum() > 10
    assert counts[7:].sum() == 0  # a transaction in flight at 0.6 s may end in the next bucket, none later
    assert [e.as_dict() for e in result.events] == [
        {"t_s": 0.3, "source": "pool:p", "kind": "start", "detail": "clients 2"},
        {"t_s": 0.6, "source": "pool:p", "kind": "stop", "detail": "stopped"}]


def test_rate_phases_change_the_rate_at_their_boundaries(server, loop):
    phases = (Phase(0.5, rate=60.0), Phase(0.5, rate=240.0))
    result, stats = run(server, pool(clients=3, phases=phases, arrivals="fixed"), loop, 1.0)
    first, second = per_half(stats, 1.0)
    assert 22 <= first <= 34 and 100 <= second <= 125
    assert [(e.t_s, e.kind, e.detail) for e in result.events] == [
        (0.0, "phase", "phase 1: rate 60/s"), (0.5, "phase", "phase 2: rate 240/s"), (1.0, "stop", "stopped")]


def test_client_phases_change_the_active_sessions(server, loop):
    phases = (Phase(0.4, clients=1), Phase(0.4, clients=4))
    result, stats = run(server, pool("SELECT pg_sleep(0.01)", clients=4, phases=phases), loop, 0.8)
    first, second = per_half(stats, 0.8)
    assert second >= 2.5 * first > 0
    assert [e.detail for e in result.events] == ["phase 1: clients 1", "phase 2: clients 4", "stopped"]
