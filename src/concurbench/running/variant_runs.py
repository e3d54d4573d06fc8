"""One variant run on a server: the variant's setup, its warm-up pass, the `before` probes, the measurement
window (samplers and background sessions around the load), the probes after it and the teardown, as one
VariantRun. What the window measured is kept whatever happens after it (a Ctrl-C, a failing teardown):
that only changes the status.
"""

from __future__ import annotations

import time

from ..background.kinds import background_events, make_background
from ..background.mssql_common import ObserverScope
from ..engines.base import Engine
from ..errors import ConcurbenchError
from ..figures import Place
from ..results.metric import probe_records, run_records
from ..results.metrics import pool_records
from ..results.model import PoolResult, RunStatus, VariantRun, WarmupPass, Workers
from ..samplers.base import SamplerDriver
from ..samplers.registry import build as build_samplers
from ..scenario.model import Scenario, Variant
from ..workload.events import merged
from ..workload.pool import LoadGenerator, PoolRunResult, resolve_clients
from ..workload.session import application_name
from .progress_events import Listener, Tick, VariantDone, VariantStarted, WarmPass
from .servers import ServerSession, deferred_interrupts
from .warmup import warm_up


SESSIONS_GONE_S = 10.0  # the longest wait for a variant's sessions to leave the server


