"""The library API: run a scenario, probe a target, check claims on every server version.

This is the one place where a command is put together: the `Target` says where the servers come
from, the same for every command; provisioners are built from it here; SIGTERM and SIGHUP are turned
into an interrupt (the run stops, keeps what it measured and lets its servers go) while a command runs, and
put back afterwards. The `run`, `probe` and `claims` commands of the command line call these
functions and print what they return; a script or a notebook calls them the same way:

    import concurbench
    from concurbench.api import Target, probe

    outcome = concurbench.run("scenarios/postgres/row-lock-vs-advisory.yaml", quick=True)
    outcome.run.frame()                              # the figures, for pandas
    reports = probe("scenarios/postgres/lock-queue.yaml", target=Target("binaries", versions=("16",)))

`side_by_side` runs two releases of a server in one run, interleaved and paired by round, until each
comparison (check/across.py) says whether the new one is worse than the old: `history check
--side-by-side` confirms a new release's first run with it (concurbench/sidebyside.py).

Nothing here prints. Bad input raises ConfigError (concurbench.errors) before any server is touched;
a run that fails once started is saved, and its error is `outcome.error`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .check import CheckPolicy
from .check.across import BUSY_ROUNDS, ROUNDS, STARTS, AcrossServers, Comparison
from .check.sides import MIN_RUNS
from .cluster.hosts import connect as connect_cluster
from .cluster.load import ClusterLoads
from .engines.registry import spec
from .errors import ConcurbenchError, ConfigError
from .probe import ProbeReport, probe as probe_target
from .provisioners.options import server_settings
from .provisioners.registry import ServerSettings, TargetOptions, TargetSpec, make_provisioner, release_targets, target_spec
from .report.by_version import claims_by_version, made_lines
from .report.tables import Report
from .results.model import Run, RunStatus
from .results.shards import Shard
from .results.store import load_run
from .running.load import load_scenario
from .running.progress_events import Listener, RunEnded, RunStarted
from .running.runner import RunOutcome, Runner, chosen_variants
from .scenario.model import Scenario

__all__ = ["CLAIMS_BUDGET_S", "CLAIMS_TARGET", "ClaimsTable", "Outcome", "RELEASE_TARGETS", "Target", "claims",
           "probe", "run", "side_by_side"]

CLAIMS_TARGET = "binaries"
CLAIMS_BUDGET_S = 30 * 60.0  # `claims`: the time budget of each scenario's check
RELEASE_TARGETS = release_targets()  # the targets that start a server of any release asked for
SIDE_BY_SIDE_BUDGET_S = 10 * 60.0


@dataclass(frozen=True)
class Target:
    """Where the servers come from, for every command alike.

    `name`: embedded, binaries, docker or dsn. `versions`: the server versions, each its own server
    (empty: the scenario's `server.versions` on docker and binaries, else one server of the target's
    default version). `image`: the Docker image (else the scenario's `server.images` for the version,
    else the engine's image of that version). The dsn target's `dsn` (a URL or connection string; its
    password is never shown) and `password_env` (the environment variable holding the password),
    `allow_server_changes` (let the scenario change server-wide settings, restored at the end) and
    `server_settings` (`apply`, or `as-is`: leave the server's settings and record the differences),
    `keep_database` (keep the database of its own a dsn run created; it is dropped at the end otherwise),
    `database` (the name of the database a dsn run creates or uses, instead of the DSN's or the default),
    `xe_without_max_duration` (SQL Server 2019 and 2022: let an Extended Events observer run on a dsn server,
    which a killed run would leave running until the next run or gc removes it).
    `keep`: leave the server running at the end."""

    name: str = "embedded"
    versions: tuple[str, ...] = ()
    dsn: str | None = field(default=None, repr=False)
    password_env: str | None = None
    image: str | None = None
    host_network: bool = False
    allow_server_changes: bool = False
    server_settings: ServerSettings = ServerSettings.APPLY
    keep_database: bool = False
    database: str | None = None
    xe_without_max_duration: bool = False
    keep: bool = False

    def __post_init__(self):
        object.__setattr__(self, "server_settings", server_settings(self.server_settings))

    @property
    def spec(self) -> TargetSpec:
        """What the target can do (provisioners/registry.py); ConfigError for a name no target has."""
        return target_spec(self.name)

    def versions_for(self, scenario: Scenario, default: Iterable[str | None] = (None,)) -> list[str | None]:
        """The versions to provision for `scenario`: `versions`, else the scenario's own matrix (a target that
        takes one, as docker and binaries do; not with an `image`, which is one server), else `default` (a
        server concurbench does not own is the one it is)."""
        target = self.spec
        if self.versions:
            return list(self.versions)
        if self.image or not target.owns_server:
            return [None]
        if scenario.versions and target.version_matrix:
            return list(scenario.versions)
        return list(default)

    def options(self, version: str | None, scenario: Scenario, listener: Listener | None = None) -> TargetOptions:
        """The provisioner registry's options for one server of `scenario` at `version`."""
        return TargetOptions(target=self.name, server_version=version, dsn=self.dsn, password_env=self.password_env,
                             image=self.image, images=scenario.images, host_network=self.host_network, keep=self.keep,
                             allow_server_changes=self.allow_server_changes, server_settings=self.server_settings,
                             keep_database=self.keep_database, database=self.database,
                             xe_without_max_duration=self.xe_without_max_duration, listener=listener)

    def provisioners(self, scenario: Scenario, *, listener: Listener | None = None, settings: bool = True,
                     default_versions: Iterable[str | None] = (None,)) -> list:
        """One provisioner per version (versions_for), with the scenario's server settings (`settings=False`:
        none, as the probe wants); ConfigError for a target or option that cannot be."""
        wanted = dict(scenario.settings) if settings else {}
        return [make_provisioner(scenario.engine, wanted, self.options(version, scenario, listener))
                for version in self.versions_for(scenario, default_versions)]


def run(scenario: Scenario | str | Path, *, target: Target | None = None, out_dir: str | Path = "results",
        quick: bool = False, params: dict[str, str] | None = None, variants: Iterable[str] = (),
        processes: int | None = None, repeat: int = 1, check: CheckPolicy | None = None,
        shard: Shard | str | None = None, listener: Listener | None = None, skip_unrunnable: bool = False,
        cluster: str | None = None, host_weights: dict[str, float] | None = None) -> Outcome:
    """Run `scenario` (a file, or one loaded with load_scenario) on `target` into a run directory under
    `out_dir`; returns the outcome (`outcome.run` is the Run, `outcome.error` the error of a run that did
    not end ok). `quick`, `params` (parameter overrides) apply when loading a file; `variants` runs only
    these; `repeat` runs each variant N times interleaved; `check` repeats runs until the claims are
    decided (CheckPolicy); `shard` ("I/N") runs one share of the run; `skip_unrunnable` runs the variants a
    server concurbench does not own can run and skips the others (otherwise such a run is refused at start);
    `cluster` (a scheduler's address) drives each variant run's load from that cluster's load hosts, dealt by
    `host_weights` (host name -> weight; 1 each by default; docs/distributed.md). `listener` hears the progress."""
    model = _scenario(scenario, quick, params)
    shard = Shard.parse(shard) if isinstance(shard, str) else shard  # with check: refused by the Runner
    target = target or Target()
    return _run(model, target, listener or Listener(), out_dir=out_dir, processes=processes,
                variants=list(variants) or None, repeat=repeat, check=check, shard=shard,
                skip_unrunnable=skip_unrunnable, cluster=cluster, host_weights=host_weights)


def probe(scenario: Scenario | str | Path, *, target: Target | None = None, quick: bool = False,
          params: dict[str, str] | None = None, variants: Iterable[str] = (),
          listener: Listener | None = None) -> list[ProbeReport]:
    """Probe every server of `target` the run of `scenario` would use, with no load (concurbench.probe):
    one ProbeReport per server, each `ok` when none of its checks failed."""
    model = _scenario(scenario, quick, params)
    target = target or Target()
    chosen = chosen_variants(model, list(variants) or None)
    provisioners = target.provisioners(model, listener=listener, settings=False)
    with sigterm_interrupts():
        return [probe_target(model, provisioner, variants=chosen) for provisioner in provisioners]


def side_by_side(scenario: Scenario | str | Path, *, old: str, new: str, comparisons: Iterable[Comparison],
                 target: Target | None = None, out_dir: str | Path = "results", quick: bool = False,
                 params: dict[str, str] | None = None, policy: CheckPolicy | None = None,
                 starts: int = STARTS, listener: Listener | None = None) -> Outcome:
    """Run the variant points `comparisons` read on the `old` and the `new` release of the target's server, both
    up at once, in one run: interleaved and paired by round, from two rounds on one more while a comparison is
    undecided, within `policy` (rounds: max_repeats, ROUNDS by default, BUSY_ROUNDS on a busy machine; time:
    budget_s, ten minutes by default), both servers restarted at even steps of the most rounds so the rounds
    run on `starts` instances of each. Each comparison's verdict is in `outcome.run.claims` (`claim_id`: its
    place in `comparisons`): FAIL when the new release is worse than the old by more than the comparison's
    minimum change, PASS when it is not, INCONCLUSIVE when the rounds could not tell. The target must start
    servers of any release (binaries, docker); ConfigError otherwise, and for a release it cannot have."""
    target = target or Target(CLAIMS_TARGET)
    if not target.spec.version_matrix:
        raise ConfigError(f"side by side: the {target.name} target cannot start another release of the server; "
                          f"confirming a release needs a target that can ({' or '.join(RELEASE_TARGETS)})")
    comparisons = tuple(comparisons)
    if not comparisons:
        raise ConfigError("side by side: nothing to compare")
    model = _only_points(_scenario(scenario, quick, params), comparisons)
    policy = policy or CheckPolicy(max_repeats=ROUNDS, budget_s=SIDE_BY_SIDE_BUDGET_S, busy_max_repeats=BUSY_ROUNDS)
    decider = AcrossServers(model, policy, first=MIN_RUNS, old=old, new=new, comparisons=comparisons,
                            instances=starts)
    variants = list(dict.fromkeys(c.ref.variant for c in comparisons))
    return _run(model, replace(target, versions=(old, new)), listener or Listener(), out_dir=out_dir,
                variants=variants, repeat=MIN_RUNS, check=policy, decider=decider)


def _only_points(model: Scenario, comparisons: tuple[Comparison, ...]) -> Scenario:
    """The scenario with each compared variant's sweep cut to the points the comparisons name (all of them where
    one names none)."""
    wanted: dict[str, set] = {}
    for c in comparisons:
        wanted.setdefault(c.ref.variant, set()).add(None if c.ref.point is None else str(c.ref.point))
    variants = []
    for v in model.variants:
        points = wanted.get(v.name, {None})
        if None not in points:
            kept = tuple(p for p in v.sweep if str(p) in points or (p is not None and _extreme(p, v.sweep, points)))
            v = replace(v, sweep=kept or v.sweep)
        variants.append(v)
    return replace(model, variants=tuple(variants))


def _extreme(point: int, sweep: tuple, names: set) -> bool:
    """A sweep point named `min` or `max`."""
    numbers = [p for p in sweep if p is not None]
    return ("min" in names and point == min(numbers)) or ("max" in names and point == max(numbers))


@dataclass
class Outcome(RunOutcome):
    """What `run` returns: the RunOutcome (`run`, `error`, `status`, `run_dir`, `claims`), and the provisioners
    of its servers."""

    provisioners: list = field(default_factory=list)

    def kept(self) -> list[str]:
        """How to reach each server left running (Target.keep), from the provisioners that can say so."""
        return [hint for p in self.provisioners if (hint := p.connect_hint()) is not None]


@dataclass
class ClaimsTable:
    """What `claims` made: the runs (one per scenario), the errors of runs that failed (scenario name and
    error), and the claims-by-version table as a Report (report.render.markdown, report.html.report_page)."""

    runs: list[Run]
    errors: list[tuple[str, ConcurbenchError]]
    report: Report

    @property
    def verdicts(self) -> list:
        return [v for r in self.runs for v in r.claims]


def claims(scenarios: Iterable[Scenario | str | Path] = (), *, stored: Iterable[str | Path] = (),
           target: Target | None = None, quick: bool = False, check: CheckPolicy | None = None,
           out_dir: str | Path = "results", listener: Listener | None = None,
           on_run: Callable[[Run, ConcurbenchError | None], None] | None = None,
           command: str | None = None) -> ClaimsTable:
    """Check every scenario's claims on every server version (`check`: CheckPolicy; None: 5 runs and a
    30-minute budget each), one run each, scenario after scenario, and tabulate them; or tabulate `stored` run directories
    instead. Every scenario file is loaded before any run. `target` defaults to binaries; versions come
    from the target, else the scenario's server.versions, else its engine's (engines/registry.py: PostgreSQL
    14 to 18, SQL Server 2019, 2022 and 2025). `on_run(run, error)` is called
    after each run; an interrupted run raises KeyboardInterrupt. `command` is named in the table's lines."""
    scenarios, stored = list(scenarios), list(stored)
    target = target or Target(CLAIMS_TARGET)
    if bool(scenarios) == bool(stored):
        raise ConfigError("give scenario files to run, or --from RUN_DIR... to tabulate stored runs (not both)")
    if target.versions and not target.spec.owns_server:
        raise ConfigError(f"--server-version does not apply to --target {target.name}: the server is the version it is")
    runs: list[Run] = []
    errors: list[tuple[str, ConcurbenchError]] = []
    if stored:
        runs = [load_run(path) for path in stored]
    else:
        models = [_scenario(s, quick, None) for s in scenarios]  # every file checked before any run
        policy = check or CheckPolicy(budget_s=CLAIMS_BUDGET_S)
        for model in models:
            outcome = _run(model, target, listener or Listener(), out_dir=out_dir, check=policy,
                           default_versions=spec(model.engine).versions)
            if outcome.status == RunStatus.INTERRUPTED:
                raise KeyboardInterrupt
            runs.append(outcome.run)
            if outcome.error is not None:
                errors.append((model.name, outcome.error))
            if on_run is not None:
                on_run(outcome.run, outcome.error)
    return ClaimsTable(runs, errors, claims_by_version(runs, lines=made_lines(runs, target.name, command)))


def _scenario(scenario: Scenario | str | Path, quick: bool, params: dict[str, str] | None) -> Scenario:
    if isinstance(scenario, Scenario):
        if quick or params:
            raise ConfigError(f"{scenario.path}: quick and params apply when a scenario file is loaded; this "
                              f"scenario is loaded already (pass its file instead)")
        return scenario
    return load_scenario(Path(scenario), quick=quick, overrides=dict(params or {}))


def _run(model: Scenario, target: Target, listener: Listener, *, default_versions: Iterable[str | None] = (None,),
         cluster: str | None = None, host_weights: dict[str, float] | None = None, **runner_options) -> Outcome:
    """Build the target's provisioners and run the scenario on them; the listener hears its start and end. With
    `cluster`, its hosts are checked (versions, clocks) before anything else, and drive the load."""
    hosts = connect_cluster(cluster, host_weights or {}) if cluster is not None else None
    try:
        provisioners = target.provisioners(model, listener=listener, default_versions=default_versions)
        listener.on_run_started(RunStarted(model.name))
        status = RunStatus.FAILED
        try:
            with sigterm_interrupts():
                outcome = Runner(model, provisioners, progress=listener, target=target.spec,
                                 cluster=ClusterLoads(hosts) if hosts is not None else None, **runner_options).run()
            status = outcome.status
        finally:
            listener.on_run_ended(RunEnded(model.name, status))
    finally:
        if hosts is not None:
            hosts.close()
    return Outcome(outcome.run, outcome.error, outcome.report, provisioners=provisioners)


HANGUPS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP (a closed terminal, a lost ssh session) raise KeyboardInterrupt, as
    Ctrl-C does, so the run cleans up; the handlers before them are put back afterwards. A SIGHUP ignored when the
    command started (nohup) stays ignored. Only the main thread can take signals: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _interrupt) for sig in HANGUPS
                if not (sig != signal.SIGTERM and signal.getsignal(sig) == signal.SIG_IGN)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
