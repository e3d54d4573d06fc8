"""compare: two hand-built run directories, paired metric by metric, gated, and rendered."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from concurbench.cli.compare import compare
from concurbench.errors import ConfigError
from concurbench.figures import Better
from concurbench.report.compare import Thresholds, compare_runs

HIGHER, LOWER, NEUTRAL = Better.HIGHER, Better.LOWER, Better.NEUTRAL
from concurbench.results.catalogue import CATALOGUE
from concurbench.report.compare_render import junit, markdown, terminal, to_json
from concurbench.results import store
from concurbench.results.migrate import migrate
from concurbench.results.model import FORMAT_VERSION, Run

SHA = "a" * 64


def metrics(tps: float, *, clients: int = 8, transactions: int | None = None, failed: int = 0) -> dict:
    """Pool metrics as pool_metrics writes them, latencies consistent with the throughput."""
    mean = clients * 1000 / tps
    txns = transactions if transactions is not None else int(tps * 2)
    return {"sessions": clients, "transactions": txns, "tps": tps, "failed": failed, "retries": 0,
            "errors": {"deadlock": 0, "serialization": 0, "lock_not_available": 0, "connection": 0, "other": 0},
            "latency": {"mean_ms": round(mean, 4), "p50_ms": round(mean * 0.8, 4), "p95_ms": round(mean * 2.5, 4),
                        "p99_ms": round(mean * 4, 4), "max_ms": round(mean * 9, 4)},
            "statements": {"lock": {"count": txns, "mean_ms": round(mean * 0.6, 4), "p50_ms": round(mean * 0.5, 4),
                                    "p95_ms": round(mean * 1.5, 4), "p99_ms": round(mean * 2, 4),
                                    "max_ms": round(mean * 5, 4)},
                           "update": {"count": txns, "mean_ms": round(mean * 0.3, 4), "p50_ms": round(mean * 0.25, 4),
                                      "p95_ms": round(mean * 0.8, 4), "p99_ms": round(mean, 4),
                                      "max_ms": round(mean * 3, 4)}},
            "statements_executed": txns * 2, "error_messages": {}}


def result(variant: str, tps: float, repeat: int = 1, *, point=None, server: str = "18.6", group: str = "locks",
           elapsed: float = 2.0, status: str = "ok", transactions: int | None = None) -> dict:
    return {"variant": variant, "group": group, "point": point, "clients": {"lockers": 8}, "server": server,
            "status": status, "elapsed_s": elapsed, "repeat": repeat, "started": 0.0, "worker_cpu_s": [0.5],
            "worker_wall_s": [2.0], "messages": [], "sampler_errors": [], "background": [], "probes": {},
            "samplers": {"wal": {"bytes": int(tps * 2 * 300), "records": 100, "fpi": 0},
                         "wait_events": {"samples": 20, "share": {"Lock:tuple": 0.4, "CPU": 0.1}}},
            "pools": {"lockers": {"measure": True, "clients": 8, "metrics": metrics(tps, transactions=transactions)},
                      "observer": {"measure": False, "clients": 1, "metrics": metrics(50.0, clients=1)}}}


def runs(variant: str, tps_values, **kwargs) -> list[dict]:
    return [result(variant, tps, i + 1, **kwargs) for i, tps in enumerate(tps_values)]


def write_run(path: Path, results: list[dict], *, scenario: str = "row-lock", sha: str = SHA, quick: bool = True,
              parameters: dict | None = None, format_version: int = 1, status: str = "ok",
              servers: list[str] | None = None, differences: list[dict] | None = None) -> Path:
    path.mkdir(parents=True)
    servers = servers or sorted({r["server"] for r in results})
    manifest = {"format_version": format_version, "harness": {"name": "concurbench", "version": "0.1.0"},
                "status": status, "error": None,
                "scenario": {"name": scenario, "title": "Row locks", "file": f"/x/{scenario}.yaml", "sha256": sha,
                             "quick": quick, "parameters": parameters or {"accounts": 1000}, "engine": "postgres",
                             "variants": sorted({r["variant"] for r in results}), "seed": 1, "baselines": {}},
                "server": {"version_short": servers[0]},
                "servers": [{"version_short": s, **({"differences": differences} if differences else {})}
                            for s in servers],
                "target": "embedded", "host": {"hostname": "vm", "cpu_count": 2}, "processes": 2}
    summary = {"format_version": format_version, "results": results, "published": [], "claims": []}
    if format_version == 1:  # written in format 1, as the results above are shaped
        (path / "manifest.json").write_text(json.dumps(manifest))
        (path / "summary.json").write_text(json.dumps(summary))
    else:  # the same run as the current format writes it
        store.write_run(Run.from_dicts(*migrate(manifest, summary, 1)), path)
    return path


def pair(tmp_path, base_results, cont_results, *, base_kwargs=None, cont_kwargs=None):
    return (write_run(tmp_path / "base", base_results, **(base_kwargs or {})),
            write_run(tmp_path / "cont", cont_results, **(cont_kwargs or {})))


def row(comparison, metric: str, variant: str = "for_update"):
    found = [r for r in comparison.rows if r.metric == metric and r.variant == variant]
    assert len(found) == 1, [(r.variant, r.metric) for r in comparison.rows]
    return found[0]


# -- the statistics and the gate ---------------------------------------------------------------

def test_a_real_20_percent_drop_over_3_repeats_is_a_significant_regression(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000, 1021, 982]), runs("for_update", [801, 818, 786]))
    c = compare_runs(base, cont, fail_above=10)
    tps = row(c, "tps")
    assert tps.baseline.n == tps.contender.n == 3
    assert tps.pct == pytest.approx(-20, abs=0.5)
    assert tps.direction == HIGHER and tps.verdict == "worse"
    assert tps.significant is True and tps.p_value < 0.01
    assert tps.regression and tps.label == "regression" and tps.threshold == 10
    p99 = row(c, "latency.p99_ms")  # latency rose by a quarter: worse too
    assert p99.pct == pytest.approx(25, abs=1) and p99.regression
    assert c.summary.regressions == len(c.regressions) >= 2
    assert c.summary.untested_regressions == 0
    assert c.warnings == []
    assert compare_runs(base, cont, fail_above=30).summary.regressions == 0  # under the threshold
    ungated = compare_runs(base, cont)
    assert ungated.summary.regressions == 0 and not ungated.summary.gated
    assert row(ungated, "tps").verdict == "worse"


def test_noise_is_not_a_regression_even_with_a_12_percent_lower_mean(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000, 1070, 930, 1050, 950]),
                      runs("for_update", [1060, 600, 980]))
    c = compare_runs(base, cont, fail_above=10)
    tps = row(c, "tps")
    assert tps.pct == pytest.approx(-12, abs=0.5)
    assert tps.verdict == "worse" and tps.significant is False and tps.p_value > 0.05
    assert not tps.regression and tps.label == "within noise"
    assert c.summary.regressions == 0 and c.summary.within_noise >= 1
    # the same means, 5 to 8% spread on each side
    (tmp_path / "b").mkdir()
    base, cont = pair(tmp_path / "b", runs("for_update", [1000, 940, 1065]), runs("for_update", [1060, 1000, 945]))
    c = compare_runs(base, cont, fail_above=1)
    assert c.summary.regressions == 0
    assert all(r.significant is False for r in c.rows if r.metric == "tps")


def test_an_improvement_is_better_and_never_fails(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000, 1021, 982]), runs("for_update", [1200, 1225, 1180]))
    c = compare_runs(base, cont, fail_above=5)
    tps, mean = row(c, "tps"), row(c, "latency.mean_ms")
    assert tps.verdict == "better" and tps.significant and not tps.regression and tps.label == "better"
    # latency is better lower: it fell, so it is an improvement too
    assert mean.direction == LOWER and mean.pct < -10 and mean.verdict == "better" and not mean.regression
    assert c.summary.regressions == 0 and c.summary.improvements >= 2


def test_the_catalogue_says_which_way_is_better():
    assert CATALOGUE.better("tps") == HIGHER
    for name in ("latency.p99_ms", "statements.lock.mean_ms", "elapsed_s", "failed", "retries", "errors.deadlock",
                 "wal.bytes_per_txn", "failed_per_txn", "database.deadlocks", "mssql_lock_waits.deadlocks_total._total"):
        assert CATALOGUE.better(name) == LOWER, name
    # a rate is not better higher for its name: deadlocks per second are better lower, other counters neutral
    assert CATALOGUE.better("mssql_lock_waits.deadlocks_per_s_mean._total") == LOWER
    for name in ("transactions", "waits.Lock:tuple", "statements.lock.count", "wal.bytes", "sessions",
                 "rows_per_s", "mssql_counters.batch_requests_per_s_mean"):
        assert CATALOGUE.better(name) == NEUTRAL, name


def test_latency_rising_alone_is_the_regression(tmp_path):
    base = [result("for_update", 1000, i + 1) for i in range(3)]
    cont = [result("for_update", 1000, i + 1) for i in range(3)]
    for r, p99 in zip(cont, (48.0, 49.5, 47.0)):  # base p99 is 8 * 1000 / 1000 * 4 = 32 ms
        r["pools"]["lockers"]["metrics"]["latency"]["p99_ms"] = p99
    for r, p99 in zip(base, (32.0, 31.0, 33.0)):
        r["pools"]["lockers"]["metrics"]["latency"]["p99_ms"] = p99
    c = compare_runs(*pair(tmp_path, base, cont), fail_above=10)
    assert [r.metric for r in c.regressions] == ["latency.p99_ms"]
    assert row(c, "latency.p99_ms").pct == pytest.approx(50, abs=1)
    assert row(c, "tps").verdict == "same" and row(c, "tps").significant is False


def test_single_runs_are_untested_and_a_drop_beyond_the_threshold_counts(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000]), runs("for_update", [800]))
    c = compare_runs(base, cont, fail_above=10)
    tps = row(c, "tps")
    assert tps.significant is None and tps.p_value is None
    assert tps.regression and tps.label == "regression (untested)"
    assert c.summary.regressions >= 1 and c.summary.untested_regressions == c.summary.regressions
    md = markdown(c)
    assert "regression (untested)" in md and "use --repeat 3 or more for a significance test" in md
    # one side with repeats, the other without: still untested
    (tmp_path / "b").mkdir()
    base, cont = pair(tmp_path / "b", runs("for_update", [1000, 1010, 990]), runs("for_update", [800]))
    assert row(compare_runs(base, cont, fail_above=10), "tps").label == "regression (untested)"
    # a small single-run move stays under the threshold
    (tmp_path / "c").mkdir()
    base, cont = pair(tmp_path / "c", runs("for_update", [1000]), runs("for_update", [960]))
    assert compare_runs(base, cont, fail_above=10).summary.regressions == 0


def test_per_metric_thresholds_first_pattern_wins_and_the_overall_value_covers_the_rest(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000, 1021, 982]), runs("for_update", [801, 818, 786]))
    c = compare_runs(base, cont, fail_above={"tps": 25, "latency.p9*": 30, "*": 10})
    assert not row(c, "tps").regression and row(c, "tps").threshold == 25
    assert not row(c, "latency.p99_ms").regression and row(c, "latency.p99_ms").threshold == 30
    assert row(c, "latency.mean_ms").regression and row(c, "latency.mean_ms").threshold == 10
    only = compare_runs(base, cont, fail_above={"tps": 15})
    assert [r.metric for r in only.regressions] == ["tps"]
    assert row(only, "latency.mean_ms").threshold is None


def test_thresholds_parse_command_line_values():
    t = Thresholds.parse(["10", "tps=5", "latency.p99_ms=20%"])
    assert t.overall == 10 and t.for_metric("tps") == 5 and t.for_metric("latency.p99_ms") == 20
    assert t.for_metric("latency.p50_ms") == 10
    assert not Thresholds.parse([])
    for bad in (["abc"], ["tps="], ["=5"], ["-3"], ["tps=x"], ["10", "20"], ["nan"]):
        with pytest.raises(ConfigError, match="--fail-above"):
            Thresholds.parse(bad)


def test_a_gate_pattern_adds_its_metrics_and_a_metric_pattern_replaces_the_defaults(tmp_path):
    base = runs("for_update", [1000, 1000, 1000])
    cont = runs("for_update", [1000, 1000, 1000])
    for r in cont:
        r["pools"]["lockers"]["metrics"]["errors"]["deadlock"] = 3
    c = compare_runs(*pair(tmp_path, base, cont), fail_above={"errors.deadlock": 0})
    dl = row(c, "errors.deadlock")
    assert dl.pct is None and dl.regression  # from zero: beyond any threshold
    c = compare_runs(tmp_path / "base", tmp_path / "cont", metrics=["statements.*.p95_ms", "wal.*"])
    assert [r.metric for r in c.rows] == ["statements.lock.p95_ms", "statements.update.p95_ms", "wal.bytes",
                                          "wal.bytes_per_txn", "wal.records", "wal.fpi"]
    assert row(c, "wal.bytes").direction == NEUTRAL
    with pytest.raises(ConfigError, match=r"--metric latency\.p99: .*did you mean latency\.p99_ms"):
        compare_runs(tmp_path / "base", tmp_path / "cont", metrics=["latency.p99"])
    with pytest.raises(ConfigError, match="--fail-above lat.p99_ms"):
        compare_runs(tmp_path / "base", tmp_path / "cont", fail_above={"lat.p99_ms": 5})


def test_elapsed_is_compared_for_fixed_count_variants_only(tmp_path):
    base = runs("fixed", [1000, 990], elapsed=3.0, transactions=3000) + runs("timed", [1000, 990])
    cont = runs("fixed", [900, 910], elapsed=3.3, transactions=3000) + runs("timed", [1000, 1005])
    c = compare_runs(*pair(tmp_path, base, cont))
    assert "elapsed_s" in [r.metric for r in c.rows if r.variant == "fixed"]
    assert "elapsed_s" not in [r.metric for r in c.rows if r.variant == "timed"]
    assert row(c, "elapsed_s", "fixed").direction == LOWER
    assert row(c, "elapsed_s", "fixed").verdict == "worse"
    # the runner's own flag decides when it is there
    for r in base + cont:
        r["fixed"] = r["variant"] == "timed"
    (tmp_path / "f").mkdir()
    c = compare_runs(*pair(tmp_path / "f", base, cont))
    assert "elapsed_s" in [r.metric for r in c.rows if r.variant == "timed"]
    assert "elapsed_s" not in [r.metric for r in c.rows if r.variant == "fixed"]


def test_pairs_by_variant_point_and_measured_pool_and_warns_about_the_unpaired(tmp_path):
    base = runs("for_update", [1000, 1010], point=4) + runs("for_update", [3000, 3010], point=32) + \
        runs("advisory", [1500, 1490], point=4)
    cont = runs("for_update", [1005, 1012], point=4) + runs("for_update", [2990, 3000], point=32) + \
        runs("gone", [10, 11])
    c = compare_runs(*pair(tmp_path, base, cont))
    keys = {(r.variant, r.point, r.pool) for r in c.rows}
    assert keys == {("for_update", 4, "lockers"), ("for_update", 32, "lockers")}  # observer is not measured
    assert any("only in the baseline" in w and "advisory@4" in w for w in c.warnings)
    assert any("only in the contender" in w and "gone" in w for w in c.warnings)


# -- refusals and warnings ---------------------------------------------------------------------------

def test_different_scenarios_are_refused_naming_both_dirs_unless_forced(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000]), runs("for_update", [1000]),
                      cont_kwargs={"scenario": "other"})
    with pytest.raises(ConfigError) as info:
        compare_runs(base, cont)
    text = info.value.message
    assert str(base) in text and str(cont) in text and "row-lock and other" in text and "--force" in text
    assert "\n" not in text
    forced = compare_runs(base, cont, force=True)
    assert forced.rows and any("different scenarios" in w for w in forced.warnings)


def test_different_format_versions_are_refused_unless_forced(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000]), runs("for_update", [1000]),
                      cont_kwargs={"format_version": 2})
    with pytest.raises(ConfigError, match=rf"different run-directory format versions \(1 and {FORMAT_VERSION}\)"):
        compare_runs(base, cont)
    assert compare_runs(base, cont, force=True).rows


def test_a_format_newer_than_this_concurbench_is_refused_with_both_versions(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000]), runs("for_update", [1000]),
                      cont_kwargs={"format_version": FORMAT_VERSION})
    summary = json.loads((cont / "summary.json").read_text())
    (cont / "summary.json").write_text(json.dumps({**summary, "format_version": 999}))
    manifest = json.loads((cont / "manifest.json").read_text())
    (cont / "manifest.json").write_text(json.dumps({**manifest, "format_version": 999}))
    result = CliRunner().invoke(compare, [str(base), str(cont)])
    assert isinstance(result.exception, ConfigError) and result.exception.exit_code == 2
    assert result.exception.message == (f"{cont / 'manifest.json'}: format version 999 is newer than this "
                                        f"concurbench reads ({FORMAT_VERSION}); upgrade concurbench")


def test_warnings_for_a_changed_scenario_quick_parameters_and_status(tmp_path):
    cont_results = runs("for_update", [1000, 990])
    cont_results[1]["status"] = "interrupted"
    base, cont = pair(tmp_path, runs("for_update", [1000, 990]), cont_results,
                      cont_kwargs={"sha": "b" * 64, "quick": False, "parameters": {"accounts": 5000},
                                   "status": "interrupted"})
    warnings = compare_runs(base, cont).warnings
    text = "\n".join(warnings)
    assert "scenario file changed" in text and "aaaaaaaaaaaa" in text
    assert "only the baseline ran with --quick" in text
    assert "accounts 1000 → 5000" in text
    assert "contender run's status is interrupted" in text
    assert "for_update interrupted" in text


def test_a_server_matrix_is_paired_by_server_and_must_match(tmp_path):
    both = runs("for_update", [1000, 1010], server="17.6") + runs("for_update", [1200, 1190], server="18.6")
    slower = runs("for_update", [1000, 1010], server="17.6") + runs("for_update", [900, 890], server="18.6")
    c = compare_runs(*pair(tmp_path, both, slower), fail_above=10)
    assert c.by_server
    assert {r.server for r in c.regressions} == {"18.6"}
    (tmp_path / "m").mkdir()
    other = runs("for_update", [1000, 1010], server="16.10") + runs("for_update", [900, 890], server="18.6")
    base, cont = pair(tmp_path / "m", both, other)
    with pytest.raises(ConfigError, match="same server matrix"):
        compare_runs(base, cont)
    forced = compare_runs(base, cont, force=True)
    assert {r.server for r in forced.rows} == {"18.6"}
    # one server on each side, different versions: compared as a version upgrade, not keyed
    (tmp_path / "u").mkdir()
    c = compare_runs(*pair(tmp_path / "u", runs("for_update", [1000]), runs("for_update", [1000], server="17.6")))
    assert not c.by_server and c.rows[0].server is None


def test_not_a_run_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    base = write_run(tmp_path / "base", runs("for_update", [1000]))
    with pytest.raises(ConfigError, match="not a run directory"):
        compare_runs(base, tmp_path / "empty")


# -- renderers ---------------------------------------------------------------------------------------

@pytest.fixture
def regressed(tmp_path):
    base, cont = pair(tmp_path, runs("for_update", [1000, 1021, 982]) + runs("advisory", [1500, 1510, 1490]),
                      runs("for_update", [801, 818, 786]) + runs("advisory", [1700, 1690, 1712]))
    return compare_runs(base, cont, fail_above=10)


def test_junit_xml_has_a_testcase_per_metric_and_a_failure_per_regression(regressed):
    root = ET.fromstring(junit(regressed))
    assert root.tag == "testsuite" and root.get("name") == "concurbench-compare"
    cases = root.findall("testcase")
    assert int(root.get("tests")) == len(cases) == len(regressed.rows)
    failures = [c for c in cases if c.find("failure") is not None]
    assert int(root.get("failures")) == len(failures) == regressed.summary.regressions > 0
    assert {c.get("classname") for c in failures} == {"row-lock.for_update/lockers"}
    tps = next(c for c in failures if c.get("name") == "tps")
    assert "-19.9%" in tps.find("failure").get("message") and "threshold 10%" in tps.find("failure").get("message")


def test_markdown_has_a_table_per_variant_and_a_regressions_section(regressed):
    md = markdown(regressed)
    assert md.startswith("## concurbench compare: row-lock")
    assert "- Baseline: base, row-lock (quick), server 18.6, 3 repeats" in md
    assert "### locks: for_update (pool lockers)" in md and "### locks: advisory (pool lockers)" in md
    assert "| Metric | Baseline | Contender | Change | Significance |" in md
    assert "| tps | 1,001 ± " in md and "**-19.9% regression**" in md
    section = md.split("**Regressions**", 1)[1]
    assert "regressions beyond the thresholds" in section
    assert "- for_update/lockers: tps 1,001 → 801.7" in section
    assert "advisory" not in section.split("**Warnings**")[0]


def test_terminal_and_json(regressed):
    console = Console(record=True, width=200)
    terminal(regressed, console)
    text = console.export_text()
    assert "Compare: row-lock" in text and "baseline: base" in text and "3 repeats" in text
    assert "green better, red worse, dim not significant" in text
    assert "regression" in text and "regressions beyond the thresholds" in text
    data = json.loads(to_json(regressed))
    assert data["summary"]["regressions"] == regressed.summary.regressions
    assert data["rows"][0]["baseline"]["n"] == 3 and "ci95" in data["rows"][0]["baseline"]


# -- the command ------------------------------------------------------------------------------------

@pytest.fixture
def group():
    @click.group()
    def cli():
        pass

    cli.add_command(compare)
    return cli


def test_command_exit_codes_formats_and_junit(regressed, group, tmp_path):
    base, cont = str(regressed.baseline.path), str(regressed.contender.path)
    runner = CliRunner()
    failed = runner.invoke(group, ["compare", base, cont, "--fail-above", "10", "--format", "md",
                                   "--junit", str(tmp_path / "junit.xml")])
    assert failed.exit_code == 1, failed.output
    assert "**Regressions**" in failed.output
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == str(regressed.summary.regressions)
    passed = runner.invoke(group, ["compare", base, cont, "--fail-above", "10", "--fail-above", "*_ms=50",
                                   "--fail-above", "tps=30", "--format", "json"])
    assert passed.exit_code == 0, passed.output
    assert json.loads(passed.output)["summary"]["regressions"] == 0
    plain = runner.invoke(group, ["compare", base, cont])
    assert plain.exit_code == 0 and "nothing gated" in plain.output


def test_command_usage_errors_and_refusals(regressed, group, tmp_path):
    base, cont = str(regressed.baseline.path), str(regressed.contender.path)
    runner = CliRunner()
    bad = runner.invoke(group, ["compare", base, cont, "--fail-above", "tps=lots"])
    assert bad.exit_code == 2 and "Invalid value for '--fail-above'" in bad.output and "Traceback" not in bad.output
    missing = runner.invoke(group, ["compare", base, str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
    other = write_run(tmp_path / "other", runs("for_update", [1000]), scenario="dead-tuples")
    refused = runner.invoke(group, ["compare", base, str(other)])
    assert isinstance(refused.exception, ConfigError) and refused.exception.exit_code == 2
    forced = runner.invoke(group, ["compare", base, str(other), "--force"])
    assert forced.exit_code == 0, forced.output


def test_two_servers_of_one_matrix_run(tmp_path, group):
    """--servers OLD,NEW: one run's servers as the two sides (their variants ran interleaved)."""
    results = []
    for i, (old, new) in enumerate(zip([1000, 1010, 990], [800, 805, 795])):
        results += [result("for_update", old, i + 1, server="16.4"), result("for_update", new, i + 1, server="17.2")]
    run = write_run(tmp_path / "matrix", results)
    comparison = compare_runs(run, run, fail_above=10, baseline_server="16", contender_server="17")
    tps = row(comparison, "tps")
    assert tps.baseline.mean == pytest.approx(1000) and tps.contender.mean == pytest.approx(800)
    assert tps.regression and tps.significant
    assert list(comparison.baseline.servers) == ["16.4"] and list(comparison.contender.servers) == ["17.2"]
    runner = CliRunner()
    out = runner.invoke(group, ["compare", str(run), "--servers", "16,17", "--fail-above", "10"])
    assert out.exit_code == 1, out.output
    same = runner.invoke(group, ["compare", str(run), "--servers", "16,16.4"])
    assert same.exit_code == 0, same.output
    wrong = runner.invoke(group, ["compare", str(run), "--servers", "15,17"])
    assert isinstance(wrong.exception, ConfigError) and "no server matches 15" in wrong.exception.message
    alone = runner.invoke(group, ["compare", str(run)])
    assert isinstance(alone.exception, ConfigError) and "--servers" in alone.exception.message


