"""Waiting for something a test caused, by polling with a deadline (never a bare sleep)."""

from __future__ import annotations

import time


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    """Whether `predicate()` became true within `timeout` seconds (asked every `interval` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
