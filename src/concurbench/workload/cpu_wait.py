"""How long a thread of the load generator waited for a CPU: the kernel's schedstat of the thread.

`/proc/thread-self/schedstat` holds three numbers for the calling thread: nanoseconds on a CPU,
nanoseconds runnable but waiting on a run queue, and the times it ran. A worker reads the second
before and after its load loop (one thread steps every session, so that thread is the worker): the
difference is how long the loop was ready to go on while another task had the CPU. On a quiet machine
that is the server's backends taking turns with the workers; beside a neighbour that keeps a CPU busy
it grows (benchmarks/rate_lag.py reads the same figure for every thread of a pool run).
"""

from __future__ import annotations

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
