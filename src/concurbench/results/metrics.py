"""A pool's figures, made as records where its statistics are measured (`pool_records`), and what they mean.

Each figure is a Metric record under its pool (figures.py): `tps`, `latency.p95_ms`, `statements.lock.mean_ms`,
`errors.deadlock`, `lag.p99_ms`, `late`, `error_messages.<text>`; the variant run carries them with its
samplers' and probes' (results/metric.py), and reports, CSV, claims and the history read them by name.

POOL_FIGURES says what each of a pool's figures means (results/catalogue.py gathers it with the
samplers' figures into the one metric catalogue); PER_TXN_FIGURES are the shares of a pool's
scheduled transactions that failed, retried, ran late or were skipped, which the history derives from
a pool's counts (per_txn) and gates as headline figures. `nested` writes a pool's records as the nested
mapping summary.json's pools have carried since format 1 (what a reader older than records reads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engines.classes import ALL as ERROR_CLASSES
from ..figures import Better, Catalogue, Figure, Kind, Metric, Place, Scope

if TYPE_CHECKING:  # the declarations here are read by `history add`, which should not import numpy
    from ..workload.stats import PoolStats

HIGHER, LOWER, NEUTRAL = Better.HIGHER, Better.LOWER, Better.NEUTRAL
HEADLINE, DIAGNOSTIC, COUNT = Kind.HEADLINE, Kind.DIAGNOSTIC, Kind.COUNT

# name -> the count it divides by the pool's scheduled transactions (committed + failed + skipped)
PER_TXN_FIGURES = {"failed_per_txn": "failed", "retries_per_txn": "retries", "late_per_txn": "late",
                   "skipped_per_txn": "skipped"}

POOL_FIGURES = (
    Figure("tps", "1/s", HIGHER, HEADLINE, "transactions committed per second of the window", window=True),
    Figure("latency.mean_ms", "ms", LOWER, HEADLINE, "mean transaction latency", window=True),
    Figure("latency.p95_ms", "ms", LOWER, HEADLINE, "95th percentile of transaction latency"),
    Figure("latency.p99_ms", "ms", LOWER, HEADLINE, "99th percentile of transaction latency"),
    Figure("latency.*", "ms", LOWER, DIAGNOSTIC, "transaction latency (median, maximum)"),
    Figure("lag.mean_ms", "ms", LOWER, HEADLINE, "mean lag behind a rate-driven pool's schedule"),
    Figure("lag.p99_ms", "ms", LOWER, HEADLINE, "99th percentile of the schedule lag"),
    Figure("lag.*", "ms", LOWER, DIAGNOSTIC, "the largest schedule lag"),
    *(Figure(name, "share", LOWER, HEADLINE, f"{count} per scheduled transaction")
      for name, count in PER_TXN_FIGURES.items()),
    Figure("failed", "txn", LOWER, COUNT, "transactions that failed (after their retries)"),
    Figure("retries", "txn", LOWER, COUNT, "transactions retried after a serialization failure or deadlock"),
    Figure("late", "txn", LOWER, COUNT, "transactions a rate-driven pool started late"),
    Figure("skipped", "txn", LOWER, COUNT, "transactions a rate-driven pool skipped, being too far behind"),
    Figure("errors.*", "errors", LOWER, COUNT, "errors by class (deadlock, serialization, lock timeout, ...)"),
    Figure("transactions", "txn", NEUTRAL, COUNT, "transactions committed"),
    Figure("sessions", "sessions", NEUTRAL, COUNT, "client sessions of the pool"),
    Figure("statements_executed", "statements", NEUTRAL, COUNT, "statements executed"),
    Figure("statements.*.count", "statements", NEUTRAL, COUNT, "executions of one statement"),
    Figure("statements.*.mean_ms", "ms", LOWER, DIAGNOSTIC, "one statement's mean latency", window=True),
    Figure("statements.*_ms", "ms", LOWER, DIAGNOSTIC, "one statement's latency percentiles"),
    Figure("error_messages.*", "errors", NEUTRAL, COUNT, "the five most common error messages, by their text"),
)


def per_txn(metrics: dict) -> dict:
    """The PER_TXN_FIGURES of a pool's figures (name -> value): None where the count is absent (a closed-loop
    pool has no late or skipped) or nothing was scheduled."""
    scheduled = sum(metrics.get(k) or 0 for k in ("transactions", "failed", "skipped"))
    out = {}
    for name, count in PER_TXN_FIGURES.items():
        value = metrics.get(count)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = round(value / scheduled, 6) if scheduled else None
    return out


def pool_records(stats: PoolStats, elapsed_s: float, place: Place) -> tuple[Metric, ...]:
    """A pool's figures as records, made from its merged statistics over the window of `elapsed_s`."""
    return place.records(pool_figures(stats, elapsed_s), Scope.POOL, POOLS)


