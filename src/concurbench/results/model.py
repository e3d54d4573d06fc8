"""The result of a run, typed: a Run holds its manifest facts and its VariantRuns, each VariantRun
its PoolResults and its figures as Metric records (`metrics`, read by name through `figures`, `own` and
`whole`); ClaimVerdicts judge the scenario's `expect` claims.

The runner builds a Run once, the store writes it (results/store.py) and `load_run` reads it back;
reports, compare and `concurbench.load` read nothing else. `as_dict`/`from_dict` give and take the
current format's JSON shapes (older formats are migrated before `from_dict`, in results/migrate.py).
A metric a server cannot give is kept as `unavailable: {metric: reason}` on the variant run or the
pool; metric lookups then return an `Unavailable` (printed "unavailable: reason"), never a gap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from .. import __version__
from ..scenario.claims import ClaimForm, claim_form, claim_of
from ..scenario.model import Scenario
from ..stats import Verdict
from ..workload.events import Event
from . import frame as frames
from .machine import MachineLoad
from .metric import Metric, SamplerFailure, Scope, from_figures
from .metrics import nested
from .shards import Plan

FORMAT_VERSION = 3


class RunStatus(StrEnum):
    """How a run, a variant run or a warm-up pass ended (the words stored, as a StrEnum they stay the same)."""

    OK = "ok"
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM or SIGHUP: figures cover the part that ran
    INCOMPLETE = "incomplete"  # a worker process sent no results
    FAILED = "failed"
    RUNNING = "running"  # a run's manifest while it goes
    KILLED = "killed"  # a run that ended without finishing (its owner is gone), as the store reads it back
    NOT_EVALUATED = "not evaluated"  # a claim's point in the history whose claim was not evaluated (not a run's end)


class Cause(StrEnum):
    """Why a claim's verdict is what it is, as a check acts on it (the reason says it in words)."""

    TESTED = "tested"  # the test decided, or left it within the noise (more runs may decide it)
    EXACT = "exact"  # every run measured the same, or 0 against more than 0: decided without an interval
    THIN = "too few observations"  # a window saw too little: more runs would not change it
    NEVER_SEEN = "both sides zero"  # nothing was seen to compare
    NO_UNCERTAINTY = "no uncertainty"  # no spread could be estimated for a side
    FEW_RUNS = "too few runs"  # a side ran fewer times than a verdict needs
    NO_FIGURE = "no figure"  # a side's figure was not measured
    QUICK = "left out of quick runs"
    OTHER_SERVER = "about other servers"
    NOT_CHOSEN = "left out with --variant"
    NOT_RUN = "not run"  # its variants were skipped by the server or not reached
    IN_A_SHARD = "in a shard"  # `merge` judges it on the data of every shard


LEFT_OUT_CAUSES = (Cause.QUICK, Cause.OTHER_SERVER, Cause.NOT_CHOSEN)  # not evaluated on purpose


CLAIMS_VARIANT = "claims"  # the variant a claim's figure is placed under (ClaimVerdict.metric, the history)
STATUSES = (RunStatus.OK, RunStatus.INTERRUPTED, RunStatus.INCOMPLETE, RunStatus.FAILED)  # of a variant run
SAMPLE_KEYS = ("variant", "point", "server", "repeat")  # the columns samples/*.csv add to a sampler's rows


class FormatProblem(ValueError):
    """A JSON document that does not have the shape of the format; `where` is the path inside it."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem


@dataclass(frozen=True)
class Unavailable:
    """A metric the server could not give, and why (`not available on PostgreSQL 14`)."""

    reason: str

    def __str__(self) -> str:
        return f"unavailable: {self.reason}"


@dataclass(frozen=True)
class PoolResult:
    """One pool of one variant run: the merged statistics with their encoded histograms (PoolStats.to_dict, kept
    as it comes) and the figures it could not give. Its figures are the variant run's records under its name."""

    name: str
    measure: bool
    clients: int
    stats: dict | None = None
    unavailable: dict[str, str] = field(default_factory=dict)

    def as_dict(self, figures: dict) -> dict:
        """Its summary.json entry; `figures` (its records by name) are written nested as formats 1 and 2 did."""
        out: dict[str, Any] = {"measure": self.measure, "clients": self.clients, "metrics": nested(figures)}
        if self.stats is not None:
            out["stats"] = self.stats
        if self.unavailable:
            out["unavailable"] = dict(self.unavailable)
        return out

    @classmethod
    def from_dict(cls, name: str, data: dict, where: str) -> "PoolResult":
        _need(data, ("measure", "clients"), where)
        return cls(name, bool(data["measure"]), data["clients"], data.get("stats"),
                   dict(_mapping(data.get("unavailable") or {}, f"{where}.unavailable")))


