"""Run a scenario: provision, set up, run every variant at every sweep point, sample, clean up.

The runner never prints: it reports progress through a callback and returns (or, on failure,
raises after saving) a run directory. Whatever was measured before a failure or a Ctrl-C is
written; servers, background sessions and worker processes are always ended.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .engines.registry import get_engine
from .errors import ConcurbenchError, Interrupted, RunError, Unsupported
from .observers.hold import HeldTransaction
from .observers.log_drain import LogDrain
from .report.metrics import pool_metrics
from .report.repeats import collapse
from .results.store import RunWriter
from .samplers.base import SamplerDriver
from .samplers.registry import build as build_samplers
from .scenario.claims import evaluate
from .scenario.model import Scenario, Variant
from .workload.pool import PoolRunner, resolve_clients

Progress = Callable[[dict], None]


def make_background(spec, conninfo: str, engine):
    """The background part of a variant by its kind (an idle transaction, a log drain, a trace)."""
    if spec.kind == "hold_transaction":
        return HeldTransaction(spec, conninfo, engine=engine)
    if spec.kind == "log_drain":
        return LogDrain(spec, conninfo)
    from .observers.mssql import SqlTrace, XEventSession

    cls = {"xevents": XEventSession, "sql_trace": SqlTrace}[spec.kind]
    return cls(spec, conninfo)


@dataclass
class RunOutcome:
    run_dir: Path
    status: str
    results: list[dict] = field(default_factory=list)
    error: ConcurbenchError | None = None
    claims: list[dict] = field(default_factory=list)

    @property
    def claims_failed(self) -> int:
        return sum(1 for c in self.claims if c["passed"] is False)


@contextlib.contextmanager
def deferred_interrupts():
    """Hold Ctrl-C and SIGTERM while cleaning up; re-deliver them afterwards as KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
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
                 progress: Progress | None = None, processes: int | None = None,
                 variants: list[str] | None = None, target: str = "embedded", repeat: int = 1):
        self.scenario = scenario
        self.provisioners = list(provisioner) if isinstance(provisioner, (list, tuple)) else [provisioner]
        self.out_dir = Path(out_dir)
        self.progress = progress or (lambda event: None)
        self.processes = processes
        self.only = variants
        self.target = target
        self.repeat = max(1, repeat)
        self.eng = get_engine(scenario.engine)
        self.unsupported: dict[str, str] = {}  # variants the server could not run, and why

    def run(self) -> RunOutcome:
        writer = RunWriter.create(self.out_dir, self.scenario, target=self.target, processes=self.processes,
                                  repeat=self.repeat)
        results: list[dict] = []
        status, error = "ok", None
        try:
            variants = self._variants()
            for provisioner in self.provisioners:
                self._run_on(provisioner, variants, writer, results)
        except KeyboardInterrupt:
            status, error = "interrupted", Interrupted("interrupted: the run was stopped; results measured so far were kept")
        except ConcurbenchError as exc:
            status, error = "failed", exc
        except Exception as exc:  # noqa: BLE001 - an unexpected error still ends with a cleanup and a saved run
            status, error = "failed", RunError(f"unexpected {type(exc).__name__}: {exc}", exc)
        finally:
            with deferred_interrupts():
                skipped = {v.name for v in self.scenario.variants} - {v.name for v in self._variants_or_all()} \
                    | set(self.unsupported)
                verdicts = [v.as_dict() for v in evaluate(list(self.scenario.expect), collapse(results), skipped)] \
                    if self.scenario.expect and results else []
                run_dir = writer.finish(results, status, error, claims=verdicts, skipped=self.unsupported)
        return RunOutcome(run_dir, status, results, error, verdicts)

    def _run_on(self, provisioner, variants: list[Variant], writer, results: list[dict]) -> None:
        """One server: start, set up, every variant at every point, tear down, always stop."""
        conn = config = None
        try:
            self.progress({"event": "provisioning", "target": self.target})
            connection = provisioner.start()
            conn = self.eng.connect(connection.conninfo, application_name="concurbench:admin")
            config = self.eng.configurator(provisioner, connection.conninfo) \
                if hasattr(self.eng, "configurator") else None
            current = dict(self.scenario.settings)
            connection, conn = self._configure(config, provisioner, connection, conn, current,
                                               dict(self.scenario.database))
            server = self.eng.server_info(conn, [k for k, _ in self.scenario.settings])
            server.update(target=self.target, connection=connection.safe)
            writer.servers.append(server)
            self.progress({"event": "server", "version": server["version_short"], "connection": connection.safe,
                           "engine": {"mssql": "SQL Server"}.get(self.scenario.engine, "PostgreSQL")})
            for step in self.scenario.setup:
                self.progress({"event": "setup", "origin": step.origin})
                self.eng.run_script(conn, step.sql, step.origin)
            # repeats interleave (A B A B, not A A B B) so that drift of the machine hits every variant alike
            for repeat in range(1, self.repeat + 1):
                for variant in variants:
                    wanted = {**dict(self.scenario.settings), **dict(variant.settings)}
                    if wanted != current:
                        self.progress({"event": "restart", "settings": dict(variant.settings)})
                        conn.close()
                        connection = provisioner.restart(wanted)
                        conn = self.eng.connect(connection.conninfo, application_name="concurbench:admin")
                        current = wanted
                    if config is not None:
                        connection, conn = self._configure(config, provisioner, connection, conn, current, {
                            **dict(self.scenario.database), **dict(variant.database)})
                    for point in variant.sweep:
                        if self.repeat > 1:
                            self.progress({"event": "repeat", "repeat": repeat, "of": self.repeat})
                        try:
                            result = self._run_variant(connection.conninfo, conn, variant, point,
                                                       server["version_num"])
                        except Unsupported as exc:
                            self.unsupported.setdefault(variant.name, exc.message)
                            self.progress({"event": "warning", "message": f"{variant.name} skipped: {exc.message}"})
                            break
                        if variant.settings:
                            result["settings"] = self.eng.server_info(conn, list(dict(variant.settings)))["settings"]
                        result["server"] = server["version_short"]
                        result["repeat"] = repeat
                        results.append(result)
                        if result["status"] == "interrupted":
                            raise KeyboardInterrupt
            for step in self.scenario.teardown:
                self.eng.run_script(conn, step.sql, step.origin)
        finally:
            with deferred_interrupts():
                if conn is not None and config is not None:
                    try:
                        for problem in config.restore(conn):
                            self.progress({"event": "warning", "message": problem})
                    except Exception as exc:  # noqa: BLE001 - the server must still be let go
                        self.progress({"event": "warning", "message": f"restoring the configuration: {exc}"})
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                self.progress({"event": "stopping"})
                provisioner.stop()

    def _configure(self, config, provisioner, connection, conn, server: dict, database: dict):
        """Apply the engine's server and database options; restart once when one needs it (SQL Server)."""
        if config is None:
            return connection, conn
        if config.apply(conn, server, database):
            self.progress({"event": "restart", "settings": server})
            conn.close()
            connection = provisioner.restart(server)
            conn = self.eng.connect(connection.conninfo, application_name="concurbench:admin")
        return connection, conn

    def _probe(self, conn, variant: Variant, when: str, into: dict) -> None:
        for probe in variant.probes:
            if when in probe.when:
                into.setdefault(probe.name, {})[when] = self.eng.query_rows(conn, probe.sql, f"probe {probe.name}")

    def _variants_or_all(self) -> list[Variant]:
        try:
            return self._variants()
        except RunError:
            return list(self.scenario.variants)

    def _variants(self) -> list[Variant]:
        if not self.only:
            return list(self.scenario.variants)
        names = {v.name for v in self.scenario.variants}
        missing = [n for n in self.only if n not in names]
        if missing:
            raise RunError(f"no variant named {', '.join(missing)} in {self.scenario.name}")
        return [v for v in self.scenario.variants if v.name in self.only]

    def _run_variant(self, conninfo: str, conn, variant: Variant, point: int | None, version_num: int) -> dict:
        pools = resolve_clients(variant.pools, point)
        clients = {p.name: p.clients for p in pools}
        self.progress({"event": "variant", "variant": variant.name, "point": point, "clients": clients,
                       "duration": variant.duration, "warmup": variant.warmup, "fixed": variant.fixed_count})
        for step in variant.setup:
            self.eng.run_script(conn, step.sql, step.origin)
        probes: dict = {}
        self._probe(conn, variant, "before", probes)
        holders = [make_background(b, conninfo, self.eng) for b in variant.background]
        driver = SamplerDriver(build_samplers(variant.samplers),
                               lambda: self.eng.connect(conninfo, application_name="concurbench:sampler"), version_num)
        result: dict = {"variant": variant.name, "group": variant.group, "point": point, "clients": clients,
                        "fixed": variant.fixed_count}
        started = time.time()
        try:
            driver.open()
            for holder in holders:
                holder.start()
            runner = PoolRunner(conninfo, pools, warmup=variant.warmup, duration=variant.duration,
                                seed=self.scenario.seed, processes=self.processes, engine=self.scenario.engine,
                                listeners=[*holders, driver],  # observers end first: a sampler may wait on them
                                progress=lambda info: self.progress({"event": "tick", "variant": variant.name,
                                                                     "point": point, **info}))
            outcome = runner.run()
        finally:
            with deferred_interrupts():
                for holder in holders:
                    holder.close()
                driver.close()
        elapsed = outcome.elapsed_s
        result.update(
            status="interrupted" if outcome.interrupted else "ok", elapsed_s=round(elapsed, 4),
            started=started, warmup_s=variant.warmup, worker_cpu_s=[round(c, 3) for c in outcome.worker_cpu_s],
            worker_wall_s=[round(w, 3) for w in outcome.worker_wall_s], messages=outcome.messages,
            pools={p.name: {"measure": p.measure, "clients": p.clients,
                            "metrics": pool_metrics(outcome.pools[p.name], elapsed),
                            "stats": outcome.pools[p.name].to_dict()} for p in pools},
            samplers=driver.summaries(elapsed), sampler_errors=driver.errors,
            samples=driver.rows, background=[h.describe() for h in holders], probes=probes)
        self._probe(conn, variant, "after", probes)
        for step in variant.teardown:
            self.eng.run_script(conn, step.sql, step.origin)
        self._probe(conn, variant, "final", probes)
        self.progress({"event": "variant_done", "result": result})
        return result
