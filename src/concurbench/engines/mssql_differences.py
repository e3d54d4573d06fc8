"""A scenario's SQL Server options against a server concurbench does not own, once the run configured it:
each one the server does not match, with what was wanted, what was found and why (`--server-settings
as-is` leaves what needs a restart, and without `--allow-server-changes` every option, as it is).

Read as the configurator reads them (mssql_config): global trace flags (DBCC TRACESTATUS), memory-optimized
tempdb metadata, the number of tempdb data files, sp_configure values in use, and the run database's
options. What the login may not read is recorded as unknown (`found` None), never guessed. The container's
keys (memory_limit, cpus, pid, collation) mean nothing on a server concurbench did not start.
"""

from __future__ import annotations

from . import mssql_config as mc

RESTART = "takes a server restart"
NOT_ALLOWED = "not applied: --allow-server-changes was not given"
NOT_TAKEN = "the server did not take the scenario's value"
TRACE_FLAG = "concurbench turns trace flags on only on a server it starts"


def differences(conn, settings: dict, database_options: dict, database: str, *, allowed: bool) -> list[dict]:
    wanted = {k: v for k, v in settings.items() if k not in mc.CONTAINER_KEYS}
    current = mc.read_server(conn, list(wanted))
    restart_options = mc.restart_only(conn) if mc.configure_names(wanted) else set()
    out = []
    for key, value in wanted.items():
        want, have, restart = _server_option(key, value, current, restart_options)
        if want != have:
            why = TRACE_FLAG if key == "trace_flags" else RESTART if restart else None
            out.append(_entry(key, want, have, why, allowed))
    if database_options:
        found = mc.read_database(conn, database)
        for option, value in database_options.items():
            if value is None:
                continue
            want, have = _shown(_norm(value)), _shown(_norm(found.get(option)))
            if want != have:
                out.append(_entry(f"{database}.{option}", want, None if found.get(option) is None else have, None,
                                  allowed))
    return out


def _server_option(key: str, value, current: dict, restart_options: set) -> tuple[str, str | None, bool]:
    """(wanted, found or None when unknown, whether making it takes a restart) as shown in the record."""
    if key == "trace_flags":
        want = sorted(set(mc.flag_numbers(value)))
        have = current.get("trace_flags")
        restart = any(flag in mc.STARTUP_TRACE_FLAGS for flag in want)
        return _flags(want), None if have is None else _flags(have), restart
    if key == "memory_optimized_tempdb_metadata":
        have = current.get(key)
        return _shown(mc.truth(value)), None if have is None else _shown(bool(have)), True
    if key == "tempdb_files":
        have = current.get(key)
        return str(int(value)), None if have is None else str(have), have is not None and int(value) < int(have)
    have = current.get(key)
    return str(int(value)), None if have is None else str(int(have)), key in restart_options


def _entry(setting: str, wanted: str, found: str | None, why: str | None, allowed: bool) -> dict:
    if found is None:
        why = "unknown: the login may not read it, or the server has no such option"
    elif why is None:
        why = NOT_TAKEN if allowed else NOT_ALLOWED
    return {"setting": setting, "wanted": wanted, "found": found, "why": why}


def _norm(value):
    return value.lower() if isinstance(value, str) else value


def _flags(flags) -> str:
    return ", ".join(str(f) for f in sorted(flags)) or "none"


def _shown(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "unknown" if value is None else str(value)
