"""The load generator's wait for a CPU: schedstat read, and kept with each variant run."""

import os
import subprocess
import sys
import time

import pytest

from concurbench.results.model import VariantRun
from concurbench.workload.cpu_wait import run_queue_ns, waited_s


def test_run_queue_ns_reads_the_second_field(tmp_path):
    stat = tmp_path / "schedstat"
    stat.write_text("123456 789 42\n")
    assert run_queue_ns(stat) == 789


def test_run_queue_ns_is_none_where_the_kernel_does_not_say(tmp_path):
    assert run_queue_ns(tmp_path / "missing") is None
    (tmp_path / "odd").write_text("nonsense\n")
    assert run_queue_ns(tmp_path / "odd") is None


def test_waited_s_needs_both_readings():
    assert waited_s(1_000_000_000, 3_500_000_000) == 2.5
    assert waited_s(None, 5) is None and waited_s(5, None) is None


@pytest.mark.skipif(run_queue_ns() is None or not hasattr(os, "sched_setaffinity"), reason="Linux's schedstat only")
def test_a_thread_sharing_its_cpu_with_a_busy_loop_waits_for_it():
    """This thread and a busy process pinned to one CPU take turns: for 0.4 s of spinning here, the
    reading grows by a good part of it (the kernel shares the CPU about evenly), and by little alone."""
    cpu = min(os.sched_getaffinity(0))
    before_mask = os.sched_getaffinity(0)
    busy = subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass" % cpu])
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.2)  # the busy loop is pinned and running
        first, end = run_queue_ns(), time.monotonic() + 0.4
        while time.monotonic() < end:
            pass
        waited = (run_queue_ns() - first) / 1e9
    finally:
        os.sched_setaffinity(0, before_mask)
        busy.kill()
        busy.wait()
    assert waited > 0.05


def test_variant_run_keeps_the_waits():
    run = VariantRun("a", "g", None, worker_cpu_s=[1.0, 1.0], worker_wall_s=[2.0, 2.0], worker_wait_s=[0.25, None],
                     pools={})
    data = run.as_dict()
    assert data["worker_wait_s"] == [0.25, None]
    data["pools"] = {"p": {"measure": True, "clients": 1, "metrics": {}}}
    assert VariantRun.from_dict(data, "r").worker_wait_s == [0.25, None]
    del data["worker_wait_s"]  # a run stored before the figure was kept
    assert VariantRun.from_dict(data, "r").worker_wait_s == []
