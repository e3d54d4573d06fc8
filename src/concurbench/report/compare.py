"""Compare two stored runs of one scenario, a baseline and a contender, metric by metric.

Pairing. Results are paired by (variant, client-count point, measured pool); when either run covers
several servers (a version matrix) the server is part of the key too, and both runs must list the
same servers (with `force`, only the servers in both are compared). Each side's repeats (`repeat`
1..N of `--repeat N`) become one Estimate: mean, n and 95% interval.

Refusals and warnings. Runs of different scenarios, or written in different format versions, are
refused (ConfigError) unless `force`; a changed scenario file (SHA-256), a different `--quick`, other
parameters, another host, a run or variant that did not finish ok, and variants found in one run only
are returned as warnings.

Direction. Which way is better is the metric catalogue's (results/catalogue.py): `tps` higher;
latencies, lag, `elapsed_s`, failed, retried, late and skipped transactions, `errors.*` and
`wal.bytes_per_txn` lower. A metric the catalogue calls neutral is reported, never gated.

Default metrics: tps, latency mean/p50/p95/p99, every statement's mean (`statements.*.mean_ms`),
and `elapsed_s` for fixed-count variants only. A fixed-count variant (pools with `transactions:`)
runs a set number of transactions, so its elapsed time is the result; a timed variant's elapsed time
is its configured duration and says nothing. The result's `fixed` flag decides when present;
otherwise a variant counts as fixed-count when its measured pools attempted (transactions + failed)
exactly the same number of transactions in every repeat of both runs, which a timed run never does
in practice. `metrics` (glob patterns, matched with fnmatch) replaces the defaults; metrics named by
`fail_above` patterns are compared as well.

Significance and the gate. With at least two repeats on both sides, Welch's t-test decides whether
a change is significant (p < 0.05). A metric regresses when it moved in its worse direction by more
than its `fail_above` threshold (percent of the baseline mean) and the move is significant after
Holm's correction over every gated metric (a comparison gates many metrics at once: at 5% each, some
would move "significantly" by chance, and a gate that fails on noise gets switched off). A change
that is not significant is reported as "within noise" and does not fail, however large. When
either side ran once there is no test: such a move is reported as an "untested" regression and does
count, because a gate that could never fire on single runs would be useless; the report says to use
`--repeat 3` or more for a significance test. Without `fail_above` nothing is gated.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path

from ..errors import ConfigError
from ..figures import Better, Way, way_of
from ..results.catalogue import CATALOGUE
from ..results.model import Run, RunStatus, VariantRun
from ..results.store import load_run
from ..scenario.claims import server_matches
from ..stats import Estimate, estimate, holm, welch

DEFAULT_METRICS = ("tps", "latency.mean_ms", "latency.p50_ms", "latency.p95_ms", "latency.p99_ms",
                   "statements.*.mean_ms")
FIXED_COUNT_METRICS = ("elapsed_s",)
ALPHA = 0.05
NEUTRAL = Better.NEUTRAL
REPEAT_HINT = "use --repeat 3 or more for a significance test"


@dataclass(frozen=True)
class Thresholds:
    """`fail_above` percentages: per metric pattern (first match wins), else the overall value."""

    overall: float | None = None
    patterns: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, value) -> "Thresholds":
        """From None, one percentage, a Thresholds, or a mapping pattern -> percentage ('*': overall)."""
        if value is None:
            return cls()
        if isinstance(value, Thresholds):
            return value
        if isinstance(value, Mapping):
            items = {str(k): _percent(v, str(k)) for k, v in value.items()}
            return cls(items.pop("*", None), tuple(items.items()))
        return cls(_percent(value, "fail_above"))

    @classmethod
    def parse(cls, values: Iterable[str]) -> "Thresholds":
        """From command-line values: `10` (overall), `tps=5`, `latency.p99_ms=20`."""
        overall, patterns = None, []
        for text in values:
            pattern, sep, number = text.rpartition("=") if "=" in text else ("", "", text)
            pattern = pattern.strip()
            if sep and not pattern:
                raise ConfigError(f"--fail-above {text}: expected PERCENT or METRIC=PERCENT, e.g. 10 or tps=5")
            pct = _percent(number, text)
            if not sep:
                if overall is not None:
                    raise ConfigError(f"--fail-above {text}: the overall threshold is given twice")
                overall = pct
            else:
                patterns.append((pattern, pct))
        return cls(overall, tuple(patterns))

    def __bool__(self) -> bool:
        return self.overall is not None or bool(self.patterns)

    def for_metric(self, metric: str) -> float | None:
        for pattern, pct in self.patterns:
            if fnmatchcase(metric, pattern):
                return pct
        return self.overall

    def as_dict(self) -> dict:
        return {"overall": self.overall, "metrics": dict(self.patterns)}


def _percent(value, what: str) -> float:
    try:
        pct = float(str(value).strip().removesuffix("%"))
    except ValueError:
        raise ConfigError(f"--fail-above {what}: {value!r} is not a percentage; expected PERCENT or "
                          f"METRIC=PERCENT, e.g. 10 or tps=5") from None
    if not math.isfinite(pct) or pct < 0:
        raise ConfigError(f"--fail-above {what}: the percentage must be a number of 0 or more")
    return pct


@dataclass(frozen=True)
class RunInfo:
    path: Path
    scenario: str
    title: str
    quick: bool
    status: RunStatus
    servers: tuple[str, ...]
    host: str
    repeats: int  # the most repeats of any variant run

    def as_dict(self) -> dict:
        return {"path": str(self.path), "scenario": self.scenario, "title": self.title, "quick": self.quick,
                "status": self.status, "servers": list(self.servers), "host": self.host, "repeats": self.repeats}


@dataclass(frozen=True)
class Row:
    group: str | None
    variant: str
    point: int | None
    pool: str
    server: str | None  # set only when the runs are paired by server
    metric: str
    baseline: Estimate
    contender: Estimate
    pct: float | None  # (contender - baseline) / |baseline| * 100; None when the baseline is 0
    direction: str
    verdict: Way  # better, worse, same, or neutral (a metric with no better direction)
    significant: bool | None  # None: untested, a side ran once
    p_value: float | None
    threshold: float | None
    regression: bool
    p_adjusted: float | None = None  # gated metrics: Welch's p-value after Holm's correction over all of them

    @property
    def where(self) -> str:
        text = self.variant + (f"@{self.point}" if self.point is not None else "") + f"/{self.pool}"
        return text + (f" ({self.server})" if self.server else "")

    @property
    def beyond(self) -> bool:
        """Moved by more than the threshold (a move away from a zero baseline counts as beyond)."""
        if self.threshold is None or self.contender.mean == self.baseline.mean:
            return False
        return self.pct is None or abs(self.pct) > self.threshold

    @property
    def label(self) -> str:
        if self.regression:
            return "regression" if self.significant else "regression (untested)"
        if self.within_noise:
            return "within noise"
        return str(self.verdict)

    @property
    def within_noise(self) -> bool:
        """Moved a better or worse way, but not significantly."""
        return self.significant is False and self.verdict in (Way.BETTER, Way.WORSE)

    def as_dict(self) -> dict:
        return {"group": self.group, "variant": self.variant, "point": self.point, "pool": self.pool,
                "server": self.server, "metric": self.metric, "baseline": self.baseline.as_dict(),
                "contender": self.contender.as_dict(), "pct": self.pct, "direction": self.direction,
                "verdict": self.verdict, "label": self.label, "significant": self.significant,
                "p_value": self.p_value, "p_adjusted": self.p_adjusted, "threshold": self.threshold,
                "regression": self.regression}


@dataclass(frozen=True)
class Summary:
    compared: int
    regressions: int
    untested_regressions: int
    improvements: int  # significant moves in the better direction
    within_noise: int
    gated: bool  # a fail_above threshold was given

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Comparison:
    baseline: RunInfo
    contender: RunInfo
    rows: list[Row]
    warnings: list[str] = field(default_factory=list)
    thresholds: Thresholds = Thresholds()
    by_server: bool = False

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.regression]

    @property
    def summary(self) -> Summary:
        regressions = self.regressions
        return Summary(compared=len(self.rows), regressions=len(regressions),
                       untested_regressions=sum(1 for r in regressions if r.significant is None),
                       improvements=sum(1 for r in self.rows if r.verdict is Way.BETTER and r.significant),
                       within_noise=sum(1 for r in self.rows if r.within_noise),
                       gated=bool(self.thresholds))

    @property
    def untested(self) -> bool:
        return any(r.significant is None for r in self.rows)

    def as_dict(self) -> dict:
        return {"baseline": self.baseline.as_dict(), "contender": self.contender.as_dict(),
                "by_server": self.by_server, "thresholds": self.thresholds.as_dict(),
                "summary": self.summary.as_dict(), "warnings": list(self.warnings),
                "rows": [r.as_dict() for r in self.rows]}


# -- comparing -------------------------------------------------------------------------------

def compare_runs(baseline_dir: Path, contender_dir: Path, *, metrics: Iterable[str] | None = None,
                 fail_above=None, force: bool = False, baseline_server: str | None = None,
                 contender_server: str | None = None) -> Comparison:
    """Compare the contender run with the baseline run; see the module docstring for the rules.

    `baseline_server` and `contender_server` take one server of a version matrix each, so the two
    sides of a comparison may be two servers of one run (whose variants ran interleaved)."""
    baseline_dir, contender_dir = Path(baseline_dir), Path(contender_dir)
    thresholds = Thresholds.of(fail_above)
    b, c = load_run(baseline_dir), load_run(contender_dir)
    if baseline_server is not None:
        b = _one_server(baseline_dir, b, baseline_server)
    if contender_server is not None:
        c = _one_server(contender_dir, c, contender_server)
    warnings = _check(baseline_dir, b, contender_dir, c, force)
    by_server = _by_server(baseline_dir, b, contender_dir, c, force, warnings)
    b_groups, c_groups = _group(b.variant_runs, by_server), _group(c.variant_runs, by_server)
    wanted, gate_patterns = list(metrics or []), [p for p, _ in thresholds.patterns]
    matched: set[str] = set()
    available: set[str] = set()
    rows = _gate(_rows(b_groups, c_groups, wanted, gate_patterns, thresholds, by_server, matched, available))
    _check_patterns(wanted, gate_patterns, matched, available)
    if not rows:
        raise ConfigError(f"nothing to compare between {baseline_dir} and {contender_dir}: no variant, client "
                          f"count and measured pool ran in both with the metrics asked for")
    warnings += _notes(gate_patterns, available, b_groups, c_groups)
    return Comparison(_info(baseline_dir, b), _info(contender_dir, c), rows, warnings, thresholds, by_server)


def _by_server(b_dir: Path, b: Run, c_dir: Path, c: Run, force: bool, warnings: list[str]) -> bool:
    """Whether results are paired server by server (either run covers several); refuses different matrices
    unless forced (then only the servers in both are compared, with a warning)."""
    b_servers, c_servers = _servers(b), _servers(c)
    by_server = len(b_servers) > 1 or len(c_servers) > 1
    if by_server and sorted(b_servers) != sorted(c_servers):
        servers = (f"the baseline ran on {', '.join(b_servers) or '?'} and the contender on "
                   f"{', '.join(c_servers) or '?'}")
        if not force:
            raise ConfigError(f"cannot compare {b_dir} with {c_dir}: a run that covers several "
                              f"servers is compared server by server, and {servers}. Compare runs of the same "
                              f"server matrix, or pass --force to compare only the servers both have.")
        warnings.append(f"compared only the servers in both runs: {servers}")
    return by_server


def _rows(b_groups: dict, c_groups: dict, wanted: list[str], gate_patterns: list[str], thresholds: Thresholds,
          by_server: bool, matched: set[str], available: set[str]) -> list[Row]:
    """A row per metric compared, for every (variant, point[, server]) and measured pool both runs have;
    `matched` and `available` collect the patterns that matched and the metrics there were."""
    rows: list[Row] = []
    for key, b_runs in b_groups.items():
        c_runs = c_groups.get(key)
        if not c_runs:
            continue
        fixed = _fixed_count(b_runs + c_runs)
        for pool, data in b_runs[0].pools.items():
            if not data.measure or pool not in c_runs[0].pools:
                continue
            b_rows = [r.figures(pool) for r in b_runs if pool in r.pools]
            c_rows = [r.figures(pool) for r in c_runs if pool in r.pools]
            names = [n for n in b_rows[0] if _values(b_rows, n) and _values(c_rows, n)]
            available.update(names)
            patterns = wanted or list(DEFAULT_METRICS) + (list(FIXED_COUNT_METRICS) if fixed else [])
            chosen = _select(names, patterns, matched)
            chosen += [n for n in _select(names, gate_patterns, matched, gated_only=True) if n not in chosen]
            for metric in chosen:
                rows.append(_row(b_runs[0], key, pool, metric, _values(b_rows, metric), _values(c_rows, metric),
                                 thresholds, by_server))
    return rows


def _check_patterns(wanted: list[str], gate_patterns: list[str], matched: set[str], available: set[str]) -> None:
    """A --metric or --fail-above pattern that matched no metric is a ConfigError with a did-you-mean."""
    for pattern in wanted + gate_patterns:
        if available and pattern not in matched:
            hint = difflib.get_close_matches(pattern, sorted(available), n=3)
            flag = "--metric" if pattern in wanted else "--fail-above"
            raise ConfigError(f"{flag} {pattern}: no metric of these runs matches it"
                              + (f" (did you mean {', '.join(hint)}?)" if hint else
                                 f"; metrics include {', '.join(sorted(available)[:12])}"))


def _notes(gate_patterns: list[str], available: set[str], b_groups: dict, c_groups: dict) -> list[str]:
    """Warnings: gate patterns whose metrics have no better direction, and what ran in one run only."""
    out = []
    for pattern in gate_patterns:
        if not any(fnmatchcase(m, pattern) and CATALOGUE.better(m) != NEUTRAL for m in available):
            neutral = sorted(m for m in available if fnmatchcase(m, pattern))
            out.append(f"--fail-above {pattern}: {', '.join(neutral[:5])} "
                       f"{'has' if len(neutral) == 1 else 'have'} no better direction, so nothing is gated")
    only_b = [_key_label(k) for k in b_groups if k not in c_groups]
    only_c = [_key_label(k) for k in c_groups if k not in b_groups]
    if only_b:
        out.append(f"only in the baseline, not compared: {', '.join(only_b)}")
    if only_c:
        out.append(f"only in the contender, not compared: {', '.join(only_c)}")
    return out


def _one_server(path: Path, run: Run, wanted: str) -> Run:
    """The run as if only the server matching `wanted` (`17` for 17.6, `2022` for 2022-CU18) had run."""
    servers = _servers(run)
    chosen = [v for v in servers if server_matches(v, wanted)]
    if len(chosen) != 1:
        raise ConfigError(f"{path}: {'no server' if not chosen else 'more than one server'} matches {wanted} "
                          f"(the run has {', '.join(servers) or 'none'})")
    return replace(run, servers=[s for s in run.servers if s.version_short == chosen[0]],
                   variant_runs=[r for r in run.variant_runs if r.server == chosen[0]])


def _check(b_dir: Path, b: Run, c_dir: Path, c: Run, force: bool) -> list[str]:
    """Refuse what cannot be compared (unless force); return warnings about what may mislead."""
    b_scn, c_scn = b.scenario, c.scenario
    refusals = []
    if b_scn.name != c_scn.name:
        refusals.append(f"they ran different scenarios ({b_scn.name} and {c_scn.name}), and a "
                        f"comparison pairs the variants of one scenario")
    if b.format_version != c.format_version:
        refusals.append(f"they were written in different run-directory format versions ({b.format_version} and "
                        f"{c.format_version}), whose metrics may not mean the same")
    if refusals and not force:
        raise ConfigError(f"cannot compare {b_dir} with {c_dir}: {'; and '.join(refusals)}. "
                          f"Pass --force to compare them anyway.")
    warnings = [f"compared although {r}" for r in refusals]
    if b_scn.name == c_scn.name and b_scn.sha256 != c_scn.sha256:
        warnings.append(f"the scenario file changed between the runs (SHA-256 {str(b_scn.sha256)[:12]} "
                        f"and {str(c_scn.sha256)[:12]}): a difference may come from the scenario")
    if bool(b_scn.quick) != bool(c_scn.quick):
        which = "baseline" if b_scn.quick else "contender"
        warnings.append(f"only the {which} ran with --quick: the runs did different amounts of work")
    b_par, c_par = b_scn.parameters, c_scn.parameters
    changed = [f"{k} {b_par.get(k, '–')} → {c_par.get(k, '–')}" for k in dict.fromkeys([*b_par, *c_par])
               if b_par.get(k) != c_par.get(k)]
    if changed:
        warnings.append(f"parameters differ: {', '.join(changed)}")
    b_host, c_host = _host(b), _host(c)
    if b_host != c_host:
        warnings.append(f"the runs come from different hosts ({b_host} and {c_host}): "
                        f"a difference may come from the machine")
    for side, run in (("baseline", b), ("contender", c)):
        for server in run.servers:
            if server.differences:  # ran --server-settings as-is: the settings are the server's, not the scenario's
                warnings.append(f"the {side} ran on {server.version_short} with settings other than the scenario's "
                                f"(--server-settings as-is): {server.differences_text(why=False)}")
        if run.status != RunStatus.OK:
            warnings.append(f"the {side} run's status is {run.status}: its figures may be partial")
        bad = [_key_label((None, r.variant, r.point)) + f" {r.status}" for r in run.variant_runs if not r.complete]
        if bad:
            warnings.append(f"{side} variant runs that did not finish ok: {', '.join(bad)}")
    return warnings


def _host(run: Run) -> str:
    return f"{run.host.get('hostname', '?')} ({run.host.get('cpu_count', '?')} CPUs)"


def _servers(run: Run) -> list[str]:
    found = list(dict.fromkeys(r.server for r in run.variant_runs if r.server))
    return found or [s.version_short for s in run.servers]


def _info(path: Path, run: Run) -> RunInfo:
    counts: dict = {}
    for r in run.variant_runs:
        key = (r.server, r.variant, r.point)
        counts[key] = counts.get(key, 0) + 1
    return RunInfo(path, run.scenario.name, run.scenario.title, run.scenario.quick, run.status,
                   tuple(_servers(run)), _host(run), max(counts.values(), default=0))


def _group(results: list[VariantRun], by_server: bool) -> dict[tuple, list[VariantRun]]:
    groups: dict[tuple, list[VariantRun]] = {}
    for r in results:
        groups.setdefault((r.server if by_server else None, r.variant, r.point), []).append(r)
    return groups


def _key_label(key: tuple) -> str:
    server, variant, point = key
    return variant + (f"@{point}" if point is not None else "") + (f" ({server})" if server else "")


def _fixed_count(runs: list[VariantRun]) -> bool:
    flags = [r.fixed for r in runs if r.fixed is not None]
    if flags:
        return all(flags)
    attempted = {sum((r.own(name).get("transactions") or 0) + (r.own(name).get("failed") or 0)
                     for name, p in r.pools.items() if p.measure) for r in runs}
    return len(attempted) == 1 and attempted != {0}


def _values(rows: list[dict], metric: str) -> list[float]:
    out = []
    for row in rows:
        v = row.get(metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def _select(names: list[str], patterns: list[str], matched: set[str], gated_only: bool = False) -> list[str]:
    """Names matching any pattern, ordered by the first pattern each matches; `matched` collects the
    patterns that matched a name. A gate pattern (gated_only) adds only metrics with a better direction."""
    chosen: list[str] = []
    for pattern in patterns:
        for name in names:
            if fnmatchcase(name, pattern):
                matched.add(pattern)
                if name not in chosen and not (gated_only and CATALOGUE.better(name) == NEUTRAL):
                    chosen.append(name)
    return chosen


def _row(first: VariantRun, key: tuple, pool: str, metric: str, b_values: list[float], c_values: list[float],
         thresholds: Thresholds, by_server: bool) -> Row:
    b, c = estimate(b_values), estimate(c_values)
    diff = c.mean - b.mean
    pct = None if b.mean == 0 else diff / abs(b.mean) * 100
    way = CATALOGUE.better(metric)
    verdict = way_of(way, diff)
    p_value = welch(b, c).p_value if b.n >= 2 and c.n >= 2 else None
    significant = None if p_value is None else p_value < ALPHA
    threshold = thresholds.for_metric(metric) if way != NEUTRAL else None
    return Row(first.group, key[1], key[2], pool, key[0] if by_server else None, metric, b, c, pct, way,
               verdict, significant, p_value, threshold, False)


def _gate(rows: list[Row]) -> list[Row]:
    """The regressions: a gated metric moved the worse way beyond its threshold, and significantly once
    Holm's correction over every gated metric is applied (so that among many metrics, some moving by
    chance at the 5% level do not fail the gate), or untested when a side ran once."""
    tested = [i for i, r in enumerate(rows) if r.threshold is not None and r.p_value is not None]
    rows = list(rows)
    for i, p in zip(tested, holm([rows[i].p_value for i in tested])):
        rows[i] = replace(rows[i], p_adjusted=p, significant=p < ALPHA)
    return [replace(r, regression=True) if r.verdict is Way.WORSE and r.beyond and r.significant is not False else r
            for r in rows]