@dataclass(frozen=True)
class Workers:
    """The worker processes of a variant run's load, and how many of them sent their results."""

    started: int
    reported: int

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "Workers":
        data = _mapping(data, where)
        _need(data, ("started", "reported"), where)
        return cls(int(data["started"]), int(data["reported"]))


@dataclass(frozen=True)
class WarmupPass:
    """What a variant's warm-up pass did (running/warmup.py): its transactions, the failed ones, how long it took,
    whether the server had just restarted, and how it ended (a RunStatus)."""

    transactions_per_client: int
    transactions: int
    failed: int
    elapsed_s: float
    after_restart: bool
    status: RunStatus = RunStatus.OK

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "WarmupPass":
        data = _mapping(data, where)
        _need(data, ("transactions", "failed", "elapsed_s"), where)
        return cls(int(data.get("transactions_per_client") or 0), int(data["transactions"]), int(data["failed"]),
                   float(data["elapsed_s"]), bool(data.get("after_restart")),
                   _status(data.get("status"), f"{where}.status"))


@dataclass(frozen=True)
class VariantRun:
    """One variant at one sweep point on one server, one repeat of it."""

    variant: str
    group: str
    point: int | None
    server: str | None = None  # the server's short version (`18.6`, `2022-CU18`)
    repeat: int = 1
    status: RunStatus = RunStatus.OK  # one of STATUSES
    elapsed_s: float = 0.0  # the measurement window actually used
    started: float | None = None  # seconds since the epoch
    warmup_s: float | None = None
    fixed: bool | None = None  # pools ran a set number of transactions (elapsed time is the result)
    worker_cpu_s: list[float] = field(default_factory=list)
    worker_wall_s: list[float] = field(default_factory=list)
    # seconds each worker's load loop waited for a CPU (None where the kernel does not say; [] before it was kept)
    worker_wait_s: list[float | None] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    pools: dict[str, PoolResult] = field(default_factory=dict)
    samplers: dict[str, dict] = field(default_factory=dict)  # each sampler's summary
    sampler_errors: list[str] = field(default_factory=list)
    background: list[dict] = field(default_factory=list)
    probes: dict[str, dict[str, list[dict]]] = field(default_factory=dict)  # probe -> when -> rows
    settings: dict[str, Any] | None = None  # server settings the variant changed, as the server reported them
    samples: dict[str, list[dict]] = field(default_factory=dict)  # periodic sampler -> rows (`t_s`, ...)
    unavailable: dict[str, str] = field(default_factory=dict)
    workers: Workers | None = None  # the worker processes of the pool run, and how many reported
    loop: str | None = None  # the workers' event loop: "compiled" or "python" (None: written before it was said)
    events: list[Event] = field(default_factory=list)  # the timeline in time order (workload/events.py)
    warmup_pass: WarmupPass | None = None  # the unmeasured pass before the load (running/warmup.py); None: none
    sampler_failures: list[SamplerFailure] = field(default_factory=list)  # samplers that gave no summary

    hosts: list[dict] = field(default_factory=list)  # a cluster's load: each load host's figures; []: one machine
    # its figures as records (results/metric.py), made where they were measured: each pool's, the samplers',
    # the probes' and its own; what every reader reads (`figures`, `metric`)
    metrics: tuple[Metric, ...] = ()

    @property
    def complete(self) -> bool:
        """Its figures cover the whole window and every worker process (not interrupted, incomplete or failed)."""
        return self.status == RunStatus.OK

    @property
    def clients(self) -> dict[str, int]:
        return {name: p.clients for name, p in self.pools.items()}

    @property
    def label(self) -> str:
        """`variant@point (server)`, as warnings and compare name a variant run."""
        return self.variant + (f"@{self.point}" if self.point is not None else "") + (
            f" ({self.server})" if self.server else "")

    def first_measured(self) -> PoolResult:
        """The first measured pool (the first pool when none is measured)."""
        return next((p for p in self.pools.values() if p.measure), next(iter(self.pools.values())))

    def figures(self, pool: str) -> dict:
        """The records of one pool with those of the variant run as a whole (its samplers', probes' and its own),
        by name: the names reports, summary.csv, claims and compare use (`tps`, `latency.p95_ms`,
        `wal.bytes_per_txn`, `waits.CPU`); a figure the server could not give is Unavailable."""
        out = {m.name: m.value for m in self.metrics if m.scope is not Scope.POOL or m.pool == pool}
        unavailable = {**self.unavailable, **(self.pools[pool].unavailable if pool in self.pools else {})}
        for name, reason in unavailable.items():
            out[name] = Unavailable(reason)
        return out

    def whole(self) -> dict:
        """The records of the variant run as a whole (its samplers', probes' and its own), by name, as measured."""
        return {m.name: m.value for m in self.metrics if m.scope is not Scope.POOL}

    def own(self, pool: str) -> dict:
        """The records of one pool alone, by name, as measured (no Unavailable)."""
        return {m.name: m.value for m in self.metrics if m.scope is Scope.POOL and m.pool == pool}

    def metric(self, pool: str, name: str):
        """One figure: a number, an Unavailable, or None when the run has no such figure."""
        return self.figures(pool).get(name)

    def as_dict(self) -> dict:
        """The summary.json entry (samples go to samples/*.csv instead)."""
        out = {"variant": self.variant, "group": self.group, "point": self.point, "server": self.server,
               "repeat": self.repeat, "status": self.status, "elapsed_s": self.elapsed_s, "started": self.started,
               "warmup_s": self.warmup_s, "fixed": self.fixed, "worker_cpu_s": list(self.worker_cpu_s),
               "worker_wall_s": list(self.worker_wall_s), "worker_wait_s": list(self.worker_wait_s),
               "messages": list(self.messages),
               "pools": {name: p.as_dict(self.own(name)) for name, p in self.pools.items()}, "samplers": self.samplers,
               "sampler_errors": list(self.sampler_errors), "background": list(self.background),
               "probes": self.probes}
        if self.settings is not None:
            out["settings"] = self.settings
        if self.unavailable:
            out["unavailable"] = dict(self.unavailable)
        if self.workers is not None:
            out["workers"] = asdict(self.workers)
        if self.loop is not None:
            out["loop"] = self.loop
        if self.events:
            out["events"] = [e.as_dict() for e in self.events]
        if self.warmup_pass is not None:
            out["warmup_pass"] = asdict(self.warmup_pass)
        if self.sampler_failures:
            out["sampler_failures"] = [f.as_dict() for f in self.sampler_failures]
        out["metrics"] = [m.as_dict() for m in self.metrics]
        if self.hosts:
            out["hosts"] = [dict(h) for h in self.hosts]
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str, samples: dict[str, list[dict]] | None = None) -> "VariantRun":
        data = _mapping(data, where)
        _need(data, ("variant", "group", "point", "pools"), where)
        pools = _mapping(data["pools"], f"{where}.pools")
        if not pools:
            raise FormatProblem(f"{where}.pools", "no pools")
        status = data.get("status", RunStatus.OK)
        if status not in STATUSES:
            raise FormatProblem(f"{where}.status", f"'{status}' is not one of {', '.join(STATUSES)}")
        run = cls(
            variant=str(data["variant"]), group=str(data["group"]), point=data["point"], server=data.get("server"),
            repeat=int(data.get("repeat") or 1), status=RunStatus(status), elapsed_s=data.get("elapsed_s") or 0.0,
            started=data.get("started"), warmup_s=data.get("warmup_s"), fixed=data.get("fixed"),
            worker_cpu_s=list(data.get("worker_cpu_s") or []), worker_wall_s=list(data.get("worker_wall_s") or []),
            worker_wait_s=list(data.get("worker_wait_s") or []), messages=list(data.get("messages") or []),
            pools={str(name): PoolResult.from_dict(str(name), _mapping(p, f"{where}.pools.{name}"),
                                                   f"{where}.pools.{name}") for name, p in pools.items()},
            samplers=dict(_mapping(data.get("samplers") or {}, f"{where}.samplers")),
            sampler_errors=list(data.get("sampler_errors") or []), background=list(data.get("background") or []),
            probes=dict(_mapping(data.get("probes") or {}, f"{where}.probes")), settings=data.get("settings"),
            samples=dict(samples or {}),
            unavailable=dict(_mapping(data.get("unavailable") or {}, f"{where}.unavailable")),
            workers=Workers.from_dict(data["workers"], f"{where}.workers") if data.get("workers") else None,
            loop=data.get("loop"), events=_events(data.get("events"), f"{where}.events"),
            warmup_pass=WarmupPass.from_dict(data["warmup_pass"], f"{where}.warmup_pass")
            if data.get("warmup_pass") else None,
            sampler_failures=_records(SamplerFailure, data.get("sampler_failures") or [], f"{where}.sampler_failures"),
            hosts=[dict(_mapping(h, f"{where}.hosts[{i}]")) for i, h in enumerate(data.get("hosts") or [])])
        if data.get("metrics") is not None:  # format 3: the records as written
            return replace(run, metrics=tuple(_records(Metric, data["metrics"], f"{where}.metrics")))
        nested_figures = {name: _mapping(p.get("metrics") or {}, f"{where}.pools.{name}.metrics")
                          for name, p in pools.items()}
        return replace(run, metrics=from_figures(run, nested_figures))  # stored before records


