"""The run model: written and read back equal, older formats migrated, unknown ones refused, broken
files named (no server needed)."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from concurbench.cli.main import main
from concurbench.errors import ConfigError
from concurbench.scenario.claims import parse_claim
from concurbench.results.model import (FORMAT_VERSION, Cause, ClaimEstimate, ClaimVerdict, PoolResult, PublishedFigure, Run,
                                       ScenarioInfo, ServerInfo, Source, VariantRun)
from concurbench.results.store import load_run, write_run
from concurbench.report.render import markdown
from concurbench.report.tables import build_report
from concurbench.results.metric import Metric, Scope
from concurbench.samplers.base import SamplerFailure
from figured import figured

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
V1_RUN = FIXTURES / "runs" / "temp-table-churn"  # format 1, written by `run --quick`
V1_OLDER = Path(__file__).resolve().parent / "fixtures" / "run_rowlock"  # format 1 before repeats and servers


def metrics(tps: float, transactions: int) -> dict:
    return {"sessions": 4, "transactions": transactions, "tps": tps, "failed": 0, "retries": 0,
            "errors": {"deadlock": 0, "serialization": 0, "lock_not_available": 0, "connection": 0, "other": 0},
            "latency": {"mean_ms": 1.5, "p50_ms": 1.25, "p95_ms": 4.0, "p99_ms": None, "max_ms": 9.5},
            "statements": {"lock": {"count": transactions, "mean_ms": 0.75, "p50_ms": 0.5, "p95_ms": 2.0,
                                    "p99_ms": None, "max_ms": 4.0}},
            "statements_executed": transactions, "error_messages": {"40P01: deadlock detected": 2}}


def variant_run(variant: str, repeat: int, *, point=8, server="17.2", status="ok", **extra) -> VariantRun:
    waits = [{"t_s": round(0.1 * i, 3), "wait": w, "sessions": n} for i in range(1, 4)
             for w, n in (("Lock:tuple", i + repeat), ("CPU", 2))]
    counters = [{"t_s": 1.0 * i, "lock_requests_per_s": 100.5 * i, "version_store_kb": None} for i in range(1, 3)]
    return figured(VariantRun(
        variant, "locks", point, server=server, repeat=repeat, status=status, elapsed_s=2.0, started=1795325353.25,
        warmup_s=0.5, fixed=False, worker_cpu_s=[0.5, 0.25], worker_wall_s=[2.0, 2.0],
        messages=["1 of 2 worker processes sent no results"] if status == "incomplete" else [],
        pools={"lockers": PoolResult("lockers", True, point,
                                     {"name": "lockers", "txn": {"hist": "HISTFAAAA", "count": 200}}),
               "noise": PoolResult("noise", False, 1, None, unavailable={"latency.p99_ms": "too few transactions"})},
        samplers={"wait_events": {"samples": 3, "share": {"Lock:tuple": 0.75, "CPU": 0.25}},
                  "wal": {"bytes": 60000, "records": 300, "fpi": 1}},
        sampler_errors=[], background=[{"kind": "hold_transaction", "pid": 42, "released_at_s": None}],
        probes={"sizes": {"before": [{"rel": "t", "bytes": 8192}], "after": [{"rel": "t", "bytes": 16384}]}},
        samples={"wait_events": waits, "mssql_counters": counters}, **extra),
        {"lockers": metrics(100.0 * repeat, 200 * repeat), "noise": metrics(5.0, 10)})


def full_run(path: Path) -> Run:
    return Run(
        ScenarioInfo("row-lock", "Row locks", "/x/row-lock.yaml", "a" * 64, True, {"accounts": 1000}, "postgres",
                     ["for_update", "advisory"], 7, {"locks": "for_update"},
                     Source("An article", "https://example.com/a", "Someone", "PostgreSQL 12", "4 cores")),
        status="interrupted", error="interrupted: the run was stopped",
        servers=[ServerInfo("PostgreSQL 17.2 on x86_64", 170002, "17.2", {"max_connections": "150"}, "binaries",
                            "postgresql://postgres@127.0.0.1:5432/concurbench"),
                 ServerInfo("Microsoft SQL Server 2022", 16000041, "2022-CU18", {}, "docker", "mssql://sa@127.0.0.1",
                            extra={"edition": "Developer Edition", "engine_edition": 3})],
        target="binaries", host={"hostname": "vm", "cpu_count": 2}, processes=2, repeat=2,
        started="2026-11-22T05:29:12.639537+00:00", ended="2026-11-22T05:29:23.904877+00:00",
        variant_runs=[variant_run("for_update", 1), variant_run("advisory", 1, settings={"work_mem": "4MB"}),
                      variant_run("for_update", 2, status="incomplete"),
                      variant_run("advisory", 2, status="interrupted", unavailable={"io.reads": "needs 16"}),
                      variant_run("alone", 1, point=None, server="2022-CU18",
                                  sampler_failures=[SamplerFailure("mssql_waits", "no reading")])],
        published=[PublishedFigure("advisory", "tps", 3446.0, "tps", 40, None, "10 lockers", "12")],
        claims=[ClaimVerdict("advisory: tps > for_update: tps", "pass", "faster", "17.2", ClaimEstimate(200.0),
                             ClaimEstimate(150.0)),
                ClaimVerdict("a: tps > b: tps", "inconclusive", "", "17.2",
                             ClaimEstimate(101.0, 95.0, 107.0, 5, "repeats"),
                             ClaimEstimate(100.0, 97.5, 102.5, 5, "repeats"), "the intervals overlap"),
                ClaimVerdict("c: tps > 1", "fail", "", "17.2", ClaimEstimate(0.5), ClaimEstimate(1.0)),
                ClaimVerdict("d: io.reads > 0", "not evaluated", "", "17.2", None, None, "unavailable: needs 16")],
        skipped={"snapshot": "needs SQL Server"}, path=path)


def test_a_run_written_and_loaded_is_equal_and_writing_changes_nothing(tmp_path):
    run = full_run(tmp_path)
    before = copy.deepcopy(run)
    write_run(run)
    assert run == before, "the store changed the run it wrote"
    loaded = load_run(tmp_path)
    assert loaded == run
    assert loaded.path == tmp_path and loaded.format_version == FORMAT_VERSION
    for name in ("manifest.json", "summary.json"):
        assert json.loads((tmp_path / name).read_text())["format_version"] == FORMAT_VERSION == 3
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == ["mssql_counters.csv", "wait_events.csv"]
    header = (tmp_path / "samples" / "wait_events.csv").read_text().splitlines()[0]
    assert header == "variant,point,server,repeat,t_s,wait,sessions"


def test_format_3_keeps_each_figure_as_a_record_and_a_sampler_failure_typed(tmp_path):
    run = full_run(tmp_path)
    write_run(run)
    stored = json.loads((tmp_path / "summary.json").read_text())["results"]
    assert stored[4]["sampler_failures"] == [{"sampler": "mssql_waits", "reason": "no reading"}]
    assert "mssql_waits" not in stored[4]["samplers"]
    assert {"name": "tps", "value": 100.0, "unit": "1/s", "scope": "pool", "variant": "for_update", "pool": "lockers",
            "clients": 8, "server": "17.2", "repeat": 1} in stored[0]["metrics"]
    loaded = load_run(tmp_path)
    assert [r.metrics for r in loaded.variant_runs] == [r.metrics for r in run.variant_runs]
    first = {(m.name, m.pool): m for m in loaded.variant_runs[0].metrics}
    assert first[("wal.bytes_per_txn", "")] == Metric("wal.bytes_per_txn", 285.7, "B", Scope.SAMPLER, "for_update", "",
                                                    9, "17.2", 1)
    assert first[("waits.Lock:tuple", "")].scope is Scope.SAMPLER and first[("elapsed_s", "")].scope is Scope.RUN
    assert first[("probes.sizes.after.bytes", "")].scope is Scope.PROBE
    assert first[("latency.mean_ms", "noise")].unit == "ms" and first[("latency.mean_ms", "noise")].clients == 1
    assert loaded.variant_runs[4].sampler_failures == [SamplerFailure("mssql_waits", "no reading")]
    assert "alone: sampler mssql_waits gave no summary: no reading" in markdown(build_report(loaded))


def test_a_claims_figure_is_a_record_named_by_its_key():
    form = parse_claim("a: tps > 1.1 * b: tps").form
    ratio = ClaimVerdict("a:tps >  b: tps*1.1", "pass", server="17.2", left=ClaimEstimate(200.0),
                         ratio=ClaimEstimate(1.8, 1.5, 2.1), form=form)
    assert ratio.metric == Metric("a: tps > 1.1 * b: tps", 1.8, "×", Scope.CLAIM, "claims", "", 0, "17.2", 0)
    left = ClaimVerdict("c: tps > 1", "fail", server="17.2", left=ClaimEstimate(0.5), claim_key="c-fast")
    assert (left.metric.name, left.metric.value, left.metric.unit) == ("c-fast", 0.5, "")
    assert ClaimVerdict("d: io.reads > 0", "not evaluated").metric is None


@pytest.mark.parametrize("edit, message", [
    (lambda r: r[0]["metrics"][2].pop("scope"), "results[0].metrics[2]: not a Metric record (KeyError: 'scope')"),
    (lambda r: r[1]["metrics"][0].update(scope="planet"), "results[1].metrics[0]: not a Metric record (ValueError:"),
    (lambda r: r[4].update(sampler_failures={"x": 1}), "results[4].sampler_failures: expected a list, got dict"),
])
def test_a_malformed_record_names_the_file_and_the_place(tmp_path, edit, message):
    write_run(full_run(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    edit(summary["results"])
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError) as info:
        load_run(tmp_path)
    assert f"summary.json: {message}" in info.value.message


def test_a_format_2_sampler_error_is_read_as_a_typed_failure(tmp_path):
    write_run(full_run(tmp_path))
    for name in ("manifest.json", "summary.json"):
        data = json.loads((tmp_path / name).read_text())
        if name == "summary.json":
            for r in data["results"]:
                r.pop("metrics"), r.pop("sampler_failures", None)
            data["results"][4]["samplers"]["mssql_waits"] = {"error": "no reading"}
        (tmp_path / name).write_text(json.dumps({**data, "format_version": 2}))
    loaded = load_run(tmp_path)
    assert loaded.format_version == 2
    assert loaded.variant_runs[4].sampler_failures == [SamplerFailure("mssql_waits", "no reading")]
    assert "mssql_waits" not in loaded.variant_runs[4].samplers
    assert [r.metrics for r in loaded.variant_runs] == [r.metrics for r in full_run(tmp_path).variant_runs]


def test_variant_run_status_and_claim_verdict_properties(tmp_path):
    run = full_run(tmp_path)
    assert [r.complete for r in run.variant_runs] == [True, True, False, False, True]
    assert [c.passed for c in run.claims] == [True, None, False, None]
    assert run.claims_failed == 1
    assert run.variant_runs[0].clients == {"lockers": 8, "noise": 1}
    assert run.variant_runs[4].label == "alone (2022-CU18)"


def test_format_1_directory_is_migrated(tmp_path):
    run = load_run(V1_RUN)
    assert run.format_version == 1
    assert [s.version_short for s in run.servers] == ["18.6"]
    assert [r.variant for r in run.variant_runs] == ["dynamic", "static", "reuse"]
    assert all(r.server == "18.6" and r.repeat == 1 and r.status == "ok" for r in run.variant_runs)
    assert run.variant_runs[0].clients == {"callers": 50}
    first = run.claims[0]
    assert first.verdict == "pass" and first.left == ClaimEstimate(42000.0) and first.right == ClaimEstimate(30000.0)
    stored = json.loads((V1_RUN / "summary.json").read_text())
    assert len(run.claims) == len(stored["claims"])
    assert [c.passed for c in run.claims] == [c["passed"] for c in stored["claims"]]
    waits = {r.variant: r.samples["wait_events"] for r in run.variant_runs}
    assert {len(rows) for rows in waits.values()} and all(rows for rows in waits.values())
    csv_rows = (V1_RUN / "samples" / "wait_events.csv").read_text().splitlines()[1:]
    assert sum(len(rows) for rows in waits.values()) == len(csv_rows)
    assert waits["dynamic"][0] == {"t_s": 0.071, "wait": "CPU", "sessions": 2}
    # written again in the current format, it reads back the same
    write_run(run, tmp_path)
    assert load_run(tmp_path) == replace(run, format_version=FORMAT_VERSION)


def test_older_format_1_without_server_and_repeat_columns_in_samples(tmp_path):
    run = load_run(V1_OLDER)
    assert run.format_version == 1 and run.repeat == 1
    for_update = [r for r in run.variant_runs if r.variant == "for_update"]
    assert [r.point for r in for_update] == [4, 32]
    assert all(r.samples["wait_events"] for r in run.variant_runs)
    csv_rows = (V1_OLDER / "samples" / "wait_events.csv").read_text().splitlines()[1:]
    assert sum(len(r.samples["wait_events"]) for r in run.variant_runs) == len(csv_rows)


def test_format_1_claims_not_evaluated_and_failed_with_an_error(tmp_path):
    run_dir = _copy(V1_RUN, tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["claims"] = [{"claim": "a: tps > 1", "description": "", "server": "18.6", "passed": None, "left": None,
                          "right": None, "error": "not evaluated: a was not run"},
                         {"claim": "b: tpz > 1", "description": "d", "server": "18.6", "passed": False, "left": None,
                          "right": None, "error": "no value for metric 'tpz'"},
                         {"claim": "c: tps > 0", "passed": True, "left": 0.0, "right": 0}]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    claims = load_run(run_dir).claims
    forms = [parse_claim(c).form for c in ("a: tps > 1", "b: tpz > 1", "c: tps > 0")]
    assert claims == [ClaimVerdict("a: tps > 1", "not evaluated", "", "18.6", None, None, "not evaluated: a was not run",
                                   cause=Cause.NOT_RUN, claim_id=0, form=forms[0]),
                      ClaimVerdict("b: tpz > 1", "fail", "d", "18.6", None, None, "no value for metric 'tpz'",
                                   claim_id=1, form=forms[1]),
                      ClaimVerdict("c: tps > 0", "pass", "", None, ClaimEstimate(0.0), ClaimEstimate(0), claim_id=2,
                                   form=forms[2])]


def _copy(run: Path, tmp: Path) -> Path:
    target = tmp / run.name
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("plots"))
    return target


def _set_version(run_dir: Path, manifest: int, summary: int) -> None:
    for name, version in (("manifest.json", manifest), ("summary.json", summary)):
        data = json.loads((run_dir / name).read_text())
        (run_dir / name).write_text(json.dumps({**data, "format_version": version}))


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["concurbench", *map(str, args)])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err


def test_an_unknown_format_version_is_refused_naming_the_file_and_both_versions(tmp_path, monkeypatch, capsys):
    run_dir = _copy(V1_RUN, tmp_path)
    _set_version(run_dir, 999, 999)
    expected = (f"{run_dir / 'manifest.json'}: format version 999 is newer than this concurbench reads "
                f"({FORMAT_VERSION}); upgrade concurbench")
    with pytest.raises(ConfigError) as info:
        load_run(run_dir)
    assert info.value.message == expected
    code, err = _cli(monkeypatch, capsys, "report", run_dir)
    assert code == 2 and " ".join(err.split()) == f"error: {expected}"
    code, err = _cli(monkeypatch, capsys, "compare", V1_RUN, run_dir)
    assert code == 2 and " ".join(err.split()) == f"error: {expected}"
    _set_version(run_dir, 0, 0)
    with pytest.raises(ConfigError, match=r"manifest.json: format version 0, not one concurbench writes \(this "
                                          r"concurbench reads 1 to 3\)"):
        load_run(run_dir)


def test_files_of_two_format_versions_in_one_directory_are_refused(tmp_path):
    run_dir = _copy(V1_RUN, tmp_path)
    _set_version(run_dir, 1, 2)
    with pytest.raises(ConfigError, match="manifest.json is format version 1 but summary.json is 2"):
        load_run(run_dir)


@pytest.mark.parametrize("name", ["manifest.json", "summary.json"])
def test_a_truncated_file_is_a_config_error_naming_it(tmp_path, monkeypatch, capsys, name):
    run_dir = _copy(V1_RUN, tmp_path)
    text = (run_dir / name).read_text()
    (run_dir / name).write_text(text[: len(text) // 2])
    with pytest.raises(ConfigError, match=f"{run_dir / name}: not valid JSON"):
        load_run(run_dir)
    code, err = _cli(monkeypatch, capsys, "report", run_dir)
    assert code == 2 and f"{run_dir / name}: not valid JSON" in " ".join(err.split())
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["results"][1].pop("pools"), "summary.json: results[1]: lacks pools"),
    (lambda s: s["results"][0].update(status="exploded"), "summary.json: results[0].status: 'exploded' is not one of"),
    (lambda s: s.update(results={}), "summary.json: results: not a list"),
    (lambda s: s["claims"][0].update(passed="maybe", left="x"), "summary.json: claims[0].left.value: expected a number, found 'x'"),
])
def test_a_malformed_summary_names_the_file_and_the_place(tmp_path, edit, message):
    run_dir = _copy(V1_RUN, tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    edit(summary)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError) as info:
        load_run(run_dir)
    assert message in info.value.message and str(run_dir) in info.value.message


def test_not_a_run_directory(tmp_path):
    with pytest.raises(ConfigError, match="no such run directory"):
        load_run(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=r"not a run directory \(no manifest.json\)"):
        load_run(tmp_path)
    (tmp_path / "manifest.json").write_text("[1, 2]")
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(ConfigError, match="a JSON object is expected, found list"):
        load_run(tmp_path)