class VariantRuns:
    """Makes the variant runs of a scenario, one at a time, on the servers the runner gives it."""

    def __init__(self, scenario: Scenario, engine: Engine, progress: Listener, processes: int | None,
                 load=None):
        self.scenario = scenario
        self.engine = engine
        self.progress = progress
        self.processes = processes
        self.load = load  # what drives the window's load: None, LoadGenerator here; or a cluster's (cluster/load.py)

    def measure(self, server: ServerSession, variant: Variant, point: int | None, repeat: int) -> VariantRun:
        eng, conn = self.engine, server.conn
        pools = resolve_clients(variant.pools, point)
        self.progress.on_variant(VariantStarted(variant.name, point, {p.name: p.clients for p in pools},
                                                variant.duration, variant.warmup, variant.fixed_count))
        self._sessions_gone(conn)  # the variant before's
        for step in variant.setup:
            eng.run_script(conn, step.sql, step.origin)
        warm = self._warm_up(server, variant, pools)
        if warm is not None:
            self._sessions_gone(conn)  # the warm-up pass's
        probes: dict = {}
        self._probe(conn, variant, "before", probes)
        started = time.time()
        outcome, driver, background_sessions = self._window(server, variant, point, pools)
        elapsed = outcome.elapsed_s
        (summaries, failures), background = driver.summaries(elapsed), [h.describe() for h in background_sessions]
        status, after, settings = self._after_window(conn, variant, probes, status_of(outcome))
        messages = [*outcome.messages, *conn.take_notes(),
                    *(f"background {b.get('name')}: {b[k]}" for b in background for k in ("error", "note") if b.get(k)),
                    *after]
        result = VariantRun(
            metrics=self._records(variant.name, server.version, repeat, pools, outcome, driver, summaries, probes),
            variant=variant.name, group=variant.group, point=point, server=server.version, repeat=repeat,
            status=status, workers=Workers(outcome.workers, outcome.reported),
            elapsed_s=round(elapsed, 4), started=started, warmup_s=variant.warmup,
            fixed=variant.fixed_count, worker_cpu_s=[round(c, 3) for c in outcome.worker_cpu_s],
            worker_wall_s=[round(w, 3) for w in outcome.worker_wall_s],
            worker_wait_s=[None if w is None else round(w, 3) for w in outcome.worker_wait_s], loop=outcome.loop,
            messages=messages,
            pools={p.name: PoolResult(p.name, p.measure, p.clients, outcome.pools[p.name].to_dict()) for p in pools},
            samplers=summaries, sampler_errors=list(driver.errors), background=background,
            probes=probes, settings=settings, samples={name: rows for name, rows in driver.rows.items() if rows},
            unavailable=driver.unavailable, events=merged(outcome.events, background_events(background_sessions)),
            warmup_pass=warm, sampler_failures=failures, hosts=list(outcome.hosts))
        self.progress.on_variant_done(VariantDone(result))
        return result

    @staticmethod
    def _records(variant: str, server: str | None, repeat: int, pools, outcome: PoolRunResult, driver: SamplerDriver,
                 summaries: dict, probes: dict) -> tuple:
        """The variant run's figures as records, made from what measured them: each pool's statistics, each
        sampler's summary, the probes' rows and the window."""
        whole = Place(variant, "", sum(p.clients for p in pools), server, repeat)
        transactions = sum(outcome.pools[p.name].transactions for p in pools) or None
        return (*(m for p in pools for m in pool_records(outcome.pools[p.name], outcome.elapsed_s,
                                                         whole._replace(pool=p.name, clients=p.clients))),
                *driver.records(summaries, transactions, whole), *probe_records(probes, whole),
                *run_records(round(outcome.elapsed_s, 4), whole))

    def _sessions_gone(self, conn) -> None:
        """Wait (at most SESSIONS_GONE_S) until the server lists no pool session of this scenario: a closed
        session's backend may still be ending, dropping its temp tables and locks, and what the next step
        sets up or probes should not meet it."""
        names = sorted({application_name(p.name) for v in self.scenario.variants for p in v.pools})
        deadline = time.monotonic() + SESSIONS_GONE_S
        while self.engine.sessions_named(conn, names) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _warm_up(self, server: ServerSession, variant: Variant, pools) -> WarmupPass | None:
        """The variant's warm-up pass (warmup.py), when it has one; the server is no longer fresh after it."""
        fresh, server.fresh = server.fresh, False
        if not variant.warmup_transactions:
            return None
        self.progress.on_warm_pass(WarmPass(variant.name, variant.warmup_transactions, fresh))
        warm = warm_up(server.connection.conninfo, pools, variant.warmup_transactions, engine=self.scenario.engine,
                       seed=self.scenario.seed, processes=self.processes, after_restart=fresh, load=LoadGenerator)
        if warm.status == RunStatus.INTERRUPTED:
            raise KeyboardInterrupt
        return warm

    def _window(self, server: ServerSession, variant: Variant, point: int | None, pools: list):
        """The measurement window: samplers and background sessions around the load; they are closed
        whatever happens. Returns the load's outcome, the sampler driver and the background sessions."""
        eng = self.engine
        conninfo, version_num = server.connection.conninfo, server.info.version_num
        remove_files = server.provisioner.file_remover()  # a container's, where observers write
        policy = server.provisioner.policy()
        scope = ObserverScope(run_id=server.connection.run_id, guest=not policy.owned,
                              unbounded_xe=policy.xe_without_max_duration)
        background_sessions = [make_background(b, conninfo, eng, remove_files=remove_files,
                                               lifetime_s=variant.warmup + variant.duration, scope=scope)
                               for b in variant.background]
        eng.flush_statistics(server.conn, version_num)  # what this session did so far is not counted
        driver = SamplerDriver(build_samplers(variant.samplers),
                               lambda: eng.connect(conninfo, application_name="concurbench:sampler"), version_num,
                               sessions=[application_name(p.name) for p in pools], warmup=variant.warmup)
        try:
            driver.open()
            for bg in background_sessions:
                bg.start()
            # The window closes in this order: background parts a sampler may wait on (a throttled log
            # drain), then the samplers' last reading, then observers whose stopping and counting is
            # work of its own (reading .xel files) that must stay outside the samplers' span.
            first = [h for h in background_sessions if not h.ends_after_samplers]
            load = (self.load or LoadGenerator)(conninfo, pools, warmup=variant.warmup, duration=variant.duration,
                                 seed=self.scenario.seed, processes=self.processes, engine=self.scenario.engine,
                                 listeners=[*first, driver, *[h for h in background_sessions if h.ends_after_samplers]],
                                 progress=lambda load: self.progress.on_tick(Tick.of(variant.name, point, load)))
            outcome = load.run()
        finally:
            with deferred_interrupts():
                for bg in background_sessions:
                    bg.close()
                driver.close()
        return outcome, driver, background_sessions

    def _after_window(self, conn, variant: Variant, probes: dict,
                      status: RunStatus) -> tuple[RunStatus, list[str], dict | None]:
        """The probes after the load, the teardown and the settings as the server reports them."""
        try:
            self._probe(conn, variant, "after", probes)
            for step in variant.teardown:
                self.engine.run_script(conn, step.sql, step.origin, what="teardown SQL")
            self._probe(conn, variant, "final", probes)
            settings = self.engine.server_info(conn, list(dict(variant.settings)))["settings"] \
                if variant.settings else None
        except KeyboardInterrupt:
            return RunStatus.INTERRUPTED, ["interrupted after the measurement (probes or teardown)"], None
        except ConcurbenchError as exc:
            return RunStatus.FAILED, [exc.message], None
        return status, [], settings

    def _probe(self, conn, variant: Variant, when: str, into: dict) -> None:
        for probe in variant.probes:
            if when in probe.when:
                into.setdefault(probe.name, {})[when] = self.engine.query_rows(conn, probe.sql, f"probe {probe.name}")


def status_of(outcome: PoolRunResult) -> RunStatus:
    """interrupted (Ctrl-C in the window), failed (the load was stopped: the server refused connections),
    incomplete (a worker process sent no results), or ok."""
    if outcome.interrupted:
        return RunStatus.INTERRUPTED
    if outcome.stopped:
        return RunStatus.FAILED
    return RunStatus.OK if outcome.complete else RunStatus.INCOMPLETE
