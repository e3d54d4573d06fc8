"""The verdicts benchmarks/driver_overhead.py prints about its goal, from paired rounds (no server)."""

from __future__ import annotations

import csv
import math

import pytest

BENCHMARK = "driver_overhead"


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script


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
    for n, (theirs, ours) in enumerate([(100.0, 99.0), (100.0, 101.0), (100.0, 100.0)], start=1):
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
    assert eight.startswith("ratio select1 simple 8 clients: 1.00 (95% interval 0.98-1.03 over 3 rounds; "
                            "goal >= 0.95: met; rounds 0.99, 1.01, 1.00)")
    cpu = next(line for line in lines if line.startswith("cpu select1 simple 8 clients:"))
    assert "goal <= 1.05: met" in cpu  # the same 15.0 us a transaction on both sides
    one = next(line for line in lines if line.startswith("ratio select1 simple 1 clients:"))
    assert "goal" not in one  # the throughput goal is about 8, 32 and 128 clients
    statement = next(line for line in lines if line.startswith("statement mean select1 simple 1 client one:"))
    assert "52.0 us vs pgbench 50.0 us" in statement
    assert "ratio 1.04 (95% interval 1.04-1.04 over 3 rounds; goal 0.9-1.1: met" in statement


def test_one_look_is_at_five_percent_and_later_looks_spend_the_rest(bench):
    assert bench.look_alpha(3, 3, 3) == pytest.approx(0.05)
    levels = [bench.look_alpha(n, 3, 10) for n in range(3, 11)]
    assert levels[0] < 0.001 and levels[-1] > 0.01
    assert sum(levels) == pytest.approx(0.05)  # spent over the looks, never more than 5% in all


def rounds_of(bench, ours: list[float], cpu: list[float]):
    """A cell's rounds: pgbench at 100 tps and 10 us a transaction, concurbench at `ours` tps and `cpu` us."""
    return [(bench.Measure(100.0, 10.0), {"concurbench/compiled": bench.Measure(t, c)}) for t, c in zip(ours, cpu)]


def test_a_cell_stops_once_both_goals_are_decided(bench):
    clear = rounds_of(bench, [101.0, 100.0, 102.0], [10.0, 10.1, 9.9])
    assert bench.settled(8, clear, ["compiled"], 3, 3)
    assert not bench.settled(8, clear[:2], ["compiled"], 3, 3), "no look before --min-rounds"
    near = rounds_of(bench, [95.0, 99.0, 94.0], [10.0, 10.1, 9.9])  # throughput interval reaches below 0.95
    assert not bench.settled(8, near, ["compiled"], 3, 3)
    costly = rounds_of(bench, [101.0, 100.0, 102.0], [10.4, 10.9, 10.2])  # CPU interval reaches past 1.05
    assert not bench.settled(8, costly, ["compiled"], 3, 3)
    # the same clear rounds at the first of eight looks: judged at its small share of the error rate
    assert bench.look_alpha(3, 3, 10) < 0.001
    assert not bench.settled(8, rounds_of(bench, [100.0, 101.0, 99.0], [10.0, 10.1, 9.9]), ["compiled"], 3, 10)
    assert bench.settled(8, rounds_of(bench, [100.0, 101.0, 99.0], [10.0, 10.1, 9.9]), ["compiled"], 3, 3)
