"""A scenario's PostgreSQL settings against a server it does not own: read, compared, planned.

A scenario writes `shared_buffers: 256MB`; pg_settings holds `16384` in units of `8kB`. `same` compares
the two as the server reads a value (memory and time units, booleans, enumerations, comma lists), and
says None when it cannot tell. `read` takes what the server shows; a setting the role may not read
(those marked superuser-only, such as shared_preload_libraries, without pg_read_all_settings) or one the
server does not have is `unknown`, with why, never guessed.

`plan` decides what becomes of each setting on a server concurbench does not own (the dsn target):
SAME (nothing to do), APPLY (ALTER SYSTEM and a reload, then put back), RECORD (left as the server
has it and recorded as a difference: `--server-settings as-is`), or REFUSE (the run stops before
anything is changed, with why and what to do). `differences` is what the run records once the server
is configured: each setting that still differs, with what was wanted, what was found and why.

`in_effect` is what the run records of every server, its own or not: the settings that are not the
server's built-in defaults, as the run's role reads them once the server is configured (IN_EFFECT_SQL
says which).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import psycopg

SAME, APPLY, RECORD, REFUSE = "same", "apply", "record", "refuse"
MEMORY = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}  # in bytes
TIME = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}  # in ms
TRUE, FALSE = ("on", "true", "yes", "1"), ("off", "false", "no", "0")
NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")
UNREADABLE = "the role may not read it (superuser or pg_read_all_settings)"
RESTART = "changes only with a server restart"
FIXED = "is fixed when the server is built or its cluster initialised"
NOT_ALLOWED = "not applied: --allow-server-changes was not given"
# What a role that is not a superuser needs beside ALTER SYSTEM ON PARAMETER to change a setting and put it back
# exactly: read what ALTER SYSTEM holds now (pg_file_settings) and reload.
MAY_RESTORE_SQL = ("SELECT has_table_privilege('pg_file_settings', 'SELECT') "
                   "AND has_function_privilege('pg_show_all_file_settings()', 'EXECUTE') "
                   "AND has_function_privilege('pg_reload_conf()', 'EXECUTE')")
RESTORE_FIX = ("GRANT SELECT ON pg_file_settings, EXECUTE ON FUNCTION pg_show_all_file_settings() and EXECUTE ON "
               "FUNCTION pg_reload_conf() to the role (concurbench reads what ALTER SYSTEM holds to put it back "
               "exactly, and reloads), or run as a superuser")


# The settings in effect: every row of pg_settings whose value does not come from the server's built-in default.
# Left out: what the server computes for itself at start (source 'override': data_directory, the config
# files' paths), what describes the harness's own session rather than the server
# (sources 'client', 'session', 'interactive': application_name, client_encoding, a SET), and where a server
# listens and keeps its files, which differ from one start to the next (a free port, a run's directory).
# Bounded: the first IN_EFFECT_LIMIT by name, each value cut to VALUE_LIMIT characters.
NOT_IN_EFFECT = ("port", "unix_socket_directories", "data_directory", "config_file", "hba_file", "ident_file",
                 "external_pid_file")
IN_EFFECT_LIMIT, VALUE_LIMIT = 200, 200
IN_EFFECT_SQL = ("SELECT name, setting, unit FROM pg_settings "
                 "WHERE source NOT IN ('default', 'override', 'client', 'session', 'interactive') "
                 "AND name <> ALL(%s) ORDER BY name LIMIT %s")
# Settings whose value may carry a password or a key (a replication conninfo, a shell command): recorded as a
# digest of the value, so a change still shows and the value never reaches a result file.
SECRET_PARTS = ("conninfo", "_command", "passphrase")


def in_effect(conn) -> dict[str, str]:
    """The server's settings that are not its defaults (IN_EFFECT_SQL), name -> value as `server_info` writes one
    ("16384 8kB"); read-only, and only what the role may read (a superuser-only setting such as
    shared_preload_libraries is absent without pg_read_all_settings)."""
    rows = conn.execute(IN_EFFECT_SQL, (list(NOT_IN_EFFECT), IN_EFFECT_LIMIT)).fetchall()
    return {name: _recorded(name, with_unit(setting, unit)) for name, setting, unit in rows}


def with_unit(setting, unit) -> str:
    """pg_settings' value with its unit, as the run records settings ("16384 8kB", "on")."""
    return f"{setting}{' ' + unit if unit else ''}"


def _recorded(name: str, value: str) -> str:
    if value and any(part in name for part in SECRET_PARTS):
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]
    return value if len(value) <= VALUE_LIMIT else value[:VALUE_LIMIT - 1] + "…"


@dataclass(frozen=True)
class Found:
    """A setting as the server has it: `shown` as SHOW prints it ("128MB"), `setting` and `unit` as
    pg_settings holds them; `unknown` says why nothing is known (then the rest is None)."""

    name: str
    shown: str | None = None
    setting: str | None = None
    unit: str | None = None
    vartype: str | None = None
    context: str | None = None
    unknown: str = ""


