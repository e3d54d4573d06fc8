"""SQL Server observers by the background kinds scenarios use: an Extended Events session
(`xevents.py`) and a server-side SQL Trace (`sqltrace.py`); what they share is in `mssql_common.py`."""

from __future__ import annotations

from .sqltrace import SHOWPLAN_XML_STATISTICS_PROFILE, SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS, SqlTrace
from .xevents import XEventSession

__all__ = ["OBSERVERS", "SHOWPLAN_XML_STATISTICS_PROFILE", "SHOWPLAN_XML_STATISTICS_PROFILE_COLUMNS", "SqlTrace",
           "XEventSession"]

OBSERVERS = {XEventSession.kind: XEventSession, SqlTrace.kind: SqlTrace}
