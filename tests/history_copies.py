"""Copies of a history store made from records, for the tests of merging them and of the store's script
(tests/unit/test_history_merge.py, tests/integration/test_history_merge_pg.py,
tests/e2e/test_history_store_script.py): nights of one series, findings on it, and the findings read back
with every run they name given as its run id (row ids differ between copies)."""

from __future__ import annotations

from pathlib import Path

from concurbench.history.findings import Finding, FindingState
from concurbench.history.level import Level
from concurbench.history.records import PointRecord, RunRecord, SeriesKey
from concurbench.history.store import open_store

LINE = SeriesKey("demo", "v", "workers", 4, -1, "16", "tps")


def night(i: int, digest: str | None = None) -> RunRecord:
    return RunRecord(f"2026120{i // 10}T{i % 10:02d}0000Z-night", digest or f"d{i}", "demo", "sha", {}, False,
                     f"2026-12-0{i // 10 + 1}T{i % 10:02d}:00:00", f"2026-12-0{i // 10 + 1}T{i % 10:02d}:10:00", "ok",
                     None, "ci", "cpu", "0.1.0", f"{i:040x}", False, "binaries", ["16.9"], 2, {"night": str(i)})


def points(rec: RunRecord, level: float = 1000.0) -> list[PointRecord]:
    return [PointRecord(rec.run_id, SeriesKey("demo", "v", "workers", 4, -1, "16.9", metric), "ok", value, value / 50,
                        2.0, None, None, 3, (value * 0.98, value, value * 1.02), count, exposure)
            for metric, value, count, exposure in (("tps", level, None, None), ("failed_per_txn", 0.002, 6.0, 3000.0))]


def add(path: str | Path, *nights: int, level: float = 1000.0) -> None:
    with open_store(path, create=True) as s:
        for i in nights:
            rec = night(i)
            s.add(rec, points(rec, level))


def row(store, i: int) -> int:
    return next(r.id for r in store.runs() if r.record.run_id == night(i).run_id)


def finding(store, first: int, *, low: int | None = None, high: int | None = None, state=FindingState.NEW,
            reason=None, acted=None, now: int | None = None, key=LINE) -> Finding:
    """A finding of the tps series starting at night `first` (the runs it could start at: nights low..high)."""
    return Finding(None, key, row(store, first), row(store, first - 1), -0.2, 1e-6, Level(1000.0, 980.0, 1020.0, 8),
                   800.0, state, "2026-12-02T03:00:00", reason, acted, None, first_low=None if low is None else
                   row(store, low), first_high=None if high is None else row(store, high),
                   now_change=-0.2 if now else None, now_run=row(store, now) if now else None, min_change=0.05)


def by_run_id(store) -> list[dict]:
    """The findings with every run reference given as its run id (row ids differ between copies)."""
    ids = {r.id: r.record.run_id for r in store.runs()}
    out = []
    for f in store.findings():
        d = {k: getattr(f, k) for k in ("key", "kind", "state", "reason", "acted", "change", "now_change")}
        d.update({k: ids.get(getattr(f, k)) for k in ("first_run", "before_run", "first_low", "first_high",
                                                       "resolved_run", "now_run")})
        out.append(d)
    return out
