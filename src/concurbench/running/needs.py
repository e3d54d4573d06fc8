"""What each variant needs of a server concurbench does not own, planned once the server is reached and before
anything is changed or the first arm runs, on both engines: a run that cannot finish there is refused at start in
one paragraph naming the variants and the way forward, or (`--skip-unrunnable`) runs the variants it can and
skips the others, each by a typed reason (`Unrunnable`). The probe shows the same plan.

A server concurbench starts (embedded, binaries, docker) can give every variant what it asks: nothing is planned.
On a dsn server:

- PostgreSQL: a variant with server settings of its own needs a restart between variants, which concurbench does
  not do to a server it does not own (the scenario's own settings are planned by the dsn provisioner).
- SQL Server: a global trace flag the server does not have (never turned on there: mssql_config.refuse_trace_flags);
  an option that takes a restart (memory-optimized tempdb metadata, fewer tempdb files, an sp_configure option
  whose is_dynamic is 0), left as it is only with `--server-settings as-is`; another server-wide change without
  `--allow-server-changes` (or `as-is`); the permissions the run's changes and observers need (ALTER SETTINGS,
  ALTER ANY EVENT SESSION, ALTER TRACE, with the GRANT); an Extended Events observer on 2019 or 2022, which have no
  MAX_DURATION, without `--allow-xe-without-max-duration`; SQL Trace where the server has none (Azure SQL);
  database options in a database that is not concurbench's. What the scenario itself needs (its top-level
  `server:`) is every variant's: such a run is refused whatever the user chooses.

Sources (Microsoft Learn): HAS_PERMS_BY_NAME (server permissions ALTER ANY EVENT SESSION, ALTER TRACE, ALTER
SETTINGS); SERVERPROPERTY (EngineEdition, ProductVersion); sys.configurations (is_dynamic).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..background.sqltrace import NO_TRACE_EDITIONS
from ..background.xevents import MAX_DURATION_FROM, UNBOUNDED_XE_FIX
from ..engines import mssql_config as mc
from ..engines.base import ChangePolicy
from ..engines.sqlserver import YEARS
from ..engines.registry import spec
from ..scenario.model import BackgroundKind, Scenario, Variant

SKIP_OPTION = "--skip-unrunnable"


class Unrunnable(StrEnum):
    """Why a variant cannot run on a server concurbench does not own (the words a skipped variant is recorded by)."""

    TRACE_FLAG = "needs a global trace flag"
    RESTART = "needs a server restart"
    SERVER_CHANGES = "needs a server-wide change"
    PERMISSION = "needs a permission"
    NO_MAX_DURATION = "needs an observer that stops by itself"
    UNSUPPORTED = "needs what the server lacks"
    DATABASE = "needs database options in a database of concurbench's"


FIXES = {
    Unrunnable.TRACE_FLAG: mc.TRACE_FLAG_FIX,
    Unrunnable.RESTART: ("run it where concurbench may restart the server (--target docker), or add --server-settings "
                         "as-is to run on this server as it is, whose figures are then not those of the scenario's "
                         "setup (the run records each difference)"),
    Unrunnable.SERVER_CHANGES: ("add --allow-server-changes to let concurbench make the change for the run and put it "
                                "back afterwards, or --server-settings as-is to run on the server as it is"),
    Unrunnable.NO_MAX_DURATION: UNBOUNDED_XE_FIX,
    Unrunnable.UNSUPPORTED: "run it on SQL Server or Azure SQL Managed Instance, or use an xevents observer",
    Unrunnable.DATABASE: ("leave the database out of --dsn so that concurbench creates its own, or add "
                          "--server-settings as-is"),
}


@dataclass(frozen=True)
class Need:
    """Something a variant (None: the scenario itself, so every variant) needs that the server will not give."""

    variant: str | None
    reason: Unrunnable
    what: str  # "trace flag 7006 on server-wide"
    fix: str

    def says(self) -> str:
        """The words a skipped variant is recorded by."""
        return f"{self.reason}: {self.what}; {self.fix}"


RUN_DATABASE = "SELECT DB_NAME() AS database_name"
SERVER_FACTS = ("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition, "
                "CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS product_version, SUSER_SNAME() AS login, "
                "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER ANY EVENT SESSION') AS alter_event_session, "
                "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER TRACE') AS alter_trace, "
                "HAS_PERMS_BY_NAME(NULL, NULL, 'ALTER SETTINGS') AS alter_settings")


def plan(scenario: Scenario, variants: list[Variant], conn, policy: ChangePolicy) -> list[Need]:
    """What the server will not give each variant (and the scenario), read over `conn` without changing anything;
    [] on a server concurbench owns."""
    if policy.owned:
        return []
    if scenario.engine == "postgres":
        return [Need(v.name, Unrunnable.RESTART, f"server settings of its own ({_pairs(v.settings)}), applied with a "
                                                 f"restart", FIXES[Unrunnable.RESTART])
                for v in variants if dict(v.settings) and {**dict(scenario.settings), **dict(v.settings)}
                != dict(scenario.settings)]
    return SqlServerNeeds(conn, policy).plan(scenario, variants)


class SqlServerNeeds:
    """SQL Server's needs, read once from the server (its version, edition, the login's permissions) and planned
    with the configurator's own functions (mssql_config.plan_server, plan_database)."""

    def __init__(self, conn, policy: ChangePolicy):
        self.conn, self.policy = conn, policy
        self.database = str(conn.execute(RUN_DATABASE).fetchone()[0])  # the connection's: the run's database
        row = conn.execute(SERVER_FACTS).fetchone()
        self.edition, self.login = int(row[0] or 0), str(row[2] or "the login")
        self.major = int(str(row[1] or "0").split(".")[0] or 0)
        self.may = {"ALTER ANY EVENT SESSION": bool(row[3]), "ALTER TRACE": bool(row[4]), "ALTER SETTINGS": bool(row[5])}

    def plan(self, scenario: Scenario, variants: list[Variant]) -> list[Need]:
        whole = self._settings(None, dict(scenario.settings), dict(scenario.database))
        out, seen = list(whole), {n.what for n in whole}
        for v in variants:
            mine = self._settings(v.name, {**dict(scenario.settings), **dict(v.settings)},
                                  {**dict(scenario.database), **dict(v.database)}) + self._observers(v)
            out += [n for n in mine if n.what not in seen]
        return out

    def _grant(self, permission: str) -> str:
        return f"have an administrator run GRANT {permission} TO [{self.login}]"

    def _settings(self, variant: str | None, settings: dict, database: dict) -> list[Need]:
        wanted = {k: v for k, v in settings.items() if k not in mc.CONTAINER_KEYS}
        names = list(wanted) + ([mc.ADVANCED] if mc.configure_names(wanted) else [])
        current = mc.read_server(self.conn, names)
        needs = []
        flags = sorted(set(mc.flag_numbers(wanted.pop("trace_flags", None))) - set(current.get("trace_flags") or []))
        needs += [Need(variant, Unrunnable.TRACE_FLAG, f"trace flag {flag} on server-wide", FIXES[Unrunnable.TRACE_FLAG])
                  for flag in flags]
        directory, files = mc.tempdb_layout(self.conn) if "tempdb_files" in wanted else ("", [])
        restart_options = mc.restart_only(self.conn) if mc.configure_names(wanted) else ()
        server = mc.plan_server(current, wanted, owned=False, tempdb_dir=directory, tempdb_names=files,
                                restart_options=restart_options, as_is=True)
        for change in server.changes:
            if change.what.startswith(f"sp_configure {mc.ADVANCED}:") or self.policy.as_is:
                continue
            if change.restart:
                needs.append(Need(variant, Unrunnable.RESTART, change.what, FIXES[Unrunnable.RESTART]))
            elif not self.policy.allow_server_changes:
                needs.append(Need(variant, Unrunnable.SERVER_CHANGES, change.what, FIXES[Unrunnable.SERVER_CHANGES]))
            elif change.setting is not None and not self.may["ALTER SETTINGS"]:
                needs.append(Need(variant, Unrunnable.PERMISSION, f"{change.what}, which needs ALTER SETTINGS",
                                  self._grant("ALTER SETTINGS")))
        if database and not self.policy.owns_database and not self.policy.as_is:
            changes = mc.plan_database(mc.read_database(self.conn, self.database), database, self.database).changes
            needs += [Need(variant, Unrunnable.DATABASE, c.what, FIXES[Unrunnable.DATABASE]) for c in changes]
        return needs

    def _observers(self, variant: Variant) -> list[Need]:
        needs = []
        for b in variant.background:
            if b.kind is BackgroundKind.XEVENTS:
                if not self.may["ALTER ANY EVENT SESSION"]:
                    needs.append(Need(variant.name, Unrunnable.PERMISSION, f"Extended Events observer {b.name}, which "
                                      f"needs ALTER ANY EVENT SESSION", self._grant("ALTER ANY EVENT SESSION")))
                if self.major < MAX_DURATION_FROM and not self.policy.xe_without_max_duration:
                    needs.append(Need(variant.name, Unrunnable.NO_MAX_DURATION, f"Extended Events observer {b.name} on "
                                      f"SQL Server {YEARS.get(self.major, self.major)}, which has no MAX_DURATION",
                                      FIXES[Unrunnable.NO_MAX_DURATION]))
            elif b.kind is BackgroundKind.SQL_TRACE:
                if self.edition in NO_TRACE_EDITIONS:
                    needs.append(Need(variant.name, Unrunnable.UNSUPPORTED, f"SQL Trace observer {b.name} on "
                                      f"{NO_TRACE_EDITIONS[self.edition]}", FIXES[Unrunnable.UNSUPPORTED]))
                elif not self.may["ALTER TRACE"]:
                    needs.append(Need(variant.name, Unrunnable.PERMISSION, f"SQL Trace observer {b.name}, which needs "
                                      f"ALTER TRACE", self._grant("ALTER TRACE")))
        return needs


