"""Whether a rate-driven pool kept its schedule, and the warning when it fell behind.

A pool with `rate:` offers its transactions on a schedule; a session that is free takes the next one
due. When the sessions cannot keep up, the transactions due wait for a free session, the lag
(first send minus due time) grows through the window, and the latencies, timed from when each
transaction was due, measure that queue more than the server. The pool fell behind when it handled
(completed, failed or skipped under `latency_limit`) fewer transactions than its schedule offered in
the window, by more than chance and the transactions still in flight at the end allow: at least
SHORTFALL of them and three standard deviations of a Poisson count of the offered number.
"""

from __future__ import annotations

import math

from ..scenario.model import Pool
from .schedule import segments
from .stats import PoolStats

SHORTFALL = 0.05  # the share of the offered transactions a pool may leave unhandled before it is behind
SIGMAS = 3.0  # Poisson arrivals: how far below the offered count chance may bring the handled one


def offered(pool: Pool, elapsed_s: float) -> float:
    """Transactions the pool's timeline offered in the window's first `elapsed_s` seconds (rate segments only)."""
    end = elapsed_s * 1e9
    segs = segments(pool)
    total = 0.0
    for k, (start, rate, clients) in enumerate(segs):
        stop = min(segs[k + 1][0], end) if k + 1 < len(segs) else end
        begin = max(start, 0)
        if rate and clients and stop > begin:
            total += rate * (stop - begin) / 1e9
    return total


def behind(pool: Pool, stats: PoolStats, elapsed_s: float) -> str | None:
    """The warning for a rate-driven pool that fell behind its schedule in the window, or None."""
    if elapsed_s <= 0 or not pool.paced:
        return None
    due = offered(pool, elapsed_s)
    handled = stats.transactions + stats.failed + stats.skipped
    if due - handled <= max(SHORTFALL * due, SIGMAS * math.sqrt(due)) + (pool.clients or 0):
        return None
    mean = stats.lag.mean_ms()
    late = (f"transactions started up to {stats.lag.max_ms() / 1000:,.2f} s after they were due (mean lag "
            f"{mean / 1000:,.2f} s)") if mean is not None else "no transaction started"
    return (f"pool {pool.name} fell behind its rate: offered {due / elapsed_s:,.0f} tps, served "
            f"{stats.transactions / elapsed_s:,.0f} tps; {late}. Its latencies, timed from when each transaction "
            f"was due, measure the queue of transactions waiting for a free session rather than the server "
            f"(give it more clients, or a lower rate)")
