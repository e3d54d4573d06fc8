"""The probe's steps, in order, on a server from any provisioner: connect; plan the settings; count the
connections the run opens at once against what the server gives; check the permissions; read each
sampler once (one that fails is read again after the setup, inside its transaction, as it may need
what the setup creates: deferred.py); start and stop each background session; run the setup, the
probe queries and the teardown inside a transaction that is rolled back; check that nothing was left
behind; let the server go. A step that fails is a failed `Check` and the probe goes on with the next
one, so one probe lists every problem it can reach.

What differs by engine is in postgres.py and mssql.py (`side_for`). The provisioner is made without
the scenario's settings, so starting it applies none (a dsn server's `start` only connects): the
probe plans them instead. What the server lets a run change, and what a run would do about its
database on a server concurbench does not own, are the provisioner's answers (`policy`, `inspect`).
Samplers, background sessions and the engine come from the same registries
the runner uses; tests hand in stand-ins through `backgrounds` and `engine`."""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Callable

from ..util import first_line
from ..background.base import close_quietly
from ..background.kinds import make_background
from ..background.mssql_common import ObserverScope
from ..engines.registry import get_engine
from ..errors import ConcurbenchError
from ..samplers.registry import build as build_samplers
from ..engines.base import ChangePolicy
from ..provisioners.base import Inspection, Provisioner
from ..provisioners.owned import Ownership
from ..running.needs import SKIP_OPTION, plan as plan_needs
from ..scenario.model import Scenario, Variant
from . import mssql, postgres
from .common import connections
from .deferred import DeferredSamplers, spec_key
from .report import Check, ProbeReport, failed, ok

SIDES = {"postgres": postgres.PostgresSide, "mssql": mssql.SqlServerSide}
CONNECT_FIX = "check the server is up and the connection settings (--dsn, --password-env); `concurbench doctor`"


def probe(scenario: Scenario, provisioner: Provisioner, *, variants: list[Variant] | None = None, engine=None,
          backgrounds: Callable = make_background, clock: Callable[[], float] = time.monotonic) -> ProbeReport:
    """Probe `scenario` (its `variants`, all by default) on the server `provisioner` gives, under what it lets a
    run change (its `policy`: --allow-server-changes, --server-settings as-is, --allow-xe-without-max-duration).
    Never raises a ConcurbenchError: every problem is a check of the report."""
    started = clock()
    eng = engine or get_engine(scenario.engine)
    chosen = list(variants) if variants is not None else list(scenario.variants)
    report = ProbeReport(scenario.name, str(scenario.path), scenario.engine, provisioner.name)
    policy = provisioner.policy()
    conn, up = None, False
    try:
        try:
            inspection = provisioner.inspect()
            plan = inspection.plan if inspection is not None else None
            side = SIDES[scenario.engine](eng, owned=policy.owned, allowed=policy.allow_server_changes,
                                          as_is=policy.as_is, database_plan=plan)
            if inspection is not None and inspection.refusal:
                report.connection = inspection.connection.safe
                report.add(failed("connect", "not connected to the run's database: it is not concurbench's",
                                  "see the database check"), _refused(eng, inspection, side, scenario, chosen))
                return report
            connection = provisioner.start()
            up = True
            report.connection = connection.safe
            conn = eng.connect(connection.conninfo, application_name="concurbench:probe")
            info = eng.server_info(conn, [])
        except ConcurbenchError as exc:
            report.add(failed("connect", first_line(exc), CONNECT_FIX))
            return report
        report.server = info.get("version_short", "")
        report.add(ok("connect", info.get("version", "")))
        if inspection is not None:
            report.add(_database(inspection, side.database_changes(scenario, chosen)))
        try:
            here = scenario.on_server(report.server)
            chosen = [here.variant(v.name) for v in chosen]
        except ConcurbenchError as exc:
            report.add(failed("scenario on this server", first_line(exc), "see the scenario's versions: conditions"))
            return report
        before = _step(report, "read the server's state", lambda: side.snapshot(conn, here, chosen))
        _step(report, "settings", lambda: side.settings(conn, here, chosen))
        _step(report, "connections", lambda: [connections(here, chosen, lambda sql: eng.query_rows(
            conn, sql, "reading the server's connection limit"), owned=policy.owned)])
        _step(report, "permissions", lambda: side.permissions(conn, here, chosen))
        _step(report, "variants", lambda: _needs(here, chosen, conn, side, policy))
        scope = ObserverScope(run_id=connection.run_id, guest=not policy.owned,
                              unbounded_xe=policy.xe_without_max_duration)
        deferred = DeferredSamplers(info.get("version_num", 0), side.fix)
        _step(report, "samplers", lambda: _samplers(eng, connection.conninfo, info.get("version_num", 0), chosen,
                                                    side, deferred))
        _step(report, "background sessions", lambda: _backgrounds(eng, connection.conninfo, chosen, side, backgrounds,
                                                                   scope))
        _step(report, "setup", lambda: side.setup(conn, here, chosen, after_setup=deferred.read))
        report.add(*deferred.unread())
        if before is not None:
            _step(report, "nothing left behind", lambda: [side.left_behind(conn, here, chosen, before)])
    finally:
        close_quietly(conn)
        if up:
            try:
                provisioner.stop()
            except ConcurbenchError as exc:
                report.add(failed("let the server go", first_line(exc), "`concurbench gc` stops what a run left"))
        report.elapsed_s = clock() - started
    return report


