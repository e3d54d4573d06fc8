"""The background session of each kind a scenario names, and the timeline events they recorded."""

from __future__ import annotations

from ..workload.events import Event
from .hold import HeldTransaction
from .log_drain import LogDrain
from .mssql import OBSERVERS as MSSQL_OBSERVERS
from .mssql_common import ObserverScope
from .statement import TimedStatement


def make_background(spec, conninfo: str, engine, *, remove_files=None, lifetime_s: float | None = None,
                    scope: ObserverScope | None = None):
    """The background part of a variant by its kind (an idle transaction, a log drain, a trace);
    `remove_files` (the provisioner's, when it can remove files on the server) takes an observer's files;
    `lifetime_s` (the window's planned length) bounds how long an observer may run by itself if the harness dies;
    `scope` says where an observer runs (the run's id, a server concurbench does not own)."""
    if spec.kind == "hold_transaction":
        return HeldTransaction(spec, conninfo, engine=engine)
    if spec.kind == "statement":
        return TimedStatement(spec, conninfo, engine=engine)
    if spec.kind == "log_drain":
        return LogDrain(spec, conninfo)
    return MSSQL_OBSERVERS[spec.kind](spec, conninfo, remove_files=remove_files, lifetime_s=lifetime_s, scope=scope)


def background_events(sessions) -> list[Event]:
    """The timeline events of a variant's background sessions (kinds that record none give none)."""
    return [e for bg in sessions for e in bg.timeline()]