def refusal(needs: list[Need], scenario: Scenario, where: str) -> str:
    """One paragraph: which variants cannot run on this server and why, and the ways forward."""
    whole = [n for n in needs if n.variant is None]
    parts = []
    if whole:
        parts.append(f"every variant {_joined(whole)}")
    by_variant: dict[str, list[Need]] = {}
    for n in needs:
        if n.variant is not None:
            by_variant.setdefault(n.variant, []).append(n)
    parts += [f"{name} {_joined(mine)}" for name, mine in by_variant.items()]
    fixes = list(dict.fromkeys(n.fix for n in needs))
    ways = "; or ".join(fixes)
    if not whole:
        others = [v.name for v in scenario.variants if v.name not in by_variant]
        ways += (f"; or add {SKIP_OPTION} to run " + (f"the others ({', '.join(others)})" if others else "nothing")
                 + " and skip these (claims on them are not evaluated), or leave them out with --variant")
    return (f"{scenario.name} cannot run to its end on {spec(scenario.engine).display} at {where}: "
            f"{'; '.join(parts)}. Nothing was run, and nothing was changed that is not put back. To go on, {ways}")


def _joined(needs: list[Need]) -> str:
    """`needs a global trace flag: trace flag 7006 on server-wide, and a permission: ...`"""
    grouped: dict[Unrunnable, list[str]] = {}
    for n in needs:
        grouped.setdefault(n.reason, []).append(n.what)
    return ", and ".join(f"{reason} ({', '.join(whats)})" for reason, whats in grouped.items())


def _pairs(settings) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings)

