"""What both engines' halves of the probe share."""

from __future__ import annotations

import re
from dataclasses import replace

from ..running.guards import capacity
from ..scenario.model import BackgroundKind, Scenario, Variant
from .report import Check, failed, ok, skipped

# Statements whose effects a rollback does not undo, or that end the probe's own transaction: the
# probe does not run them and says so.
NOT_UNDONE = re.compile(r"\b(pg_stat_\w*reset\w*|pg_stat_statements_reset|setval|pg_advisory_lock\w*|"
                        r"pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile|pg_switch_wal|"
                        r"dblink\w*|DBCC|sp_configure|RECONFIGURE|xp_\w+)\b", re.I)
TRANSACTION_CONTROL = re.compile(r"^\s*(COMMIT|END|ROLLBACK|ABORT|BEGIN\s*(TRAN|TRANSACTION|WORK|ISOLATION|;|$)|"
                                 r"START\s+TRANSACTION|SAVEPOINT|RELEASE|PREPARE\s+TRANSACTION)\b", re.I)
CREATES = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+|OR\s+ALTER\s+|UNLOGGED\s+|UNIQUE\s+)?"
                     r"(TABLE|VIEW|FUNCTION|PROCEDURE|PROC|INDEX|SEQUENCE|TYPE|MATERIALIZED)\b", re.I)


def without_statements(spec):
    """A held transaction that begins and ends without the scenario's statements (they need the setup's
    objects, which exist only inside the probe's own transaction)."""
    if spec.kind is BackgroundKind.STATEMENT:  # it would run once a window began; its SQL goes in the rolled-back one
        return replace(spec, sql=())
    if spec.kind is not BackgroundKind.HOLD_TRANSACTION:
        return spec
    return replace(spec, sql=(), release_after=None, release_when=None)


def why_not_run(statement: str) -> str | None:
    """Why the probe leaves a statement out of its rolled-back transaction, or None to run it."""
    if TRANSACTION_CONTROL.match(statement):
        return "it ends or changes the probe's own transaction"
    found = NOT_UNDONE.search(statement)
    if found:
        return f"a rollback does not undo {found.group(1)}"
    return None


def background_statements(variant) -> list[tuple[str, str]]:
    """(what, sql) of each statement the variant's held transactions and timed statements run: in the setup's
    transaction."""
    out = []
    for spec in variant.background:
        if spec.kind not in (BackgroundKind.HOLD_TRANSACTION, BackgroundKind.STATEMENT):
            continue
        out += [(f"background {spec.name}", sql) for sql in spec.sql]
        if spec.release_when:
            out.append((f"background {spec.name} release_when", spec.release_when))
    return out


def scenario_sql(scenario, variants) -> str:
    """Every setup statement of the scenario and the variants, for what it creates."""
    return "\n".join(step.sql for step in (*scenario.setup, *(s for v in variants for s in v.setup)))


def labelled(prefix: str, steps) -> list[tuple[str, object]]:
    """(check name, step) of each SQL step: `setup (file.sql)`, numbered when there are several."""
    if len(steps) == 1:
        return [(f"{prefix} ({steps[0].origin})", steps[0])]
    return [(f"{prefix} {i} ({step.origin})", step) for i, step in enumerate(steps, 1)]


def connections(scenario: Scenario, variants: list[Variant], query, *, owned: bool) -> Check:
    """The most connections a variant run opens at once (guards.capacity), against what the server gives."""
    found = capacity(scenario, variants, query, owned=owned)
    if found.fits is None:
        return skipped("connections", found.says)
    return ok("connections", found.says) if found.fits else failed("connections", found.says, found.fix)
