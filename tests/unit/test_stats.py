"""Latency and PoolStats: batch recording, exact merging, serialisation and percentile suppression."""

from __future__ import annotations

import json
import random
from array import array
from collections import Counter

import numpy as np
import pytest

from concurbench.workload.stats import (HIGHEST_NS, MIN_SAMPLES_FOR, Latency, PoolStats, new_histogram,
                                        record_many)

RESOLUTION = 1e-3  # 3 significant digits


def latencies(n: int, seed: int) -> list[int]:
    """Nanosecond latencies spread over six orders of magnitude (log-uniform)."""
    rng = random.Random(seed)
    return [int(10 ** rng.uniform(2, 8)) for _ in range(n)]


def filled(pool: str, txn: list[int], stmts: dict[str, list[int]], **counters) -> PoolStats:
    stats = PoolStats(pool, **counters)
    for ns in txn:
        stats.txn.record(ns)
    for name, values in stmts.items():
        for ns in values:
            stats.statement(name).record(ns)
    return stats


# -- record_many (the vectorised recording) ----------------------------------------

def test_record_many_matches_record_value_bucket_for_bucket():
    values = latencies(20_000, seed=1) + [1, 2, 2047, 2048, 2049, 4095, 4096, 4097, 1 << 20, (1 << 20) + 1,
                                          10 ** 9, HIGHEST_NS - 1, HIGHEST_NS]
    batch, single = new_histogram(), new_histogram()
    record_many(batch, array("q", values))
    for v in values:
        single.record_value(v)
    assert list(batch.counts) == list(single.counts)
    assert batch.get_total_count() == single.get_total_count() == len(values)
    assert batch.get_max_value() == single.get_max_value()
    assert batch.get_min_value() == single.get_min_value()
    for pct in (1, 50, 90, 99, 99.9, 100):
        assert batch.get_value_at_percentile(pct) == single.get_value_at_percentile(pct)


def test_record_many_adds_to_what_is_there():
    hist = new_histogram()
    record_many(hist, array("q", [100, 200]))
    record_many(hist, array("q", [100, 5_000_000]))
    assert hist.get_total_count() == 4
    assert hist.get_count_at_value(100) == 2
    assert hist.get_count_at_value(200) == 1
    assert hist.get_max_value() == hist.get_highest_equivalent_value(5_000_000)


def test_values_below_2048_are_exact():
    for v in (1, 2, 3, 999, 1000, 1500, 2046, 2047):
        hist = new_histogram()
        record_many(hist, array("q", [v]))
        assert hist.get_value_at_percentile(50) == v
        assert hist.get_min_value() == v and hist.get_max_value() == v


def test_values_above_2048_keep_three_significant_digits():
    rng = random.Random(5)
    many = [2048, 2049, 3001, 4095] + [rng.randrange(2048, HIGHEST_NS) for _ in range(2_000)]
    hist = new_histogram()
    record_many(hist, array("q", many))
    for v in many:
        low = hist.get_lowest_equivalent_value(v)
        high = hist.get_highest_equivalent_value(v)
        assert low <= v <= high
        assert (high - low + 1) / v < RESOLUTION  # the bucket is narrower than 0.1% of the value
        assert hist.get_count_at_value(v) >= 1
    for v in many[:4] + many[-10:]:
        single = new_histogram()
        record_many(single, array("q", [v]))
        assert abs(single.get_value_at_percentile(50) - v) / v < RESOLUTION
        assert single.get_count_at_value(v) == 1


def test_values_outside_the_range_are_clipped():
    hist = new_histogram()
    record_many(hist, array("q", [0, -5, HIGHEST_NS * 10]))
    assert hist.get_total_count() == 3
    assert hist.get_count_at_value(1) == 2
    assert hist.get_max_value() == hist.get_highest_equivalent_value(HIGHEST_NS)


# -- Latency ---------------------------------------------------------------------

def test_latency_count_sum_mean_are_exact():
    values = latencies(1_000, seed=2)
    lat = Latency()
    for v in values:
        lat.record(v)
    assert lat.count == 0  # recorded values wait in the buffer
    assert lat.mean_ms() == pytest.approx(sum(values) / len(values) / 1e6, rel=1e-12)
    assert lat.count == 1_000 and lat.total_ns == sum(values)
    assert len(lat.pending) == 0
    assert lat.max_ms() == pytest.approx(max(values) / 1e6, rel=RESOLUTION)
    for pct in (50.0, 95.0, 99.0):
        exact = float(np.percentile(values, pct, method="inverted_cdf"))
        assert lat.percentile_ms(pct) == pytest.approx(exact / 1e6, rel=RESOLUTION)


def test_empty_latency_has_no_figures():
    lat = Latency()
    assert lat.mean_ms() is None
    assert lat.max_ms() is None
    assert lat.percentile_ms(50.0) is None
    assert lat.to_dict() == {"count": 0, "total_ns": 0, "hist": ""}
    assert Latency.from_dict(lat.to_dict()).count == 0


@pytest.mark.parametrize("pct", sorted(MIN_SAMPLES_FOR))
def test_percentile_suppressed_below_min_samples(pct):
    need = MIN_SAMPLES_FOR[pct]
    lat = Latency()
    for i in range(need - 1):
        lat.record(1000 + i)
    assert lat.percentile_ms(pct) is None
    lat.record(5000)
    value = lat.percentile_ms(pct)
    assert value is not None and 0.001 <= value <= 0.0051


