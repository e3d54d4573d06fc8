"""A run directory as the history keeps it: one RunRecord, and a PointRecord per series it measured.

A series is (scenario, variant, pool, clients, sweep point, server version, metric). A point is one
run's figure for it: the mean over the run's repeats with its standard error, and each repeat's
value. With one repeat the error is the window's own where one exists (`tps`, `latency.mean_ms`,
statement means and wait shares, as a report shows them), otherwise there is none.

Metrics kept: every number a measured pool reports (`tps`, `latency.*`, `statements.*`, `errors.*`,
`lag.*`, the shares of its transactions that failed, retried, ran late or were skipped, ...) under its
pool; every number of the variant run itself (WAL, sampler summaries, wait shares, probes,
`elapsed_s`) under pool "" (once, however many pools it has); and each claim's measured ratio (left
over right) or left side under variant "claims", one series per claim and server, named by the claim's
key (ClaimKey: its `id:`, else its form written one way, carrying the form), so a claim reworded,
re-spaced or moved in its list keeps its series, and what its figure means is read from its form.

A pool's counts of rare events (failed, retried, late and skipped transactions, errors by class, and the
shares of its scheduled transactions they make) keep, besides their value, the count summed over the
repeats and the scheduled transactions it is out of (its exposure): the detector judges their rate as a
count with its exposure, whatever the number of transactions did from run to run.

A run keeps the machine it ran on (CPU model, CPUs, what others used of them while its load paused, the
load average, and whether that made the machine busy), the server settings in effect, the scenario file's
path as the run recorded it (a side-by-side run of the same night loads it again), and its kind: a run of
the series, or a run made to confirm a suspicion (its directory holds CONFIRMING, written by `history
check --side-by-side`), which never joins a series' level, also when it is added by hand.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from ..check.sides import is_window_metric, window_estimate
from ..errors import ConfigError
from ..report.repeats import key as repeat_key
from ..results.machine import OTHERS_LIMIT
from ..results.metrics import PER_TXN_FIGURES, per_txn
from ..results.catalogue import CATALOGUE
from ..results.model import CLAIMS_VARIANT, Run, RunStatus, Unavailable, VariantRun
from ..scenario.claims import ClaimForm
from ..results.store import MANIFEST, SUMMARY, load_run
from ..stats import Verdict, estimate

CLAIMS = CLAIMS_VARIANT  # the variant name claims' series are kept under
NO_POINT = -1  # a variant without a client sweep
SKIPPED_PREFIXES = ("error_messages.",)  # numbers keyed by text, not metrics
RARE_COUNTS = ("failed", "retries", "late", "skipped")  # a pool's counts of rare events, besides errors.*
ERRORS = "errors."  # a pool's errors by class: errors.CLASS
BUSY_SHARE = 0.25  # a run's machine was busy when others used this share of its CPUs while its load paused
CONFIRMING = "side-by-side.json"  # in a run directory made to confirm a suspicion: what it compared and decided


class RunKind(StrEnum):
    """What a stored run is for: a point of its series, or a confirming run (side by side), kept apart."""

    MEASURED = "run"
    CONFIRMATION = "confirmation"


class ClaimKey(str):
    """A claim series' metric: the claim's key, carrying the parsed form it was stored with (None where none
    was), so which way its figure is better comes from the form. It compares and hashes as its text."""

    form: ClaimForm | None

    def __new__(cls, key: str, form: ClaimForm | None = None):
        out = super().__new__(cls, key)
        out.form = form
        return out

    def __reduce__(self):
        return ClaimKey, (str(self), self.form)


class SeriesKey(NamedTuple):
    """What names a series, in the store and in an analysis. `server` is the server version a stored series
    ran on; an analysis's series runs on a line (analysis.py): a track (`16`, or a `track` label), one
    server version, or every version ("*"), and keeps it here."""

    scenario: str
    variant: str
    pool: str  # "" for a figure of the variant run as a whole
    clients: int
    point: int  # the sweep point (NO_POINT without a sweep)
    server: str
    metric: str

    @property
    def location(self) -> tuple:
        """Where the metric was measured: the key without the metric (the metrics of one location move
        together)."""
        return self[:-1]


@dataclass(frozen=True)
class RunRecord:
    """What the history keeps of one run directory."""

    run_id: str  # the run directory's name
    digest: str  # SHA-256 of its manifest.json and summary.json: the same run added twice is seen as such
    scenario: str
    scenario_sha256: str
    parameters: dict
    quick: bool
    started: str
    ended: str
    status: RunStatus
    error: str | None
    host: str
    cpu_model: str
    harness: str
    commit: str  # the scenario checkout's git commit ("" where none was recorded)
    dirty: bool | None
    target: str
    servers: list[str]
    format_version: int
    labels: dict[str, str] = field(default_factory=dict)
    machine: dict = field(default_factory=dict)  # cpu_model, cpus, others (CPUs others used), load_average, busy
    settings: dict = field(default_factory=dict)  # server version -> {setting: value} in effect
    kind: RunKind = RunKind.MEASURED
    scenario_file: str = ""  # the scenario file's path as the run recorded it ("" where none was)

    def __post_init__(self):
        object.__setattr__(self, "status", RunStatus(self.status))  # a stored word becomes its member

    @property
    def busy(self) -> bool:
        """Others kept a large share of the machine's CPUs busy while the run's load paused."""
        return bool(self.machine.get("busy"))

    @property
    def machine_id(self) -> tuple[str, int] | None:
        """What makes two runs' machines the same one for a series: CPU model and CPUs (None: not recorded)."""
        model, cpus = self.machine.get("cpu_model"), self.machine.get("cpus")
        return (str(model), int(cpus)) if model and cpus else None

    @property
    def busy_share(self) -> float | None:
        """On a busy machine, the share of its CPUs others kept busy, to the nearest quarter (a quarter at least,
        all at most); None on a quiet one."""
        if not self.busy:
            return None
        others, cpus = self.machine.get("others"), self.machine.get("cpus")
        if not others or not cpus:
            return 1.0
        return min(1.0, max(0.25, round(4 * others / cpus) / 4))


