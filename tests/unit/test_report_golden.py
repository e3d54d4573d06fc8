"""Golden files of the reports of stored runs, and the HTML page (no server needed).

Every run directory under tests/fixtures/runs/ (copied from a real `concurbench run ... --quick`) is
rendered as Markdown (`markdown(build_report(...))`) and as `concurbench report RUN_DIR --format json`,
and the text is compared with tests/fixtures/golden/<run>.md and <run>.json.

After a deliberate change of the tables or their layout, regenerate the golden files with

    CONCURBENCH_REGOLD=1 python3 -m pytest tests/unit/test_report_golden.py

(the tests that rewrite a file skip, saying which), then review `git diff tests/fixtures/golden`.
A new fixture is a run directory copied into tests/fixtures/runs/<name>/ (without plots/),
followed by the same command.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import shutil
from dataclasses import replace
from html import escape
from pathlib import Path

import pytest
from click.testing import CliRunner

from concurbench.cli.main import cli
from concurbench.report.html import html_page
from concurbench.report.render import markdown
from concurbench.report.tables import build_report
from concurbench.results.model import Source
from concurbench.results.store import load_run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RUNS = sorted(p for p in (FIXTURES / "runs").iterdir() if (p / "manifest.json").is_file())
GOLDEN = FIXTURES / "golden"
REGOLD = os.environ.get("CONCURBENCH_REGOLD") == "1"
REGOLD_COMMAND = "CONCURBENCH_REGOLD=1 python3 -m pytest tests/unit/test_report_golden.py"


def _compare(actual: str, golden: Path) -> None:
    if REGOLD:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
        pytest.skip(f"CONCURBENCH_REGOLD=1: rewrote {golden.relative_to(FIXTURES.parent.parent)}")
    assert golden.is_file(), f"no golden file {golden}; create it with: {REGOLD_COMMAND}"
    expected = golden.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            str(golden), "rendered now", n=2))
        lines = diff.splitlines()
        shown = "\n".join(lines[:80]) + (f"\n... {len(lines) - 80} more diff lines" if len(lines) > 80 else "")
        pytest.fail(f"{golden.name} differs from the report rendered now:\n{shown}\n"
                    f"If the change is intended, regenerate with: {REGOLD_COMMAND}", pytrace=False)


def _invoke(*args: str):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_there_is_a_fixture_run():
    assert RUNS, f"no run directories under {FIXTURES / 'runs'}"


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_markdown_matches_golden(run: Path):
    _compare(markdown(build_report(load_run(run))), GOLDEN / f"{run.name}.md")


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_report_json_matches_golden(run: Path):
    _compare(_invoke("report", run, "--format", "json").stdout, GOLDEN / f"{run.name}.json")


# -- -o/--output --------------------------------------------------------------------------------------

RUN = RUNS[0] if RUNS else None


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json"])
def test_output_option_writes_the_file_instead_of_stdout(tmp_path, fmt):
    target = tmp_path / f"report.{fmt}"
    result = _invoke("report", RUN, "--format", fmt, "-o", target)
    assert result.stdout == ""
    assert f"wrote {target}" in result.stderr
    text = target.read_text(encoding="utf-8")
    if fmt == "table":
        assert build_report(load_run(RUN)).title in text
        assert "\x1b[" not in text, "no terminal colour codes in a file"
    else:
        assert text == _invoke("report", RUN, "--format", fmt).stdout


# -- HTML ---------------------------------------------------------------------------------------------

def _copy(tmp: Path) -> Path:
    run = tmp / RUN.name
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("plots"))
    return run


@pytest.fixture(scope="module")
def html_run(tmp_path_factory):
    """`report --format html -o page.html` on a copy of the fixture, with the charts it wrote."""
    pytest.importorskip("matplotlib", reason="the charts need matplotlib")
    tmp = tmp_path_factory.mktemp("html")
    run = _copy(tmp)
    page = tmp / "page.html"
    result = _invoke("report", run, "--format", "html", "-o", page)
    return run, page, result


def _external_refs(page: str) -> list[str]:
    return re.findall(r'(?:src|href)\s*=\s*["\']?\s*(?:https?:)?//[^"\'\s>]*', page, flags=re.I)


def test_html_written_to_the_output_file(html_run):
    run, page, result = html_run
    assert result.stdout == ""
    assert f"wrote {page}" in result.stderr
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


def test_html_is_one_self_contained_file(html_run):
    _, page, _ = html_run
    text = page.read_text(encoding="utf-8")
    assert "<link" not in text and "<script" not in text and "@import" not in text
    assert _external_refs(text) == []
    for value in re.findall(r'\bsrc="([^"]*)"', text):
        assert value.startswith("data:image/"), f"a file referenced from the page: {value[:60]}"
    for value in re.findall(r'\bhref="([^"]*)"', text):
        assert value.startswith("#"), f"a link out of the page: {value[:60]}"


def test_html_has_every_table_title_and_line(html_run):
    run, page, _ = html_run
    text = page.read_text(encoding="utf-8")
    report = build_report(load_run(run))
    tables = [t for t in report.tables if t.rows]
    assert tables
    for table in tables:
        assert f"<h2>{escape(table.title)}</h2>" in text
        for note in table.notes:
            assert escape(note) in text
    for line in report.lines:
        assert f"<li>{escape(line)}</li>" in text
    assert text.count("<table>") == len(tables)
    assert 'class="num"' in text


def test_html_embeds_every_chart_written(html_run):
    run, page, _ = html_run
    text = page.read_text(encoding="utf-8")
    charts = {p.stem for p in (run / "plots").iterdir()}
    assert charts, "the fixture run draws no chart"
    assert text.count("<svg") + text.count("data:image/png") == len(charts)
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "ids repeat across the inlined charts"
    for stem in charts:
        assert f"plots/{stem}." in text, f"no caption for {stem}"


def test_html_embeds_png_when_there_is_no_svg(tmp_path):
    run = _copy(tmp_path)
    pngs = []
    for n in range(2):
        pngs.append(tmp_path / f"chart{n}.png")
        pngs[-1].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(16))
    text = html_page(load_run(run), plots=pngs)
    assert text.count("data:image/png;base64,") == 2
    assert "<svg" not in text


def test_html_without_matplotlib_says_so(tmp_path, monkeypatch):
    run = _copy(tmp_path)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **kw: None if name == "matplotlib" else find_spec(name, *a, **kw))
    page = tmp_path / "page.html"
    result = _invoke("report", run, "--format", "html", "-o", page)
    text = page.read_text(encoding="utf-8")
    assert "Charts not drawn: matplotlib is not installed" in text
    assert "<svg" not in text and "data:image/png" not in text
    assert "matplotlib" in result.stderr
    assert not (run / "plots").exists()


def test_html_escapes_text_and_links_the_source(tmp_path):
    run = load_run(_copy(tmp_path))
    run = replace(run, scenario=replace(run.scenario, title="<script>alert(1)</script> & more",
                                        source=Source(title="An <em>article</em>", url="https://example.com/a?b=1&c=2")))
    text = html_page(run, plots=[])
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text
    assert '<a href="https://example.com/a?b=1&amp;c=2">An &lt;em&gt;article&lt;/em&gt;</a>' in text
    assert _external_refs(text) == ['href="https://example.com/a?b=1&amp;c=2']
    assert "No chart applies to this run." in text


def test_golden_json_is_the_model_of_the_stored_run():
    """The JSON golden file is the run as the current format writes it (a sanity check on the fixture)."""
    for run in RUNS:
        golden = GOLDEN / f"{run.name}.json"
        if REGOLD or not golden.is_file():
            continue
        assert json.loads(golden.read_text(encoding="utf-8")) == load_run(run).as_dict()


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_report_csv_is_the_stored_summary_csv(run: Path):
    """summary.csv rendered from the model is the file the run wrote (format 1 fixtures included)."""
    assert _invoke("report", run, "--format", "csv").stdout == (run / "summary.csv").read_text(encoding="utf-8")
