"""The verdicts benchmarks/driver_overhead.py prints about its goal, from paired rounds (no server)."""

from __future__ import annotations

import csv
import importlib.util
import math
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "driver_overhead.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("driver_overhead", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_interval_is_the_t_interval_of_the_logarithms(bench):
    ratios = [0.9, 1.0, 1.1, 0.95]
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3) * sd / sqrt(4)
    centre, low, high = bench.ratio_interval(ratios)
    assert centre == pytest.approx(math.exp(mean))
    assert low == pytest.approx(math.exp(mean - half), rel=1e-9)
    assert high == pytest.approx(math.exp(mean + half), rel=1e-9)


@pytest.mark.parametrize("low, high, goal, verdict", [
    (0.91, 1.05, (0.9, math.inf), "met"),
    (0.89, 1.05, (0.9, math.inf), "undecided"),
    (0.80, 0.89, (0.9, math.inf), "missed"),
    (0.92, 1.08, (0.9, 1.1), "met"),
    (0.95, 1.12, (0.9, 1.1), "undecided"),
    (1.11, 1.30, (0.9, 1.1), "missed"),
    (None, None, (0.9, 1.1), "undecided (one round)"),
])
def test_goal_verdict(bench, low, high, goal, verdict):
    assert bench.goal_verdict(low, high, goal) == verdict


def test_summary_from_a_csv(bench, tmp_path, capsys):
    """Rounds read back from --csv give the same lines the run printed: ratio, interval, verdict."""
    path = tmp_path / "run.csv"
    rows = []
    for n, (theirs, ours) in enumerate([(100.0, 96.0), (100.0, 98.0), (100.0, 97.0)], start=1):
        for side, tps, mean in (("pgbench", theirs, 0.050), ("concurbench/compiled", ours, 0.052)):
            for clients in (1, 8):
                rows.append(["select1", n, "simple", clients, side, "compiled" if "/" in side else "", tps, 15.0,
                             tps / theirs, f"one={mean:.5f}"])
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["workload", "round", "protocol", "clients", "side", "loop", "tps", "cpu_us_per_txn",
                         "ratio", "statement_means_ms"])
        writer.writerows(rows)
    lines = bench.from_csv(str(path))
    eight = next(line for line in lines if line.startswith("ratio select1 simple 8 clients:"))
    assert eight.startswith("ratio select1 simple 8 clients: 0.97 (95% interval 0.95-1.00 over 3 rounds; "
                            "goal >= 0.9: met; rounds 0.96, 0.98, 0.97)")
    one = next(line for line in lines if line.startswith("ratio select1 simple 1 clients:"))
    assert "goal" not in one  # the throughput goal is about 8 and 32 clients
    statement = next(line for line in lines if line.startswith("statement mean select1 simple 1 client one:"))
    assert "52.0 us vs pgbench 50.0 us" in statement
    assert "ratio 1.04 (95% interval 1.04-1.04 over 3 rounds; goal 0.9-1.1: met" in statement