def _database(inspection: Inspection, changes: list[str]) -> Check:
    """The database a run on a server concurbench does not own uses, whose it is, and what the run does to it."""
    plan, kept = inspection.plan, inspection.keep_database
    name = plan.name
    if plan.ownership == Ownership.CREATE:
        says = (f"{name}: did not exist; created for this probe and dropped at its end. A run creates it the same "
                f"way (a copy of template1, marked as concurbench's) and " +
                ("keeps it (--keep-database)" if kept else "drops it when it ends (--keep-database keeps it)"))
    elif plan.ownership == Ownership.OWN:
        says = f"{name}: concurbench's own ({plan.marker.text}); a run " + \
            ("drops it when it ends" if plan.drops_at_end(kept) else "keeps it")
    elif plan.may_mark:
        says = f"{name}: holds no objects; a run marks it as concurbench's (it stays, as do later runs' uses of it)"
    else:
        says = (f"{name}: holds no objects; it cannot be marked (the role does not own it, or it has a comment of "
                f"someone else's), so a run uses it unmarked, and a run killed in it leaves objects that make the "
                f"next run refuse it")
    return ok("database", says + (". Changes to the database: " + "; ".join(changes) if changes else
                                  ". No other change to the database"))


def _refused(eng, inspection: Inspection, side, scenario: Scenario, variants: list[Variant]) -> Check:
    """A database that is not concurbench's: refused, with its objects the run would drop or change."""
    says = inspection.refusal
    if inspection.plan.ownership == Ownership.FOREIGN:
        conn = None
        try:
            conn = eng.connect(inspection.connection.conninfo, application_name="concurbench:probe")
            touched = side.would_touch(conn, scenario, variants)
        except ConcurbenchError as exc:
            touched = [f"(could not read them: {first_line(exc)})"]
        finally:
            close_quietly(conn)
        says += (". The run's statements would touch these of its objects: " + "; ".join(touched) if touched else
                 ". None of its objects has a name the run's statements use, but concurbench runs only in a "
                 "database of its own")
    return failed("database", says, "let concurbench create its own database (leave the database out of --dsn; "
                                    "the role needs CREATEDB or dbcreator), or name an empty database")


def _step(report: ProbeReport, name: str, run: Callable):
    """One step of the probe; what it raises (a lost connection, a driver error) is a failed check of its own."""
    try:
        result = run()
    except Exception as exc:  # noqa: BLE001 - the probe goes on and reports it
        report.add(failed(name, first_line(exc), "the step stopped here; the server's words say why"))
        return None
    if isinstance(result, list):
        report.add(*result)
    return result


def _samplers(eng, conninfo: str, version_num: int, variants: list[Variant], side,
              deferred: DeferredSamplers) -> list[Check]:
    """Each distinct sampler of the variants, read once on a connection of its own, as the runner's driver does;
    one that fails is handed to `deferred`, to be read again after the setup (it may need what the setup creates)."""
    specs = list({spec_key(spec): spec for v in variants for spec in v.samplers}.values())
    if not specs:
        return []
    try:
        conn = eng.connect(conninfo, application_name="concurbench:sampler")
    except ConcurbenchError as exc:
        return [failed("samplers: connect", first_line(exc), CONNECT_FIX)]
    checks = []
    try:
        for spec, sampler in zip(specs, build_samplers(specs)):
            name = f"sampler {sampler.name}"
            try:
                sampler.prepare(conn, version_num)
                sampler.read(conn)
            except Exception as exc:  # noqa: BLE001 - a driver error is the server's answer
                deferred.add(spec, first_line(exc))
                with contextlib.suppress(Exception):
                    conn.rollback()
                continue
            missing = "; ".join(f"{k}: {why}" for k, why in sampler.unavailable().items())
            checks.append(ok(name, "read once" + (f" ({missing})" if missing else "")))
    finally:
        close_quietly(conn)
    return checks


def _needs(scenario: Scenario, variants: list[Variant], conn, side, policy: ChangePolicy) -> list[Check]:
    """The run's plan of what each variant needs of this server (running/needs.py), as the run makes it."""
    policy = replace(policy, owns_database=side.database_owned(conn))
    found = plan_needs(scenario, variants, conn, policy)
    if not found:
        return [ok("variants", f"every variant can run on this server ({', '.join(v.name for v in variants)})")]
    skip = "" if any(n.variant is None for n in found) else f"; or run with {SKIP_OPTION} to skip it"
    return [failed(f"variant {n.variant}" if n.variant else "every variant", f"{n.reason}: {n.what}", n.fix + skip)
            for n in found]


def _backgrounds(eng, conninfo: str, variants: list[Variant], side, make: Callable,
                 scope: ObserverScope | None = None) -> list[Check]:
    """Each background session (and observer) started and stopped once. Their statements run in the setup's
    transaction instead (side.setup), where the objects they read exist."""
    checks = []
    seen = set()
    for variant in variants:
        for spec in variant.background:
            if (spec.name, spec.kind) in seen:
                continue
            seen.add((spec.name, spec.kind))
            name = f"background {spec.name} ({spec.kind})"
            session = None
            try:
                session = make(side.background_spec(spec), conninfo, eng, scope=scope)
                session.start()
            except ConcurbenchError as exc:
                checks.append(failed(name, first_line(exc), side.fix(first_line(exc), f"start {spec.kind}")))
                continue
            finally:
                if session is not None:
                    session.close()
            error = (session.describe() or {}).get("error")
            checks.append(failed(name, f"stopping it: {error}", side.fix(error, f"stop {spec.kind}")) if error
                          else ok(name, "started and stopped"))
    return checks
