"""What a run on a SQL Server concurbench does not own checks and leaves behind around its changes: who else is
in the run's database before a change that needs the database to itself, and the record of a global trace
flag the run turned on.

READ_COMMITTED_SNAPSHOT and ACCELERATED_DATABASE_RECOVERY need the database to themselves ("there must
be no active connections to the database except for the connection executing the ALTER DATABASE
command"). `guard_sessions` refuses them while a session that is not concurbench's (its program name
does not start with `concurbench`) is in the database, naming it; `termination` says how the statement
ends (`sees_all_sessions`): `WITH ROLLBACK IMMEDIATE` only when the login can see every session (VIEW
SERVER STATE), which the guard then found to be concurbench's, else `WITH NO_WAIT`, which fails instead
of waiting or disconnecting anyone.

A server-wide change on a server concurbench does not own (an sp_configure option; global trace flags
are no longer turned on there, but records of older runs' are still read) is recorded first, as an
extended property of the run's database (`recorded`: who made it, and for an option its value before
and after), and the record goes when the change is undone; a run killed in between leaves the record,
by which `concurbench gc --target dsn` knows the change was concurbench's and how to undo it
(provisioners/mssql_sweep.py). A database holding such a record is never dropped by concurbench
(`records_in`): the dsn provisioner keeps it and says to run gc, which puts the change back first, and a
run that adopts the database puts back what a record of a run that is gone says before anything else.

Sources (Microsoft Learn): ALTER DATABASE SET options (READ_COMMITTED_SNAPSHOT; WITH <termination>:
ROLLBACK IMMEDIATE, NO_WAIT "the request will fail if the requested database state or option change
can't complete immediately"); sys.dm_exec_sessions (database_id, program_name, is_user_process; a login
without VIEW SERVER STATE sees only its own session); HAS_PERMS_BY_NAME; sp_addextendedproperty,
sp_dropextendedproperty and sys.extended_properties (class 0: the database itself).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from .quoting import tsql_literal
from ..errors import ProvisionError
from .mssql_config import Change


# -- who else is in the database -----------------------------------------------------------------------------
OTHER_SESSIONS = ("SELECT session_id, login_name, host_name, program_name FROM sys.dm_exec_sessions "
                  "WHERE database_id = DB_ID(?) AND session_id <> @@SPID AND is_user_process = 1 ORDER BY session_id")
SEES_ALL_SESSIONS = ("SELECT CASE WHEN HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') = 1 OR "
                     "HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER PERFORMANCE STATE') = 1 THEN 1 ELSE 0 END")
OURS = "concurbench"  # every session concurbench opens names its program so (APP=concurbench...)


@dataclass(frozen=True)
class Session:
    session_id: int
    login: str
    host: str
    program: str

    @property
    def ours(self) -> bool:
        return self.program.startswith(OURS)

    def __str__(self) -> str:
        return f"session {self.session_id} (login {self.login}, host {self.host or '?'}, program {self.program or '?'})"


def sessions_in(conn, database: str) -> list[Session]:
    """The other user sessions in `database` (all of them only for a login with VIEW SERVER STATE)."""
    return [Session(int(r[0]), str(r[1] or ""), str(r[2] or ""), str(r[3] or ""))
            for r in conn.execute(OTHER_SESSIONS, database).fetchall()]


def sees_all_sessions(conn) -> bool:
    """Whether the login sees every session: then a change that needs the database to itself may end WITH ROLLBACK
    IMMEDIATE once guard_sessions found only concurbench's in it; otherwise it ends WITH NO_WAIT and fails rather
    than disconnect anyone."""
    row = conn.execute(SEES_ALL_SESSIONS).fetchone()
    return bool(row and row[0])


def guard_sessions(conn, database: str, changes: list[Change], doing: str = "make") -> None:
    """Refuse changes that need the database to themselves while a session that is not concurbench's is in it."""
    exclusive = [c for c in changes if c.exclusive]
    if not exclusive:
        return
    others = [s for s in sessions_in(conn, database) if not s.ours]
    if others:
        raise ProvisionError(
            f"concurbench will not {doing} {'; '.join(c.what for c in exclusive)}: it needs database {database} to "
            f"itself, and {'; '.join(map(str, others))} {'is' if len(others) == 1 else 'are'} in it, which "
            f"concurbench did not open and will not disconnect (no ROLLBACK IMMEDIATE); wait for "
            f"{'it' if len(others) == 1 else 'them'} to leave and run again")


# -- the record of a server-wide change --------------------------------------------------------------------
FLAG_PROPERTY = "concurbench_trace_flag_"  # + the flag number: an extended property of the run's database
CONFIGURE_PROPERTY = "concurbench_configure:"  # + the sp_configure option's name; value "old -> new; note"
# The records of server-wide changes in the connection's database (the LIKE patterns escape `_` as [_]).
RECORDS = ("SELECT CAST(name AS nvarchar(128)) AS name, CAST(value AS nvarchar(4000)) AS value "
           "FROM sys.extended_properties WHERE class = 0 AND (name LIKE N'concurbench[_]trace[_]flag[_]%' "
           "OR name LIKE N'concurbench[_]configure:%') ORDER BY name")
_NOTE = re.compile(r"pid (\d+) on (\S+) at (\S+)")
_SETTING = re.compile(r"^(-?\d+) -> (-?\d+); ")


def change_note(now: datetime | None = None) -> str:
    """What a record says: which process on which machine made the change, and when (gc tells by it whether that
    run still lives)."""
    when = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"made by concurbench pid {os.getpid()} on {socket.gethostname()} at {when}"


def parse_note(text: str | None) -> tuple[int, str, str] | None:
    """(pid, host, when) of a record's text, or None when it is not one."""
    m = _NOTE.search(text or "")
    return (int(m.group(1)), m.group(2), m.group(3)) if m else None


def records_in(conn) -> list[tuple[str, str]]:
    """(name, text) of each record of a server-wide change in the connection's database."""
    return [(str(r[0]), str(r[1] or "")) for r in conn.execute(RECORDS).fetchall()]


def parse_setting(text: str | None) -> tuple[int, int] | None:
    """(old, new) of an sp_configure record's text."""
    m = _SETTING.match(text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def record(name: str, text: str) -> list[str]:
    """Statements in the run's database that record a change (replacing a stale record of the same name)."""
    return unrecord(name) + [f"EXEC sys.sp_addextendedproperty @name = {tsql_literal(name)}, @value = {tsql_literal(text)}"]


def unrecord(name: str) -> list[str]:
    return [f"IF EXISTS (SELECT 1 FROM sys.extended_properties WHERE class = 0 AND name = {tsql_literal(name)}) "
            f"BEGIN EXEC sys.sp_dropextendedproperty @name = {tsql_literal(name)} END"]


def recorded(change: Change, note: str) -> Change:
    """A server-wide change (a global trace flag, an sp_configure option) that leaves a record while it is made, by
    which gc finds and undoes a killed run's."""
    if change.flag is not None:
        name, text = f"{FLAG_PROPERTY}{int(change.flag)}", note
    elif change.setting is not None:
        option, old, new = change.setting
        name, text = f"{CONFIGURE_PROPERTY}{option}", f"{old} -> {new}; {note}"
    else:
        return change
    return replace(change, apply=record(name, text) + change.apply, undo=change.undo + unrecord(name))
