"""A run's Report is built once, after its data are written, and report.md is that Report wherever the
store put the run (no server: the store is driven directly, as tests/unit/test_run_journal.py does)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from concurbench.report import render
from concurbench.report.render import REPORT_MD, RunReport, markdown
from concurbench.results.store import SUMMARY, create_run_dir, load_run, save_run

OK = Path(__file__).resolve().parents[1] / "fixtures" / "bad" / "runs" / "ok"


@pytest.fixture()
def built(monkeypatch):
    """The runs build_report was called with, and whether their summary.json was on disk by then."""
    calls: list[tuple] = []
    original = render.build_report

    def counted(run):
        calls.append((run.path, (Path(run.path) / SUMMARY).is_file()))
        return original(run)

    monkeypatch.setattr(render, "build_report", counted)
    return calls


@pytest.fixture()
def run(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    stored = load_run(OK)
    return replace(stored, path=create_run_dir(tmp_path / "runs", "ok"))


def test_the_report_is_built_once_after_the_data_and_written_from_that_object(run, built):
    report = RunReport()
    written, problem = save_run(run, also=report.write)
    assert problem is None and written.path == run.path
    assert built == [(run.path, True)]
    assert report.of(written) is report.report and len(built) == 1
    assert (run.path / REPORT_MD).read_text(encoding="utf-8") == markdown(report.report)


def test_a_run_sent_to_the_fallback_has_the_same_single_report(run, built, tmp_path):
    shutil.rmtree(run.path)  # gone under the run, as on a disk that was unmounted
    report = RunReport()
    written, problem = save_run(run, also=report.write)
    fallback = tmp_path / "tmp" / "concurbench-unsaved" / run.path.name
    assert written.path == fallback and "written to" in problem
    assert built == [(fallback, True)]
    assert (fallback / REPORT_MD).read_text(encoding="utf-8") == markdown(report.of(written))
    assert len(built) == 1


def test_a_run_that_could_not_be_written_anywhere_still_has_its_tables_to_print(run, built, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", "/proc/concurbench-cannot-write-here")
    shutil.rmtree(run.path)
    report = RunReport()
    written, problem = save_run(run, also=report.write)
    assert "the tables printed are all that is left" in problem and built == []
    tables = report.of(written)
    assert tables.title and tables.tables and len(built) == 1
