"""A warm-up pass: the variant's own transactions before its measured load, in a run of their own.

A variant with `warmup_transactions: N` first runs every measured pool with each client doing N
transactions, closed loop (no rate, timeline or phases), without samplers, background sessions or
probes, and then starts the measured load. It is for variants whose load is a fixed number of
transactions, which have no warm-up inside their window (`warmup:` would take from the count): an arm
that starts seconds after the server restarted (tempdb-gam-contention's, when memory-optimized
tempdb metadata changes) would otherwise measure a cold buffer pool, an empty plan cache and a new
tempdb, while an arm on a server that just ran something else would not. Every run of the variant
gets the same pass, whether or not the server restarted before it; what it did is recorded in the
variant run (`warmup_pass`), with `after_restart`. Its parameters are drawn from a seed of their own,
so the measured load does not replay them. Nothing it does is undone: it runs after the variant's
setup and before its `before` probes.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from ..results.model import RunStatus, WarmupPass
from ..scenario.model import Pool
from ..workload.pool import LoadGenerator

SEED_OFFSET = 7919  # the pass's draws differ from the measured load's


def warm_pools(pools: list[Pool], count: int) -> list[Pool]:
    """The measured pools (clients resolved) as the pass runs them: `count` transactions per client, closed loop."""
    return [replace(p, transactions=count, rate=None, phases=(), start_after=None, stop_after=None,
                    latency_limit=None) for p in pools if p.measure]


def warm_up(conninfo: str, pools: list[Pool], count: int, *, engine: str, seed: int, processes: int | None,
            after_restart: bool, load: Callable[..., LoadGenerator] = LoadGenerator) -> WarmupPass:
    """Run the pass with `load` (the runner's load generator) and say what it did: transactions, failed ones,
    seconds, whether the server had just restarted. The load generator's own errors (sessions that cannot
    connect) are raised, as for the measured load."""
    warm = warm_pools(pools, count)
    began = time.monotonic()
    outcome = load(conninfo, warm, warmup=0.0, duration=0.0, seed=seed + SEED_OFFSET, processes=processes,
                   engine=engine).run()
    return WarmupPass(count, sum(s.transactions for s in outcome.pools.values()),
                      sum(s.failed for s in outcome.pools.values()), round(time.monotonic() - began, 3), after_restart,
                      RunStatus.INTERRUPTED if outcome.interrupted else (
                          RunStatus.OK if outcome.complete and not outcome.stopped else RunStatus.INCOMPLETE))
