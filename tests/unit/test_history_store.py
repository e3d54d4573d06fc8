"""The history store and its series, on records made here (no server): adding twice, a different run under
a taken id, migrating a store of the previous schema, ordering by track, time and version, runs left out,
scenario changes, grouping metrics that moved together, which way is worse."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from concurbench.errors import ConfigError
from concurbench.history import render, schema
from concurbench.figures import way_of as way
from concurbench.history.analysis import analyse, better_way
from concurbench.history.records import PointRecord, RunRecord
from concurbench.history.store import SeriesKey, open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "history"


def record(i: int, *, server: str = "18.6", status: str = "ok", sha: str = "sha-a", params=None, digest=None):
    run_id = f"2026010{i // 10}T{i % 10:02d}0000Z-demo"
    return RunRecord(run_id, digest or f"d{i}", "demo", sha, params or {"rows": 1}, False, f"2026-01-01T{i:02d}:00:00",
                     f"2026-01-01T{i:02d}:01:00", status, None, "host", "cpu", "0.1.0", f"{i:040x}", False,
                     "embedded", [server], 2, {"night": str(i)})


def point(rec: RunRecord, metric: str, value: float, *, server: str = "18.6", status: str = "ok", se=None):
    return PointRecord(rec.run_id, SeriesKey("demo", "v", "pool", 4, 4, server, metric), status, float(value), se,
                       2.0 if se else None, None, None, 3, (float(value),))


def fill(path, values: dict[str, list[float]], **kwargs) -> None:
    with open_store(path, create=True) as store:
        for i in range(len(next(iter(values.values())))):
            rec = record(i, **{k: (v(i) if callable(v) else v) for k, v in kwargs.items()})
            store.add(rec, [point(rec, m, vs[i], server=rec.servers[0]) for m, vs in values.items()])


def table(report, title: str):
    return next(t for t in report.tables if t.title.startswith(title))


def noisy(n: int, seed: int, step_at: int | None = None, step: float = 0.0) -> list[float]:
    rng = np.random.default_rng(seed)
    x = 100 * (1 + 0.02 * rng.standard_normal(n))
    if step_at is not None:
        x[step_at:] *= 1 + step
    return list(x)


def test_adding_twice_changes_nothing_and_a_different_run_under_a_taken_id_is_refused(tmp_path):
    path = tmp_path / "h.db"
    rec = record(1)
    with open_store(path, create=True) as store:
        assert store.add(rec, [point(rec, "tps", 10)]) is True
        assert store.add(rec, [point(rec, "tps", 10)]) is False
        with pytest.raises(ConfigError, match="already holds a different run named"):
            store.add(record(1, digest="other"), [])
        assert len(store.runs()) == 1


def test_a_store_is_not_created_by_reading_it(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        open_store(tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()
    (tmp_path / "junk.db").write_text("not a database at all, just text" * 100)
    with pytest.raises(ConfigError, match="not an SQLite database"):
        open_store(tmp_path / "junk.db")


def test_a_store_of_schema_1_is_migrated_and_takes_a_second_client_count(tmp_path):
    """A store the previous concurbench wrote (series keyed without their client count, so a variant run
    at another client count ended in a KeyError): migrated when opened, its runs and series kept under
    their ids, and then a series that differs only in its client count goes in."""
    path = tmp_path / "v1.db"
    shutil.copy(FIXTURES / "schema-v1.db", path)
    with sqlite3.connect(path) as conn:
        before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("history_runs", "history_series", "history_points")}
        series_before = conn.execute("SELECT * FROM history_series ORDER BY id").fetchall()
    with open_store(path) as store:
        assert store.schema_version() == schema.SCHEMA_VERSION == 3
        assert store.findings() == [] and store.expectations() == []
        key = next(iter(store.series().values()))
        rec = record(1)
        other = replace(point(rec, key.metric, 5.0), key=key._replace(clients=key.clients + 3))
        assert store.add(replace(rec, scenario=key.scenario), [other]) is True
        assert sum(1 for k in store.series().values() if k[:3] == key[:3] and k.metric == key.metric) == 2
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT * FROM history_series ORDER BY id").fetchall()[:len(series_before)] == series_before
        assert conn.execute("SELECT count(*) FROM history_points").fetchone()[0] == before["history_points"] + 1
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_store_of_schema_2_is_migrated_keeping_its_findings_and_expectations(tmp_path):
    """A store main's concurbench wrote (schema 2: a run, an acknowledged finding, an expectation; see
    tests/fixtures/history/README.md): migrated to schema 3 when opened, every row read as before, the new
    columns at their defaults (a run of the series, a change finding without kept thresholds), and a run of
    schema 3 with counts and exposures goes in beside it."""
    path = tmp_path / "v2.db"
    shutil.copy(FIXTURES / "schema-v2.db", path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM history_meta").fetchone() == ("2",)
        rows_before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("history_runs", "history_series", "history_points", "history_findings")}
    with open_store(path) as store:
        assert store.schema_version() == 3
        (run,) = store.runs()
        assert run.record.kind == "run" and run.record.machine == {} and run.record.settings == {}
        (f,) = store.findings()
        assert f.state == "acknowledged" and f.reason == "on purpose" and f.kind == "change"
        assert f.starts == (f.first_run, f.first_run) and f.min_change is None and f.now_change is None
        (e,) = store.expectations()
        assert e.release == "18.7" and e.lapsed is None
        rec = record(3)
        key = SeriesKey("demo", "v", "pool", 4, 4, "18.6", "failed_per_txn")
        assert store.add(rec, [PointRecord(rec.run_id, key, "ok", 0.0002, None, None, None, None, 1, (0.0002,), 2.0,
                                           10_000.0)])
        stored = store.points([k for k, v in store.series().items() if v == key])
        assert [(p.count, p.exposure) for points in stored.values() for p in points] == [(2.0, 10_000.0)]
    with sqlite3.connect(path) as conn:
        for table, count in rows_before.items():
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] >= count
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_change_is_found_and_told_with_its_runs_and_levels(tmp_path):
    path = tmp_path / "h.db"
    fill(path, {"tps": noisy(30, 1, 20, -0.15), "latency.mean_ms": noisy(30, 2, 20, 0.17),
                "transactions": [300.0] * 30})
    with open_store(path) as store:
        a = analyse(store)
    (g,) = a.groups
    assert g.status == "confirmed" and g.after_run.run.record.run_id == record(20).run_id
    assert g.before_run.run.record.run_id == record(19).run_id
    assert sorted(m.metric for m in g.moved) == ["latency.mean_ms", "tps"]  # one change, two metrics
    assert {m.metric: m.way for m in g.moved} == {"tps": "worse", "latency.mean_ms": "worse"}
    data = render.as_json(a)
    (c,) = data["change_points"]
    assert {"scenario", "variant", "pool", "metric", "run", "version", "change", "p"} <= set(c)
    assert c["run"] == record(20).run_id and c["version"] == "18.6" and c["p"] < 1e-3
    assert len(data["series"]) == 3 and len(data["series"][0]["points"]) == 30


def test_runs_that_failed_are_shown_and_left_out(tmp_path):
    path = tmp_path / "h.db"
    values = noisy(25, 3)
    values[10] = 10.0  # a run that ended early reported a tenth
    fill(path, {"tps": values}, status=lambda i: "failed" if i == 10 else "ok")
    with open_store(path) as store:
        a = analyse(store)
    (s,) = a.series
    assert len(s.points) == 25 and len(s.included) == 24 and a.groups == []
    assert "Left out" in table(render.report(a), "Series").notes[0]
    csv = render.as_csv(a).splitlines()
    assert sum(1 for line in csv if ",failed," in line) == 1


def test_ordered_by_version_one_series_runs_through_the_releases(tmp_path):
    path = tmp_path / "h.db"
    versions = ["16.10", "16.9", "15.19", "16.9", "15.19", "16.10", "15.18", "16.11", "15.18", "16.11"]
    values = [200.0 if v.startswith("16") else 100.0 for v in versions]
    fill(path, {"tps": values}, server=lambda i: versions[i])
    with open_store(path) as store:
        by_time = analyse(store, order="time")
        by_version = analyse(store, order="version")
        by_track = analyse(store)
    assert len(by_time.series) == 5 and all(s.changes == [] for s in by_time.series)  # a series a version
    assert sorted(s.key.server for s in by_track.series) == ["15", "16"]  # a series a major, by default
    (s,) = by_version.series
    assert [p.server for p in s.points] == ["15.18", "15.18", "15.19", "15.19", "16.9", "16.9", "16.10", "16.10",
                                            "16.11", "16.11"]
    (g,) = by_version.groups
    assert (g.before_run.server, g.after_run.server) == ("15.19", "16.9")


def test_a_change_at_a_run_whose_scenario_changed_says_so(tmp_path):
    path = tmp_path / "h.db"
    fill(path, {"wal.bytes_per_txn": [100.0] * 10 + [200.0] * 5}, params=lambda i: {"rows": 1 if i < 10 else 2})
    with open_store(path) as store:
        a = analyse(store)
    (g,) = a.groups
    assert g.scenario_changed and [p.scenario_changed for p in a.series[0].points].index(True) == 10
    assert "scenario changed" in table(render.report(a), "Change points").rows[0][0]


@pytest.mark.parametrize("metric, change, expected", [
    ("tps", -0.1, "worse"), ("latency.p99_ms", 0.1, "worse"), ("lag.mean_ms", -0.1, "better"),
    ("errors.deadlock", None, "worse"), ("wal.bytes_per_txn", 0.2, "worse"), ("waits.CPU", 0.3, "neutral"),
    ("failed_per_txn", 0.5, "worse"),
    ("advisory@max: tps > for_update@max: tps", -0.2, "worse"),
    ("advisory@max: statements.lock.mean_ms < for_update@max: statements.lock.mean_ms", -0.2, "better")])
def test_which_way_is_worse(metric, change, expected):
    variant = "claims" if ":" in metric else "v"
    assert way(better_way(SeriesKey("demo", variant, "p", 4, 4, "18.6", metric)), change) == expected


def test_a_direction_given_wins():
    key = SeriesKey("demo", "v", "", 4, 4, "18.6", "waits.CPU")
    assert better_way(key, {"waits.*": "lower"}) == "lower"
    assert way(better_way(key._replace(metric="tps"), {"t*": "neutral"}), -0.5) == "neutral"


def test_the_store_url_password_is_never_shown():
    from concurbench.history.store import shown
    assert shown("postgresql://ci:pw-123@db.example:5433/perf") == "postgresql://ci@db.example:5433/perf"
    assert "pw-123" not in json.dumps(shown("postgresql://ci:pw-123@db.example/perf"))
