"""The names concurbench gives what it makes on a SQL Server, and how a name is read back to the run that made it.

Every run has an id of RUN_ID_LENGTH hexadecimal digits (`new_run_id`; the dsn target makes one per run, the
docker target takes the first digits of its container's run id), and every name it makes carries it, so two
runs on one server never take each other's objects for their own:

- an observer's key is `<run id>_<observer>`: its Extended Events session `concurbench_<key>`, its SQL Trace's
  files `concurbench-<key>-<UTC time>.trc`, and the program name of its sessions `concurbench:observer:<key>`;
- the temporary database of a dsn run that names none: `concurbench_<run id>`;
- the run's record, the extended property `concurbench_run_<run id>` of the run's database: which process on
  which machine runs it (mssql_guards.change_note), by which a later run of the same machine, or gc, tells that
  the run is gone and what it left.
"""

from __future__ import annotations

import re
import uuid

RUN_ID_LENGTH = 8
_RUN_ID = re.compile(r"[0-9a-f]{%d}" % RUN_ID_LENGTH)
XE_PREFIX = "concurbench_"
TRACE_PREFIX = "concurbench-"
OBSERVER_PROGRAM = "concurbench:observer:"
RUN_PROPERTY = "concurbench_run_"
DATABASE_PREFIX = "concurbench_"


def new_run_id() -> str:
    return uuid.uuid4().hex[:RUN_ID_LENGTH]


def observer_key(run_id: str, observer: str) -> str:
    """`<run id>_<observer>` (the observer's name alone where the run has no id: a test, the Python API)."""
    return f"{run_id}_{observer}" if run_id else observer


def xe_session(key: str) -> str:
    return XE_PREFIX + key


def trace_prefix(key: str) -> str:
    return TRACE_PREFIX + key


def observer_program(key: str) -> str:
    return OBSERVER_PROGRAM + key


def run_database(run_id: str) -> str:
    return DATABASE_PREFIX + run_id


def run_property(run_id: str) -> str:
    return RUN_PROPERTY + run_id


def run_of(key: str) -> str | None:
    """The run id an observer's key (or a database's name after `concurbench_`) starts with, or None."""
    head = key.split("_", 1)[0]
    return head if _RUN_ID.fullmatch(head) else None


def run_of_property(name: str) -> str | None:
    """The run id of a run record's name (`concurbench_run_<run id>`), or None."""
    if not name.startswith(RUN_PROPERTY):
        return None
    rest = name[len(RUN_PROPERTY):]
    return rest if _RUN_ID.fullmatch(rest) else None
