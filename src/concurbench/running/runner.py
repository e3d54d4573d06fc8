"""Run a scenario: provision, set up, run every variant at every sweep point, sample, clean up.

The runner never prints: it tells a listener its progress (progress_events.py) and returns (or, on
failure, raises after saving) a run directory. Whatever was measured before a failure or a Ctrl-C is
written; servers, background sessions and worker processes are always ended. It builds the run's
result (results/model.py) once, has the store write it and then renders report.md from it; until
then the run directory holds a manifest saying "running" and a journal of the finished variant
runs, so a run killed outright still says what it was and what finished. Before any of that, the
resource guards (guards.py) check what each variant run would open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import liveruns
from .. import stats
from ..background.events import merged
from ..background.kinds import background_events, make_background
from ..check import CheckPolicy, Sequential, evaluate, with_differences, with_machine
from ..check.evaluate import LEFT_OUT
from ..check.plan import points_of
from ..check.sides import MIN_RUNS
from ..engines.admin import AdminSession
from ..engines.registry import get_engine
from ..errors import ConcurbenchError, ConfigError, Interrupted, RunError, Unsupported
from .guards import check_connected, check_scenario
from .plan import PlannedRun, in_round, plan_runs, round_runs, without
from .progress_events import CheckLook, Listener, Planned, Provisioning, RepeatStarted, Restarting, RunWarning, \
    ServerUp, SetupStep, Stopping, Tick, VariantDone, VariantStarted, WarmPass
from ..results.metrics import pool_metrics
from ..report.render import RunReport
from ..report.tables import Report
from ..results.model import FORMAT_VERSION, ClaimVerdict, PoolResult, PublishedFigure, Run, ScenarioInfo, \
    ServerInfo, ShardInfo, VariantRun
from ..results.machine import MachineLoad
from ..results.shards import SHARD_AND_CHECK, Plan, Shard
from ..results.store import checkout_of, create_run_dir, host_info, now_iso, record_variant_run, save_run, start_run
from ..samplers.base import SamplerDriver
from ..samplers.registry import build as build_samplers
from ..scenario.model import Scenario, Variant
from ..util import suggest
from .warmup import warm_up
from ..workload.cpu_wait import cpus_in_use
from ..workload.pool import LoadGenerator, resolve_clients, start_workers_early
from ..workload.session import application_name


def incomplete_error(results: list[VariantRun]) -> RunError | None:
    """The error of a run in which some worker process sent no results: which variant runs lack its sessions."""
    partial = [r for r in results if r.status == "incomplete"]
    if not partial:
        return None
    names = ", ".join(dict.fromkeys(
        r.variant + (f"@{r.point}" if r.point is not None else "") + (f" on {r.server}" if r.server else "")
        + (f" ({r.workers['reported']} of {r.workers['started']} worker processes reported)" if r.workers else "")
        for r in partial))
    return RunError(f"incomplete variant runs: {names}; a worker process sent no results, so their figures "
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
    def status(self) -> str:
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


@dataclass
class _Server:
    """One server of the run and what the runner keeps about it between variants."""

    provisioner: object
    position: int = 0  # its place in the run's list of servers (--server-version order)
    started: bool = False
    released: bool = False
    connection: object = None
    conn: object = None
    config: object = None
    info: dict = field(default_factory=dict)
    current: dict = field(default_factory=dict)  # the settings it runs with now
    fresh: bool = False  # started or restarted since its last variant run (a warm-up pass records it)
    scenario: Scenario | None = None  # the scenario's steps for this server's version (Scenario.on_server)

    @property
    def version(self) -> str:
        return self.info.get("version_short", "?")


@contextlib.contextmanager
def deferred_interrupts():
    """Hold Ctrl-C, SIGTERM and SIGHUP while cleaning up; re-deliver them afterwards as KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            raise KeyboardInterrupt