@dataclass(frozen=True)
class PointRecord:
    """One run's figure for one series."""

    run_id: str
    key: SeriesKey
    status: RunStatus  # OK, or how the variant run ended (its figures are kept, and left out of detection);
    # a claim's point: NOT_EVALUATED where its claim was not evaluated
    mean: float
    se: float | None  # the mean's standard error, with df degrees of freedom (None: not known)
    df: float | None
    low: float | None  # a 95% interval given as such (a claim's), where se is not known
    high: float | None
    n: int
    values: tuple[float, ...]
    count: float | None = None  # a rare event's count, summed over the repeats
    exposure: float | None = None  # ... and the scheduled transactions it is out of

    def __post_init__(self):
        object.__setattr__(self, "status", RunStatus(self.status))  # a stored word becomes its member


def check_labels(labels: dict[str, str], what: str = "label") -> None:
    """Labels as the history keeps and shows them: a key that is not empty and holds no `=`, and no control
    character (a newline would break the one line per cause of a gate's summary) in key or value; else a
    ConfigError naming the label."""
    for key, value in labels.items():
        text = f"{key}={value}"
        if not str(key).strip():
            raise ConfigError(f"{what} {text!r}: the key is empty; give KEY=VALUE (branch=main)")
        if "=" in str(key):
            raise ConfigError(f"{what} {text!r}: a key may not hold '='; give KEY=VALUE (branch=main)")
        bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
        if bad is not None:
            raise ConfigError(f"{what} {text!r}: holds a control character ({bad!r}); a label is one line of "
                              f"printable text")


def read_run(path: Path | str, labels: dict[str, str] | None = None) -> tuple[RunRecord, list[PointRecord]]:
    """A run directory's records. A path that is not a run directory, a newer format or a damaged file is a
    ConfigError naming the file (load_run's); so are labels the history cannot keep (check_labels)."""
    check_labels(labels or {})
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{path}: not a run directory (no such directory); give the directory `concurbench run` "
                          f"printed last")
    if not (path / MANIFEST).is_file():
        raise ConfigError(f"{path}: not a run directory (it has no {MANIFEST}); give the directory `concurbench run` "
                          f"printed last")
    run = load_run(path)
    if run.status == RunStatus.RUNNING:
        raise ConfigError(f"{path}: the run is still going (or was killed before it ended); add it when it has "
                          f"ended, or `concurbench gc` a killed one")
    record = _run_record(path, run, labels or {})
    return record, points_of(record, run)


