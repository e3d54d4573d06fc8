"""A real run against the embedded PostgreSQL: counts add up, errors are classified, sessions end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from concurbench.report import render
from concurbench.running.progress_events import Recorder, Tick, VariantDone, VariantStarted
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario
from concurbench.results.metrics import nested

HERE = Path(__file__).parent
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def outcome(server, running_server, tmp_path_factory):
    scenario = load_scenario(HERE / "scenarios" / "hold-and-errors.yaml")
    events, built = Recorder(), []
    provisioner = running_server(server[1])
    original = render.build_report
    with pytest.MonkeyPatch.context() as patch:  # how often the run's tables are built
        patch.setattr(render, "build_report", lambda run: built.append(run.path) or original(run))
        out = Runner(scenario, provisioner, out_dir=tmp_path_factory.mktemp("runs"), progress=events).run()
    return out, events, provisioner, built


def by_variant(outcome, name):
    return next(r for r in outcome[0].results if r.variant == name)


def test_run_completes_and_writes_the_run_directory(outcome):
    out, events, provisioner, built = outcome
    assert out.status == "ok", out.error
    assert provisioner.stopped == 1
    for name in ("manifest.json", "summary.json", "summary.csv", "report.md", "samples/wait_events.csv"):
        assert (out.run_dir / name).is_file(), name
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["format_version"] == 3
    assert manifest["servers"][0]["version_num"] >= 140000
    assert manifest["scenario"]["sha256"] and len(manifest["scenario"]["sha256"]) == 64
    assert {VariantStarted, Tick, VariantDone} <= {type(e) for e in events.events}
    # the tables were built once; report.md is the Report the outcome carries for printing
    assert built == [out.run_dir]
    assert (out.run_dir / "report.md").read_text(encoding="utf-8") == render.markdown(out.report)


def test_statements_executed_equal_transactions_times_statements(outcome):
    for result in outcome[0].results:
        for pool, data in result.pools.items():
            m = nested(result.own(pool))
            statements = len(m["statements"])
            assert m["statements_executed"] == m["transactions"] * statements, (result.variant, pool)
            for name, s in m["statements"].items():
                assert s["count"] == m["transactions"], (result.variant, name)


def test_fixed_transaction_count_per_client(outcome):
    m = nested(by_variant(outcome, "counted").own("fixed"))
    assert m["transactions"] == 3 * 50
    assert m["failed"] == 0


def test_lock_not_available_is_counted_not_fatal(outcome):
    m = nested(by_variant(outcome, "nowait").own("grabbers"))
    assert m["transactions"] == 0
    assert m["errors"]["lock_not_available"] > 0
    assert m["failed"] == m["errors"]["lock_not_available"]
    assert any(key.startswith("55P03") for key in m["error_messages"])


def test_serialization_failures_are_retried(outcome):
    m = nested(by_variant(outcome, "conflicts").own("incrementers"))
    assert m["transactions"] > 0
    assert m["retries"] > 0
    assert m["errors"]["serialization"] == m["failed"]


def test_held_transaction_released_halfway_and_closed(outcome, admin):
    result = by_variant(outcome, "held_snapshot")
    holder, keeper = result.background
    assert holder["released_at_s"] == pytest.approx(0.7, abs=0.3)
    assert keeper["released_at_s"] is None
    rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'concurbench%%'").fetchall()
    assert rows == []
    pids = {holder["pid"], keeper["pid"]}
    assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)).fetchone()[0] == 0


def test_samplers_report_deltas(outcome):
    result = by_variant(outcome, "counted")
    assert result.samplers["wal"]["bytes"] > 0
    assert result.samplers["database"]["xact_commit"] >= 150
    assert result.sampler_errors == [] and result.sampler_failures == []


def test_the_stored_run_loads_back_as_the_run_that_was_built(outcome):
    from concurbench.results.store import load_run

    out = outcome[0]
    assert load_run(out.run_dir) == out.run
    assert any(r.samples.get("wait_events") for r in out.run.variant_runs)


def test_stored_run_renders_again_and_is_listed(outcome, cli_main):
    run_dir = outcome[0].run_dir
    code, md, err = cli_main("report", run_dir, "--format", "md")
    assert code == 0, err
    assert md.strip() == (run_dir / "report.md").read_text().strip()
    code, as_json, err = cli_main("report", run_dir, "--format", "json")
    assert json.loads(as_json)["manifest"]["scenario"]["name"] == "hold-and-errors"
    code, listing, err = cli_main("results", run_dir.parent)
    assert code == 0 and "hold-and-errors" in listing and "ok" in listing
    code, out, err = cli_main("report", run_dir / "samples")
    assert code == 2 and "not a run directory" in err and "Traceback" not in err, err


def test_fixed_count_of_failing_transactions_ends(outcome):
    m = nested(by_variant(outcome, "always_fails").own("failing"))
    assert m["transactions"] == 0
    assert m["failed"] == 2 * 5
    assert m["errors"]["other"] == 10
    assert any(key.startswith("22012") for key in m["error_messages"])  # division_by_zero


def test_report_writes_charts_of_a_stored_run(outcome, tmp_path):
    import shutil

    from click.testing import CliRunner

    from concurbench.cli.main import cli

    run_dir = tmp_path / "run"
    shutil.copytree(outcome[0].run_dir, run_dir)
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "md", "--plots"])
    assert result.exit_code == 0, result.output
    charts = sorted(p.name for p in (run_dir / "plots").iterdir())
    assert "latency-main.png" in charts and "latency-main.svg" in charts
    assert all((run_dir / "plots" / name).stat().st_size > 1000 for name in charts)
