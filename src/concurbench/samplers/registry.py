"""Samplers by the names scenarios use. Adding one is a class and a line here."""

from __future__ import annotations

from .base import Sampler
from .mssql import MSSQL_SAMPLERS
from .postgres import Checkpointer, DatabaseCounters, Io, MultiXact, TableStats, Wal, WaitEvents

SAMPLERS: dict[str, type[Sampler]] = {
    cls.name: cls for cls in (WaitEvents, DatabaseCounters, Wal, MultiXact, TableStats, Io, Checkpointer,
                              *MSSQL_SAMPLERS)
}


def build(specs) -> list[Sampler]:
    return [SAMPLERS[spec.name](spec) for spec in specs]
