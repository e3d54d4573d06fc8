"""pandas views of stored runs: the tidy frame, the samples, `results --format csv|json`, and the
blog-table example under docs/ (no server needed)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import concurbench
from concurbench.cli.main import cli
from concurbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn"
ROWLOCK = ROOT / "tests" / "unit" / "fixtures" / "run_rowlock"
KEYS = ["server", "variant", "group", "point", "pool", "measured", "clients", "repeat", "status"]


def test_frame_has_one_row_per_variant_run_pool_and_metric():
    run = concurbench.load(RUN)
    frame = run.frame()
    assert list(frame.columns) == KEYS + ["metric", "value", "unit", "scope", "unavailable"]
    expected = sum(len([m for m in r.figures(p) if not m.startswith("error_messages.")])
                   for r in run.variant_runs for p in r.pools)
    assert len(frame) == expected > 100
    assert not frame.duplicated(["server", "variant", "point", "pool", "repeat", "metric"]).any()
    assert set(frame.variant) == {"dynamic", "static", "reuse"} and set(frame.server) == {"18.6"}
    assert frame.point.isna().all() and frame.measured.all() and (frame.repeat == 1).all()
    tps = frame[frame.metric == "tps"].set_index("variant")["value"]
    assert tps.to_dict() == {r.variant: r.own("callers")["tps"] for r in run.variant_runs}
    assert frame.value.dtype == float and frame.unavailable.isna().all()
    units = frame.drop_duplicates("metric").set_index("metric")[["unit", "scope"]].T.to_dict("list")
    assert units["tps"] == ["1/s", "pool"] and units["wal.bytes_per_txn"] == ["B", "sampler"]
    assert units["elapsed_s"] == ["s", "run"] and units["waits.CPU"] == ["share", "sampler"]


def test_frame_of_a_sweep_keeps_points_and_background_pools():
    frame = concurbench.load(ROWLOCK).frame()
    assert sorted(frame[frame.variant == "for_update"].point.unique().tolist()) == [4, 32]
    assert str(frame.point.dtype) == "Int64"
    background = frame[~frame.measured]
    assert not background.empty and set(background.pool) == {"lockers"}


def test_frame_carries_unavailable_metrics_with_their_reason():
    run = concurbench.load(RUN)
    first = replace(run.variant_runs[0], unavailable={"wal.bytes_per_txn": "not on this server"})
    frame = replace(run, variant_runs=[first]).frame()
    row = frame[frame.metric == "wal.bytes_per_txn"].iloc[0]
    assert pd.isna(row.value) and row.unavailable == "not on this server"


def test_samples_of_one_sampler():
    run = concurbench.load(RUN)
    waits = run.samples("wait_events")
    stored = pd.read_csv(RUN / "samples" / "wait_events.csv")
    assert len(waits) == len(stored)
    assert list(waits.columns) == ["server", "variant", "group", "point", "repeat", "status", "t_s", "wait", "sessions"]
    assert waits.groupby("variant").sessions.sum().to_dict() == stored.groupby("variant").sessions.sum().to_dict()
    with pytest.raises(ConfigError, match="no samples of a sampler named locks .the run has wait_events."):
        run.samples("locks")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_results_command_gives_the_tidy_rows_of_many_runs(fmt):
    result = CliRunner().invoke(cli, ["results", str(RUN), str(ROWLOCK), "--format", fmt])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(io.StringIO(result.stdout)) if fmt == "csv" else pd.DataFrame(json.loads(result.stdout))
    assert list(rows.columns[:2]) == ["run", "scenario"]
    assert rows.groupby("run").size().to_dict() == {str(RUN): len(concurbench.load(RUN).frame()),
                                                    str(ROWLOCK): len(concurbench.load(ROWLOCK).frame())}
    assert set(rows.scenario) == {"temp-table-churn", "row-lock-vs-advisory"}


def test_results_table_lists_runs_under_a_directory():
    result = CliRunner().invoke(cli, ["results", str(RUN.parent)])
    assert result.exit_code == 0 and "temp-table-churn (quick)" in result.output and "10/10" in result.output


def test_blog_table_example_rebuilds_the_table_from_a_run_directory():
    env = {**os.environ, "PYTHONPATH": str(Path(concurbench.__file__).parent.parent)}
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "blog_table.py"), str(RUN)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "## Temp-table churn (a temp table created per call, or kept per session)"
    assert "| Variant | Clients | TPS | p95 ms | vs dynamic |" in lines
    run = concurbench.load(RUN)
    tps = {r.variant: r.own("callers")["tps"] for r in run.variant_runs}
    p95 = {r.variant: r.own("callers")["latency.p95_ms"] for r in run.variant_runs}
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| Variant")]
    assert [r.split(" | ")[0].strip("| ") for r in rows] == ["dynamic", "static", "reuse"]
    for row in rows:
        variant, clients, tps_cell, p95_cell, vs = [c.strip() for c in row.strip("|").split("|")]
        assert clients == "50"
        assert float(tps_cell.replace(",", "")) == pytest.approx(tps[variant], abs=0.5)
        assert float(p95_cell.replace(",", "")) == pytest.approx(p95[variant], abs=0.5)
        assert vs == ("base" if variant == "dynamic" else f"{tps[variant] / tps['dynamic']:.2f}×")
