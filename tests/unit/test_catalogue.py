"""The metric catalogue: every figure a run reports is declared once, with its unit, better direction and
kind; compare, claims and the history read it, and a claim's figure is better on its operator's side."""

from __future__ import annotations

from pathlib import Path

import pytest

from concurbench.figures import Better, Catalogue, Figure, Kind
from concurbench.results.catalogue import CATALOGUE, claim_figure
from concurbench.scenario.claims import parse_claim
from concurbench.results.model import Unavailable
from concurbench.results.store import load_run
from concurbench.samplers.registry import SAMPLERS

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def test_every_figure_of_a_stored_run_is_declared():
    run = load_run(RUNS / "temp-table-churn")
    names = {m for r in run.variant_runs for pool in r.pools for m, v in r.figures(pool).items()
             if not isinstance(v, Unavailable)}
    assert {"tps", "latency.p99_ms", "failed", "retries"} <= names
    assert sorted(m for m in names if not CATALOGUE.declares(m)) == []


def test_every_sampler_declares_the_figures_of_its_summary():
    for name, cls in SAMPLERS.items():
        assert cls.figures, f"{name} declares no figures"
        prefixes = {f.pattern.split(".", 1)[0] for f in cls.figures}
        assert prefixes <= {name, "waits", "wait_events"}, (name, prefixes)


@pytest.mark.parametrize("metric, kind", [
    ("tps", Kind.HEADLINE), ("latency.mean_ms", Kind.HEADLINE), ("latency.p95_ms", Kind.HEADLINE),
    ("latency.p99_ms", Kind.HEADLINE), ("lag.p99_ms", Kind.HEADLINE), ("failed_per_txn", Kind.HEADLINE),
    ("skipped_per_txn", Kind.HEADLINE), ("latency.p50_ms", Kind.DIAGNOSTIC), ("statements.x.mean_ms", Kind.DIAGNOSTIC),
    ("errors.deadlock", Kind.COUNT), ("wal.bytes", Kind.SIZE), ("waits.IO:WALSync", Kind.SHARE)])
def test_the_kinds(metric, kind):
    assert CATALOGUE.figure(metric).kind is kind


def test_an_exact_name_says_more_than_a_glob_declared_before_it():
    cat = Catalogue([Figure("latency.*", "ms", Better.LOWER, Kind.DIAGNOSTIC),
                     Figure("latency.p99_ms", "ms", Better.LOWER, Kind.HEADLINE)])
    assert cat.figure("latency.p99_ms").kind is Kind.HEADLINE and cat.figure("latency.max_ms").kind is Kind.DIAGNOSTIC
    assert not cat.declares("tps") and cat.better("tps") is Better.NEUTRAL


def test_a_claims_figure_is_better_on_the_side_its_operator_wants():
    def figure(text):
        claim = parse_claim(text)
        return claim_figure(claim.key, claim.form)
    assert figure("a@max: tps > 1.1 * b@max: tps").better is Better.HIGHER
    assert figure("a: statements.lock.mean_ms <= b: statements.lock.mean_ms").better is Better.LOWER
    assert figure("a: failed == 0").better is Better.NEUTRAL and figure("a: failed == 0").unit == ""
    assert figure("a: tps > b: tps").kind is Kind.HEADLINE and figure("a: tps > b: tps").unit == "×"
    assert figure("a: tps > b: tps").pattern == "a: tps > b: tps"
    assert not claim_figure("a claim stored without its form", None).known


def test_the_history_derives_the_shares_of_transactions_that_failed_retried_ran_late_or_were_skipped():
    from concurbench.results.metrics import per_txn
    assert per_txn({"transactions": 90, "failed": 5, "retries": 12, "skipped": 5}) == {
        "failed_per_txn": 0.05, "retries_per_txn": 0.12, "skipped_per_txn": 0.05}
    assert per_txn({"transactions": 0, "failed": 0, "retries": 0}) == {"failed_per_txn": None, "retries_per_txn": None}
    assert all(CATALOGUE.declares(m) for m in ("failed_per_txn", "retries_per_txn", "late_per_txn", "skipped_per_txn"))


def test_window_figures_are_those_with_an_error_of_their_own():
    from concurbench.check.sides import is_window_metric
    assert [is_window_metric(m) for m in ("tps", "latency.mean_ms", "statements.lock.mean_ms", "waits.CPU")] == [True] * 4
    assert not any(is_window_metric(m) for m in ("latency.p99_ms", "elapsed_s", "failed_per_txn"))