@dataclass(frozen=True)
class Planned:
    name: str
    wanted: str
    found: Found
    action: str  # SAME, APPLY, RECORD or REFUSE
    why: str = ""


def read(conn, names) -> dict[str, Found]:
    """What the server has for each name. `conn` is in autocommit (a refused read ends nothing)."""
    names = list(names)
    out: dict[str, Found] = {}
    if not names:
        return out
    for name, setting, unit, vartype, context, shown in conn.execute(
            "SELECT name, setting, unit, vartype, context, current_setting(name) FROM pg_settings "
            "WHERE name = ANY(%s)", (names,)).fetchall():
        out[name] = Found(name, shown, setting, unit, vartype, context)
    for name in names:
        if name not in out:
            out[name] = _hidden(conn, name)
    return out


def _hidden(conn, name: str) -> Found:
    """A name pg_settings does not list for this role: superuser-only, a placeholder, or none at all."""
    try:
        value = conn.execute("SELECT current_setting(%s, true)", (name,)).fetchone()[0]
    except psycopg.errors.InsufficientPrivilege:
        return Found(name, unknown=UNREADABLE)
    if value is None:
        library = " (a library's setting is known once the library is loaded)" if "." in name else ""
        return Found(name, unknown=f"the server has no setting named {name}{library}")
    return Found(name, shown=value, setting=value, vartype="string", context="user")


def same(wanted, found: Found) -> bool | None:
    """Whether the server's value is the scenario's; None when it cannot be told (unknown, or a value
    that does not parse as the setting's type: then it counts as different)."""
    if found.unknown:
        return None
    text = as_text(wanted).strip()
    kind = found.vartype
    if kind == "bool":
        value = _bool(text)
        return None if value is None else value == (found.setting == "on")
    if kind in ("integer", "real"):
        want, have = _number(text, found.unit), _number(found.setting, found.unit)
        if want is None or have is None:
            return None
        return abs(want - have) <= 1e-9 * max(1.0, abs(have)) if kind == "real" else round(want) == round(have)
    if kind == "enum":
        return text.lower() == str(found.setting).lower()
    return _items(text) == _items(found.setting or "")


def as_text(value) -> str:
    """A scenario's value as the server is given it (YAML's `on` is a boolean: "on")."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _bool(text: str) -> bool | None:
    low = text.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    return None


def _number(text: str | None, unit: str | None) -> float | None:
    """A value in the setting's base unit (bytes for memory, milliseconds for time), or None."""
    m = NUMBER.match(str(text or ""))
    if not m:
        return None
    value, given = float(m.group(1)), m.group(2)
    base = _unit(unit or "")
    if not given:
        return value * base[1] if base else value
    for table in (MEMORY, TIME):
        if given in table and base and base[0] is table:
            return value * table[given]
    return None


def _unit(unit: str):
    """(the unit table, the size of one base unit in it) for pg_settings' unit ("8kB", "ms"), or None."""
    m = re.fullmatch(r"(\d*)\s*([A-Za-z]+)", unit)
    if not m:
        return None
    count = int(m.group(1) or 1)
    for table in (MEMORY, TIME):
        if m.group(2) in table:
            return table, count * table[m.group(2)]
    return None


def _items(text: str) -> list[str]:
    """A string setting as its comma-separated items (shared_preload_libraries, search_path)."""
    return [item.strip().strip('"') for item in str(text).split(",") if item.strip()]


def plan(found: dict[str, Found], wanted: dict, *, as_is: bool, allowed: bool) -> list[Planned]:
    """What becomes of each wanted setting on a server concurbench does not own (see the module's text)."""
    out = []
    for name, value in wanted.items():
        have = found[name]
        if have.unknown:
            why = have.unknown
        elif same(value, have):
            out.append(Planned(name, as_text(value), have, SAME))
            continue
        elif have.context == "postmaster":
            why = RESTART
        elif have.context == "internal":
            why = FIXED
        elif not allowed:
            why = NOT_ALLOWED
        else:
            out.append(Planned(name, as_text(value), have, APPLY))
            continue
        out.append(Planned(name, as_text(value), have, RECORD if as_is else REFUSE, why))
    return out


def differences(found: dict[str, Found], wanted: dict, *, allowed: bool) -> list[dict]:
    """Each wanted setting the server does not match, once configured: {setting, wanted, found, why};
    `found` is None when the role may not read it or the server has no such setting."""
    out = []
    for p in plan(found, wanted, as_is=True, allowed=allowed):
        if p.action == SAME:
            continue
        why = p.why or "the server did not take the scenario's value"
        out.append({"setting": p.name, "wanted": p.wanted, "found": p.found.shown, "why": why})
    return out
