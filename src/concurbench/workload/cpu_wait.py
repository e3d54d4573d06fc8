"""How long a thread of the load generator waited for a CPU, and how many CPUs others use.

`/proc/thread-self/schedstat` holds three numbers for the calling thread: nanoseconds on a CPU,
nanoseconds runnable but waiting on a run queue, and the times it ran. A worker reads the second
before and after its load loop (one thread steps every session, so that thread is the worker): the
difference is how long the loop was ready to go on while another task had the CPU: a neighbour's, or
the backends' of the server being measured, which on two cores take as much from the workers as a CPU
hog does (results/machine.py has the figures; benchmarks/rate_lag.py reads the same for every thread).

What other processes use shows while the run's own load is idle: `cpus_in_use` reads the machine's
busy and total ticks (/proc/stat) around a short pause.
"""

from __future__ import annotations

import time
from pathlib import Path

SCHEDSTAT = Path("/proc/thread-self/schedstat")


def run_queue_ns(path: Path = SCHEDSTAT) -> int | None:
    """Nanoseconds the calling thread has waited on a run queue since it started; None where the kernel
    does not say (not Linux, or a kernel built without schedstat)."""
    try:
        return int(path.read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def waited_s(before: int | None, after: int | None) -> float | None:
    """Seconds waited for a CPU between two readings of run_queue_ns, or None when either is missing."""
    if before is None or after is None:
        return None
    return max(0, after - before) / 1e9


PROC_STAT = Path("/proc/stat")
PAUSE_S = 0.25  # how long a run looks at the machine while its own load is idle


def cpu_ticks(path: Path = PROC_STAT) -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot from /proc/stat's first line (idle and iowait are
    not busy); None where there is no such file."""
    try:
        fields = [int(x) for x in path.read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return total - idle, total


def cpus_in_use(cpus: int, pause_s: float = PAUSE_S, sleep=None, read=cpu_ticks) -> float | None:
    """CPUs in use on the whole machine over a pause of `pause_s` in which the caller does nothing: called
    while a run's own load is idle, what other processes use. None where /proc/stat cannot be read."""
    before = read()
    (sleep or time.sleep)(pause_s)
    after = read()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(cpus * (after[0] - before[0]) / (after[1] - before[1]), 2)
