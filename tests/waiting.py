"""Waiting for something a test caused, by polling with a deadline (never a bare sleep)."""

from __future__ import annotations

import time


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Poll `predicate` until it returns something true, or the deadline; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