def _records(kind, value, where: str) -> list:
    """Stored records of a kind with a `from_dict` (Metric, SamplerFailure), or a FormatProblem naming which."""
    if not isinstance(value, list):
        raise FormatProblem(where, f"expected a list, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        try:
            out.append(kind.from_dict(_mapping(item, f"{where}[{i}]")))
        except (KeyError, ValueError, TypeError) as exc:
            if isinstance(exc, FormatProblem):
                raise
            raise FormatProblem(f"{where}[{i}]", f"not a {kind.__name__} record ({type(exc).__name__}: {exc})") \
                from None
    return out


def _form(value, where: str) -> ClaimForm | None:
    if value is None:
        return None
    try:
        return claim_of(_mapping(value, where))
    except ValueError as exc:
        raise FormatProblem(where, str(exc)) from None


def _status(value, where: str) -> RunStatus:
    """A stored status (ok when none is written), or a FormatProblem naming where."""
    try:
        return RunStatus(value or RunStatus.OK)
    except ValueError:
        raise FormatProblem(where, f"'{value}' is not one of {', '.join(RunStatus)}") from None


def _events(value, where: str) -> list[Event]:
    """A variant run's timeline events as written (none in runs written before events were kept)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise FormatProblem(where, f"expected a list of events, got {type(value).__name__}")
    out = []
    for i, e in enumerate(value):
        e = _mapping(e, f"{where}[{i}]")
        _need(e, ("t_s", "source", "kind"), f"{where}[{i}]")
        out.append(Event(float(e["t_s"]), str(e["source"]), str(e["kind"]), str(e.get("detail") or "")))
    return out


@dataclass(frozen=True)
class ClaimEstimate:
    """One side of a claim: its value, and where known its interval, the observations behind it and how
    it was estimated (`method`)."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int | None = None
    method: str | None = None
    confidence: float | None = None  # of the interval; None: 95%

    def as_dict(self) -> dict:
        out = {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "method": self.method}
        if self.confidence is not None:
            out["confidence"] = self.confidence
        return out

    @classmethod
    def from_dict(cls, data, where: str) -> "ClaimEstimate | None":
        if data is None:
            return None
        if _number(data):  # a bare number (format 1)
            return cls(float(data))
        data = _mapping(data, where)
        _need(data, ("value",), where)
        if not _number(data["value"]):
            raise FormatProblem(f"{where}.value", f"expected a number, found {data['value']!r}")
        return cls(data["value"], data.get("low"), data.get("high"), data.get("n"), data.get("method"),
                   data.get("confidence"))


@dataclass(frozen=True)
class ClaimVerdict:
    """The verdict on one `expect` claim on one server: pass, fail, inconclusive or not evaluated.

    The claim travels with it: `claim` is its text as the scenario wrote it, `claim_id` its place in the
    scenario's `expect` (0 first), `form` its parsed sides and operator, `key` what names it (its `id:`, else
    its form written one way; a verdict stored without one takes its form's). `cause` says why the verdict is what
    it is (the reason says it in words); `left_out` marks a claim not evaluated on purpose, which a check does
    not count as undecided: the scenario left it out (of quick runs, or of servers it is not about) or the
    user did (its variants were not chosen with --variant)."""

    claim: str
    verdict: Verdict
    description: str = ""
    server: str | None = None
    left: ClaimEstimate | None = None
    right: ClaimEstimate | None = None
    reason: str = ""
    ratio: ClaimEstimate | None = None  # left / right with its 95% interval, where the test was on the log scale
    p_value: float | None = None  # the test's two-sided p-value
    level: float | None = None  # the level it was tested at: its share of 5% (Holm over claims, spending over looks)
    interval: ClaimEstimate | None = None  # left / right (or left - right) at the level the verdict was tested at
    runs_needed: int | None = None  # inconclusive: runs a side that would decide it if the difference stays so
    cause: Cause = Cause.TESTED
    claim_id: int | None = None  # None: a verdict built outside a scenario's check (tests)
    form: ClaimForm | None = None  # the claim parsed: form.left, form.op, form.right
    claim_key: str = ""  # the claim's `id:` or its form's text (made "": the form's, or the text without one)
    # its measured figure as a record, made with the verdict (where the claim is judged; see __post_init__)
    metric: Metric | None = field(default=None, init=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "verdict", Verdict(self.verdict))  # a word ("pass") becomes its member
        object.__setattr__(self, "cause", Cause(self.cause))
        if not self.claim_key:  # made or stored without one: its form's text (the text itself where it has none)
            object.__setattr__(self, "claim_key", self.form.text if self.form is not None else self.claim)
        object.__setattr__(self, "metric", self._record())

    @property
    def key(self) -> str:
        """What names the claim in reports and the history (see above)."""
        return self.claim_key

    def _record(self) -> Metric | None:
        """The verdict's estimate as a record (scope claim, named by its key, under variant `claims`): left over
        right where the test was on that ratio (unit ×), else its left side; None where nothing was measured."""
        shown, unit = (self.ratio, "×") if self.ratio is not None else (self.left, "")
        if shown is None or not _number(shown.value):
            return None
        return Metric(self.key, shown.value, unit, Scope.CLAIM, CLAIMS_VARIANT, "", 0, self.server, 0)

    @property
    def left_out(self) -> bool:
        """Not evaluated on purpose (see above)."""
        return self.cause in LEFT_OUT_CAUSES

    @property
    def passed(self) -> bool | None:
        """True on pass, False on fail, None when the claim was not decided."""
        return {Verdict.PASS: True, Verdict.FAIL: False}.get(self.verdict)

    def as_dict(self) -> dict:
        return {"claim": self.claim, "description": self.description, "server": self.server,
                "verdict": self.verdict.value, "left_out": self.left_out,
                "left": self.left.as_dict() if self.left else None,
                "right": self.right.as_dict() if self.right else None, "reason": self.reason,
                "ratio": self.ratio.as_dict() if self.ratio else None, "p_value": self.p_value, "level": self.level,
                "interval": self.interval.as_dict() if self.interval else None, "runs_needed": self.runs_needed,
                "cause": self.cause.value, "claim_id": self.claim_id,
                "form": None if self.form is None else claim_form(self.form), "key": self.key}

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "ClaimVerdict":
        data = _mapping(data, where)
        _need(data, ("claim", "verdict"), where)
        try:
            verdict = Verdict(data["verdict"])
        except ValueError:
            raise FormatProblem(f"{where}.verdict", f"'{data['verdict']}' is not one of {', '.join(Verdict)}") from None
        _need(data, ("cause",), where)
        try:
            cause = Cause(data["cause"])
        except ValueError:
            raise FormatProblem(f"{where}.cause", f"'{data['cause']}' is not one of {', '.join(Cause)}") from None
        return cls(data["claim"], verdict, data.get("description") or "", data.get("server"),
                   ClaimEstimate.from_dict(data.get("left"), f"{where}.left"),
                   ClaimEstimate.from_dict(data.get("right"), f"{where}.right"), data.get("reason") or "",
                   ClaimEstimate.from_dict(data.get("ratio"), f"{where}.ratio"), data.get("p_value"),
                   data.get("level"), ClaimEstimate.from_dict(data.get("interval"), f"{where}.interval"),
                   data.get("runs_needed"), cause, data.get("claim_id"),
                   _form(data.get("form"), f"{where}.form"), str(data.get("key") or ""))


class _Flat:
    """A record stored as one flat JSON object of its fields; `required` names those it cannot lack."""

    required: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict, where: str):
        data = _mapping(data, where)
        _need(data, cls.required, where)
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class PublishedFigure(_Flat):
    """A figure from the source article, shown beside what was measured. (Its own class, not the
    scenario's `Published`: the stored format must not change when the scenario format does.)"""

    variant: str
    metric: str
    value: float
    unit: str = ""
    clients: int | None = None
    pool: str | None = None
    note: str = ""
    server: str | None = None

    required = ("variant", "metric", "value")