def _run_record(path: Path, run: Run, labels: dict[str, str]) -> RunRecord:
    digest = hashlib.sha256()
    for name in (MANIFEST, SUMMARY):
        file = path / name
        if file.is_file():
            digest.update(file.read_bytes())
    checkout = run.scenario.checkout or {}
    servers = sorted({s.version_short for s in run.servers if s.version_short})
    if not run.started:
        raise ConfigError(f"{path / MANIFEST}: started: missing; the history orders runs by when they started, so "
                          f"this run cannot be placed (is it a run directory concurbench wrote, and whole?)")
    return RunRecord(
        run_id=path.resolve().name, digest=digest.hexdigest(), scenario=run.scenario.name,
        scenario_sha256=run.scenario.sha256, parameters=dict(run.scenario.parameters), quick=run.scenario.quick,
        started=run.started, ended=run.ended, status=run.status, error=run.error,
        host=str(run.host.get("hostname") or ""), cpu_model=str(run.host.get("cpu_model") or ""),
        harness=str(run.harness.get("version") or ""), commit=str(checkout.get("commit") or labels.get("commit") or ""),
        dirty=checkout.get("dirty"), target=run.target, servers=servers, format_version=run.format_version,
        labels=dict(labels), machine=machine_of(run), settings=settings_of(run),
        kind=RunKind.CONFIRMATION if (path / CONFIRMING).is_file() else RunKind.MEASURED,
        scenario_file=str(run.scenario.file or ""))


def machine_of(run: Run) -> dict:
    """The machine a run ran on, as the history compares runs by it: CPU model and CPUs, what others used of
    the CPUs while the run's load paused (the median of its looks), the load average when it started, and
    whether others' share made the machine busy (the load average lags the run before, so it does not)."""
    cpus = run.machine.cpus if run.machine else run.host.get("cpu_count")
    out = {"cpu_model": str(run.host.get("cpu_model") or ""), "cpus": int(cpus) if cpus else None}
    if run.machine is not None:
        others = run.machine.others
        out.update(others=None if others is None else round(others, 2), load_average=run.machine.load_average,
                   busy=others is not None and others >= max(OTHERS_LIMIT, BUSY_SHARE * run.machine.cpus))
    return out


def settings_of(run: Run) -> dict:
    """Each server version's settings in effect as the run recorded them: those the scenario set, over those
    the server reported in effect (where the run read them)."""
    out: dict[str, dict] = {}
    for server in run.servers:
        mine = {**(server.settings_in_effect or {}), **server.settings}
        if mine:
            out.setdefault(server.version_short, {}).update({str(k): str(v) for k, v in mine.items()})
    return out


def points_of(record: RunRecord, run: Run) -> list[PointRecord]:
    default_server = run.server.version_short if run.server else "?"
    groups: dict[tuple, list[VariantRun]] = {}
    for r in run.variant_runs:
        groups.setdefault(repeat_key(r), []).append(r)
    out: list[PointRecord] = []
    for runs in groups.values():
        first = runs[0]
        server = first.server or default_server
        point = NO_POINT if first.point is None else int(first.point)
        status = next((r.status for r in runs if r.status != RunStatus.OK), RunStatus.OK)
        measured = [name for name, p in first.pools.items() if p.measure] or [next(iter(first.pools))]
        for pool in measured:
            own = set(first.own(pool)) | set(PER_TXN_FIGURES)
            clients = int(first.pools[pool].clients)
            rows = [{**r.figures(pool), **per_txn(r.own(pool))} for r in runs if pool in r.pools]
            _check_numbers(record, first, pool, rows)
            rare = _rare_counts([r.own(pool) for r in runs if pool in r.pools])
            for metric in _numbers(rows):
                if metric in own:
                    where = (pool, clients)
                elif pool == measured[0]:
                    where = ("", _total_clients(first))
                else:
                    continue
                values = [row[metric] for row in rows if _number(row.get(metric))]
                single = window_estimate(runs[0], pool, metric)[0] if len(values) == 1 and is_window_metric(metric) \
                    else None
                out.append(_point(record, first.variant, *where, point, server, metric, status, values, single,
                                  rare.get(metric) if where[0] else None))
    out.extend(_claim_points(record, run, default_server))
    return out


