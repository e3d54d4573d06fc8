"""Where a pool's worker processes come from: forks of one fork server that imported the load loop once,
named concurbench-w0, -w1, ... for ps and top, and given what they need as arguments (the parent's
environment as it is now, not as it was when the fork server started)."""

from __future__ import annotations

import psutil
import pytest
from processes import is_worker

from concurbench.scenario.model import Pool, Statement
from concurbench.workload import fastloop
from concurbench.workload.pool import LoadGenerator

pytestmark = pytest.mark.integration


class Look:
    """A progress callback that notes the worker processes it sees while the window runs."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, int]] = {}

    def __call__(self, info) -> None:
        for proc in psutil.Process().children(recursive=True):
            if is_worker(proc):
                self.seen[proc.pid] = (proc.name(), proc.ppid())


def test_workers_are_named_forks_of_one_fork_server_that_lasts(server):
    looks = []
    for _ in range(2):
        look = Look()
        result = LoadGenerator(server[1].conninfo, [Pool("p", 4, (Statement("one", "SELECT 1"),))], warmup=0,
                               duration=0.5, processes=2, progress=look, tick=0.1).run()
        assert result.pools["p"].transactions > 0 and not result.messages
        looks.append(look.seen)
    for seen in looks:
        assert sorted(name for name, _ in seen.values()) == ["concurbench-w0", "concurbench-w1"]
    parents = {parent for seen in looks for _, parent in seen.values()}
    assert len(parents) == 1 and parents != {psutil.Process().pid}  # one fork server for both runs
    assert "forkserver" in " ".join(psutil.Process(parents.pop()).cmdline())
    assert not [p for p in psutil.Process().children(recursive=True) if is_worker(p)]  # none outlives its run


def test_the_wait_named_after_the_fork_server_started_still_reaches_the_workers(server, compiled, monkeypatch):
    """CONCURBENCH_LOOP_WAIT is read by the parent when a pool runs and handed to the workers: here the fork
    server already runs (the test above, or any earlier pool), and whole-millisecond waits still show."""
    LoadGenerator(server[1].conninfo, [Pool("p", 1, (Statement("one", "SELECT 1"),))], warmup=0, duration=0.1).run()
    monkeypatch.setenv(fastloop.WAIT_ENV, "epoll_wait")
    pool = Pool("timed", 2, (Statement("one", "SELECT 1"),), rate=1000.0, arrivals="fixed")
    stats = LoadGenerator(server[1].conninfo, [pool], warmup=0.1, duration=0.8, loop="compiled").run().pools["timed"]
    assert stats.transactions >= 700 and stats.lag.mean_ms() > 0.3  # half a millisecond late on average