@dataclass(frozen=True)
class Source:
    title: str = ""
    url: str = ""
    author: str = ""
    engine: str = ""
    hardware: str = ""


@dataclass(frozen=True)
class ScenarioInfo:
    """What the run directory records of the scenario (the file itself is named and hashed)."""

    name: str
    title: str = ""
    file: str = ""
    sha256: str = ""
    quick: bool = False
    parameters: dict = field(default_factory=dict)
    engine: str = "postgres"
    variants: list[str] = field(default_factory=list)
    seed: int | None = None
    baselines: dict[str, str] = field(default_factory=dict)
    source: Source = Source()
    checkout: dict = field(default_factory=dict)  # the scenario file's git checkout: {"commit", "dirty"}; {} outside one

    @classmethod
    def of(cls, s: "Scenario", checkout: dict | None = None) -> "ScenarioInfo":
        return cls(s.name, s.title, str(s.path), s.sha256, s.quick, dict(s.parameters), s.engine,
                   [v.name for v in s.variants], s.seed, dict(s.baselines),
                   Source(s.source.title, s.source.url, s.source.author, s.source.engine, s.source.hardware),
                   dict(checkout or {}))

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["source"] = dict(self.source.__dict__)
        if not self.checkout:
            del out["checkout"]  # outside a git checkout: written as before it was recorded
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "ScenarioInfo":
        data = _mapping(data, where)
        _need(data, ("name",), where)
        source = _mapping(data.get("source") or {}, f"{where}.source")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data and f.name != "source"},
                   source=Source(**{f.name: source.get(f.name) or "" for f in fields(Source)}))