def test_p95_needs_twenty_and_p99_a_hundred():
    assert MIN_SAMPLES_FOR[95.0] == 20 and MIN_SAMPLES_FOR[99.0] == 100
    lat = Latency()
    for _ in range(50):
        lat.record(1_000_000)
    assert lat.percentile_ms(50.0) == pytest.approx(1.0, rel=RESOLUTION)
    assert lat.percentile_ms(95.0) == pytest.approx(1.0, rel=RESOLUTION)
    assert lat.percentile_ms(99.0) is None


def test_latency_round_trip_through_json():
    lat = Latency()
    for v in latencies(500, seed=3):
        lat.record(v)
    data = json.loads(json.dumps(lat.to_dict()))
    back = Latency.from_dict(data)
    assert (back.count, back.total_ns) == (lat.count, lat.total_ns)
    assert list(back.hist.counts) == list(lat.hist.counts)
    for pct in (50.0, 95.0, 99.0):
        assert back.percentile_ms(pct) == lat.percentile_ms(pct)
    assert back.max_ms() == lat.max_ms()
    assert back.mean_ms() == lat.mean_ms()
    back.record(123)  # a decoded latency still records
    assert back.mean_ms() is not None and back.count == lat.count + 1


# -- PoolStats -------------------------------------------------------------------

def test_merge_equals_recording_everything_into_one():
    t1, t2 = latencies(3_000, seed=10), latencies(2_000, seed=11)
    a1, a2 = latencies(3_000, seed=12), latencies(2_000, seed=13)
    b2 = latencies(700, seed=14)  # a statement only the second part ran
    one = filled("p", t1, {"a": a1}, sessions=2, transactions=3_000, failed=4, retries=1,
                 errors=Counter(deadlock=3, other=1), error_messages=Counter({"40P01: deadlock detected": 3}))
    two = filled("p", t2, {"a": a2, "b": b2}, sessions=3, transactions=2_000, failed=2, retries=5,
                 errors=Counter(deadlock=1, serialization=1),
                 error_messages=Counter({"40P01: deadlock detected": 1, "40001: could not serialize": 1}))
    everything = filled("p", t1 + t2, {"a": a1 + a2, "b": b2})

    merged = one.merge(two)
    assert merged is one
    assert (merged.sessions, merged.transactions, merged.failed, merged.retries) == (5, 5_000, 6, 6)
    assert merged.errors == Counter(deadlock=4, other=1, serialization=1)
    assert merged.error_messages["40P01: deadlock detected"] == 4
    assert set(merged.statements) == {"a", "b"}
    assert merged.statements_executed == len(a1) + len(a2) + len(b2)
    pairs = [(merged.txn, everything.txn)] + [(merged.statements[n], everything.statements[n]) for n in "ab"]
    for got, want in pairs:
        assert got.mean_ms() == pytest.approx(want.mean_ms(), rel=1e-12)
        assert (got.count, got.total_ns) == (want.count, want.total_ns)
        assert got.max_ms() == pytest.approx(want.max_ms(), rel=RESOLUTION)
        for pct in (50.0, 95.0, 99.0):
            assert got.percentile_ms(pct) == pytest.approx(want.percentile_ms(pct), rel=RESOLUTION)
    assert merged.txn.max_ms() == pytest.approx(max(t1 + t2) / 1e6, rel=RESOLUTION)


def test_merge_flushes_pending_values_of_both_sides():
    one, two = PoolStats("p"), PoolStats("p")
    one.txn.record(1_000)
    two.txn.record(3_000)
    one.merge(two)
    assert one.txn.count == 2 and one.txn.total_ns == 4_000
    assert one.txn.mean_ms() == pytest.approx(0.002)


def test_merge_into_empty():
    src = filled("p", [1_000, 2_000], {"s": [500]}, transactions=2)
    empty = PoolStats("p")
    empty.merge(src)
    assert empty.transactions == 2 and empty.txn.count == 2 and empty.statements["s"].count == 1


def test_merging_different_pools_raises():
    with pytest.raises(ValueError, match="lockers"):
        PoolStats("bystanders").merge(PoolStats("lockers"))


def test_pool_stats_round_trip_through_json():
    stats = filled("lockers", latencies(300, seed=20), {"lock": latencies(300, seed=21), "update": [5_000] * 10},
                   sessions=4, transactions=300, failed=7, retries=2, errors=Counter(deadlock=7),
                   error_messages=Counter({"40P01: deadlock detected": 7}))
    data = json.loads(json.dumps(stats.to_dict()))
    back = PoolStats.from_dict(data)
    assert back.pool == "lockers"
    assert (back.sessions, back.transactions, back.failed, back.retries) == (4, 300, 7, 2)
    assert back.errors == Counter(deadlock=7)
    assert back.error_messages == Counter({"40P01: deadlock detected": 7})
    assert set(back.statements) == {"lock", "update"}
    assert back.statements_executed == 310
    assert back.txn.percentile_ms(95.0) == stats.txn.percentile_ms(95.0)
    assert back.statements["update"].mean_ms() == pytest.approx(0.005)
    assert back.to_dict() == stats.to_dict()
    # decoded stats merge like fresh ones
    back.merge(PoolStats.from_dict(data))
    assert back.transactions == 600 and back.txn.count == 600


def test_statement_returns_the_same_latency():
    stats = PoolStats("p")
    assert stats.statement("x") is stats.statement("x")
    assert stats.statements_executed == 0
