"""One side of a claim as an estimate: the figure a reference names, over the runs that measured it.

Two kinds of figure:
  - window figures (those the metric catalogue marks `window`: `tps`, `latency.mean_ms`,
    `statements.NAME.mean_ms`, `waits.WAIT`) are rates and means over the measurement window. Each run gives one, and its window's own estimate from the
    pools' 100 ms series (or the wait samples), marked steady or not;
  - run figures (everything else: elapsed time of a fixed count, percentiles, sampler deltas,
    probes) are one number per run.
Either way the runs are the unit of replication: a side is its runs (`stats.Runs`), each with the
round it ran in, so that two sides of the same rounds can be paired. A window's own estimate is what
a report shows for a single run (marked where the window was not steady).

A verdict needs at least two runs of every variant it names: a window's own noise says nothing of
how much the next run differs (another moment on a busy machine, another server start). A side
also has too few observations when a run saw fewer than MIN_EVENTS transactions or sampled sessions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .. import stats
from ..results.catalogue import CATALOGUE
from ..results.model import Cause, ClaimEstimate, Unavailable, VariantRun
from ..samplers.postgres import WAITS, WaitEvents
from ..scenario.claims import Ref
from ..util import suggest

MIN_EVENTS = 10  # transactions (or sampled sessions) a window figure needs in each run
MIN_RUNS = 2
THIN = "too few observations"  # reasons that more runs would not change
NEVER_SEEN = "both sides are zero"
_STATEMENT_MEAN = re.compile(r"^statements\.(?P<name>.+)\.mean_ms$")


class NotEvaluated(Exception):
    """The claim cannot be judged at all (a variant run is incomplete, a metric unavailable)."""


class NotFound(LookupError):
    """The reference names a point, pool or metric the run does not have."""


@dataclass
class SideData:
    """What one reference measured: per-run values in repeat (round) order, and each run's window estimate."""

    ref: Ref
    repeats: list[int]
    values: list[float]
    window: bool  # a window figure (within-run estimates exist)
    reason: str = ""  # why it cannot be judged
    cause: Cause | None = None  # the same, typed (THIN: more runs would not change it; FEW_RUNS: they would)
    within: list[stats.Estimate | None] = field(default_factory=list)

    @property
    def zero(self) -> bool:
        return bool(self.values) and all(v == 0 for v in self.values)

    @property
    def runs(self) -> stats.Runs:
        return stats.Runs(tuple(self.values), tuple(self.repeats), tuple(self.within) if self.window else ())

    def shown(self, factor: float = 1.0) -> ClaimEstimate | None:
        """The side as a report shows it, with its 95% interval: one run's window estimate (none where the
        window was not steady: its spread describes the design, not the noise of the mean), or the mean
        of the runs; a side positive in every run takes its interval from the log scale, where its test
        was made (so it never reaches below zero)."""
        if not self.values:
            return None
        runs = self.runs.scaled(factor)
        mean = sum(runs.values) / len(runs.values)
        if len(runs.values) == 1:
            (only,) = runs.per_run()
            if only is None or not only.steady:
                why = "single run" if only is None else f"single run; window not steady: {only.shift}"
                return ClaimEstimate(mean, n=1, method=why)
            return ClaimEstimate(mean, only.low, only.high, only.n, only.method)
        if runs.positive:
            est = runs.estimate(log=True)
            half = est.half
            return ClaimEstimate(mean, math.exp(est.mean - half), bounded_exp(est.mean + half), est.n,
                                 "repeats, log scale")
        est = runs.estimate()
        return ClaimEstimate(mean, est.low, est.high, est.n, est.method)


def bounded_exp(x: float) -> float | None:
    """exp(x) for the upper bound of an interval on the log scale; None where it has no finite bound (a
    look at a tiny level with one degree of freedom can reach past what a float holds)."""
    return math.exp(x) if x < 700 else None


def is_window_metric(metric: str) -> bool:
    """A rate or mean over the window, whose one run carries an error of its own (the catalogue says which)."""
    return CATALOGUE.figure(metric).window


def select(ref: Ref, runs: list[VariantRun]) -> list[VariantRun]:
    """The runs (every repeat) of the variant and sweep point a reference names, on one server."""
    mine = [r for r in runs if r.variant == ref.variant]
    if not mine:
        raise NotFound(f"no results for variant '{ref.variant}' (was it run?)")
    points = sorted({r.point for r in mine if r.point is not None})
    if ref.point is None:
        if len(points) > 1:
            raise NotFound(f"variant '{ref.variant}' ran at {points}: say which with @N, @min or @max")
        return sorted(mine, key=lambda r: r.repeat)
    want = points[0] if ref.point == "min" else points[-1] if ref.point == "max" else int(ref.point)
    chosen = [r for r in mine if r.point == want]
    if not chosen:
        raise NotFound(f"variant '{ref.variant}' has no sweep point {ref.point} (it ran at {points})")
    return sorted(chosen, key=lambda r: r.repeat)


