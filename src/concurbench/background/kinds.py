"""The background session of each kind a scenario names (one maker per BackgroundKind in MAKERS), and the
timeline events they recorded."""

from __future__ import annotations

from typing import Callable

from ..scenario.model import BackgroundKind
from ..workload.events import Event
from .hold import HeldTransaction
from .log_drain import LogDrain
from .mssql import OBSERVERS as MSSQL_OBSERVERS
from .mssql_common import ObserverScope
from .statement import TimedStatement


def _held(spec, conninfo: str, engine, **_) -> HeldTransaction:
    return HeldTransaction(spec, conninfo, engine=engine)


def _statement(spec, conninfo: str, engine, **_) -> TimedStatement:
    return TimedStatement(spec, conninfo, engine=engine)


def _drain(spec, conninfo: str, engine, **_) -> LogDrain:
    return LogDrain(spec, conninfo)


def _observer(kind: BackgroundKind) -> Callable:
    """A SQL Server observer (Extended Events, SQL Trace): it may remove its files, bounds its own life, and runs in
    the scope it is given."""
    def make(spec, conninfo: str, engine, *, remove_files=None, lifetime_s: float | None = None,
             scope: ObserverScope | None = None):
        return MSSQL_OBSERVERS[kind](spec, conninfo, remove_files=remove_files, lifetime_s=lifetime_s, scope=scope)
    return make


MAKERS: dict[BackgroundKind, Callable] = {
    BackgroundKind.HOLD_TRANSACTION: _held, BackgroundKind.STATEMENT: _statement, BackgroundKind.LOG_DRAIN: _drain,
    **{kind: _observer(kind) for kind in MSSQL_OBSERVERS}}


def make_background(spec, conninfo: str, engine, *, remove_files=None, lifetime_s: float | None = None,
                    scope: ObserverScope | None = None):
    """The background part of a variant by its kind (an idle transaction, a log drain, a trace);
    `remove_files` (the provisioner's, when it can remove files on the server) takes an observer's files;
    `lifetime_s` (the window's planned length) bounds how long an observer may run by itself if the harness dies;
    `scope` says where an observer runs (the run's id, a server concurbench does not own)."""
    return MAKERS[spec.kind](spec, conninfo, engine, remove_files=remove_files, lifetime_s=lifetime_s, scope=scope)


def background_events(sessions) -> list[Event]:
    """The timeline events of a variant's background sessions (kinds that record none give none)."""
    return [e for bg in sessions for e in bg.timeline()]
