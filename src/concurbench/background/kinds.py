"""The background session of each kind a scenario names."""

from __future__ import annotations

from .hold import HeldTransaction
from .log_drain import LogDrain
from .mssql import OBSERVERS as MSSQL_OBSERVERS


def make_background(spec, conninfo: str, engine, *, remove_files=None):
    """The background part of a variant by its kind (an idle transaction, a log drain, a trace);
    `remove_files` (the provisioner's, when it can remove files on the server) takes an observer's files."""
    if spec.kind == "hold_transaction":
        return HeldTransaction(spec, conninfo, engine=engine)
    if spec.kind == "log_drain":
        return LogDrain(spec, conninfo)
    return MSSQL_OBSERVERS[spec.kind](spec, conninfo, remove_files=remove_files)
