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


@dataclass
class _Server:
    """One server of the run and what the runner keeps about it between variants."""

    provisioner: object
    started: bool = False
    released: bool = False
    connection: object = None
    conn: object = None
    config: object = None
    info: dict = field(default_factory=dict)
    current: dict = field(default_factory=dict)  # the settings it runs with now

    @property
    def version(self) -> str:
        return self.info.get("version_short", "?")


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
        self._skipped_on: set[tuple[str, str]] = set()  # (variant, server) pairs not to try again

    def run(self) -> RunOutcome:
        writer = RunWriter.create(self.out_dir, self.scenario, target=self.target, processes=self.processes,
                                  repeat=self.repeat)
        results: list[dict] = []
        status, error = "ok", None
        servers = [_Server(p) for p in self.provisioners]
        # With repeats, a version matrix keeps every server up and runs each variant on each in turn,
        # so drift of the machine hits every server alike; a single pass takes one server at a time.
        batches = [servers] if self.repeat > 1 else [[server] for server in servers]
        try:
            variants = self._variants()
            for batch in batches:
                try:
                    self._run_batch(batch, variants, writer, results)
                finally:
                    with deferred_interrupts():
                        for server in batch:
                            self._release(server)
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
                skipped = {v.name for v in self.scenario.variants} - {v.name for v in self._variants_or_all()} \
                    | set(self.unsupported)
                verdicts = [v.as_dict() for v in evaluate(list(self.scenario.expect), collapse(results), skipped)] \
                    if self.scenario.expect and results else []
                run_dir = writer.finish(results, status, error, claims=verdicts, skipped=self.unsupported)
        return RunOutcome(run_dir, status, results, error, verdicts)

    def _run_batch(self, servers: list["_Server"], variants: list[Variant], writer, results: list[dict]) -> None:
        for server in servers:
            self._start(server, writer)
        # repeats interleave (A B A B, not A A B B) so that drift hits every variant alike
        for repeat in range(1, self.repeat + 1):
            for variant in variants:
                for server in servers:
                    self._variant_on(server, variant, repeat, results)
        for server in servers:
            for step in self.scenario.teardown:
                self.eng.run_script(server.conn, step.sql, step.origin)

    def _start(self, server: "_Server", writer) -> None:
        """Start one server, configure it, record what it is, and run the scenario's setup on it."""
        self.progress({"event": "provisioning", "target": self.target})
        server.started = True
        server.connection = server.provisioner.start()
        server.conn = self.eng.connect(server.connection.conninfo, application_name="concurbench:admin")
        server.config = self.eng.configurator(server.provisioner, server.connection.conninfo) \
            if hasattr(self.eng, "configurator") else None
        server.current = dict(self.scenario.settings)
        self._configure(server, server.current, dict(self.scenario.database))
        server.info = self.eng.server_info(server.conn, [k for k, _ in self.scenario.settings])
        server.info.update(target=self.target, connection=server.connection.safe)
        writer.servers.append(server.info)
        self.progress({"event": "server", "version": server.version, "connection": server.connection.safe,
                       "engine": {"mssql": "SQL Server"}.get(self.scenario.engine, "PostgreSQL")})
        for step in self.scenario.setup:
            self.progress({"event": "setup", "origin": step.origin})
            self.eng.run_script(server.conn, step.sql, step.origin)

    def _variant_on(self, server: "_Server", variant: Variant, repeat: int, results: list[dict]) -> None:
        """Every sweep point of one variant on one server (restarted or reconfigured first when it must be)."""
        if (variant.name, server.version) in self._skipped_on:
            return
        wanted = {**dict(self.scenario.settings), **dict(variant.settings)}
        if wanted != server.current:
            self.progress({"event": "restart", "settings": dict(variant.settings)})
            server.conn.close()
            server.connection = server.provisioner.restart(wanted)
            server.conn = self.eng.connect(server.connection.conninfo, application_name="concurbench:admin")
            server.current = wanted
        if server.config is not None:
            self._configure(server, server.current, {**dict(self.scenario.database), **dict(variant.database)})
        for point in variant.sweep:
            self.progress({"event": "repeat", "repeat": repeat, "of": self.repeat,
                           "server": server.version if len(self.provisioners) > 1 else None})
            try:
                result = self._run_variant(server.connection.conninfo, server.conn, variant, point,
                                           server.info["version_num"])
            except Unsupported as exc:
                self.unsupported.setdefault(variant.name, exc.message)
                self._skipped_on.add((variant.name, server.version))
                self.progress({"event": "warning", "message": f"{variant.name} skipped: {exc.message}"})
                return
            if variant.settings:
                result["settings"] = self.eng.server_info(server.conn, list(dict(variant.settings)))["settings"]
            result["server"] = server.version
            result["repeat"] = repeat
            results.append(result)
            if result["status"] == "interrupted":
                raise KeyboardInterrupt

    def _release(self, server: "_Server") -> None:
        """Put back what the run changed on the server, close the connection, stop the server: always."""
        if server.released:
            return
        server.released = True
        if server.conn is not None and server.config is not None:
            try:
                for problem in server.config.restore(server.conn):
                    self.progress({"event": "warning", "message": problem})
            except Exception as exc:  # noqa: BLE001 - the server must still be let go
                self.progress({"event": "warning", "message": f"restoring the configuration: {exc}"})
        if server.conn is not None:
            with contextlib.suppress(Exception):
                server.conn.close()
        if server.started:
            self.progress({"event": "stopping"})
            server.provisioner.stop()

    def _configure(self, server: "_Server", settings: dict, database: dict) -> None:
        """Apply the engine's server and database options; restart once when one needs it (SQL Server)."""
        if server.config is not None and server.config.apply(server.conn, settings, database):
            self.progress({"event": "restart", "settings": settings})
            server.conn.close()
            server.connection = server.provisioner.restart(settings)
            server.conn = self.eng.connect(server.connection.conninfo, application_name="concurbench:admin")

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
            worker_wall_s=[round(w, 3) for w in outcome.worker_wall_s], loop=outcome.loop, messages=outcome.messages,
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