def test_the_gate_corrects_for_the_number_of_gated_metrics(tmp_path):
    """A drop that is significant for one metric alone (p ~ 0.03) is not a regression when many metrics are
    gated at once: at 5% each, some would move by chance (Holm's correction over every gated metric)."""
    base, cont = pair(tmp_path, runs("a", [1000, 1020, 980]), runs("a", [930, 945, 915]))
    alone = compare_runs(base, cont, fail_above={"tps": 3})
    (tps,) = [r for r in alone.rows if r.metric == "tps"]
    assert 0.01 < tps.p_value < 0.05 and tps.p_adjusted == tps.p_value and tps.regression
    many = compare_runs(base, cont, fail_above=3)  # every default metric is gated: tps, latencies, statements
    (tps,) = [r for r in many.rows if r.metric == "tps"]
    gated = [r for r in many.rows if r.threshold is not None]
    assert len(gated) > 5 and tps.p_adjusted > tps.p_value
    assert not tps.regression and tps.label == "within noise"


def test_a_run_on_a_server_as_it_is_is_named_with_its_differences(tmp_path):
    """A contender that ran `--server-settings as-is` (a user's own server) against a baseline on the scenario's
    settings: the comparison says which settings were not the scenario's."""
    found = [{"setting": "shared_buffers", "wanted": "256MB", "found": "128MB", "why": "changes only with a restart"},
             {"setting": "work_mem", "wanted": "64MB", "found": None, "why": "the role may not read it"}]
    base, cont = pair(tmp_path, runs("for_update", [1000, 1010]), runs("for_update", [990, 1005]),
                      cont_kwargs={"differences": found})
    warnings = compare_runs(base, cont).warnings
    assert warnings == ["the contender ran on 18.6 with settings other than the scenario's (--server-settings "
                        "as-is): shared_buffers 128MB, the scenario wants 256MB; work_mem unknown, the scenario "
                        "wants 64MB"]
    assert compare_runs(base, base).warnings == []