def side_data(ref: Ref, runs: list[VariantRun]) -> SideData:
    """The estimate of one reference from every repeat of its variant run (raises NotFound/NotEvaluated)."""
    chosen = select(ref, runs)
    complete = [r for r in chosen if r.complete]
    if not complete:
        r = chosen[0]
        raise NotEvaluated(f"{r.label} is {r.status}: {'; '.join(r.messages) or 'its figures are partial'}")
    pool = ref.pool or complete[0].first_measured().name
    if pool not in complete[0].pools:
        raise NotFound(f"variant '{ref.variant}' has no pool '{pool}' (it has {', '.join(complete[0].pools)})")
    values, repeats, within, thin = [], [], [], []
    window = is_window_metric(ref.metric)
    for run in complete:
        metrics = run.figures(pool)
        value = metrics.get(ref.metric)
        if isinstance(value, Unavailable):
            raise NotEvaluated(f"{ref.metric} of {run.label} is {value}")
        if value is None:
            if ref.metric.startswith(WAITS) and WaitEvents.name in run.samples:
                value = 0.0  # the sampler's rows never saw the wait: share 0 (whether that is enough is said below)
            elif _percentile(ref.metric) and metrics.get("transactions") is not None:
                thin.append(f"{run.label} ran {metrics['transactions']:,} transactions, too few for "
                            f"{ref.metric.rsplit('.', 1)[-1].removesuffix('_ms')}")
                continue
            else:
                hint = suggest(ref.metric, [m for m in metrics if m != ref.metric]) or \
                    f" (some metrics: {', '.join(list(metrics)[:8])})"
                raise NotFound(f"no value for metric '{ref.metric}' of {ref}{hint}")
        values.append(float(value))
        repeats.append(run.repeat)
        if window:
            est, events = window_estimate(run, pool, ref.metric)
            within.append(est)
            if events < MIN_EVENTS:
                thin.append(f"{run.label} saw {events} {'sampled sessions' if ref.metric.startswith('waits.') else 'transactions'}"
                            f" (a window figure needs {MIN_EVENTS})")
    data = SideData(ref, repeats, values, window, within=within)
    if thin:
        data.reason, data.cause = f"{THIN}: " + "; ".join(thin), Cause.THIN
    elif len(values) < MIN_RUNS:
        data.cause = Cause.FEW_RUNS
        data.reason = (f"{ref.variant} ran {len(values)} time{'s' if len(values) != 1 else ''}: a verdict needs "
                       f"{MIN_RUNS} runs of each side (--check repeats as needed, or --repeat {MIN_RUNS})")
    return data


def _percentile(metric: str) -> bool:
    return bool(re.search(r"\.p\d+(\.\d+)?_ms$", metric))


def window_estimate(run: VariantRun, pool: str, metric: str) -> tuple[stats.Estimate | None, int]:
    """A window figure's within-run estimate from one run, and the events (transactions, sessions) behind it."""
    if metric.startswith("waits."):
        return _wait_share(run, metric.removeprefix("waits."))
    series = (run.pools[pool].stats or {}).get("series")
    transactions = int(run.own(pool).get("transactions") or 0)
    if not series:
        return None, transactions
    bucket_s = series["bucket_ns"] / 1e9
    length = int(run.elapsed_s / bucket_s + 1e-9)  # full buckets of the window; later ones are cut
    counts = _padded(series["count"], length)
    if metric == "tps":
        est = stats.within_run(counts)
        return (None if est is None else _rescale(est, 1 / bucket_s)), transactions
    if metric == "latency.mean_ms":
        sums = _padded(series["txn_ns"], length)
    else:
        name = _STATEMENT_MEAN.match(metric).group("name")
        if name not in series.get("statement_ns", {}):
            return None, transactions
        sums = _padded(series["statement_ns"][name], length)
    est = stats.within_run(sums, counts)
    return (None if est is None else _rescale(est, 1e-6)), transactions


def _wait_share(run: VariantRun, wait: str) -> tuple[stats.Estimate | None, int]:
    """The share of sampled non-idle sessions in one wait, per sample time, as a ratio estimate."""
    rows = run.samples.get(WaitEvents.name) or []
    by_time: dict[float, list[float]] = {}
    for row in rows:
        slot = by_time.setdefault(float(row["t_s"]), [0.0, 0.0])
        sessions = float(row.get("sessions") or 0)
        slot[1] += sessions
        if row.get("wait") == wait:
            slot[0] += sessions
    times = sorted(by_time)
    hits = [by_time[t][0] for t in times]
    totals = [by_time[t][1] for t in times]
    est = stats.within_run(hits, totals) if times else None
    return est, int(sum(totals))


def _rescale(est: stats.Estimate, factor: float) -> stats.Estimate:
    return est.scaled(factor)


def _padded(values, length: int) -> list[float]:
    values = list(values)[:length]
    return values + [0] * (length - len(values))
