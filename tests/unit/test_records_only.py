"""A variant run's figures travel as its records: a run whose figures exist only as records (no sampler summaries,
and in its summary.json no nested pool figures) is compared, judged by a claim, reported (tables and summary.csv)
and added to a history exactly as the same run stored with its figures the older way (nested pool figures and
sampler summaries, formats 1 and 2). Probes keep their rows, which the report shows as rows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from concurbench.check.evaluate import judge_claims
from concurbench.figures import Way
from concurbench.history.records import read_run
from concurbench.report.compare import compare_runs
from concurbench.report.render import markdown
from concurbench.report.tables import build_report
from concurbench.results.model import PoolResult, Run, ScenarioInfo, ServerInfo, VariantRun
from concurbench.results.store import SUMMARY, csv_text, load_run, write_run
from concurbench.scenario.claims import parse_claim
from figured import figured

CLAIM = "a: tps > b: tps"


def older(variant: str, repeat: int, tps: float) -> VariantRun:
    """A variant run with its figures the older way: nested pool figures and sampler summaries."""
    txns = int(tps * 2)
    figures = {"sessions": 4, "transactions": txns, "tps": tps, "failed": 1, "retries": 2,
               "errors": {"deadlock": 1, "serialization": 0},
               "latency": {"mean_ms": 4000 / tps, "p50_ms": 3500 / tps, "p95_ms": 9000 / tps, "p99_ms": 12000 / tps},
               "statements": {"lock": {"count": txns, "mean_ms": 2000 / tps, "p95_ms": 5000 / tps}},
               "statements_executed": txns, "error_messages": {"40P01: deadlock detected": 1}}
    share = {"Lock:tuple": 0.6, "CPU": 0.3, "IO:WalSync": 0.1} if variant == "a" else {"CPU": 0.9, "Lock:tuple": 0.1}
    run = VariantRun(variant, "g", None, server="18.1", repeat=repeat, elapsed_s=2.0,
                     pools={"workers": PoolResult("workers", True, 4)},
                     samplers={"wal": {"bytes": 150 * txns, "records": txns, "fpi": 2},
                               "wait_events": {"samples": 20, "share": share}},
                     probes={"size": {"after": [{"bytes": 8192 * repeat}]}})
    return figured(run, {"workers": figures})


def records_only(run: VariantRun) -> VariantRun:
    """The same variant run with its figures only as records: no sampler summary (its probes' rows stay: the
    report shows them as rows, text and all)."""
    return replace(run, samplers={})


def runs(scale: float = 1.0) -> list[VariantRun]:
    return [older(v, r, tps * scale * (1 + 0.01 * r)) for r in (1, 2, 3) for v, tps in (("a", 1200.0), ("b", 1000.0))]


def stored(path: Path, results: list[VariantRun], strip: bool = False) -> Path:
    """The run written to `path`; `strip`: its summary.json keeps the figures only as records."""
    verdicts = judge_claims([parse_claim(CLAIM)], results)
    run = Run(ScenarioInfo("demo", "Demo", "/x/demo.yaml", "a" * 64, False, {}, "postgres", ["a", "b"],
                           baselines={"g": "b"}),
              servers=[ServerInfo("PostgreSQL 18.1", 180001, "18.1")], target="embedded",
              host={"hostname": "vm", "cpu_count": 2}, processes=2, repeat=3, started="2026-11-29T07:00:00+00:00",
              ended="2026-11-29T07:01:00+00:00", variant_runs=results, claims=verdicts, path=path)
    path.mkdir()
    write_run(run, path)
    if strip:
        summary = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
        for result in summary["results"]:
            for pool in result["pools"].values():
                del pool["metrics"]
        (path / SUMMARY).write_text(json.dumps(summary), encoding="utf-8")
    return path


def test_a_run_of_records_alone_is_judged_reported_compared_and_kept_as_one_with_nested_figures(tmp_path):
    base, contender = runs(), runs(0.8)
    new_base, new_contender = [records_only(r) for r in base], [records_only(r) for r in contender]
    assert all(not r.samplers for r in new_base)

    # judged: the same verdict, on the same estimates
    (old_verdict,), (new_verdict,) = judge_claims([parse_claim(CLAIM)], base), judge_claims([parse_claim(CLAIM)],
                                                                                          new_base)
    assert new_verdict.as_dict() == old_verdict.as_dict() and new_verdict.verdict == "pass"

    old_dir, new_dir = stored(tmp_path / "old", base), stored(tmp_path / "new", new_base, strip=True)
    old_run, new_run = load_run(old_dir), load_run(new_dir)
    assert all(not r.samplers for r in new_run.variant_runs)

    # reported: the tables and summary.csv
    old_md, new_md = markdown(build_report(old_run)), markdown(build_report(new_run))
    assert new_md == old_md
    assert "Lock:tuple 60%" in new_md and "1,224 ± 29.8" in new_md  # top waits and tps made it into the tables
    assert csv_text(new_run) == csv_text(old_run)
    assert "wal.bytes_per_txn" in csv_text(new_run).splitlines()[0]

    # compared: the same rows, contender against baseline
    old_cmp = compare_runs(old_dir, stored(tmp_path / "old-c", contender))
    new_cmp = compare_runs(new_dir, stored(tmp_path / "new-c", [records_only(r) for r in new_contender], strip=True))
    assert new_cmp.rows == old_cmp.rows and new_cmp.warnings == old_cmp.warnings
    assert {(r.metric, r.verdict) for r in new_cmp.rows if r.variant == "a"} >= {("tps", Way.WORSE),
                                                                                 ("latency.mean_ms", Way.WORSE)}

    # kept in a history: the same points
    def points(path: Path) -> list[tuple]:
        return sorted((p.key, p.status, p.mean, p.se, p.values, p.count, p.exposure) for p in read_run(path)[1])

    kept = points(new_dir)
    assert kept == points(old_dir)
    metrics = {key.metric for key, *_ in kept}
    assert {"tps", "wal.bytes_per_txn", "waits.Lock:tuple", "errors.deadlock", "failed_per_txn"} <= metrics
