"""Statistics of repeated runs: t quantiles, intervals, Welch's test, folding repeats, warnings."""

from __future__ import annotations

import math

import pytest

from concurbench.report.repeats import busiest_worker, client_cpu, collapse, warnings
from concurbench.stats import estimate, t_cdf, t_quantile, welch
from concurbench.report.tables import build_report
from concurbench.results.model import Run, ScenarioInfo, ServerInfo, VariantRun


@pytest.mark.parametrize("df, expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)])
def test_t_quantile_matches_published_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_cdf_is_symmetric_and_tends_to_the_normal():
    assert t_cdf(0.0, 7) == pytest.approx(0.5)
    assert t_cdf(-1.5, 7) == pytest.approx(1 - t_cdf(1.5, 7))
    assert t_cdf(1.96, 1e6) == pytest.approx(0.975, abs=1e-4)


def test_estimate_interval_from_three_values():
    e = estimate([100.0, 102.0, 98.0])
    assert e.mean == 100.0 and e.sd == pytest.approx(2.0)
    assert e.half == pytest.approx(4.3027 * 2.0 / math.sqrt(3), rel=1e-4)
    assert e.cv == pytest.approx(0.02)
    single = estimate([5.0])
    assert single.half is None and single.cv is None


def test_welch_separates_a_real_shift_from_noise():
    shifted = welch(estimate([100, 102, 98]), estimate([80, 81, 79]))
    assert shifted.significant and shifted.p_value < 0.01
    noisy = welch(estimate([100, 90, 110]), estimate([95, 85, 112]))
    assert noisy.significant is False
    assert welch(estimate([1.0]), estimate([2.0])).significant is None


def _result(variant, tps, repeat, point=None, transactions=5000, cpu=(0.5,), wall=(1.0,)):
    return VariantRun.from_dict({"variant": variant, "group": "g", "point": point, "clients": {"p": 4}, "server": "18.1",
            "status": "ok", "elapsed_s": 10.0, "repeat": repeat, "worker_cpu_s": list(cpu), "worker_wall_s": list(wall),
            "messages": [], "sampler_errors": [], "samplers": {"wal": {"bytes": 1000 * repeat}},
            "pools": {"p": {"measure": True, "clients": 4, "metrics": {
                "tps": tps, "transactions": transactions, "failed": 0, "retries": 0, "sessions": 4,
                "errors": {}, "statements": {"s": {"count": transactions, "mean_ms": 2.0 * repeat}},
                "statements_executed": transactions, "error_messages": {},
                "latency": {"mean_ms": 1.0, "p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "max_ms": 9.0}}}}}, "test")


def test_collapse_folds_repeats_into_means_with_intervals():
    raw = [_result("a", 100.0, 1), _result("b", 50.0, 1), _result("a", 110.0, 2), _result("b", 52.0, 2)]
    folded = collapse(raw)
    assert [r.variant for r in folded] == ["a", "b"]
    a = folded[0]
    assert a.repeats == 2
    assert a.own("p")["tps"] == pytest.approx(105.0)
    assert a.own("p")["statements.s.mean_ms"] == pytest.approx(3.0)
    assert a.samplers["wal"]["bytes"] == pytest.approx(1500)
    tps = a.repeat_stats["p"]["tps"]
    assert tps["n"] == 2 and tps["ci95"] == pytest.approx(12.7062 * math.sqrt(50) / math.sqrt(2), rel=1e-4)


def test_single_runs_pass_through_unchanged():
    raw = [_result("a", 100.0, 1)]
    assert collapse(raw)[0] is raw[0]


def test_warnings_for_spread_thin_tails_and_a_busy_load_generator():
    raw = [_result("a", 100.0, 1, transactions=150, cpu=(0.95,)), _result("a", 140.0, 2, transactions=150, cpu=(0.9,))]
    text = "\n".join(warnings(raw))
    assert "large spread between 2 repeats" in text and "tps 24%" in text
    assert "p95/p99 from 150 transactions" in text
    assert "busy 95%" in text
    calm = [_result("a", 100.0, 1), _result("a", 101.0, 2)]
    assert warnings(calm) == []


def test_client_cpu_and_busiest_worker():
    r = _result("a", 1.0, 1, cpu=(0.5, 0.25), wall=(1.0, 1.0))
    assert client_cpu(r) == pytest.approx(0.75)
    assert busiest_worker(r) == pytest.approx(0.5)
    folded = collapse([r, _result("a", 1.0, 2, cpu=(0.5, 0.25), wall=(1.0, 1.0))])[0]
    assert client_cpu(folded) == pytest.approx(0.75)


def test_report_shows_mean_and_interval_with_repeats():
    raw = [_result("a", 100.0, 1), _result("a", 110.0, 2), _result("a", 105.0, 3)]
    run = Run(ScenarioInfo("demo", "Demo"), repeat=3, target="embedded", host={"cpu_count": 2},
              servers=[ServerInfo("PostgreSQL 18.1", version_short="18.1")], variant_runs=raw)
    report = build_report(run)
    assert any("Repeats: 3 per variant" in line for line in report.lines)
    table = report.tables[0]
    row = table.rows[0]
    assert row[table.columns.index("TPS")] == "105.0 ± 12.4"
    assert row[table.columns.index("Client CPU")] == "0.50"
    assert "MultiXacts" not in table.columns and "WAL B/txn" in table.columns  # only filled columns stay