def _point(record: RunRecord, variant: str, pool: str, clients: int, point: int, server: str, metric: str,
           status: RunStatus, values: list[float], single, rare: tuple[float, float] | None = None) -> PointRecord:
    est = estimate(values)
    se, df = est.se, est.df
    if len(values) == 1 and single is not None:  # the window's own error
        se, df = single.se, single.df
    count, exposure = rare if rare is not None else (None, None)
    return PointRecord(record.run_id, SeriesKey(record.scenario, variant, pool, clients, point, server, metric), status,
                       float(est.mean), _finite(se), _finite(df), None, None, len(values),
                       tuple(float(v) for v in values), count, exposure)


def _rare_counts(pools: list[dict]) -> dict[str, tuple[float, float]]:
    """A pool's rare events over its repeats (each repeat's figures by name): metric -> (count, scheduled
    transactions), for the counts (failed, retries, late, skipped, errors.CLASS) and the shares of them per
    transaction; none where a repeat lacks the count or scheduled nothing."""
    names = {**{c: c for c in RARE_COUNTS}, **PER_TXN_FIGURES,
             **{name: name for p in pools for name in p if name.startswith(ERRORS)}}
    out = {}
    scheduled = [sum(p.get(k) or 0 for k in ("transactions", "failed", "skipped")) for p in pools]
    if not pools or not all(_number(e) and e > 0 for e in scheduled):
        return out
    for metric, count in names.items():
        counts = [p.get(count) for p in pools]
        if all(_number(c) for c in counts):
            out[metric] = (float(sum(counts)), float(sum(scheduled)))
    return out


def _check_numbers(record: RunRecord, r: VariantRun, pool: str, rows: list[dict]) -> None:
    """A figure the metric catalogue declares must be a number (or absent, or unavailable): text where a
    number belongs means a damaged or hand-edited summary, refused rather than dropped from its series."""
    for row in rows:
        for name, value in row.items():
            if value is None or _number(value) or isinstance(value, Unavailable) or name.startswith(SKIPPED_PREFIXES):
                continue
            if CATALOGUE.declares(name):
                raise ConfigError(f"run {record.run_id}: {SUMMARY}: variant {r.label}, pool {pool}: {name}: "
                                  f"{value!r} is not a number (a damaged or edited summary); nothing was added")


def _claim_points(record: RunRecord, run: Run, default_server: str) -> list[PointRecord]:
    """Each decided or undecided claim's measured figure: the ratio left/right where the verdict tested one,
    else the left side; its interval is the 95% one the verdict reports."""
    out = []
    for c in run.claims:
        m = c.metric  # its figure as a record; its interval is the verdict's ratio's, or its left side's
        if m is None or not _number(m.value):
            continue
        shown = c.ratio if c.ratio is not None else c.left
        status = RunStatus.NOT_EVALUATED if c.verdict is Verdict.NOT_EVALUATED else RunStatus.OK
        key = SeriesKey(record.scenario, m.variant, m.pool, m.clients, NO_POINT, m.server or default_server,
                        ClaimKey(m.name, c.form))
        out.append(PointRecord(record.run_id, key, status, float(m.value), None, None, _finite(shown.low),
                               _finite(shown.high), int(shown.n or 1), (float(m.value),)))
    return out


def _numbers(rows: list[dict]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    for row in rows:
        for name, value in row.items():
            if name not in seen and _number(value) and not name.startswith(SKIPPED_PREFIXES):
                seen.add(name)
                names.append(name)
    return names


def _total_clients(r: VariantRun) -> int:
    return sum(int(p.clients) for p in r.pools.values())


def _number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and not isinstance(value, Unavailable)
            and math.isfinite(value))


def _finite(value) -> float | None:
    return float(value) if _number(value) else None
