"""`concurbench compare` as a user runs it: two real quick runs of one scenario, then a refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from processes import tagged

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "postgres" / "temp-table-churn.yaml"
OTHER_RUN = ROOT / "tests" / "unit" / "fixtures" / "run_rowlock"  # a stored run of row-lock-vs-advisory
pytestmark = pytest.mark.e2e

# Every process a run starts inherits this marker, so leftovers are found by it (as in test_cli_run.py).
TAG = f"e2e-{uuid.uuid4().hex}"
ENV = {**os.environ, "CONCURBENCH_TEST_TAG": TAG}

# The installed entry point, with `compare` added when cli/main.py does not register it (yet).
ENTRY = "import sys; from concurbench.cli.main import main; sys.argv[0] = 'concurbench'; main()"


def concurbench(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=ENV)


def harness_processes() -> set[int]:
    """Live (not zombie) processes started by this module's runs: CLI, workers, servers."""
    return tagged(TAG)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """The same quick scenario run twice on the embedded server, 20 clients of 20 calls each (compare reads
    the runs' figures, not the article's contention of 100 clients, which made each run take about 8 s)."""
    out = tmp_path_factory.mktemp("runs")
    before = harness_processes()
    dirs = []
    for _ in range(2):
        result = concurbench("run", str(SCENARIO), "--quick", "--param", "clients=20", "--param", "calls=20", "--out", str(out))
        assert result.returncode == 0, result.stderr[-2000:]
        dirs.append(Path(result.stdout.strip().splitlines()[-1]))
    assert harness_processes() - before == set()
    return dirs[0], dirs[1]


def test_compare_two_real_runs_markdown_and_junit_agree_with_the_exit_code(two_runs, tmp_path):
    base, cont = two_runs
    junit_file = tmp_path / "compare.xml"
    result = concurbench("compare", str(base), str(cont), "--format", "md", "--fail-above", "10",
                         "--junit", str(junit_file))
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    md = result.stdout
    assert md.startswith("## concurbench compare: temp-table-churn")
    assert f"- Baseline: {base.name}, temp-table-churn (quick), server 18" in md
    assert f"- Contender: {cont.name}, temp-table-churn (quick), server 18" in md
    for variant in ("dynamic", "static", "reuse"):
        assert f"### main: {variant} (pool callers)" in md
    assert "| Metric | Baseline | Contender | Change | Significance |" in md
    assert "| elapsed_s |" in md  # every pool runs a fixed number of calls
    assert "untested (n=1/1)" in md  # single runs: no significance test
    section = md.split("**Regressions**", 1)[1].split("**Warnings**", 1)[0]
    listed = [line for line in section.splitlines() if line.startswith("- ")]
    root = ET.parse(junit_file).getroot()
    assert root.tag == "testsuite" and root.get("name") == "concurbench-compare"
    cases = root.findall("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| Metric")]
    assert int(root.get("tests")) == len(cases) == len(rows)
    assert int(root.get("failures")) == len(failures) == len(listed)
    assert result.returncode == (1 if listed else 0)
    if listed:
        assert "use --repeat 3 or more for a significance test" in section
        assert all(c.get("classname").startswith("temp-table-churn.") for c in failures)
    data = json.loads(concurbench("compare", str(base), str(cont), "--format", "json").stdout)
    assert data["summary"]["regressions"] == 0 and data["summary"]["gated"] is False  # no threshold: no gate
    assert {r["variant"] for r in data["rows"]} == {"dynamic", "static", "reuse"}
    table = concurbench("compare", str(base), str(cont), "--metric", "tps", "--fail-above", "10")
    assert table.returncode in (0, 1) and "Compare: temp-table-churn" in table.stdout
    assert "green better, red worse" in table.stdout


def test_runs_of_different_scenarios_are_refused_with_exit_2(two_runs):
    base, _ = two_runs
    result = concurbench("compare", str(OTHER_RUN), str(base))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1  # one paragraph
    text = result.stderr
    assert "error:" in text and "different scenarios" in text and "--force" in text
    assert str(OTHER_RUN) in text and str(base) in text
    forced = concurbench("compare", str(OTHER_RUN), str(base), "--force")
    assert forced.returncode == 2 and "nothing to compare" in " ".join(forced.stderr.split())
    usage = concurbench("compare", str(OTHER_RUN), str(base), "--fail-above", "tps=much")
    assert usage.returncode == 2 and "Invalid value for '--fail-above'" in usage.stderr


def test_runs_of_different_format_versions_are_refused_naming_both(two_runs):
    """The stored format-1 fixture of the same scenario against a run written now (format 3)."""
    _, cont = two_runs
    old = ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn"
    result = concurbench("compare", str(old), str(cont))
    assert result.returncode == 2, result.stderr[-2000:]
    text = " ".join(result.stderr.split())
    assert "different run-directory format versions (1 and 3)" in text and "Traceback" not in text
    forced = concurbench("compare", str(old), str(cont), "--force", "--format", "json")
    assert forced.returncode in (0, 1), forced.stderr[-2000:]
    assert any("format versions (1 and 3)" in w for w in json.loads(forced.stdout)["warnings"])
