"""One server of a run, from its start to its end: provisioned, checked against the run's connections,
configured, described and set up; reconfigured or restarted when a variant wants other settings; put
back and let go at the end, whatever happened. The runner (runner.py) keeps one ServerSession per
server of the run and decides what runs on which.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable

from ..engines.admin import AdminSession
from ..engines.base import Configurator, Engine
from ..engines.registry import spec
from ..errors import ConcurbenchError, ConfigError
from ..provisioners.base import Connection, Provisioner
from ..provisioners.registry import TargetSpec
from ..results.model import ServerInfo
from ..scenario.model import Scenario, Variant
from ..workload.pool import start_workers_early
from .guards import check_connected
from .needs import Need, plan as plan_needs, refusal
from .progress_events import Listener, Provisioning, Restarting, RunWarning, ServerUp, SetupStep, Stopping


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


class ServerSession:
    """One server of the run and what the run keeps about it between variants."""

    def __init__(self, provisioner: Provisioner, position: int, *, scenario: Scenario, engine: Engine,
                 target: TargetSpec, progress: Listener, skip_unrunnable: bool = False):
        self.provisioner = provisioner
        self.position = position  # its place in the run's list of servers (--server-version order)
        self.engine = engine
        self.target = target
        self.progress = progress
        self.whole = scenario  # the scenario as loaded; `scenario` is its steps for this server's version
        self.scenario: Scenario | None = None  # Scenario.on_server, once the server's version is known
        self.started = False
        self.released = False
        self.connection: Connection | None = None
        self.conn: AdminSession | None = None
        self.config: Configurator | None = None  # SQL Server's options, applied over a connection and put back
        self.info: ServerInfo | None = None  # what the server is, once configured (the run records it)
        self.current: dict = {}  # the settings it runs with now
        self.fresh = False  # started or restarted since its last variant run (a warm-up pass records it)
        self.skip_unrunnable = skip_unrunnable  # --skip-unrunnable: skip the variants this server cannot run
        self.unrunnable: dict[str, list[Need]] = {}  # those variants, each with what it needs

    @property
    def version(self) -> str:
        return self.info.version_short if self.info is not None else "?"

    def start(self, variants: list[Variant], described: Callable[[ServerInfo], None]) -> None:
        """Start the server, check the run's connections and every variant's needs (needs.py) against it before
        anything is changed, configure it, tell `described` what it is, and run the scenario's setup on it."""
        whole, eng = self.whole, self.engine
        self.progress.on_provisioning(Provisioning(self.target.name, self.target.owns_server))
        self.started = True
        start_workers_early()  # the workers' fork server starts beside the server
        self.connection = self.provisioner.start()
        for note in self.connection.notes:
            self.progress.on_warning(RunWarning(note))
        self.fresh = True
        self.conn = self._admin()
        check_connected(whole, variants, lambda sql, what: eng.query_rows(self.conn, sql, what), self.connection.safe)
        policy = self.provisioner.policy()
        self._plan(variants, policy)
        self.config = eng.configurator(policy, self.connection.conninfo)
        self.current = dict(whole.settings)
        self.configure(self.current, dict(whole.database))
        self.provisioner.apply_settings()  # a dsn server's, planned by start(); nothing for a server of its own
        facts = eng.server_info(self.conn, [k for k, _ in whole.settings])
        facts["settings_in_effect"] = eng.settings_in_effect(self.conn)  # what the server runs with, read-only
        if not policy.owned:  # what the scenario wanted that this server has not
            facts["differences"] = eng.setting_differences(self.conn, dict(whole.settings), dict(whole.database),
                                                           allowed=policy.allow_server_changes)
        facts.update(target=self.target.name, connection=self.connection.safe)
        if facts.get("differences") and policy.as_is:
            self.progress.on_warning(RunWarning(
                f"--server-settings as-is: this server runs the scenario without some of its settings, so its figures "
                f"are not those of the scenario's (the article's) setup: {ServerInfo.from_dict(facts).differences_text()}"))
        if self.connection.notes:  # what a killed run of this machine left, removed or said at the start
            facts["found_at_start"] = list(self.connection.notes)
        if self.unrunnable:
            facts["skipped_variants"] = {name: [n.says() for n in needs] for name, needs in self.unrunnable.items()}
        # what the provisioner knows of the server (a container's image and CPU limit), never a password
        facts.update({k: v for k, v in self.connection.extra.items() if k not in facts})
        self.info = ServerInfo.from_dict(facts)
        described(self.info)
        self.progress.on_server(ServerUp(self.version, self.connection.safe, spec(whole.engine).display))
        self.scenario = whole.on_server(self.version)
        for step in self.scenario.setup:
            self.progress.on_setup(SetupStep(step.origin))
            eng.run_script(self.conn, step.sql, step.origin)

    def _plan(self, variants: list[Variant], policy) -> None:
        """What this server cannot give a variant: refused here in one paragraph, before anything is changed, unless
        --skip-unrunnable and the scenario itself needs nothing the server lacks; then those variants are skipped."""
        needs = plan_needs(self.whole, variants, self.conn, policy)
        if not needs:
            return
        if not self.skip_unrunnable or any(n.variant is None for n in needs):
            raise ConfigError(refusal(needs, self.whole, self.connection.safe))
        for need in needs:
            self.unrunnable.setdefault(need.variant, []).append(need)

    def ready_for(self, variant: Variant) -> None:
        """The server as `variant` wants it: restarted with its settings when they differ and must be (on SQL
        Server only start-up arguments restart here), its options applied."""
        wanted = {**dict(self.whole.settings), **dict(variant.settings)}
        if wanted != self.current:
            if self.config is None or self.config.needs_restart(self.current, wanted):
                self._restart(wanted, dict(variant.settings))
            self.current = wanted
        if self.config is not None:
            self.configure(self.current, {**dict(self.whole.database), **dict(variant.database)})

    def configure(self, settings: dict, database: dict) -> None:
        """Apply the engine's server and database options; restart once when one needs it (SQL Server)."""
        if self.config is not None and self.config.apply(self.conn, settings, database):
            self._restart(settings, settings)
            # what only a fresh server allows (removing tempdb files); what it could not do is a warning
            for problem in self.config.after_restart(self.conn):
                self.progress.on_warning(RunWarning(problem))

    def teardown(self) -> None:
        for step in self.scenario.teardown:
            self.engine.run_script(self.conn, step.sql, step.origin, what="teardown SQL")

    def release(self) -> None:
        """Put back what the run changed on the server, close the connection, stop the server: always, once."""
        if self.released:
            return
        self.released = True
        if self.conn is not None and self.config is not None:
            try:
                for problem in self.config.restore(self.conn):
                    self.progress.on_warning(RunWarning(problem))
            except Exception as exc:  # noqa: BLE001 - the server must still be let go
                self.progress.on_warning(RunWarning(f"restoring the configuration: {exc}"))
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
        if self.started:
            self.progress.on_stopping(Stopping(self.target.name, self.target.owns_server))
            try:
                self.provisioner.stop()
            except ConcurbenchError as exc:  # what was measured is saved all the same; the message says what is left
                self.progress.on_warning(RunWarning(exc.message))

    def renew(self, why: str) -> None:
        """Restart the server as it is (its settings, its data, its database): a new instance of the same server."""
        self._restart(None, {}, why)

    def _restart(self, settings: dict | None, told: dict, why: str = "") -> None:
        self.progress.on_restart(Restarting(told, why))
        self.conn.close()
        self.connection = self.provisioner.restart(settings)
        self.conn = self._admin()
        self.fresh = True

    def _admin(self) -> AdminSession:
        """The harness's own connection to the server; its reconnections are warnings as they happen."""
        return AdminSession(self.engine, self.connection.conninfo,
                            on_note=lambda text: self.progress.on_warning(RunWarning(text)))
