"""A claim's history series is named by the claim's key (no server): a claim reworded, re-spaced and moved in its
list keeps its series; a store of schema 2, which named them by their text, is migrated to the keys; the gate
reads which way a claim's figure is better from the form stored with its series, even under an `id:`."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

from concurbench.figures import Better
from concurbench.history.analysis import figure_of
from concurbench.history.records import CLAIMS, ClaimKey, PointRecord, RunRecord, SeriesKey, read_run
from concurbench.history.store import open_store
from concurbench.scenario.claims import parse_claim

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN = FIXTURES / "runs" / "temp-table-churn"


def reworded(text: str) -> str:
    """The claim's check written another way: the factor after its reference, wider spaces around the operator."""
    left, op, right = re.split(r" (<=|>=|<|>) ", text)
    factor = re.fullmatch(r"([\d.]+) \* (.+)", right)
    return f"{left}   {op}  {factor.group(2)} * {factor.group(1)}" if factor else f"{left}  {op}  {right}"


def claims_series(store) -> dict[int, SeriesKey]:
    return {sid: k for sid, k in store.series().items() if k.variant == CLAIMS}


def test_a_reworded_and_reordered_claim_keeps_its_series(tmp_path):
    again = tmp_path / "20260102T000000Z-temp-table-churn"
    shutil.copytree(RUN, again)
    summary = json.loads((again / "summary.json").read_text())
    summary["claims"] = [{**c, "claim": reworded(c["claim"]), "description": "said another way"}
                         for c in reversed(summary["claims"])]
    assert all(parse_claim(c["claim"]).key != c["claim"] for c in summary["claims"])  # every text differs
    (again / "summary.json").write_text(json.dumps(summary))
    with open_store(tmp_path / "h.db", create=True) as store:
        for path in (RUN, again):
            assert store.add(*read_run(path))
        series = claims_series(store)
        points = store.points(sorted(series))
    assert len(series) == 10
    assert all(len(p) == 2 for p in points.values())
    assert all(k.metric.form is not None and k.metric == k.metric.form.text for k in series.values())


def test_a_store_of_schema_2_keys_its_claims_series_by_key_joining_texts_of_one_form(tmp_path):
    """Schema 2 named a claim's series by its text: migrating names it by its key with its form beside it,
    joins two texts of one form (each run's point kept), and a finding on a text follows it to the key."""
    path = tmp_path / "v2.db"
    shutil.copy(FIXTURES / "history" / "schema-v2.db", path)
    key = "dynamic: wal.bytes_per_txn > 10 * reuse: wal.bytes_per_txn"
    other = "dynamic:wal.bytes_per_txn  >  reuse: wal.bytes_per_txn * 10"
    with sqlite3.connect(path) as conn:
        (sid, run), = conn.execute("SELECT s.id, p.run FROM history_series s JOIN history_points p ON p.series = s.id "
                                   "WHERE s.metric = ?", (key,)).fetchall()
        conn.execute("UPDATE history_series SET metric = ? WHERE id = ?", (reworded(key), sid))
        columns = [r[1] for r in conn.execute("PRAGMA table_info(history_runs)") if r[1] != "id"]
        listed = ", ".join(columns)
        conn.execute(f"INSERT INTO history_runs ({listed}) SELECT {listed.replace('run_id', quoted('second'))} "
                     f"FROM history_runs WHERE id = ?", (run,))
        second = conn.execute("SELECT id FROM history_runs WHERE run_id = 'second'").fetchone()[0]
        conn.execute("INSERT INTO history_series (scenario, variant, pool, clients, point, server, metric) "
                     "SELECT scenario, variant, pool, clients, point, server, ? FROM history_series WHERE id = ?",
                     (other, sid))
        joined = conn.execute("SELECT id FROM history_series WHERE metric = ?", (other,)).fetchone()[0]
        conn.execute("INSERT INTO history_points (run, series, status, mean, se, df, low, high, n, vals) "
                     "SELECT ?, ?, status, mean * 2, se, df, low, high, n, vals FROM history_points "
                     "WHERE series = ?", (second, joined, sid))
        columns = [r[1] for r in conn.execute("PRAGMA table_info(history_findings)") if r[1] != "id"]
        listed = ", ".join(columns)
        conn.execute(f"INSERT INTO history_findings ({listed}) SELECT "
                     f"{listed.replace('variant', quoted(CLAIMS)).replace('metric', quoted(other))} "
                     f"FROM history_findings")
    with open_store(path) as store:
        series = claims_series(store)
        assert len(series) == 10 and sid in series and joined not in series
        assert series[sid].metric == key and isinstance(series[sid].metric, ClaimKey)
        assert figure_of(series[sid]).better is Better.HIGHER
        assert sorted(p.run for p in store.points([sid])[sid]) == sorted([run, second])
        assert {(f.key.variant, f.key.metric) for f in store.findings()} == {("dynamic", "tps"), (CLAIMS, key)}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_claim_named_by_its_id_is_read_with_its_stored_form(tmp_path):
    """A key that says nothing of the claim (an `id:`): which way is better comes from the form stored with it,
    and the latest run's form is the one kept (a check rewritten under the same id)."""
    path = tmp_path / "h.db"
    for i, text in enumerate(["a: tps > 1.1 * b: tps", "a: latency.mean_ms < b: latency.mean_ms"]):
        rec = record(i)
        key = SeriesKey("demo", CLAIMS, "", 0, -1, "18.6", ClaimKey("a-wins", parse_claim(text).form))
        with open_store(path, create=True) as store:
            store.add(rec, [PointRecord(rec.run_id, key, "ok", 1.2, None, None, 1.1, 1.3, 3, (1.2,))])
        with open_store(path) as store:
            (stored,) = store.series().values()
            assert stored.metric == "a-wins"
            assert figure_of(stored).better is (Better.HIGHER if i == 0 else Better.LOWER)


def record(i: int) -> RunRecord:
    return RunRecord(f"run-{i}", f"d{i}", "demo", "sha", {}, False, f"2026-01-01T{i:02d}:00:00",
                     f"2026-01-01T{i:02d}:01:00", "ok", None, "host", "cpu", "0.1.0", "", False, "embedded",
                     ["18.6"], 3)


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
