"""The validated scenario: frozen dataclasses, built only by the loader."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from ..errors import ConfigError
from .distributions import Distribution
from .versions import VersionSpec, applies, version_parts

DEFAULT_GROUP = "main"


@dataclass(frozen=True)
class SqlStep:
    """One piece of setup or teardown SQL, inline or read from a file."""

    sql: str
    origin: str  # "inline" or the file's path
    versions: VersionSpec | None = None  # run only on servers that meet it (`versions: ">=15"`)


@dataclass(frozen=True)
class Statement:
    name: str
    sql: str
    versions: VersionSpec | None = None


@dataclass(frozen=True)
class Phase:
    """A stretch of a pool's timeline: `rate` or `clients` change at its start (None: as before)."""

    duration: float
    rate: float | None = None
    clients: int | None = None


class Arrivals(StrEnum):
    """How a rate-driven pool spaces its transactions (`arrivals:`)."""

    POISSON = "poisson"  # exponential gaps, as pgbench -R
    FIXED = "fixed"  # one every 1/rate seconds


class BackgroundKind(StrEnum):
    """A background session's `kind:` (background/kinds.py makes each)."""

    HOLD_TRANSACTION = "hold_transaction"
    STATEMENT = "statement"
    LOG_DRAIN = "log_drain"
    XEVENTS = "xevents"
    SQL_TRACE = "sql_trace"


class XeTarget(StrEnum):
    """Where an Extended Events session keeps its events (`options: {target: ...}`)."""

    RING_BUFFER = "ring_buffer"
    EVENT_FILE = "event_file"


@dataclass(frozen=True)
class Pool:
    """A set of sessions (clients) each running the same transaction in a loop."""

    name: str
    clients: int | None  # None: the variant's sweep point
    transaction: tuple[Statement, ...]
    params: tuple[tuple[str, Distribution], ...] = ()
    measure: bool = True  # False: background load, reported apart
    atomic: bool = False  # wrap the statements in BEGIN ... COMMIT
    transactions: int | None = None  # per client; None: run for the duration
    max_tries: int = 1
    think: float = 0.0  # seconds between transactions
    protocol: str = "prepared"  # prepared | extended | simple, as pgbench -M
    init: tuple[str, ...] = ()  # SQL run once by each session right after it connects (SET ...)
    rate: float | None = None  # transactions per second for the whole pool; None: closed loop
    arrivals: Arrivals = Arrivals.POISSON  # how a rate's transactions are spaced
    latency_limit: float | None = None  # seconds; later transactions are counted late, or skipped
    start_after: float | None = None  # seconds into the measurement window; None: with the warm-up
    stop_after: float | None = None  # seconds into the measurement window; None: at its end
    phases: tuple[Phase, ...] = ()  # one after another from the pool's start; the pool stops after the last

    def __post_init__(self):
        object.__setattr__(self, "arrivals", Arrivals(self.arrivals))  # given as its word (tests, scripts)

    @property
    def paced(self) -> bool:
        """Driven by a rate (open loop), not by its clients' own pace."""
        return self.rate is not None or any(p.rate is not None for p in self.phases)

    @property
    def timed(self) -> bool:
        """Has a rate or a timeline: its sessions ask a schedule when to start each transaction."""
        return self.paced or self.start_after is not None or self.stop_after is not None or bool(self.phases)

    def clients_at(self, point: int | None) -> int:
        if self.clients is not None:
            return self.clients
        assert point is not None
        return point

    @property
    def statement_names(self) -> list[str]:
        names = [s.name for s in self.transaction]
        return (["begin", *names, "commit"]) if self.atomic else names


@dataclass(frozen=True)
class Background:
    """A session kept beside the pools, e.g. an idle transaction holding a snapshot."""

    name: str
    kind: BackgroundKind
    isolation: str
    sql: tuple[str, ...]
    release_after: float | None = None  # seconds into the measurement; None: held to the end
    start_after: float | None = None  # hold_transaction: begin this far into the measurement (None: before it)
    at: float | None = None  # statement: run the SQL this far into the measurement
    rate: float | None = None  # log_drain: bytes per second the drain reads from the server's log FIFO
    release_when: str | None = None  # or: SQL polled on another connection; commit once it returns true
    options: dict = field(default_factory=dict, compare=False)  # xevents / sql_trace: target, events, file...

    def __post_init__(self):
        object.__setattr__(self, "kind", BackgroundKind(self.kind))  # a kind given as its word (tests, scripts)


