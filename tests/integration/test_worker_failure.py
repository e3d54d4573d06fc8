"""A worker whose load loop raises (a bug, or an extension built for other code) stops the run with the
error, instead of handing back a window with nothing in it as if it had run. The worker runs in this
process so the loop can be replaced; its sessions connect to the real server."""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import time

import pytest

from concurbench.scenario.model import Pool, Statement
from concurbench.workload import pool as pool_module
from concurbench.workload.pool import _SessionSpec, _worker

pytestmark = pytest.mark.integration


def test_a_load_loop_that_raises_stops_the_run_with_its_error(server, monkeypatch):
    def broken(sessions, window, status, finished, **loop_options):
        raise TypeError("function takes exactly 10 arguments (14 given)")

    monkeypatch.setattr(pool_module, "_loop", broken)
    previous = signal.getsignal(signal.SIGINT)  # the worker ignores Ctrl-C; this process must not
    pool = Pool(name="p", clients=2, transaction=(Statement("one", "SELECT 1"),))
    specs = [_SessionSpec(pool, i, i) for i in range(2)]
    window, counters, status, finished = mp.RawArray("q", 3), mp.RawArray("q", 2), mp.RawArray("b", 2), mp.RawArray("q", 2)
    window[0] = window[1] = time.perf_counter_ns()
    results: queue.Queue = queue.Queue()
    try:
        _worker(server[1].conninfo, "postgres", specs, 1, window, counters, status, finished, results, "python")
    finally:
        signal.signal(signal.SIGINT, previous)
    report = results.get_nowait()
    assert report["stopped"] == "a worker's load loop failed: TypeError: function takes exactly 10 arguments (14 given)"
