"""A database of concurbench's own on a server it does not own (`--target dsn`), for both engines.

A scenario's setup drops and creates objects with common names (`accounts`, `payments`), so on a
server concurbench does not own it runs only in a database that is its own: one it creates (the
DSN names no database; `--database NAME` chooses its name), one that carries its marker, or one the
user names (in the DSN or with --database) that holds no user objects at all (then it is marked).
Anything else is refused before the run touches it, with the way forward: a database of the default
name that is a user's is answered with `--database NAME`.

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

from ..engines.quoting import pg_literal, pg_name
from ..engines.registry import spec
from ..errors import ConfigError

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


def chosen_database(in_dsn: str | None, option: str | None) -> str | None:
    """The database the user named for the run: the DSN's, or --database's (both only when they agree); None when
    neither names one (the target then takes its default)."""
    if option is not None and not option.strip():
        raise ConfigError("--database: give the name of the database concurbench creates or uses")
    if in_dsn and option and in_dsn != option:
        raise ConfigError(f"--database {option} and the database of --dsn ({in_dsn}) differ: name the run's database "
                          f"once, in --dsn or with --database")
    return option or in_dsn or None


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
    return f"COMMENT ON DATABASE {pg_name(database)} IS {pg_literal(marker_text(temporary))}"


def refusal(plan: DatabasePlan, where: str, role: str, engine: str, default: str = DATABASE) -> str:
    """One paragraph: why the run will not use this database, and the ways forward (`default`: the database the run
    creates when none is named)."""
    grant = spec(engine).grant_to_create(role)
    if plan.sessions:
        return (f"database {plan.name} on {where} is a temporary database of another concurbench run, which is "
                f"still connected ({', '.join(plan.sessions)}). Wait for that run to end, or choose another name "
                f"with --database NAME (an empty database, one marked as concurbench's, or one to create)")
    if plan.ownership == Ownership.SYSTEM:
        return (f"database {plan.name} on {where} is one of the server's own, which concurbench does not use for a "
                f"scenario; nothing was run or changed. Leave the database out of --dsn and concurbench creates and "
                f"uses its own ({default}" + (")" if plan.may_create else f"; role {role} needs {grant})") +
                ", or name an empty database (--database NAME)")
    if plan.ownership == Ownership.CREATE:
        return (f"concurbench runs a scenario only in a database of its own, and database {plan.name} does not "
                f"exist on {where}, and role {role} may not create databases. Have an administrator grant it "
                f"({grant}), or create an empty database for it ({spec(engine).database_for(role, plan.name)}) and run "
                f"again; nothing was changed on the server")
    shown = ", ".join(plan.objects[:LISTED]) + (f" and {plan.object_count - LISTED} more"
                                                   if plan.object_count > LISTED else "")
    if plan.named:
        ways = f"leave the database out of --dsn and concurbench creates and uses its own ({default}"
        ways += ")" if plan.may_create else f"; role {role} needs {grant})"
        ways += ", or name an empty database (in --dsn, or with --database NAME)"
    else:
        ways = (f"choose another name for the database concurbench creates and uses with --database NAME (one that "
                f"does not exist yet, an empty one, or one marked as concurbench's)")
        ways += "" if plan.may_create else f"; role {role} needs {grant}"
    return (f"database {plan.name} on {where} holds objects concurbench did not create ({shown}), and a "
            f"scenario's setup drops and creates objects by name, so concurbench will not run in it; nothing was "
            f"run or changed. To go on, {ways}")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
