"""SQL Server configuration a scenario asks for, applied over a connection and put back afterwards.

Database options (`database:` in a scenario) are set with ALTER DATABASE; server options (`server:`)
are sp_configure settings, global trace flags (DBCC TRACEON(n, -1), when the provisioner cannot pass
`-T` at start-up), MEMORY_OPTIMIZED TEMPDB_METADATA (takes effect after a restart) and the number of
tempdb data files. Each change is recorded with the value it replaced, so `restore` can undo exactly
what this run changed and nothing else.

Every statement runs in the connection's own database: what must run in tempdb (DBCC SHRINKFILE)
is wrapped in `EXEC sys.sp_executesql N'USE tempdb; ...'`. sp_executesql treats the database context
as EXECUTE does, and a USE inside EXECUTE holds only until that statement ends (the sp_executesql
and EXECUTE pages), so the scenario's setup that follows on the same connection still runs in the
run's database.

tempdb data files are removed only from a server the harness owns, right after a restart: startup
re-creates every tempdb file, empty, and empty files can be removed ("Shrink the tempdb database");
while the server runs, EMPTYFILE and REMOVE FILE fail (errors 2555 and 5042) as soon as pages sit
in the file. A server the harness does not own is never restarted, so there the removal is refused.
Startup itself may already have put pages in a file, and a temp-table workload leaves some in the
files the run added to a server it does not own: EMPTYFILE (after which no new data goes into the
file) and REMOVE FILE are tried again after a pause, and a file that still cannot go is reported,
not fatal.

sp_configure options need `show advanced options`; when it was off, it is turned on as a change of
its own and turned off again when the options are put back. When its state cannot be read, no
sp_configure option is changed: turning it on then could not be undone.

Database options go only to a database that is concurbench's (`unowned`, `database_owned`): one it
created or that carries its marker (provisioners/owned.py). Who else is in that database before an
option that needs it to itself, and the record of a trace flag a run turned on: mssql_guards.py.

Sources (Microsoft Learn): ALTER DATABASE SET options (READ_COMMITTED_SNAPSHOT, ALLOW_SNAPSHOT_ISOLATION,
ACCELERATED_DATABASE_RECOVERY, DELAYED_DURABILITY, RECOVERY; WITH ROLLBACK IMMEDIATE to get the
exclusive access the first and the third need); sys.databases (is_read_committed_snapshot_on,
snapshot_isolation_state, is_accelerated_database_recovery_on (2019+), delayed_durability_desc,
recovery_model_desc); COL_LENGTH (NULL for a column that does not exist) and error 207 (invalid column
name: a batch naming a column the server lacks fails as a whole when compiled, so the ADR column is
read through sp_executesql); the termination clause of ALTER DATABASE (ROLLBACK IMMEDIATE, NO_WAIT); DBCC TRACESTATUS (public; error 40518 where the
command is not supported, 2571 where it is not permitted); ALTER SERVER CONFIGURATION SET MEMORY_OPTIMIZED TEMPDB_METADATA and
SERVERPROPERTY('IsTempdbMetadataMemoryOptimized'); DBCC TRACEON/TRACEOFF/TRACESTATUS; sp_configure and
sys.configurations; ALTER DATABASE ... ADD FILE / REMOVE FILE and DBCC SHRINKFILE (EMPTYFILE);
"Shrink the tempdb database"; EXECUTE and sp_executesql (database context).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .quoting import tsql_literal, tsql_name
from ..errors import ConfigError, EngineError, ProvisionError
from .odbc import error_number_from_pyodbc, error_text

DATABASE_OPTIONS = ("read_committed_snapshot", "allow_snapshot_isolation", "accelerated_database_recovery",
                    "delayed_durability", "recovery")
DURABILITY = ("disabled", "allowed", "forced")
RECOVERY = ("simple", "full", "bulk_logged")
# Server keys the runner handles; anything else under `server:` settings is an sp_configure name.
SERVER_KEYS = ("trace_flags", "memory_optimized_tempdb_metadata", "tempdb_files")
CONTAINER_KEYS = ("memory_limit", "pid", "collation", "cpus", "min_cpus")  # only the docker provisioner reads these
ADVANCED = "show advanced options"
# "You can turn on Trace Flag N only at startup" (Microsoft Learn, Trace flags, 2024-01-23): DBCC TRACEON does
# not make them take effect, so a server concurbench does not own never gets them from a run.
STARTUP_TRACE_FLAGS = (834, 836, 8012, 8020)
REMOVE_ATTEMPTS = 3  # EMPTYFILE and REMOVE FILE of a tempdb file, with a pause between attempts
RETRY_PAUSE_S = 2.0


# -- database options ------------------------------------------------------------------------------------
INVALID_COLUMN = 207  # "Invalid column name": a server older than the column it was asked for
_DATABASE_COLUMNS = "is_read_committed_snapshot_on, snapshot_isolation_state, delayed_durability_desc, recovery_model_desc"
# One query, RCSI to ADR: the ADR column (2019+) is named only inside sp_executesql, which the server compiles
# only where COL_LENGTH found the column, so an older server answers NULL for it instead of refusing the batch.
READ_DATABASE = (
    f"IF COL_LENGTH('sys.databases', 'is_accelerated_database_recovery_on') IS NULL "
    f"SELECT {_DATABASE_COLUMNS}, CAST(NULL AS bit) AS adr FROM sys.databases WHERE name = ? "
    f"ELSE EXEC sys.sp_executesql N'SELECT {_DATABASE_COLUMNS}, is_accelerated_database_recovery_on AS adr "
    f"FROM sys.databases WHERE name = @name', N'@name sysname', @name = ?")
READ_DATABASE_WITHOUT_ADR = f"SELECT {_DATABASE_COLUMNS}, CAST(NULL AS bit) AS adr FROM sys.databases WHERE name = ?"
ROLLBACK_IMMEDIATE, NO_WAIT = "ROLLBACK IMMEDIATE", "NO_WAIT"
EXCLUSIVE_OPTIONS = ("read_committed_snapshot", "accelerated_database_recovery")  # need the database to themselves


def read_database(conn, database: str) -> dict:
    """The run database's options as a plan compares them; `accelerated_database_recovery` None where the server
    has no ADR. Only an "invalid column" answer reads as no ADR: any other failure is an EngineError."""
    try:
        row = _first_row(conn.execute(READ_DATABASE, database, database))
    except Exception as exc:  # noqa: BLE001 - pyodbc errors; only error 207 is expected, anything else is raised
        if error_number_from_pyodbc(exc) != INVALID_COLUMN:
            raise EngineError(f"cannot read the options of database {database}: {error_text(exc)}", exc) from exc
        row = _first_row(conn.execute(READ_DATABASE_WITHOUT_ADR, database))
    if row is None:
        raise EngineError(f"database {database} does not exist")
    return {"read_committed_snapshot": bool(row[0]), "allow_snapshot_isolation": row[1] == 1,
            "delayed_durability": str(row[2]).lower(), "recovery": str(row[3]).lower(),
            "accelerated_database_recovery": None if row[4] is None else bool(row[4])}


def _first_row(cursor):
    """The first row of the first result set a batch returns (an IF ... ELSE EXEC batch may send counts first)."""
    while cursor.description is None:
        if not cursor.nextset():
            return None
    return cursor.fetchone()


def database_statement(database: str, option: str, value, termination: str = ROLLBACK_IMMEDIATE) -> str:
    """The ALTER DATABASE that sets one option; those that need the database to themselves end with `termination`
    (ROLLBACK IMMEDIATE, or NO_WAIT where the login cannot see who else is in the database)."""
    db = tsql_name(database)
    if termination not in (ROLLBACK_IMMEDIATE, NO_WAIT):
        raise ValueError(f"termination must be {ROLLBACK_IMMEDIATE} or {NO_WAIT}")
    if option == "read_committed_snapshot":
        return f"ALTER DATABASE {db} SET READ_COMMITTED_SNAPSHOT {_on(value)} WITH {termination}"
    if option == "allow_snapshot_isolation":
        return f"ALTER DATABASE {db} SET ALLOW_SNAPSHOT_ISOLATION {_on(value)}"
    if option == "accelerated_database_recovery":
        return f"ALTER DATABASE {db} SET ACCELERATED_DATABASE_RECOVERY = {_on(value)} WITH {termination}"
    if option == "delayed_durability":
        if str(value).lower() not in DURABILITY:
            raise ValueError(f"delayed_durability must be one of {', '.join(DURABILITY)}")
        return f"ALTER DATABASE {db} SET DELAYED_DURABILITY = {str(value).upper()}"
    if option == "recovery":
        if str(value).lower() not in RECOVERY:
            raise ValueError(f"recovery must be one of {', '.join(RECOVERY)}")
        return f"ALTER DATABASE {db} SET RECOVERY {str(value).upper()}"
    raise ValueError(f"unknown database option {option}")


def _on(value) -> str:
    return "ON" if value else "OFF"


@dataclass
class Change:
    """One thing this run changed: the statement that did it and the one that puts it back."""

    what: str
    apply: list[str]
    undo: list[str]
    flag: int | None = None  # a global trace flag this change turned on
    hint: str = ""  # what to do by hand when the undo fails
    attempts: int = 1  # how often `apply` is tried (after a pause) before it counts as failed
    undo_attempts: int = 1  # the same for `undo`
    restart: bool = False  # takes effect only once the server restarts: never made on a server we do not own
    database: bool = False  # an option of the run's database (not of the server)
    exclusive: bool = False  # needs the database to itself (guard_sessions before it is made or undone)
    setting: tuple[str, int, int] | None = None  # an sp_configure option this change set: (name, old, new)


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    restart: bool = False  # the server must restart before the changes take effect
    after_restart: list[Change] = field(default_factory=list)  # changes only a freshly started server allows


def plan_database(current: dict, wanted: dict, database: str, termination: str = ROLLBACK_IMMEDIATE) -> Plan:
    """Statements that bring `current` to `wanted` (only what differs), each with its undo."""
    plan = Plan()
    for option in DATABASE_OPTIONS:
        if option not in wanted or wanted[option] is None:
            continue
        new, old = _norm(wanted[option]), _norm(current.get(option))
        if new == old:
            continue
        if old is None:
            raise EngineError(f"this server has no {option} (ACCELERATED_DATABASE_RECOVERY needs SQL Server 2019 "
                              f"or later)")
        plan.changes.append(Change(f"{database}.{option}: {old} -> {new}",
                                   [database_statement(database, option, new, termination)],
                                   [database_statement(database, option, old, termination)],
                                   database=True, exclusive=option in EXCLUSIVE_OPTIONS))
    return plan


def _norm(value):
    return value.lower() if isinstance(value, str) else value


# -- server options -------------------------------------------------------------------------------------
def read_server(conn, names) -> dict:
    """What the server has now for the keys a scenario may set (for the manifest and for planning)."""
    out: dict = {}
    names = list(names or [])
    flags = global_trace_flags(conn)
    if flags is not None:
        out["trace_flags"] = flags
    try:
        row = conn.execute("SELECT CAST(SERVERPROPERTY('IsTempdbMetadataMemoryOptimized') AS int)").fetchone()
        out["memory_optimized_tempdb_metadata"] = None if row[0] is None else bool(row[0])
    except Exception:  # noqa: BLE001
        pass
    try:
        row = conn.execute("SELECT COUNT(*) FROM tempdb.sys.database_files WHERE type = 0").fetchone()
        out["tempdb_files"] = int(row[0])
    except Exception:  # noqa: BLE001
        pass
    for name in configure_names(names):
        row = conn.execute("SELECT CAST(value_in_use AS bigint) FROM sys.configurations WHERE name = ?",
                           name).fetchone()
        out[name] = None if row is None else int(row[0])
    return out


TRACESTATUS_REFUSED = (40518, 2571)  # the command is not supported here (Azure SQL Database); not permitted


def global_trace_flags(conn) -> list[int] | None:
    """The trace flags on globally (DBCC TRACESTATUS(-1), open to every login); None where the server refuses the
    command. Any other failure (a lost connection) is an EngineError: it must not read as "no flag on"."""
    try:
        cursor = conn.execute("DBCC TRACESTATUS(-1) WITH NO_INFOMSGS")
        # with no flag on there is no result set at all (pyodbc: no description, and fetchall() raises)
        rows = cursor.fetchall() if cursor.description is not None else []
    except Exception as exc:  # noqa: BLE001 - pyodbc errors: the refusals are told apart by number
        if error_number_from_pyodbc(exc) in TRACESTATUS_REFUSED:
            return None
        raise EngineError(f"cannot read the global trace flags (DBCC TRACESTATUS): {error_text(exc)}", exc) from exc
    return sorted(int(r[0]) for r in rows if int(r[2]) == 1)  # TraceFlag, Status, Global


def plan_server(current: dict, wanted: dict, *, owned: bool, tempdb_dir: str | None = None,
                tempdb_names: list[str] | None = None, restart_options=(), as_is: bool = False) -> Plan:
    """Statements for the server keys of `wanted` that differ from `current`.

    An `owned` server (one we start, such as a container) got its trace flags as `-T` at start-up,
    so they are not set here, and may be restarted; on another server each missing flag is turned
    on globally and off again afterwards, and removing tempdb files is refused (`as_is`: planned as a
    change that needs a restart, which `unowned` leaves out). Changes that need a restart are marked:
    memory-optimized tempdb metadata, the sp_configure options in `restart_options` (restart_only()),
    and STARTUP_TRACE_FLAGS.
    """
    plan = Plan()
    configure: list[tuple] = []
    for name, value in wanted.items():
        if name in CONTAINER_KEYS:
            continue
        if name == "trace_flags":
            if owned:
                continue
            have = set(current.get("trace_flags") or [])
            for flag in sorted(set(flag_numbers(value)) - have):
                plan.changes.append(Change(f"trace flag {flag} on", [f"DBCC TRACEON({flag}, -1)"],
                                           [f"DBCC TRACEOFF({flag}, -1)"], flag, restart=flag in STARTUP_TRACE_FLAGS))
        elif name == "memory_optimized_tempdb_metadata":
            old, new = current.get(name), truth(value)
            if old is None or new != bool(old):
                plan.changes.append(Change(f"{name}: {old} -> {new}", [_tempdb_metadata(new)],
                                           [_tempdb_metadata(bool(old))] if old is not None else [], restart=True))
                plan.restart = True
        elif name == "tempdb_files":
            _plan_tempdb_files(plan, int(current.get(name) or 1), int(value), tempdb_dir or "", tempdb_names or [],
                               owned, as_is)
        else:
            old = current.get(name)
            if old is None:
                raise EngineError(f"sp_configure has no option named {name!r} on this server")
            if int(value) != int(old):
                configure.append((name, old, value))
    _plan_configure(plan, configure, current.get(ADVANCED), set(restart_options))
    return plan


def _plan_configure(plan: Plan, options: list[tuple], advanced, restart_options: set) -> None:
    """sp_configure changes; with `show advanced options` off, turning it on first is a change of its own,
    undone last. When its state cannot be read nothing is planned: it could not be put back as it was."""
    if options and advanced is None:
        raise ProvisionError(f"this scenario sets {', '.join(o[0] for o in options)} with sp_configure, which needs "
                             f"'{ADVANCED}', and its value could not be read (sys.configurations), so concurbench "
                             f"could not put it back as it was; nothing was changed. Leave the option out of the "
                             f"scenario, or check that the login can read sys.configurations")
    if options and int(advanced) == 0 and ADVANCED not in [o[0] for o in options]:
        plan.changes.append(Change(f"sp_configure {ADVANCED}: 0 -> 1", _set_option(ADVANCED, 1),
                                   _set_option(ADVANCED, 0), setting=(ADVANCED, 0, 1)))
    for name, old, value in options:
        plan.changes.append(Change(f"sp_configure {name}: {old} -> {value}", _set_option(name, value),
                                   _set_option(name, old), restart=name in restart_options,
                                   setting=(name, int(old), int(value))))


def flag_numbers(value) -> list[int]:
    """Trace flags from `[7006, 1222]`, `"7006,1222"` or `-T7006`."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").replace(";", ",").split(",")
    return [int(str(item).strip().lstrip("-").lstrip("Tt")) for item in items if str(item).strip()]