class Runner:
    """Runs a scenario on one server, or on several in turn (a version matrix), into one run directory."""

    def __init__(self, scenario: Scenario, provisioner, *, out_dir: Path | str = "results",
                 progress: Listener | None = None, processes: int | None = None,
                 variants: list[str] | None = None, target: str = "embedded", repeat: int = 1,
                 check: CheckPolicy | None = None, shard: Shard | None = None):
        self.scenario = scenario
        self.provisioners = list(provisioner) if isinstance(provisioner, (list, tuple)) else [provisioner]
        self.out_dir = Path(out_dir)
        self.progress = progress or Listener()
        self.processes = processes
        self.only = variants
        self.target = target
        self.repeat = max(1, repeat)
        self.check = check  # --check: repeat what open claims need until they are decided
        self.sequential: Sequential | None = None
        self._verdicts: list[ClaimVerdict] = []  # the last look's verdicts
        self._judged = 0  # how many variant runs that look saw
        self.eng = get_engine(scenario.engine)
        self.unsupported: dict[str, str] = {}  # variants the server could not run, and why
        self._recorded: list[ServerInfo] = []  # the servers of the run, in the order they started
        self._skipped_on: set[tuple[str, str]] = set()  # (variant, server) pairs not to try again
        # --shard: the plan of the whole run and this shard's (server position, repeat, variant, point)s;
        # ConfigError here, before any server starts, when the run has fewer combinations than shards
        self.shard = shard
        if shard is not None and check is not None:
            raise ConfigError(SHARD_AND_CHECK)
        self.plan = None if shard is None else Plan.of(len(self.provisioners), self._variants_or_all(), self.repeat)
        self.share = None if shard is None else {(c.server, c.repeat, c.variant, c.point)
                                                 for c in shard.combinations(self.plan)}
        self.schedule: list[PlannedRun] = []  # the variant runs to come, announced as the progress event Planned
        self._finished = 0  # variant runs done, the schedule's first entries
        self._run_dir: Path | None = None
        self._started = ""
        self._unkept: str | None = None  # why finished variant runs could not be journalled
        self._servers: list[_Server] = []
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
        status, error = "ok", None
        servers = self._servers = [_Server(p, position=i) for i, p in enumerate(self.provisioners)]
        self._recorded = []
        # With repeats, a version matrix keeps every server up and runs each variant on each in turn,
        # so drift of the machine hits every server alike; a single pass takes one server at a time.
        together = self.repeat > 1 or self.check is not None
        batches = [servers] if together else [[server] for server in servers]
        if self.share is not None:  # a server with nothing in the shard is not started
            used = {server for server, *_ in self.share}
            batches = [b for b in ([s for s in batch if s.position in used] for batch in batches) if b]
        self.schedule = plan_runs(variants, len(servers), range(1, self.repeat + 1), together=together,
                                  share=self.share)
        self._mark_running(first=True)
        live, report = None, RunReport()
        if self.check is not None and self.scenario.expect:
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
                            self._release(server)
            error = incomplete_error(results)
            status = "incomplete" if error else status
        except KeyboardInterrupt:
            status, error = "interrupted", Interrupted("interrupted: the run was stopped; results measured so far were kept")
        except ConcurbenchError as exc:
            status, error = "failed", exc
        except Exception as exc:  # noqa: BLE001 - an unexpected error still ends with a cleanup and a saved run
            status, error = "failed", RunError(f"unexpected {type(exc).__name__}: {exc}", exc)
        finally:
            with deferred_interrupts():
                for server in servers:
                    self._release(server)
                self._machine = self._machine.with_waits(results)
                verdicts = with_machine(with_differences(self._final_verdicts(results, status), self._recorded),
                                        self._machine) if self.scenario.expect else []
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
            start_run(self._result(self._run_dir, self._started, "running", None, [], []), planned=len(self.schedule))
        except ConfigError:
            if first:
                with contextlib.suppress(OSError):
                    self._run_dir.rmdir()
                raise

    def _admin(self, server: "_Server") -> AdminSession:
        """The harness's own connection to a server; its reconnections are warnings as they happen."""
        return AdminSession(self.eng, server.connection.conninfo,
                            on_note=lambda text: self.progress.on_warning(RunWarning(text)))

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

    def _result(self, run_dir: Path, started: str, status: str, error: ConcurbenchError | None,
                results: list[VariantRun], verdicts: list[ClaimVerdict]) -> Run:
        s = self.scenario
        shard = None if self.shard is None else ShardInfo(self.shard.index, self.shard.count, self.plan, [
            server.version if server.started and server.info else None for server in self._servers])
        return Run(scenario=ScenarioInfo.of(s, checkout_of(s.path)), status=status, error=error.message if error else None,
                   servers=list(self._recorded), target=self.target, host=host_info(),
                   processes=self.processes or os.cpu_count(), repeat=self.repeat, started=started, ended=now_iso(),
                   variant_runs=list(results), published=[PublishedFigure(**p.__dict__) for p in s.source.published],
                   claims=list(verdicts), skipped=dict(self.unsupported), format_version=FORMAT_VERSION, path=run_dir,
                   shard=shard, machine=self._machine)

    def _final_verdicts(self, results: list[VariantRun], status: str) -> list[ClaimVerdict]:
        """The claims' verdicts at the end: the last look of a check, or one look at all that was measured."""
        if self.shard is not None:  # a shard holds part of the data: `merge` judges the claims on all of it
            return shard_verdicts(self.scenario, results, self.shard)
        seq = self.sequential
        if seq is not None and seq.looks_taken and len(results) == self._judged:
            return self._verdicts
        skipped = self._skipped(results, status)
        if seq is not None:
            seq.skipped = skipped
            return seq.judge(results)
        return evaluate(list(self.scenario.expect), results, skipped=skipped, quick=self.scenario.quick)

    def _skipped(self, results: list[VariantRun], status: str) -> dict[str, str]:
        """Variants a claim may name that have no run, and why (claims on them are not evaluated)."""
        chosen = {v.name for v in self._variants_or_all()}
        ran = {r.variant for r in results}
        out = {}
        for v in self.scenario.variants:
            if v.name in self.unsupported:
                out[v.name] = f"skipped by the server: {self.unsupported[v.name]}"
            elif v.name not in chosen:
                out[v.name] = LEFT_OUT
            elif v.name not in ran:
                out[v.name] = f"not run: the run {'was interrupted' if status == 'interrupted' else 'ended'} first"
        return out

    def _run_batch(self, servers: list["_Server"], variants: list[Variant], results: list[VariantRun]) -> None:
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
            for step in server.scenario.teardown:
                self.eng.run_script(server.conn, step.sql, step.origin, what="teardown SQL")

    def _start(self, server: "_Server") -> None:
        """Start one server, configure it, record what it is, and run the scenario's setup on it."""
        self.progress.on_provisioning(Provisioning(self.target))
        server.started = True
        start_workers_early()  # the workers' fork server starts beside the server
        server.connection = server.provisioner.start()
        server.fresh = True
        server.conn = self._admin(server)
        # before anything is changed or created on the server: the run's connections against what it gives
        check_connected(self.scenario, self._variants(), lambda sql, what: self.eng.query_rows(server.conn, sql, what),
                        server.connection.safe)
        server.config = self.eng.configurator(server.provisioner, server.connection.conninfo)
        server.current = dict(self.scenario.settings)
        self._configure(server, server.current, dict(self.scenario.database))
        if hasattr(server.provisioner, "apply_settings"):  # a dsn server's: planned by start(), applied now
            server.provisioner.apply_settings()
        server.info = self.eng.server_info(server.conn, [k for k, _ in self.scenario.settings])
        if getattr(server.provisioner, "name", "") == "dsn":  # what the scenario wanted that this server has not
            server.info["differences"] = self.eng.setting_differences(
                server.conn, dict(self.scenario.settings), dict(self.scenario.database),
                allowed=bool(getattr(server.provisioner, "allow", False)))
        server.info.update(target=self.target, connection=server.connection.safe)
        # what the provisioner knows of the server (a container's image and CPU limit), never a password
        server.info.update({k: v for k, v in server.connection.extra.items() if k not in server.info})
        self._recorded.append(ServerInfo.from_dict(server.info))
        self._mark_running()
        self.progress.on_server(ServerUp(server.version, server.connection.safe,
                                         {"mssql": "SQL Server"}.get(self.scenario.engine, "PostgreSQL")))
        server.scenario = self.scenario.on_server(server.version)
        for step in server.scenario.setup:
            self.progress.on_setup(SetupStep(step.origin))
            self.eng.run_script(server.conn, step.sql, step.origin)

    def _decide(self, servers: list["_Server"], variants: list[Variant], results: list[VariantRun]) -> None:
        """--check: more interleaved rounds of the variant points open claims read, until decided or out of limits."""
        seq = self.sequential
        repeat = self.repeat
        while True:
            if repeat >= MIN_RUNS:
                self._plan_check()
                seq.skipped = self._skipped(results, "ok")
                self._verdicts, self._judged = seq.judge(results), len(results)
                wanted = seq.wanted(self._verdicts, results)
                open_claims = sum(1 for v in self._verdicts if v.verdict == stats.INCONCLUSIVE)
                if open_claims:
                    self.progress.on_check(CheckLook(seq.looks_taken, seq.looks, open_claims, repeat))
            else:  # one run decides nothing: every point a claim reads runs a second time
                wanted = {}
                for claim in self.scenario.expect:
                    if self.scenario.quick and claim.skip_quick:
                        continue
                    for key in points_of(claim, results):
                        wanted.setdefault(key, set()).update(s.version for s in servers)
            running = {v.name for v in variants} - set(self.unsupported)
            wanted = {key: where for key, where in wanted.items() if key[0] in running}
            if not wanted or repeat >= seq.max_repeats:
                return
            if not seq.affordable(wanted):
                self.progress.on_warning(RunWarning("--check: the next round would pass the time budget; "
                                                    "stopping with the claims still open"))
                return
            repeat += 1
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

    def _plan_check(self) -> None:
        """Before the first look: when others keep a CPU busy, the check may take more runs
        (CheckPolicy.busy_max_repeats), planned from the machine alone, and the user is told why."""
        seq = self.sequential
        if seq.looks_taken == 0 and seq.plan(self._machine.contended):
            self.progress.on_warning(RunWarning(f"--check: the machine is busy ({self._machine.short()}): up to "
                                                f"{seq.max_repeats} runs a side instead of {self.check.max_repeats}"))

    def _variant_on(self, server: "_Server", variant: Variant, repeat: int, results: list[VariantRun],
                    points: set | None = None) -> None:
        """Every sweep point of one variant on one server (restarted or reconfigured first when it must be)."""
        if self.share is not None:  # --shard: only this shard's points of this variant, repeat and server
            points = {p for p in variant.sweep if (server.position, repeat, variant.name, p) in self.share}
            if not points:
                return
        if (variant.name, server.version) in self._skipped_on:
            return
        variant = server.scenario.variant(variant.name)
        wanted = {**dict(self.scenario.settings), **dict(variant.settings)}
        if wanted != server.current:
            # with a configurator (SQL Server) only start-up arguments restart here; the rest is applied
            # below, which restarts once when an option needs it
            if server.config is None or server.config.needs_restart(server.current, wanted):
                self.progress.on_restart(Restarting(dict(variant.settings)))
                server.conn.close()
                server.connection = server.provisioner.restart(wanted)
                server.conn = self._admin(server)
                server.fresh = True
            server.current = wanted
        if server.config is not None:
            self._configure(server, server.current, {**dict(self.scenario.database), **dict(variant.database)})
        for point in in_round(variant.sweep, repeat):
            if points is not None and point not in points:
                continue
            self.progress.on_repeat(RepeatStarted(repeat, max(self.repeat, repeat),
                                                  server.version if len(self.provisioners) > 1 else None))
            began = time.monotonic()
            try:
                result = self._run_variant(server, variant, point, repeat)
            except Unsupported as exc:
                self.unsupported.setdefault(variant.name, exc.message)
                self._skipped_on.add((variant.name, server.version))
                self.progress.on_warning(RunWarning(f"{variant.name} skipped: {exc.message}"))
                self.schedule = without(self.schedule, self._finished, variant.name, server.position)
                self._announce()
                return
            results.append(result)
            self._kept(result)
            if self.sequential is not None:
                self.sequential.record(result, time.monotonic() - began)
            if result.status == "interrupted":
                raise KeyboardInterrupt
            if result.status == "failed":  # the load could not go on, or its teardown failed: the last message says
                raise RunError(f"{result.label}: {result.messages[-1]}")

    def _release(self, server: "_Server") -> None:
        """Put back what the run changed on the server, close the connection, stop the server: always."""
        if server.released:
            return
        server.released = True
        if server.conn is not None and server.config is not None:
            try:
                for problem in server.config.restore(server.conn):
                    self.progress.on_warning(RunWarning(problem))
            except Exception as exc:  # noqa: BLE001 - the server must still be let go
                self.progress.on_warning(RunWarning(f"restoring the configuration: {exc}"))
        if server.conn is not None:
            with contextlib.suppress(Exception):
                server.conn.close()
        if server.started:
            self.progress.on_stopping(Stopping(self.target))
            try:
                server.provisioner.stop()
            except ConcurbenchError as exc:  # what was measured is saved all the same; the message says what is left
                self.progress.on_warning(RunWarning(exc.message))

    def _configure(self, server: "_Server", settings: dict, database: dict) -> None:
        """Apply the engine's server and database options; restart once when one needs it (SQL Server)."""
        if server.config is not None and server.config.apply(server.conn, settings, database):
            self.progress.on_restart(Restarting(dict(settings)))
            server.conn.close()
            server.connection = server.provisioner.restart(settings)
            server.conn = self._admin(server)
            server.fresh = True
            # what only a fresh server allows (removing tempdb files); what it could not do is a warning
            for problem in server.config.after_restart(server.conn):
                self.progress.on_warning(RunWarning(problem))

    def _probe(self, conn, variant: Variant, when: str, into: dict) -> None:
        for probe in variant.probes:
            if when in probe.when:
                into.setdefault(probe.name, {})[when] = self.eng.query_rows(conn, probe.sql, f"probe {probe.name}")

    def _variants_or_all(self) -> list[Variant]:
        try:
            return self._variants()
        except ConfigError:
            return list(self.scenario.variants)

    def _variants(self) -> list[Variant]:
        return chosen_variants(self.scenario, self.only)

    def _warm_up(self, server: "_Server", variant: Variant, pools) -> dict | None:
        """The variant's warm-up pass (warmup.py), when it has one; the server is no longer fresh after it."""
        fresh, server.fresh = server.fresh, False
        if not variant.warmup_transactions:
            return None
        self.progress.on_warm_pass(WarmPass(variant.name, variant.warmup_transactions, fresh))
        warm = warm_up(server.connection.conninfo, pools, variant.warmup_transactions, engine=self.scenario.engine,
                       seed=self.scenario.seed, processes=self.processes, after_restart=fresh, load=LoadGenerator)
        if warm["status"] == "interrupted":
            raise KeyboardInterrupt
        return warm

    def _run_variant(self, server: "_Server", variant: Variant, point: int | None, repeat: int) -> VariantRun:
        conn = server.conn
        pools = resolve_clients(variant.pools, point)
        self.progress.on_variant(VariantStarted(variant.name, point, {p.name: p.clients for p in pools},
                                                variant.duration, variant.warmup, variant.fixed_count))
        for step in variant.setup:
            self.eng.run_script(conn, step.sql, step.origin)
        warm = self._warm_up(server, variant, pools)
        probes: dict = {}
        self._probe(conn, variant, "before", probes)
        started = time.time()
        outcome, driver, background_sessions = self._window(server, variant, point, pools)
        elapsed = outcome.elapsed_s
        summaries, background = driver.summaries(elapsed), [h.describe() for h in background_sessions]
        status, after, settings = self._after_window(conn, variant, probes, _status(outcome))
        messages = [*outcome.messages, *conn.take_notes(),
                    *(f"background {b.get('name')}: {b[k]}" for b in background for k in ("error", "note") if b.get(k)),
                    *after]
        result = VariantRun(
            variant=variant.name, group=variant.group, point=point, server=server.version, repeat=repeat,
            status=status, workers={"started": outcome.workers, "reported": outcome.reported},
            elapsed_s=round(elapsed, 4), started=started, warmup_s=variant.warmup,
            fixed=variant.fixed_count, worker_cpu_s=[round(c, 3) for c in outcome.worker_cpu_s],
            worker_wall_s=[round(w, 3) for w in outcome.worker_wall_s],
            worker_wait_s=[None if w is None else round(w, 3) for w in outcome.worker_wait_s], loop=outcome.loop,
            messages=messages,
            pools={p.name: PoolResult(p.name, p.measure, p.clients, pool_metrics(outcome.pools[p.name], elapsed),
                                      outcome.pools[p.name].to_dict()) for p in pools},
            samplers=summaries, sampler_errors=list(driver.errors), background=background,
            probes=probes, settings=settings, samples={name: rows for name, rows in driver.rows.items() if rows},
            unavailable=driver.unavailable, events=merged(outcome.events, background_events(background_sessions)),
            warmup_pass=warm)
        self.progress.on_variant_done(VariantDone(result))
        return result

    def _window(self, server: "_Server", variant: Variant, point: int | None, pools: list):
        """The measurement window: samplers and background sessions around the load; they are closed
        whatever happens. Returns the load's outcome, the sampler driver and the background sessions."""
        conninfo, version_num = server.connection.conninfo, server.info["version_num"]
        remove_files = getattr(server.provisioner, "remove_files", None)  # a container's, where observers write
        background_sessions = [make_background(b, conninfo, self.eng, remove_files=remove_files,
                                               lifetime_s=variant.warmup + variant.duration)
                               for b in variant.background]
        self.eng.flush_statistics(server.conn, version_num)  # what this session did so far is not counted
        driver = SamplerDriver(build_samplers(variant.samplers),
                               lambda: self.eng.connect(conninfo, application_name="concurbench:sampler"), version_num,
                               sessions=[application_name(p.name) for p in pools], warmup=variant.warmup)
        try:
            driver.open()
            for bg in background_sessions:
                bg.start()
            # The window closes in this order: background parts a sampler may wait on (a throttled log
            # drain), then the samplers' last reading, then observers whose stopping and counting is
            # work of its own (reading .xel files) that must stay outside the samplers' span.
            first = [h for h in background_sessions if not h.ends_after_samplers]
            load = LoadGenerator(conninfo, pools, warmup=variant.warmup, duration=variant.duration,
                                 seed=self.scenario.seed, processes=self.processes, engine=self.scenario.engine,
                                 listeners=[*first, driver, *[h for h in background_sessions if h.ends_after_samplers]],
                                 progress=lambda info: self.progress.on_tick(Tick(variant.name, point, **info)))
            outcome = load.run()
        finally:
            with deferred_interrupts():
                for bg in background_sessions:
                    bg.close()
                driver.close()
        return outcome, driver, background_sessions

    def _after_window(self, conn, variant: Variant, probes: dict, status: str) -> tuple[str, list[str], dict | None]:
        """The probes after the load, the teardown and the settings as the server reports them. What the window
        measured is kept whatever happens here (a Ctrl-C, a failing teardown): that only changes the status."""
        try:
            self._probe(conn, variant, "after", probes)
            for step in variant.teardown:
                self.eng.run_script(conn, step.sql, step.origin, what="teardown SQL")
            self._probe(conn, variant, "final", probes)
            settings = self.eng.server_info(conn, list(dict(variant.settings)))["settings"] \
                if variant.settings else None
        except KeyboardInterrupt:
            return "interrupted", ["interrupted after the measurement (probes or teardown)"], None
        except ConcurbenchError as exc:
            return "failed", [exc.message], None
        return status, [], settings

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
    return [ClaimVerdict(c.text, stats.Verdict.NOT_EVALUATED, c.description, server, reason=reason)
            for server in servers for c in scenario.expect]


def _status(outcome) -> str:
    """interrupted (Ctrl-C in the window), failed (the load was stopped: the server refused connections),
    incomplete (a worker process sent no results), or ok."""
    if outcome.interrupted:
        return "interrupted"
    if outcome.stopped:
        return "failed"
    return "ok" if outcome.complete else "incomplete"
