"""A database of concurbench's own on a server it does not own (`--target dsn`), for both engines.

A scenario's setup drops and creates objects with common names (`accounts`, `payments`), so on a
server concurbench does not own it runs only in a database that is its own: one it creates (the
DSN names no database), one that carries its marker, or one the DSN names that holds no user
objects at all (then it is marked). Anything else is refused before the run touches it.

The marker is a database comment on PostgreSQL (COMMENT ON DATABASE) and an extended property named
`concurbench` on SQL Server. Its text says whether the database is temporary (created for a run,
dropped when that run ends; a killed run leaves it, and the next run or `gc --target dsn` drops it)
or kept (`--keep-database`, the database of a server concurbench started itself, or one a DBA
prepared and marked by hand: any text that starts with MARKER). concurbench drops only temporary
databases it marked.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import StrEnum

DATABASE = "concurbench"  # the database created when the DSN names none
MARKER = "concurbench database"  # every marker starts so; what follows says temporary or kept
TEMPORARY = "temporary"
PROPERTY = "concurbench"  # SQL Server: the extended property holding the marker
LISTED = 5  # objects named in a refusal


class Ownership(StrEnum):
    """Whose a database is, as far as a run may use it."""

    CREATE = "create"  # it does not exist: the run creates it
    OWN = "own"  # it carries concurbench's marker
    EMPTY = "empty"  # no marker, no user objects: the run marks it and uses it
    FOREIGN = "foreign"  # objects of its own and no marker: refused
    SYSTEM = "system"  # the server's own (PostgreSQL's postgres and templates, SQL Server's master...): refused


@dataclass(frozen=True)
class Marker:
    temporary: bool
    text: str


@dataclass(frozen=True)
class DatabasePlan:
    """What a dsn run will do about its database, found before anything is changed."""

    name: str
    ownership: Ownership
    named: bool  # the DSN names it (else the default, DATABASE)
    marker: Marker | None = None
    objects: tuple[str, ...] = ()  # user objects of a database that is not concurbench's (a few, for the message)
    object_count: int = 0
    may_create: bool = False  # the role may create databases
    may_mark: bool = False  # the role may set the marker (owns the database)
    sessions: tuple[str, ...] = ()  # other sessions in a temporary database of concurbench's (another run's)

    @property
    def refused(self) -> bool:
        return self.ownership in (Ownership.FOREIGN, Ownership.SYSTEM) or bool(self.sessions) \
            or (self.ownership == Ownership.CREATE and not self.may_create)

    def drops_at_end(self, keep: bool) -> bool:
        """Whether the run drops the database when it ends: one it creates, or a temporary one a killed run left."""
        if keep:
            return False
        return self.ownership == Ownership.CREATE or (self.marker is not None and self.marker.temporary)


def marker_text(temporary: bool, now: datetime | None = None) -> str:
    """The marker a run writes: who made the database and when, and whether it is dropped at the run's end."""
    when = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    who = f"{_user()}@{socket.gethostname()} pid {os.getpid()} at {when}"
    if temporary:
        return f"{MARKER}: {TEMPORARY}, made by {who}; dropped when that run ends (a killed run's: by the next " \
               f"run or `concurbench gc --target dsn`)"
    return f"{MARKER}: kept, marked by {who}; concurbench may drop or replace anything in it"


def parse_marker(text: str | None) -> Marker | None:
    """The marker in a database's comment or extended property, or None when it is not concurbench's."""
    if not text or not text.startswith(MARKER):
        return None
    rest = text[len(MARKER):].lstrip(": ").lower()
    return Marker(temporary=rest.startswith(TEMPORARY), text=text)


def comment_sql(database: str, temporary: bool) -> str:
    """PostgreSQL: the statement that marks `database` as concurbench's."""
    name = '"' + database.replace('"', '""') + '"'
    text = "'" + marker_text(temporary).replace("'", "''") + "'"
    return f"COMMENT ON DATABASE {name} IS {text}"


def refusal(plan: DatabasePlan, where: str, role: str, engine: str) -> str:
    """One paragraph: why the run will not use this database, and the ways forward."""
    grant = create_grant(role, engine)
    if plan.sessions:
        return (f"database {plan.name} on {where} is a temporary database of another concurbench run, which is "
                f"still connected ({', '.join(plan.sessions)}). Wait for that run to end, or name another "
                f"database in --dsn (an empty one, or one marked as concurbench's)")
    if plan.ownership == Ownership.SYSTEM:
        return (f"database {plan.name} on {where} is one of the server's own, which concurbench does not use for a "
                f"scenario; nothing was run or changed. Leave the database out of --dsn and concurbench creates and "
                f"uses its own ({DATABASE}" + (")" if plan.may_create else f"; role {role} needs {grant})") +
                ", or name an empty database")
    if plan.ownership == Ownership.CREATE:
        return (f"concurbench runs a scenario only in a database of its own, and database {plan.name} does not "
                f"exist on {where}, and role {role} may not create databases. Have an administrator grant it "
                f"({grant}), or create an empty database for it ({create_for(role, plan.name, engine)}) and run "
                f"again; nothing was changed on the server")
    shown = ", ".join(plan.objects[:LISTED]) + (f" and {plan.object_count - LISTED} more"
                                                   if plan.object_count > LISTED else "")
    ways = f"leave the database out of --dsn and concurbench creates and uses its own ({DATABASE}"
    ways += ")" if plan.may_create else f"; role {role} needs {grant})"
    return (f"database {plan.name} on {where} holds objects concurbench did not create ({shown}), and a "
            f"scenario's setup drops and creates objects by name, so concurbench will not run in it; nothing was "
            f"run or changed. To go on, {ways}, or name an empty database in --dsn")


def create_grant(role: str, engine: str) -> str:
    """The statement that lets a role or login create databases."""
    if engine == "mssql":
        return f"ALTER SERVER ROLE dbcreator ADD MEMBER [{role.replace(']', ']]')}]"
    return f'ALTER ROLE "{role}" CREATEDB' if not role.isidentifier() or role != role.lower() \
        else f"ALTER ROLE {role} CREATEDB"


def create_for(role: str, database: str, engine: str) -> str:
    """How an administrator makes an empty database a role may use as its own."""
    if engine == "mssql":
        return f"CREATE DATABASE [{database}]; then in it: CREATE USER [{role}] FOR LOGIN [{role}]; " \
               f"ALTER ROLE db_owner ADD MEMBER [{role}]"
    return f"CREATE DATABASE {database} OWNER {role}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