def truth(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("on", "true", "yes", "1")
    return bool(value)


def _tempdb_metadata(on: bool) -> str:
    return f"ALTER SERVER CONFIGURATION SET MEMORY_OPTIMIZED TEMPDB_METADATA = {_on(on)}"


def _set_option(name: str, value) -> list[str]:
    return [f"EXEC sp_configure {tsql_literal(name)}, {int(value)}", "RECONFIGURE"]


def restart_only(conn) -> set[str]:
    """The sp_configure options whose new value takes effect only after a restart (sys.configurations.is_dynamic
    is 0: RECONFIGURE sets `value` and leaves `value_in_use` as it was)."""
    return {str(r[0]) for r in conn.execute("SELECT name FROM sys.configurations WHERE is_dynamic = 0").fetchall()}


def configure_names(names) -> list[str]:
    """The sp_configure options among server keys."""
    return [n for n in names if n not in SERVER_KEYS and n not in CONTAINER_KEYS]


def in_tempdb(sql: str) -> str:
    """`sql` run in tempdb without changing the connection's database: sp_executesql behaves as EXECUTE
    with regard to database context, whose changes last only until the end of the statement."""
    return f"EXEC sys.sp_executesql {tsql_literal('USE tempdb; ' + sql)}"


def _empty_and_remove(name: str) -> list[str]:
    return [in_tempdb(f"DBCC SHRINKFILE ({tsql_literal(name)}, EMPTYFILE) WITH NO_INFOMSGS"),
            f"ALTER DATABASE tempdb REMOVE FILE {tsql_name(name)}"]


def _plan_tempdb_files(plan: Plan, have: int, want: int, directory: str, names: list[str], owned: bool,
                       as_is: bool = False) -> None:
    """Add files named concurbench_tempN now; remove the last data files (never the primary) right after a
    restart of a server we own, and refuse to remove them from any other."""
    if want < 1:
        raise ValueError("tempdb_files must be at least 1")
    for n in range(have + 1, want + 1):
        name = f"concurbench_temp{n}"
        path = f"{directory.rstrip('/')}/{name}.ndf" if directory else f"{name}.ndf"
        plan.changes.append(Change(f"tempdb file {name} added",
                                   [f"ALTER DATABASE tempdb ADD FILE (NAME = {tsql_name(name)}, "
                                    f"FILENAME = {tsql_literal(path)}, SIZE = 8MB, FILEGROWTH = 64MB)"],
                                   _empty_and_remove(name),
                                   hint=f"once the server has restarted, run ALTER DATABASE tempdb REMOVE FILE "
                                        f"{tsql_name(name)}", undo_attempts=REMOVE_ATTEMPTS))
    if want >= have:
        return
    if not owned and as_is:  # recorded, never made: removing a file takes a restart
        plan.changes.append(Change(f"tempdb data files: {have} -> {want}", [], [], restart=True))
        return
    if not owned:
        raise ProvisionError(
            f"this scenario wants {want} tempdb data file(s) and the server has {have}: concurbench removes tempdb "
            f"files only from a server it starts, right after a restart (while a server runs, DBCC SHRINKFILE "
            f"EMPTYFILE and REMOVE FILE fail as soon as pages sit in a file, and a removed file is not put back "
            f"afterwards); remove them yourself (ALTER DATABASE tempdb REMOVE FILE, after a restart) or use "
            f"--target docker")
    if len(names) < have:
        raise EngineError(f"tempdb has {have} data files but only {len(names)} could be named (tempdb.sys.database_files)")
    for name in reversed(names[want:have]):
        plan.after_restart.append(Change(
            f"tempdb file {name} removed", _empty_and_remove(name), [], attempts=REMOVE_ATTEMPTS,
            hint=f"the run goes on with more tempdb data files than the scenario asks for (its probes record how "
                 f"many); remove it after a restart with ALTER DATABASE tempdb REMOVE FILE {tsql_name(name)}"))
    plan.restart = True


def tempdb_layout(conn) -> tuple[str, list[str]]:
    """The folder of tempdb's primary data file and the logical names of its data files, primary first."""
    rows = conn.execute("SELECT name, physical_name FROM tempdb.sys.database_files WHERE type = 0 "
                        "ORDER BY file_id").fetchall()
    if not rows:
        return "", []
    path = str(rows[0][1]).replace("\\", "/")
    return path.rsplit("/", 1)[0] if "/" in path else "", [str(r[0]) for r in rows]


# -- applying and restoring --------------------------------------------------------------------------------
def apply(conn, plan: Plan, sleep=time.sleep) -> list[Change]:
    """Run the plan; on a failure undo what was done and raise. Returns the changes made (for restore)."""
    done: list[Change] = []
    for change in plan.changes:
        try:
            _run_all(conn, change.apply, change.attempts, sleep)
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            restore(conn, done, sleep)
            raise EngineError(f"cannot change {change.what}: {error_text(exc)}", exc) from exc
        done.append(change)
    return done


def apply_or_report(conn, changes: list[Change], sleep=time.sleep) -> tuple[list[Change], list[str]]:
    """Run each change on its own: (those made, the problems of those that could not be made)."""
    done, problems = [], []
    for change in changes:
        try:
            _run_all(conn, change.apply, change.attempts, sleep)
        except Exception as exc:  # noqa: BLE001 - pyodbc errors
            tries = f" after {change.attempts} attempts" if change.attempts > 1 else ""
            hint = f"; {change.hint}" if change.hint else ""
            problems.append(f"could not make the change '{change.what}'{tries}: {error_text(exc)}{hint}")
            continue
        done.append(change)
    return done, problems


def restore(conn, changes: list[Change], sleep=time.sleep) -> list[str]:
    """Undo the changes, last first; returns the problems met (restoring carries on past each)."""
    problems = []
    for change in reversed(changes):
        try:
            _run_all(conn, change.undo, change.undo_attempts, sleep)
        except Exception as exc:  # noqa: BLE001
            hint = f" ({change.hint})" if change.hint else ""
            problems.append(f"could not put back {change.what}: {error_text(exc)}{hint}")
    return problems


def _run_all(conn, statements: list[str], attempts: int, sleep) -> None:
    """Run the statements in order; when one fails, start over after a pause, `attempts` times in all."""
    for attempt in range(1, attempts + 1):
        try:
            for sql in statements:
                _run(conn, sql)
            return
        except Exception:  # noqa: BLE001 - pyodbc errors; the last one is raised
            if attempt == attempts:
                raise
            sleep(RETRY_PAUSE_S)


def _run(conn, sql: str) -> None:
    cursor = conn.execute(sql)
    while cursor.nextset():
        pass


def unowned(server: Plan, database: Plan, *, allowed: bool, as_is: bool,
            database_owned: bool = False) -> tuple[Plan, list[Change]]:
    """What a run makes on a server it does not own, and what it leaves as the server has it (recorded).
    Database options are made when the database is concurbench's (`database_owned`: no flag needed, they touch
    nothing else), and never in another one: refused, or left and recorded with `as_is`. A global trace flag is
    never turned on there, even with `allowed` (refuse_trace_flags; left and recorded with `as_is`). Other server
    options: without `as_is`, refuse_unowned() stops the run at a change it may not make; with it, the changes
    that need a restart (and, without `allowed`, every change) are left, and `show advanced options` is turned on
    only for an sp_configure change that is made."""
    db_made, db_left = (list(database.changes), []) if database_owned else ([], list(database.changes))
    flags = [c for c in server.changes if c.flag is not None]
    changes = [c for c in server.changes if c.flag is None]
    if not as_is:
        refuse_trace_flags(flags)
        refuse_unowned(Plan(changes, server.restart or any(c.restart for c in changes)), allowed, "server options")
        if db_left:
            refuse_foreign_database(db_left)
        return Plan(changes + db_made), db_left
    made = [c for c in changes if allowed and not c.restart]
    if not any(c.what.startswith("sp_configure ") and not c.what.startswith(f"sp_configure {ADVANCED}:")
               for c in made):
        made = [c for c in made if not c.what.startswith(f"sp_configure {ADVANCED}:")]
    left = [c for c in changes if c not in made and not c.what.startswith(f"sp_configure {ADVANCED}:")]
    return Plan(made + db_made), flags + left + db_left


TRACE_FLAG_FIX = ("concurbench turns a global trace flag on only on a server it starts (--target docker passes it as "
                  "-T at start-up); on your own server turn it on yourself (DBCC TRACEON(n, -1), or -T at start-up) "
                  "and run that variant alone with --server-settings as-is, then turn it off")


def refuse_trace_flags(flags: list[Change]) -> None:
    """Global trace flags asked of a server concurbench does not own: never turned on there (an undocumented
    server-wide switch on every database of someone else's server)."""
    if flags:
        raise ProvisionError(f"this scenario turns on {'; '.join(c.what for c in flags)} server-wide, and {TRACE_FLAG_FIX}")


def refuse_foreign_database(changes: list[Change]) -> None:
    """Database options asked of a database that is not concurbench's: a usage error before any change."""
    raise ConfigError(f"this scenario changes database options ({'; '.join(c.what for c in changes)}), and "
                      f"concurbench changes them only in a database of its own (one it created, or one that carries "
                      f"its marker), so nothing was changed. Leave the database out of --dsn so that concurbench "
                      f"creates its own, or add --server-settings as-is to run on this database as it is and record "
                      f"the differences")


def refuse_unowned(plan: Plan, allowed: bool, what: str) -> None:
    """A server we do not own: changes need --allow-server-changes, and a restart is out of the question."""
    if not plan.changes:
        return
    if not allowed:
        raise ProvisionError(f"this scenario changes {what} ({'; '.join(c.what for c in plan.changes)}) on a server "
                             f"concurbench does not own: add --allow-server-changes to let it make the changes for "
                             f"the run and put them back afterwards")
    if plan.restart or any(c.restart for c in plan.changes):
        needs = [c.what for c in plan.changes if c.restart] or [c.what for c in plan.changes]
        raise ProvisionError(f"{'; '.join(needs)} needs a server restart, which concurbench does not do to a server "
                             f"it does not own; set it yourself, add --server-settings as-is to run on the server as "
                             f"it is and record the difference, or use --target docker")