SERVER_KEYS = ("version", "version_num", "version_short", "settings", "target", "connection", "differences",
               "settings_in_effect")


@dataclass(frozen=True)
class ServerInfo:
    """A server the scenario ran on, as its engine described it; `extra` holds engine-specific facts
    (SQL Server's edition and product version). `differences` are the scenario's settings a server
    concurbench does not own ran without (`--server-settings as-is`): {setting, wanted, found, why},
    `found` None where the role may not read it. `settings_in_effect` are the server's settings that were not
    its defaults when the run started (name -> value; engines/pg_settings.py says which), None where the
    engine cannot tell (SQL Server) or for a run written before they were recorded."""

    version: str = ""
    version_num: int | None = None
    version_short: str = "?"
    settings: dict = field(default_factory=dict)
    target: str | None = None
    connection: str | None = None  # without any password
    extra: dict = field(default_factory=dict)
    differences: list[dict] = field(default_factory=list)
    settings_in_effect: dict | None = None

    def as_dict(self) -> dict:
        head = {"version": self.version, "version_num": self.version_num, "version_short": self.version_short}
        out = {**head, **self.extra, "settings": self.settings, "target": self.target, "connection": self.connection}
        if self.differences:
            out["differences"] = [dict(d) for d in self.differences]
        if self.settings_in_effect is not None:
            out["settings_in_effect"] = dict(self.settings_in_effect)
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str = "server") -> "ServerInfo":
        data = _mapping(data, where)
        known = {k: data[k] for k in SERVER_KEYS if k in data}
        differences = known.pop("differences", None) or []
        if not isinstance(differences, list) or not all(isinstance(d, dict) and "setting" in d for d in differences):
            raise FormatProblem(f"{where}.differences", "expected a list of {setting, wanted, found, why}")
        in_effect = known.pop("settings_in_effect", None)
        if in_effect is not None and not (isinstance(in_effect, dict)
                                          and all(isinstance(v, str) for v in in_effect.values())):
            raise FormatProblem(f"{where}.settings_in_effect", "expected a mapping of setting names to values")
        return cls(**known, differences=[dict(d) for d in differences], settings_in_effect=in_effect,
                   extra={k: v for k, v in data.items() if k not in SERVER_KEYS})

    def differences_text(self, why: bool = True) -> str:
        """The differences in one line: "shared_buffers 128MB, the scenario wants 256MB (why); ..."."""
        return "; ".join(f"{d['setting']} {'unknown' if d.get('found') is None else d['found']}, the scenario wants "
                         f"{d['wanted']}" + (f" ({d['why']})" if why and d.get("why") else "")
                         for d in self.differences)