@dataclass(frozen=True)
class SamplerSpec:
    name: str
    options: tuple[tuple[str, object], ...] = ()

    def option(self, key: str, default=None):
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class Probe:
    """A query whose rows are kept with the results: before the load, after it, or after teardown."""

    name: str
    sql: str
    when: tuple[str, ...] = ("after",)
    versions: VersionSpec | None = None


PROBE_TIMES = ("before", "after", "final")


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    group: str
    pools: tuple[Pool, ...]
    background: tuple[Background, ...]
    setup: tuple[SqlStep, ...]
    teardown: tuple[SqlStep, ...]
    duration: float
    warmup: float
    sweep: tuple[int | None, ...]  # (None,) when no pool follows the sweep
    samplers: tuple[SamplerSpec, ...]
    settings: tuple[tuple[str, str], ...] = ()  # server settings for this variant (applied with a restart)
    database: tuple[tuple[str, object], ...] = ()  # SQL Server database options for this variant
    probes: tuple[Probe, ...] = ()
    # each client of each measured pool runs this many transactions before the measured load, in a pass of their
    # own that nothing measures (running/warmup.py: warm_up); None: no such pass
    warmup_transactions: int | None = None

    @property
    def uses_sweep(self) -> bool:
        return any(p.clients is None for p in self.pools)

    @property
    def fixed_count(self) -> bool:
        return all(p.transactions is not None for p in self.pools if p.measure)


@dataclass(frozen=True)
class Published:
    """A figure from the source article, shown beside what we measure."""

    variant: str
    metric: str
    value: float
    unit: str = ""
    clients: int | None = None
    pool: str | None = None
    note: str = ""
    server: str | None = None  # the server version the figure was measured on (`2019`); None: any


@dataclass(frozen=True)
class Source:
    title: str = ""
    url: str = ""
    author: str = ""
    engine: str = ""
    hardware: str = ""
    published: tuple[Published, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    engine: str
    path: Path
    sha256: str
    description: str
    source: Source
    settings: tuple[tuple[str, str], ...]
    parameters: tuple[tuple[str, object], ...]
    setup: tuple[SqlStep, ...]
    teardown: tuple[SqlStep, ...]
    variants: tuple[Variant, ...]
    baselines: tuple[tuple[str, str], ...]  # group -> variant name
    seed: int = 1
    quick: bool = False
    expect: tuple = ()  # claims.Claim
    extras: dict = field(default_factory=dict, compare=False)
    database: tuple[tuple[str, object], ...] = ()  # SQL Server: ALTER DATABASE options for every variant
    versions: tuple[str, ...] = ()  # server.versions: the default version matrix of docker and binaries targets
    images: tuple[tuple[str, str], ...] = ()  # server.images: the docker target's image per version

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def groups(self) -> list[str]:
        seen: list[str] = []
        for v in self.variants:
            if v.group not in seen:
                seen.append(v.group)
        return seen

    def baseline(self, group: str) -> str | None:
        return dict(self.baselines).get(group)

    def on_server(self, version: str) -> "Scenario":
        """The scenario as it runs on a server of this version (`14.23`): SQL steps, probes and pool
        statements whose `versions:` condition the server does not meet are left out. ConfigError when
        the version cannot be read or a pool's transaction is left with no statement."""
        items = [*self.setup, *self.teardown, *(i for v in self.variants for i in (
            *v.setup, *v.teardown, *v.probes, *(s for p in v.pools for s in p.transaction)))]
        if all(item.versions is None for item in items):
            return self
        parts = version_parts(version)
        if parts is None:
            raise ConfigError(f"{self.path}: the scenario has versions: conditions, but the server's version "
                              f"'{version}' does not start with a number")

        def keep(steps):
            return tuple(s for s in steps if applies(s.versions, parts))

        variants = []
        for v in self.variants:
            pools = []
            for pool in v.pools:
                if not keep(pool.transaction):
                    raise ConfigError(f"{self.path}: variants.{v.name}.pools.{pool.name}.transaction: no statement "
                                      f"is for server {version} (each has a versions: condition it does not meet)")
                pools.append(replace(pool, transaction=keep(pool.transaction)))
            variants.append(replace(v, setup=keep(v.setup), teardown=keep(v.teardown), probes=keep(v.probes),
                                    pools=tuple(pools)))
        return replace(self, setup=keep(self.setup), teardown=keep(self.teardown), variants=tuple(variants))
