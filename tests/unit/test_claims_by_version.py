"""The claims-by-version table, from runs made up in the stored format (no server)."""

from __future__ import annotations

import subprocess
import sys

from concurbench.report.by_version import claims_by_version
from concurbench.report.html import report_page
from concurbench.report.render import markdown
from concurbench.results.model import ClaimEstimate, ClaimVerdict, Run, ScenarioInfo, ServerInfo
from concurbench.results.store import write_run

CLAIM = "a: tps > b: tps"


def _run(tmp_path, name="s") -> Run:
    servers = [ServerInfo(version_short=v) for v in ("17.2", "14.23", "16.4")]
    claims = [
        ClaimVerdict(CLAIM, "pass", server="14.23", left=ClaimEstimate(300.0, 290.0, 310.0, 3),
                     ratio=ClaimEstimate(3.0, 2.7, 3.3), reason="holds at 95%"),
        ClaimVerdict(CLAIM, "inconclusive", server="16.4", ratio=ClaimEstimate(1.05, 0.9, 1.2),
                     reason="the difference is within the noise"),
        ClaimVerdict(CLAIM, "fail", server="17.2", ratio=ClaimEstimate(0.5, 0.45, 0.55), reason="the opposite holds"),
        *[ClaimVerdict("b: tps > 1", "inconclusive", server=v, reason=f"the difference is within the noise (2 runs a "
                       f"side); p = 0.{n} against 0.0013 (its share of 5%: Holm over 3 claims, look 1 of "
                       f"4, spending over looks)") for n, v in enumerate(("17.2", "14.23", "16.4"))],
        ClaimVerdict("a: io.reads > 0", "not evaluated", server="14.23",
                     reason="not evaluated: io.reads of a (14.23) is unavailable: not available on PostgreSQL 14"),
    ]
    path = tmp_path / name
    path.mkdir()
    run = Run(ScenarioInfo(name, quick=True), servers=servers, target="binaries", claims=claims, path=path)
    write_run(run)
    return run


def test_a_row_per_claim_a_column_per_version_in_version_order(tmp_path):
    report = claims_by_version([_run(tmp_path)])
    (table,) = report.tables
    assert table.columns == ["#", "Claim", "14.23", "16.4", "17.2"]
    assert table.rows[0] == ["1", CLAIM, "PASS 3.00× [2.70, 3.30]", "INCONCLUSIVE 1.05× [0.900, 1.20]",
                             "FAIL 0.500× [0.450, 0.550]"]
    assert table.rows[2] == ["3", "a: io.reads > 0", "n/a", "–", "–"]
    assert "3 on 14.23: not evaluated: io.reads of a (14.23) is unavailable: not available on PostgreSQL 14" \
        in table.notes
    assert "1 on 16.4: the difference is within the noise" in table.notes
    # one note for a reason given on several versions
    assert "2 on 14.23, 16.4, 17.2: the difference is within the noise (2 runs a side)" in table.notes
    md = markdown(report)
    assert "| 1 | a: tps > b: tps | PASS 3.00× [2.70, 3.30] |" in md
    page = report_page(report)
    assert page.startswith("<!DOCTYPE html>") and "<td>FAIL 0.500× [0.450, 0.550]</td>" in page


def test_the_command_tabulates_stored_runs_and_exits_as_a_check_does(tmp_path):
    run = _run(tmp_path)
    md, html = tmp_path / "claims.md", tmp_path / "claims.html"
    result = subprocess.run([sys.executable, "-m", "concurbench.cli.main", "claims", "--from", str(run.path),
                             "-o", str(md), "--html", str(html)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr  # a claim failed on 17.2
    assert "## s (quick)" in md.read_text() and "<h2>s (quick)</h2>" in html.read_text()
    both = subprocess.run([sys.executable, "-m", "concurbench.cli.main", "claims", "scenarios/x.yaml", "--from",
                           str(run.path)], capture_output=True, text=True, timeout=60)
    assert both.returncode == 2 and "not both" in both.stderr