@dataclass(frozen=True)
class ShardInfo:
    """A run made with `--shard INDEX/COUNT`: the plan it was cut from (results/shards.py has the rule)
    and, for each server of the plan, the version it ran as here (None: this shard did not start it)."""

    index: int
    count: int
    plan: Plan
    servers: list[str | None] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def as_dict(self) -> dict:
        return {"index": self.index, "count": self.count, "plan": self.plan.as_dict(), "servers": list(self.servers)}

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "ShardInfo":
        data = _mapping(data, where)
        _need(data, ("index", "count", "plan"), where)
        try:
            plan = Plan.from_dict(_mapping(data["plan"], f"{where}.plan"))
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatProblem(f"{where}.plan", f"not a plan ({exc})") from exc
        index, count = data["index"], data["count"]
        if not (isinstance(index, int) and isinstance(count, int) and 1 <= index <= count):
            raise FormatProblem(where, f"shard {index}/{count} is not I/N with 1 <= I <= N")
        return cls(index, count, plan, list(data.get("servers") or []))


@dataclass(frozen=True)
class MergedShard(_Flat):
    """One shard a merged run was made of (`concurbench merge`): its place, directory, host and status."""

    index: int
    count: int
    path: str
    hostname: str = ""
    status: RunStatus = RunStatus.OK
    started: str = ""
    ended: str = ""

    required = ("index", "count", "path")


