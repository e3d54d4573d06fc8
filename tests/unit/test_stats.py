"""Latency and PoolStats: batch recording, exact merging, serialisation and percentile suppression."""

from __future__ import annotations

import json
import random
from array import array
from collections import Counter

import numpy as np
import pytest

from concurbench.workload.stats import (BUCKET_NS, HIGHEST_NS, MIN_SAMPLES_FOR, Latency, PoolStats, new_histogram,
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


# -- per-interval series ---------------------------------------------------------

ORIGIN = 5_000_000_000  # a perf_counter value: where the window's measurement starts


def recorded(pool: str, txns: list[tuple[int, int, dict[str, int]]], failures: list[int] = (),
             origin: int = ORIGIN) -> PoolStats:
    """Stats as the hot loop leaves them: (completion time, latency, statement latencies) per transaction."""
    stats = PoolStats(pool, transactions=len(txns), failed=len(failures), origin_ns=origin)
    for end, ns, stmts in txns:
        stats.txn.record(ns)
        stats.ends.append(end)
        for name, value in stmts.items():
            stats.statement(name).record(value)
    stats.failed_ends.extend(failures)
    return stats


def test_series_buckets_by_completion_time_from_the_origin():
    bucket = BUCKET_NS
    stats = recorded("p", [(ORIGIN, 10, {"a": 4, "b": 6}),                    # first instant of bucket 0
                           (ORIGIN + bucket - 1, 20, {"a": 5, "b": 15}),      # last instant of bucket 0
                           (ORIGIN + bucket, 30, {"a": 10, "b": 20}),         # first of bucket 1
                           (ORIGIN + 3 * bucket + 7, 40, {"a": 1, "b": 39})],  # bucket 3; bucket 2 empty
                     failures=[ORIGIN + 2 * bucket, ORIGIN + 2 * bucket + 1, ORIGIN + 5 * bucket])
    series = stats.to_dict()["series"]
    assert series["bucket_ns"] == 100_000_000
    assert series["count"] == [2, 1, 0, 1, 0, 0]
    assert series["txn_ns"] == [30, 30, 0, 40, 0, 0]
    assert series["statement_ns"] == {"a": [9, 10, 0, 1, 0, 0], "b": [21, 20, 0, 39, 0, 0]}
    assert series["failed"] == [0, 0, 2, 0, 0, 1]
    assert len(stats.ends) == 0 and len(stats.failed_ends) == 0


def test_series_sums_equal_the_totals():
    rng = random.Random(30)
    txns = [(ORIGIN + rng.randrange(0, 20 * BUCKET_NS), ns, {"s": ns // 3})
            for ns in latencies(5_000, seed=31)]
    stats = recorded("p", txns)
    stats.flush()
    assert int(stats.series.count.sum()) == stats.transactions == stats.txn.count
    assert int(stats.series.txn_ns.sum()) == stats.txn.total_ns
    assert int(stats.series.statement_ns["s"].sum()) == stats.statements["s"].total_ns


def test_series_merge_adds_elementwise_and_pads_the_shorter():
    short = recorded("p", [(ORIGIN + 5, 100, {"a": 60})], failures=[ORIGIN + BUCKET_NS])
    long = recorded("p", [(ORIGIN + 1, 1, {"a": 1, "b": 2}), (ORIGIN + 3 * BUCKET_NS, 7, {"a": 3, "b": 4})])
    merged = short.merge(long).to_dict()["series"]
    assert merged["count"] == [2, 0, 0, 1]
    assert merged["txn_ns"] == [101, 0, 0, 7]
    assert merged["failed"] == [0, 1, 0, 0]
    assert merged["statement_ns"] == {"a": [61, 0, 0, 3], "b": [2, 0, 0, 4]}


def test_series_merge_is_exact_in_any_grouping():
    """Sessions merged in a worker, then workers merged in the parent: the same as one big recording."""
    rng = random.Random(40)
    parts = [[(ORIGIN + rng.randrange(0, (k + 3) * BUCKET_NS), rng.randrange(1, 10**9), {"x": rng.randrange(1, 10**6)})
              for _ in range(rng.randrange(1, 400))] for k in range(6)]
    everything = recorded("p", [t for part in parts for t in part]).to_dict()["series"]
    worker_a, worker_b = recorded("p", parts[0]), recorded("p", parts[3])
    for part in parts[1:3]:
        worker_a.merge(recorded("p", part))
    for part in parts[4:]:
        worker_b.merge(recorded("p", part))
    parent = PoolStats("p")
    for worker in (worker_b, worker_a):  # through JSON, as between processes
        parent.merge(PoolStats.from_dict(json.loads(json.dumps(worker.to_dict()))))
    assert parent.to_dict()["series"] == everything


def test_series_round_trip_and_old_results_without_one():
    stats = recorded("p", [(ORIGIN + 2 * BUCKET_NS, 9, {"a": 9})], failures=[ORIGIN])
    data = json.loads(json.dumps(stats.to_dict()))
    assert PoolStats.from_dict(data).to_dict()["series"] == data["series"]
    del data["series"]  # results written before the series existed
    old = PoolStats.from_dict(data)
    assert old.to_dict()["series"] == {"bucket_ns": BUCKET_NS, "count": [], "txn_ns": [], "failed": [],
                                       "statement_ns": {"a": []}}


def test_series_of_a_pool_without_transactions_names_its_statements():
    stats = recorded("p", [], failures=[ORIGIN + 1])
    stats.statement("grab")
    assert stats.to_dict()["series"] == {"bucket_ns": BUCKET_NS, "count": [0], "txn_ns": [0], "failed": [1],
                                         "statement_ns": {"grab": [0]}}


def test_series_refuses_what_it_cannot_place():
    early = recorded("p", [(ORIGIN - 1, 5, {})])
    with pytest.raises(ValueError, match="before the start"):
        early.flush()
    misaligned = recorded("p", [(ORIGIN, 5, {"a": 1})])
    misaligned.ends.append(ORIGIN + 1)  # a completion time without its latencies
    with pytest.raises(ValueError, match="2 completion times"):
        misaligned.flush()
    other = PoolStats("p")
    other.series.bucket_ns = 1_000_000_000
    with pytest.raises(ValueError, match="buckets"):
        PoolStats("p").merge(other)
