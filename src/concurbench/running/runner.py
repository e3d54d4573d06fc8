"""Run a scenario: provision, set up, run every variant at every sweep point, sample, clean up.

The runner never prints: it tells a listener its progress (progress_events.py) and returns (or, on
failure, raises after saving) a run directory. Whatever was measured before a failure or a Ctrl-C is
written; servers, background sessions and worker processes are always ended. It builds the run's
result (results/model.py) once, has the store write it and then renders report.md from it; until
then the run directory holds a manifest saying "running" and a journal of the finished variant
runs, so a run killed outright still says what it was and what finished. Before any of that, the
resource guards (guards.py) check what each variant run would open. Each server's life is a ServerSession
(servers.py), each variant run's steps are VariantRuns' (variant_runs.py); the runner decides what runs
where and when, keeps what finished, judges the claims and saves the run.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from . import liveruns
from .. import stats
from ..check import CheckPolicy, Sequential, judge_claims, with_differences, with_machine
from ..check.evaluate import Skip, left_out
from ..check.rounds import Stop
from ..cluster.breakdown import LOST
from ..cluster.load import ClusterLoads
from ..engines.registry import get_engine
from ..errors import ConcurbenchError, ConfigError, Interrupted, RunError, Unsupported
from ..provisioners.base import Provisioner
from ..provisioners.registry import EMBEDDED, TargetSpec
from ..report.render import RunReport
from ..report.tables import Report
from ..results.machine import MachineLoad
from ..results.model import FORMAT_VERSION, Cause, ClaimVerdict, PublishedFigure, Run, RunStatus, ScenarioInfo, \
    ServerInfo, ShardInfo, VariantRun
from ..results.shards import Plan, Shard, refuse_with_check
from ..results.store import checkout_of, create_run_dir, host_info, now_iso, record_variant_run, save_run, start_run
from ..scenario.model import Scenario, Variant
from ..util import suggest
from ..workload.cpu_wait import cpus_in_use
from .guards import check_scenario
from .plan import PlannedRun, in_round, plan_runs, round_runs, without
from .progress_events import CheckLook, Listener, Planned, RepeatStarted, RunWarning
from .servers import ServerSession, deferred_interrupts
from .variant_runs import VariantRuns


def incomplete_error(results: list[VariantRun]) -> RunError | None:
    """The error of a run in which some worker process (or a cluster's load host) sent no results: which variant
    runs lack its sessions."""
    partial = [r for r in results if r.status == RunStatus.INCOMPLETE]
    if not partial:
        return None
    names = ", ".join(dict.fromkeys(
        r.variant + (f"@{r.point}" if r.point is not None else "") + (f" on {r.server}" if r.server else "")
        + (f" ({r.workers.reported} of {r.workers.started} worker processes reported)" if r.workers else "")
        for r in partial))
    lost = list(dict.fromkeys(h["host"] for r in partial for h in r.hosts if h.get("status") == LOST))
    who = f"load host{'s' if len(lost) > 1 else ''} {', '.join(lost)} sent no results" if lost \
        else "a worker process sent no results"
    return RunError(f"incomplete variant runs: {names}; {who}, so their figures "
                    f"leave out its sessions: they are marked incomplete and claims on them were not evaluated")


@dataclass
class RunOutcome:
    run: Run
    error: ConcurbenchError | None = None
    report: Report | None = None  # the tables report.md was written from, to print as they are

    @property
    def run_dir(self) -> Path:
        return self.run.path

    @property
    def status(self) -> RunStatus:
        return self.run.status

    @property
    def results(self) -> list[VariantRun]:
        return self.run.variant_runs

    @property
    def claims(self) -> list[ClaimVerdict]:
        return self.run.claims

    @property
    def claims_failed(self) -> int:
        return self.run.claims_failed

    def files_left(self) -> list[str]:
        """The files observers wrote on a server that could not remove them (a dsn server), as patterns, once each."""
        return list(dict.fromkeys(pattern for r in self.results for b in r.background
                                  if b.get("files") and not b.get("files_removed") for pattern in b["files"]))


class Runner:
    """Runs a scenario on one server, or on several in turn (a version matrix), into one run directory."""

    def __init__(self, scenario: Scenario, provisioner, *, out_dir: Path | str = "results",
                 progress: Listener | None = None, processes: int | None = None,
                 variants: list[str] | None = None, target: TargetSpec = EMBEDDED, repeat: int = 1,
                 check: CheckPolicy | None = None, shard: Shard | None = None, skip_unrunnable: bool = False,
                 decider: Sequential | None = None, cluster: ClusterLoads | None = None):
        self.scenario = scenario
        self.provisioners = list(provisioner) if isinstance(provisioner, (list, tuple)) else [provisioner]
        self.out_dir = Path(out_dir)
        self.progress = progress or Listener()
        self.processes = processes
        self.only = variants
        self.target = target
        self.repeat = max(1, repeat)
        self.check = check  # --check: repeat what open claims need until they are decided
        self.skip_unrunnable = skip_unrunnable  # run the variants a server can run, skip the others (needs.py)
        # what decides instead of the scenario's claims, with the check's rounds (check/across.py: two servers
        # side by side); its verdicts are the run's claims
        self.decider = decider
        self.sequential: Sequential | None = None  # --check: its looks and rounds (check/rounds.py)
        self.eng = get_engine(scenario.engine)
        self.unsupported: dict[str, str] = {}  # variants the server could not run, and why
        self._recorded: list[ServerInfo] = []  # the servers of the run, in the order they started
        self._skipped_on: set[tuple[str, str]] = set()  # (variant, server) pairs not to try again
        # --shard: the plan of the whole run and this shard's (server position, repeat, variant, point)s;
        # ConfigError here, before any server starts, when the run has fewer combinations than shards
        self.shard = shard
        refuse_with_check(shard, check is not None)
        self.plan = None if shard is None else Plan.of(len(self.provisioners), self._variants_or_all(), self.repeat)
        self.share = None if shard is None else {(c.server, c.repeat, c.variant, c.point)
                                                 for c in shard.combinations(self.plan)}
        self.schedule: list[PlannedRun] = []  # the variant runs to come, announced as the progress event Planned
        self._finished = 0  # variant runs done, the schedule's first entries
        self._run_dir: Path | None = None
        self._started = ""
        self._unkept: str | None = None  # why finished variant runs could not be journalled
        self._servers: list[ServerSession] = []
        self.cluster = cluster  # run --cluster: each variant run's load from the cluster's hosts
        self._measure = VariantRuns(scenario, self.eng, self.progress, processes,
                                    **({"load": cluster} if cluster is not None else {}))
        self._machine = MachineLoad(os.cpu_count() or 1)  # how busy the machine is: at the start, at each pause

    def run(self) -> RunOutcome:
        variants = self._variants()  # before anything: a --variant the scenario lacks, or a run too big to hold
        check_scenario(self.scenario, variants, processes=self.processes, target=self.target)
        run_dir = self._run_dir = create_run_dir(self.out_dir, self.scenario.name)
        started = self._started = now_iso()
        cpus = os.cpu_count() or 1
        self._machine = MachineLoad(cpus, round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None)
        self._pause()  # what others use of the machine before anything of the run's starts
        results: list[VariantRun] = []
        status, error = RunStatus.OK, None
        servers = self._servers = [self.session(p, i) for i, p in enumerate(self.provisioners)]
        self._recorded = []
        # With repeats, a version matrix keeps every server up and runs each variant on each in turn,
        # so drift of the machine hits every server alike; a single pass takes one server at a time.
        together = self.repeat > 1 or self.check is not None or self.decider is not None
        batches = [servers] if together else [[server] for server in servers]
        if self.share is not None:  # a server with nothing in the shard is not started
            used = {server for server, *_ in self.share}
            batches = [b for b in ([s for s in batch if s.position in used] for batch in batches) if b]
        self.schedule = plan_runs(variants, len(servers), range(1, self.repeat + 1), together=together,
                                  share=self.share)
        self._mark_running(first=True)
        live, report = None, RunReport()
        if self.decider is not None:
            self.sequential = self.decider
        elif self.check is not None and self.scenario.expect:
            self.sequential = Sequential(self.scenario, self.check, first=self.repeat)
        try:
            live = liveruns.register(run_dir)
            self._announce()
            for batch in batches:
                try:
                    self._run_batch(batch, variants, results)
                finally:
                    with deferred_interrupts():
                        for server in batch:
                            server.release()
            error = incomplete_error(results)
            status = RunStatus.INCOMPLETE if error else status
        except KeyboardInterrupt:
            status, error = RunStatus.INTERRUPTED, Interrupted("interrupted: the run was stopped; results measured so far were kept")
        except ConcurbenchError as exc:
            status, error = RunStatus.FAILED, exc
        except Exception as exc:  # noqa: BLE001 - an unexpected error still ends with a cleanup and a saved run
            status, error = RunStatus.FAILED, RunError(f"unexpected {type(exc).__name__}: {exc}", exc)
        finally:
            with deferred_interrupts():
                for server in servers:
                    server.release()
                self._machine = self._machine.with_waits(results)
                verdicts = with_machine(with_differences(self._final_verdicts(results, status), self._recorded),
                                        self._machine) if self.scenario.expect or self.decider is not None else []
                run, unsaved = save_run(self._result(run_dir, started, status, error, results, verdicts),
                                        also=report.write)
                if unsaved is not None and error is None:
                    error = RunError(unsaved)
                liveruns.unregister(live)
        return RunOutcome(run, error, report.of(run))

    def _mark_running(self, first: bool = False) -> None:
        """The manifest of the run in progress (again once a server is known): a killed run still says what it
        was. A directory that cannot take the first is a ConfigError, before any server; later ones may fail."""
        if self._run_dir is None:  # a server started outside run() (tests of the runner's steps)
            return
        try:
            start_run(self._result(self._run_dir, self._started, RunStatus.RUNNING, None, [], []), planned=len(self.schedule))
        except ConfigError:
            if first:
                with contextlib.suppress(OSError):
                    self._run_dir.rmdir()
                raise

    def _announce(self) -> None:
        """Tell the progress display the variant runs to come (again whenever the schedule changes): a shard's
        share of the whole run's, and whether --check may add rounds."""
        shard = (str(self.shard), len(self.plan.combinations())) if self.shard is not None else (None, None)
        self.progress.on_plan(Planned(tuple(self.schedule), *shard, check=self.sequential is not None))

    def _kept(self, result: VariantRun) -> None:
        """A variant run finished: journal it (a killed run keeps it) and count it against the schedule."""
        self._finished += 1
        unkept = record_variant_run(self._run_dir, result) if self._run_dir is not None else None
        if unkept is not None and self._unkept is None:
            self._unkept = unkept
            self.progress.on_warning(RunWarning(f"finished variant runs cannot be kept until the end ({unkept}); "
                                                f"they stay in memory"))

    def _result(self, run_dir: Path, started: str, status: RunStatus, error: ConcurbenchError | None,
                results: list[VariantRun], verdicts: list[ClaimVerdict]) -> Run:
        s = self.scenario
        shard = None if self.shard is None else ShardInfo(self.shard.index, self.shard.count, self.plan, [
            server.version if server.started and server.info is not None else None for server in self._servers])
        return Run(scenario=ScenarioInfo.of(s, checkout_of(s.path)), status=status, error=error.message if error else None,
                   servers=list(self._recorded), target=self.target.name, host=host_info(),
                   processes=self.processes or os.cpu_count(), repeat=self.repeat, started=started, ended=now_iso(),
                   variant_runs=list(results), published=[PublishedFigure(**p.__dict__) for p in s.source.published],
                   claims=list(verdicts), skipped=dict(self.unsupported), format_version=FORMAT_VERSION, path=run_dir,
                   shard=shard, machine=self._machine,
                   load_hosts=self.cluster.manifest() if self.cluster is not None else [])

    def _final_verdicts(self, results: list[VariantRun], status: RunStatus) -> list[ClaimVerdict]:
        """The claims' verdicts at the end: the last look of a check, or one look at all that was measured."""
        if self.shard is not None:  # a shard holds part of the data: `merge` judges the claims on all of it
            return shard_verdicts(self.scenario, results, self.shard)
        skipped = self._skipped(results, status)
        if self.sequential is not None:
            return self.sequential.final(results, skipped)
        return judge_claims(list(self.scenario.expect), results, skipped=skipped, quick=self.scenario.quick)

    def _skipped(self, results: list[VariantRun], status: RunStatus) -> dict[str, Skip]:
        """Variants a claim may name that have no run, and why (claims on them are not evaluated)."""
        chosen = {v.name for v in self._variants_or_all()}
        ran = {r.variant for r in results}
        out = {}
        for v in self.scenario.variants:
            if v.name in self.unsupported:
                out[v.name] = Skip(Cause.NOT_RUN, f"skipped by the server: {self.unsupported[v.name]}")
            elif v.name not in chosen:
                out[v.name] = left_out()
            elif v.name not in ran:
                ended = "was interrupted" if status == RunStatus.INTERRUPTED else "ended"
                out[v.name] = Skip(Cause.NOT_RUN, f"not run: the run {ended} first")
        return out

    def session(self, provisioner: Provisioner, position: int = 0) -> ServerSession:
        """A server of the run, not started yet."""
        return ServerSession(provisioner, position, scenario=self.scenario, engine=self.eng, target=self.target,
                             progress=self.progress, skip_unrunnable=self.skip_unrunnable)

    def _start(self, server: ServerSession) -> None:
        """Start one server and set it up; the run records what it is as soon as it is known. The variants it cannot
        run (--skip-unrunnable) are skipped on it, each by its typed reason."""
        server.start(self._variants(), self._described)
        for name, needs in server.unrunnable.items():
            self._skip(name, server, "; ".join(n.says() for n in needs))

    def _skip(self, name: str, server: ServerSession, why: str) -> None:
        """Skip a variant on a server: recorded with why, left out of the schedule, and said."""
        self.unsupported.setdefault(name, why)
        self._skipped_on.add((name, server.version))
        self.progress.on_warning(RunWarning(f"{name} skipped: {why}"))
        self.schedule = without(self.schedule, self._finished, name, server.position)
        self._announce()

    def _described(self, info: ServerInfo) -> None:
        self._recorded.append(info)
        self._mark_running()

    def _run_batch(self, servers: list[ServerSession], variants: list[Variant], results: list[VariantRun]) -> None:
        for server in servers:
            self._start(server)
        # repeats interleave (A B B A, not A A B B) so that drift hits every variant alike (plan.in_round)
        for repeat in range(1, self.repeat + 1):
            for variant in in_round(variants, repeat):
                for server in in_round(servers, repeat):
                    self._variant_on(server, variant, repeat, results)
        if self.sequential is not None:
            self._decide(servers, variants, results)
        for server in servers:
            server.teardown()

    def _decide(self, servers: list[ServerSession], variants: list[Variant], results: list[VariantRun]) -> None:
        """--check: the rounds the check asks for (check/rounds.py), each run interleaved, until it stops."""
        seq = self.sequential
        versions = [s.version for s in servers]
        while True:
            step = seq.next_round(results, skipped=self._skipped(results, RunStatus.OK), busy=self._machine.contended,
                                  servers=versions, running={v.name for v in variants} - set(self.unsupported))
            if step.widened:
                self.progress.on_warning(RunWarning(
                    f"--check: the machine is busy ({self._machine.short()}): up to {seq.max_repeats} runs a side "
                    f"instead of {self.check.max_repeats}"))
            if step.taken is not None and step.taken.open:
                self.progress.on_check(CheckLook(step.taken.look, step.taken.of, step.taken.open, step.taken.runs))
            if step.stop is Stop.BUDGET:
                self.progress.on_warning(RunWarning("--check: the next round would pass the time budget; "
                                                    "stopping with the claims still open"))
            if step.stop is not None:
                return
            repeat, wanted = step.repeat, step.wanted
            if seq.renews(repeat):  # a new instance of every server: what one start of a server does to its
                for server in servers:  # figures is spread over the run's starts instead of lasting all of it
                    server.renew(f"{server.version}, a new instance from round {repeat} on")
            self._pause()
            self.schedule += round_runs(variants, [(s.position, s.version) for s in servers], wanted, repeat)
            self._announce()  # the progress display learns of the round before it starts
            for variant in in_round(variants, repeat):
                points = {point for (name, point) in wanted if name == variant.name}
                for server in in_round(servers, repeat):
                    mine = {p for p in points if server.version in wanted[(variant.name, p)]}
                    if mine:
                        self._variant_on(server, variant, repeat, results, points=mine)

    def _pause(self) -> None:
        """Look at the machine while the run's own load is idle: the CPUs others use (results/machine.py)."""
        others = cpus_in_use(self._machine.cpus)
        if others is not None:
            self._machine = self._machine.paused(others)

    def _variant_on(self, server: ServerSession, variant: Variant, repeat: int, results: list[VariantRun],
                    points: set | None = None) -> None:
        """Every sweep point of one variant on one server (restarted or reconfigured first when it must be)."""
        if self.share is not None:  # --shard: only this shard's points of this variant, repeat and server
            points = {p for p in variant.sweep if (server.position, repeat, variant.name, p) in self.share}
            if not points:
                return
        if (variant.name, server.version) in self._skipped_on:
            return
        variant = server.scenario.variant(variant.name)
        server.ready_for(variant)
        for point in in_round(variant.sweep, repeat):
            if points is not None and point not in points:
                continue
            self.progress.on_repeat(RepeatStarted(repeat, max(self.repeat, repeat),
                                                  server.version if len(self.provisioners) > 1 else None))
            began = time.monotonic()
            try:
                result = self._measure.measure(server, variant, point, repeat)
            except Unsupported as exc:
                self._skip(variant.name, server, exc.message)
                return
            results.append(result)
            self._kept(result)
            if self.sequential is not None:
                self.sequential.record(result, time.monotonic() - began)
            if result.status == RunStatus.INTERRUPTED:
                raise KeyboardInterrupt
            if result.status == RunStatus.FAILED:  # the load could not go on, or its teardown failed: the last message says
                raise RunError(f"{result.label}: {result.messages[-1]}")

    def _variants_or_all(self) -> list[Variant]:
        try:
            return self._variants()
        except ConfigError:
            return list(self.scenario.variants)

    def _variants(self) -> list[Variant]:
        return chosen_variants(self.scenario, self.only)

def chosen_variants(scenario: Scenario, only: list[str] | None) -> list[Variant]:
    """The variants `--variant` names (all when none); ConfigError naming one the scenario lacks."""
    if not only:
        return list(scenario.variants)
    names = [v.name for v in scenario.variants]
    missing = [n for n in only if n not in names]
    if missing:
        raise ConfigError(f"--variant {missing[0]}: {scenario.path} has no variant named '{missing[0]}'"
                          f"{suggest(missing[0], names)}; it has: {', '.join(names)}")
    return [v for v in scenario.variants if v.name in only]


def shard_verdicts(scenario: Scenario, results: list[VariantRun], shard: Shard) -> list[ClaimVerdict]:
    """A shard's claims, on every server it ran: not evaluated, and where they will be."""
    servers = list(dict.fromkeys(r.server for r in results)) or [None]
    reason = f"not evaluated in shard {shard}: `concurbench merge` judges the claims on the data of every shard"
    return [ClaimVerdict(c.text, stats.Verdict.NOT_EVALUATED, c.description, server, reason=reason,
                         cause=Cause.IN_A_SHARD, claim_id=i, form=c.form, claim_key=c.key)
            for server in servers for i, c in enumerate(scenario.expect)]