def pool_figures(stats: PoolStats, elapsed_s: float) -> dict:
    """A pool's figures by name, in the order reports list them."""
    stats.flush()
    out = {"sessions": stats.sessions, "transactions": stats.transactions,
           "tps": round(stats.transactions / elapsed_s, 3) if elapsed_s > 0 else None,
           "failed": stats.failed, "retries": stats.retries,
           **{f"errors.{k}": stats.errors.get(k, 0) for k in ERROR_CLASSES},
           **{f"latency.{k}": v for k, v in _latency(stats.txn).items()}}
    for name, s in stats.statements.items():
        out[f"statements.{name}.count"] = s.count
        out.update({f"statements.{name}.{k}": v for k, v in _latency(s).items()})
    out["statements_executed"] = stats.statements_executed
    out.update({f"error_messages.{text}": n for text, n in stats.error_messages.most_common(5)})
    if stats.lag.count or stats.skipped:  # a rate-driven pool: its schedule lag, late and skipped transactions
        lag = _latency(stats.lag)
        out.update({f"lag.{k}": lag[k] for k in ("mean_ms", "p99_ms", "max_ms")})
        out.update(late=stats.late, skipped=stats.skipped)
    return out


STATEMENT = "statements."  # a statement's figures: statements.NAME.FIGURE (FIGURE: count, mean_ms, p95_ms, ...)


def statements(figures: dict) -> dict[str, dict]:
    """A pool's statements' figures (name -> value) by statement, in order: {NAME: {count, mean_ms, ...}}."""
    out: dict[str, dict] = {}
    for name, value in figures.items():
        if name.startswith(STATEMENT):
            statement, _, figure = name[len(STATEMENT):].rpartition(".")
            out.setdefault(statement, {})[figure] = value
    return out


def nested(figures: dict) -> dict:
    """A pool's figures (name -> value) as the nested mapping of formats 1 and 2 (`latency: {p95_ms}`,
    `statements: {NAME: {count}}`, `errors: {deadlock}`), which summary.json's pools keep beside the records."""
    out: dict = {}
    for name, value in figures.items():
        head, _, rest = name.partition(".")
        if name == "statements_executed":  # the two mappings around it are there also when empty, as pools wrote them
            out.setdefault("statements", {})
            out[name] = value
            out.setdefault("error_messages", {})
        elif not rest:
            out[name] = value
        elif name.startswith(STATEMENT):
            statement, _, figure = rest.rpartition(".")
            out.setdefault("statements", {}).setdefault(statement, {})[figure] = value
        else:
            out.setdefault(head, {})[rest] = value
    return out


def _latency(lat) -> dict:
    def r(value):
        return None if value is None else round(value, 4)

    return {"mean_ms": r(lat.mean_ms()), "p50_ms": r(lat.percentile_ms(50.0)), "p95_ms": r(lat.percentile_ms(95.0)),
            "p99_ms": r(lat.percentile_ms(99.0)), "max_ms": r(lat.max_ms())}


POOLS = Catalogue(POOL_FIGURES)
