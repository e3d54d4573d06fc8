"""A run in progress and its end: the "running" manifest, the journal of finished variant runs, the final
files written once (whole or not at all), and the fallback when the run directory cannot take them.

A SIGKILL of a real run is in the fault tier (tests/faults); here the files are driven directly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from concurbench.errors import ConfigError
from concurbench.results import journal
from concurbench.results.store import (MANIFEST, SUMMARY, create_run_dir, load_run, record_variant_run, save_run,
                                       start_run, write_run)

OK = Path(__file__).resolve().parents[1] / "fixtures" / "bad" / "runs" / "ok"


@pytest.fixture()
def run(tmp_path):
    """A run of the fixture's scenario, about to start in a new directory."""
    stored = load_run(OK)
    path = create_run_dir(tmp_path / "runs", "ok")
    return replace(stored, path=path, status="running", variant_runs=[]), stored.variant_runs[0]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_run_in_progress_says_running_and_keeps_what_finished(run):
    started, finished = run
    start_run(started, planned=3)
    manifest = json.loads((started.path / MANIFEST).read_text())
    assert manifest["status"] == "running" and manifest["planned_runs"] == 3
    assert manifest["owner"]["pid"] == journal.owner()["pid"]
    assert load_run(started.path).status == "running" and load_run(started.path).variant_runs == []
    assert record_variant_run(started.path, finished) is None
    assert record_variant_run(started.path, replace(finished, repeat=2)) is None
    seen = load_run(started.path)
    assert seen.status == "running" and "2 of 3 variant runs finished so far" in seen.error
    assert [r.repeat for r in seen.variant_runs] == [1, 2]
    assert seen.variant_runs[0].own("p") == finished.own("p")


def test_a_run_whose_process_is_gone_reads_as_killed(run):
    started, finished = run
    start_run(started, planned=2)
    record_variant_run(started.path, finished)
    manifest = json.loads((started.path / MANIFEST).read_text())
    manifest["owner"]["pid"] = dead_pid()
    (started.path / MANIFEST).write_text(json.dumps(manifest))
    with open(started.path / journal.JOURNAL, "a") as fh:  # a kill in the middle of a line
        fh.write('{"format_version": 2, "result": {"variant"')
    seen = load_run(started.path)
    assert seen.status == "killed"
    assert seen.error.startswith(f"pid {manifest['owner']['pid']} ended without finishing the run; 1 of 2 variant runs")
    assert "variant-runs.jsonl:2: cut short" in seen.error
    assert len(seen.variant_runs) == 1


def test_the_final_files_replace_the_journal_and_leave_no_temporary_file(run):
    started, finished = run
    start_run(started)
    record_variant_run(started.path, finished)
    write_run(replace(started, status="ok", variant_runs=[finished]))
    names = sorted(p.name for p in started.path.iterdir())
    assert names == ["manifest.json", "summary.csv", "summary.json"]
    final = load_run(started.path)
    assert final.status == "ok" and len(final.variant_runs) == 1


def test_a_directory_that_cannot_take_the_results_sends_them_to_the_fallback(run, tmp_path, monkeypatch):
    started, finished = run
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    start_run(started)
    done = replace(started, status="ok", variant_runs=[finished])
    shutil.rmtree(started.path)  # gone under the run, as on a disk that was unmounted
    written, problem = save_run(done, also=lambda r: (Path(r.path) / "report.md").write_text("tables\n"))
    fallback = tmp_path / "tmp" / "concurbench-unsaved" / started.path.name
    assert written.path == fallback
    assert problem.startswith(f"cannot write the run directory {started.path}: ")
    assert problem.endswith(f"the results were written to {fallback} instead")
    assert load_run(fallback).variant_runs[0].own("p") == finished.own("p")
    assert (fallback / "report.md").read_text() == "tables\n"


def test_save_run_writes_in_place_when_it_can(run):
    started, finished = run
    written, problem = save_run(replace(started, status="ok", variant_runs=[finished]))
    assert problem is None and written.path == started.path and (started.path / SUMMARY).is_file()


def test_start_run_names_a_directory_that_cannot_take_it(run):
    started, _ = run
    shutil.rmtree(started.path)
    with pytest.raises(ConfigError, match=f"{started.path / MANIFEST}: cannot write the run directory"):
        start_run(started)


def test_a_journal_line_of_another_format_is_left_out_and_said(run):
    started, finished = run
    start_run(started)
    (started.path / journal.JOURNAL).write_text(json.dumps({"format_version": 1, "result": {}}) + "\n")
    record_variant_run(started.path, finished)
    runs, problems = journal.read(started.path)
    assert len(runs) == 1 and problems == [f"{started.path / journal.JOURNAL}:1: format version 1, not 3; left out"]