@dataclass(frozen=True)
class Run:
    """A run directory: the manifest's facts, every variant run, published figures, claims' verdicts."""

    scenario: ScenarioInfo
    status: RunStatus = RunStatus.OK
    error: str | None = None
    servers: list[ServerInfo] = field(default_factory=list)
    target: str = ""
    host: dict = field(default_factory=dict)
    processes: int | None = None
    repeat: int = 1
    started: str = ""  # ISO 8601, UTC
    ended: str = ""
    harness: dict = field(default_factory=lambda: {"name": "concurbench", "version": __version__})
    variant_runs: list[VariantRun] = field(default_factory=list)
    published: list[PublishedFigure] = field(default_factory=list)
    claims: list[ClaimVerdict] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # variants the server could not run, and why
    format_version: int = FORMAT_VERSION  # the format the directory was written in (a migrated run keeps its own)
    path: Path | None = field(default=None, compare=False)
    shard: ShardInfo | None = None  # `run --shard`: which share of which run this is
    merged_from: list[MergedShard] = field(default_factory=list)  # `merge`: the shards it was made of
    machine: MachineLoad | None = None  # how busy the machine was (machine.py); None: not measured
    load_hosts: list[dict] = field(default_factory=list)  # `run --cluster`: the load hosts; []: this machine

    @property
    def server(self) -> ServerInfo | None:
        return self.servers[0] if self.servers else None

    @property
    def claims_failed(self) -> int:
        return sum(1 for c in self.claims if c.verdict is Verdict.FAIL)

    def frame(self):
        """One tidy row per server x variant x point x pool x repeat x metric (a pandas DataFrame)."""
        return frames.tidy(self)

    def samples(self, name: str):
        """The periodic samples of one sampler, every variant run's, as a pandas DataFrame."""
        return frames.samples(self, name)

    def manifest_dict(self) -> dict:
        return {"format_version": FORMAT_VERSION, "harness": dict(self.harness), "status": self.status,
                "error": self.error, "scenario": self.scenario.as_dict(),
                "servers": [s.as_dict() for s in self.servers], "target": self.target, "host": dict(self.host),
                "processes": self.processes, "repeat": self.repeat, "started": self.started, "ended": self.ended,
                **({"shard": self.shard.as_dict()} if self.shard else {}),
                **({"merged_from": [m.as_dict() for m in self.merged_from]} if self.merged_from else {}),
                **({"machine": self.machine.as_dict()} if self.machine else {}),
                **({"load_hosts": [dict(h) for h in self.load_hosts]} if self.load_hosts else {})}

    def summary_dict(self) -> dict:
        return {"format_version": FORMAT_VERSION, "results": [r.as_dict() for r in self.variant_runs],
                "published": [p.as_dict() for p in self.published], "claims": [c.as_dict() for c in self.claims],
                "skipped": dict(self.skipped)}

    def as_dict(self) -> dict:
        """The manifest and the summary in one document (`report --format json`)."""
        return {"manifest": self.manifest_dict(), **self.summary_dict()}

    @classmethod
    def from_dicts(cls, manifest: dict, summary: dict, *, samples: dict | None = None, path: Path | None = None,
                   format_version: int = FORMAT_VERSION) -> "Run":
        """From the current format's manifest and summary; `samples` maps a result's index to its samples.
        Raises FormatProblem naming the place that does not fit ("manifest: ..." or "summary: ...")."""
        manifest = _mapping(manifest, "manifest")
        summary = _mapping(summary, "summary")
        _need(manifest, ("scenario",), "manifest")
        _need(summary, ("results",), "summary")
        results = summary["results"]
        if not isinstance(results, list):
            raise FormatProblem("summary.results", "not a list")
        samples = samples or {}
        return cls(
            scenario=ScenarioInfo.from_dict(manifest["scenario"], "manifest.scenario"),
            status=_status(manifest.get("status"), "manifest.status"), error=manifest.get("error"),
            servers=[ServerInfo.from_dict(s, f"manifest.servers[{i}]") for i, s in
                     enumerate(manifest.get("servers") or [])],
            target=manifest.get("target") or "", host=dict(manifest.get("host") or {}),
            processes=manifest.get("processes"), repeat=int(manifest.get("repeat") or 1),
            started=manifest.get("started") or "", ended=manifest.get("ended") or "",
            harness=dict(manifest.get("harness") or {}),
            variant_runs=[VariantRun.from_dict(r, f"summary.results[{i}]", samples.get(i)) for i, r in
                          enumerate(results)],
            published=[PublishedFigure.from_dict(p, f"summary.published[{i}]") for i, p in
                       enumerate(summary.get("published") or [])],
            claims=[ClaimVerdict.from_dict(c, f"summary.claims[{i}]") for i, c in
                    enumerate(summary.get("claims") or [])],
            skipped=dict(summary.get("skipped") or {}), format_version=format_version, path=path,
            shard=ShardInfo.from_dict(manifest["shard"], "manifest.shard") if manifest.get("shard") else None,
            merged_from=[MergedShard.from_dict(m, f"manifest.merged_from[{i}]") for i, m in
                         enumerate(manifest.get("merged_from") or [])],
            machine=MachineLoad.from_dict(_mapping(manifest["machine"], "manifest.machine"))
            if manifest.get("machine") else None,
            load_hosts=[dict(_mapping(h, f"manifest.load_hosts[{i}]"))
                        for i, h in enumerate(manifest.get("load_hosts") or [])])


# Helpers ---------------------------------------------------------------------------------------------

def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise FormatProblem(where, f"expected an object, found {type(value).__name__}")
    return value


def _need(data: dict, keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise FormatProblem(where, f"lacks {', '.join(missing)}")
