"""The processes a test's runs started: found by the tag the test puts in their environment, or as worker
processes by their name."""

from __future__ import annotations

import psutil


def tagged(tag: str) -> set[int]:
    """Live (not zombie) processes whose environment carries CONCURBENCH_TEST_TAG=tag: CLI, workers, servers."""
    found = set()
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and proc.environ().get("CONCURBENCH_TEST_TAG") == tag:
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


def is_worker(proc: psutil.Process) -> bool:
    """A live worker process of a pool (pool.py names them concurbench-w0, -w1, ...)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE and proc.name().startswith("concurbench-w")
    except psutil.Error:
        return False
