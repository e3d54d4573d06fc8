"""What a test tier needs from the machine, and what happens without it: a skip that says why on a
machine with Python alone, a failure instead under CI=true (where .ci/run installs everything)."""

from __future__ import annotations

import os

import pytest


def missing(reason: str) -> None:
    """Skip the module (or test) with the reason; fail it instead when CI=true."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a part the tests need is missing: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def import_pyodbc():
    """pyodbc, or `missing` with the reason: not installed, or installed without unixODBC's shared library
    (then its import fails with an ImportError naming libodbc.so.2, which importorskip does not catch)."""
    try:
        import pyodbc
    except ImportError as exc:
        missing(f"pyodbc cannot be imported ({str(exc).splitlines()[0]}): pip install pyodbc, and apt-get install "
                f"unixodbc")
    return pyodbc


def need_compiled() -> None:
    """Skip (with the reason) when the compiled event loop cannot run here; fail instead when CI=true (CI builds it)."""
    from concurbench.workload import fastloop

    why = fastloop.unavailable("postgres")
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the compiled loop cannot run: {why}", pytrace=False)
        pytest.skip(why)


def need_cluster() -> None:
    """Skip (with the reason) when the optional extra concurbench[cluster] is not installed; fail when CI=true (.ci/run
    installs it with the test extra)."""
    from concurbench.cluster.engine import unavailable

    why = unavailable()
    if why:
        missing(why)
