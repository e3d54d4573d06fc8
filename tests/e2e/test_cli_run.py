"""The installed `concurbench` command, run as a user would: a quick scenario, Ctrl-C, bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from processes import tagged
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml"
pytestmark = pytest.mark.e2e


# Every process a test's run starts (the CLI, its workers, the server it starts) inherits this
# marker, so leftovers are found by it and other runs on the same machine are not counted.
TAG = f"e2e-{uuid.uuid4().hex}"
ENV = {**os.environ, "CONCURBENCH_TEST_TAG": TAG}


def concurbench(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=kwargs.pop("timeout", 180), env=ENV, **kwargs)


def read_until(proc: subprocess.Popen, pattern: re.Pattern, timeout: float) -> tuple[bool, str]:
    """Whether a line of the process's stderr matched `pattern` by the deadline, and the lines read."""
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if pattern.search(seen[-1]):
            return True, "\n".join(seen)
    return False, "\n".join(seen)


def harness_processes() -> set[int]:
    """Live (not zombie) processes started by this module's runs: CLI, workers, servers."""
    return tagged(TAG)


def test_quick_run_prints_tables_and_writes_the_run_directory(tmp_path):
    before = harness_processes()
    result = concurbench("run", str(SCENARIO), "--quick", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert run_dir.parent == tmp_path and run_dir.name.endswith("-row-lock-vs-advisory")
    for name in ("manifest.json", "summary.json", "summary.csv", "report.md", "samples/wait_events.csv"):
        assert (run_dir / name).is_file(), name
    assert "Published beside measured" in result.stdout
    assert "locks: 90 clients" in result.stdout  # the quick form keeps the article's contention
    report = (run_dir / "report.md").read_text()
    assert "| for_update | lockers | 90 |" in report
    summary = json.loads((run_dir / "summary.json").read_text())
    runs = {(r["variant"], r["point"]): r for r in summary["results"]}
    assert runs[("for_share_many", None)]["samplers"]["multixact"]["created"] > 0
    assert runs[("for_share_1", None)]["samplers"]["multixact"]["created"] == 0
    assert runs[("for_update", 90)]["samplers"]["wal"]["bytes"] > 0
    assert harness_processes() - before == set()


def test_ctrl_c_keeps_measured_results_and_leaves_nothing_behind(tmp_path):
    scenario = tmp_path / "long.yaml"
    scenario.write_text(
        "name: long\nengine: postgres\nsetup: CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)\n"
        "duration: 60s\nwarmup: 0s\nvariants:\n"
        "  first:\n    duration: 1s\n    pools:\n      p: {clients: 2, transaction: [SELECT 1]}\n"
        "  second:\n    background: [{kind: hold_transaction, sql: SELECT count(*) FROM t}]\n"
        "    pools:\n      p: {clients: 4, transaction: [UPDATE t SET id = id WHERE id = 1]}\n")
    before = harness_processes()
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(scenario), "--out",
                             str(tmp_path / "runs")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=ENV)
    found, seen = read_until(proc, re.compile(r"^  second: [\d.]+ s, [1-9][\d,]* txns"), 90)
    assert found, seen  # the second variant is measuring and has committed transactions
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole process group
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert time.monotonic() - started < 30
    run_dir = Path(stdout.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    summary = json.loads((run_dir / "summary.json").read_text())
    results = {r["variant"]: r for r in summary["results"]}
    assert results["first"]["pools"]["p"]["metrics"]["transactions"] > 0
    assert results["second"]["status"] == "interrupted"
    assert results["second"]["pools"]["p"]["metrics"]["transactions"] > 0
    assert wait_until(lambda: harness_processes() - before == set(), 10), harness_processes() - before


def test_failing_setup_names_the_statement_and_stops_the_server(tmp_path):
    scenario = tmp_path / "broken-setup.yaml"
    scenario.write_text("name: broken-setup\nengine: postgres\nsetup: |\n  CREATE TABLE a (x int);\n"
                        "  SELECT no_such_function();\nvariants:\n  v:\n    pools:\n"
                        "      p: {clients: 1, transaction: [SELECT 1]}\n")
    before = harness_processes()
    result = concurbench("run", str(scenario), "--out", str(tmp_path / "runs"))
    assert result.returncode == 1
    assert "line 2" in result.stderr and "no_such_function" in result.stderr
    assert "Traceback" not in result.stderr
    manifest = json.loads((Path(result.stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert harness_processes() - before == set()


def test_bad_input_is_one_paragraph_and_exit_2(tmp_path):
    result = concurbench("run", str(SCENARIO), "--param", "acounts=5")
    assert result.returncode == 2
    assert "did you mean 'accounts'" in result.stderr
    assert "Traceback" not in result.stderr
    broken = tmp_path / "bad.yaml"
    broken.write_text("name: bad\nengine: postgres\nvariants:\n  v:\n    pools:\n      p: {clients: ten, transaction: [SELECT 1]}\n")
    result = concurbench("validate", str(broken))
    assert result.returncode == 2
    assert f"{broken}:6:" in result.stderr and "variants.v.pools.p.clients" in result.stderr


def test_check_exits_3_when_a_claim_is_false_on_purpose(tmp_path):
    scenario = tmp_path / "claims.yaml"
    scenario.write_text("name: claims\nengine: postgres\nduration: 0.3s\nwarmup: 0s\nvariants:\n"
                        "  one:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n"
                        "expect:\n  - 'one: failed == 0'\n  - {claim: false on purpose, check: 'one: tps > 1e12'}\n")
    checked = concurbench("run", str(scenario), "--check", "--out", str(tmp_path / "runs"))
    assert checked.returncode == 3, checked.stderr[-2000:]
    assert "1 of 2 claims do not hold" in checked.stderr
    assert "PASS" in checked.stdout and "FAIL" in checked.stdout
    run_dir = Path(checked.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [c["verdict"] for c in summary["claims"]] == ["pass", "fail"]
    assert [r["repeat"] for r in summary["results"]][:2] == [1, 2]  # one run decides nothing: --check ran more
    assert summary["claims"][1]["right"]["value"] == 1e12 and summary["claims"][1]["left"]["low"] is not None
    unchecked = concurbench("run", str(scenario), "--out", str(tmp_path / "runs"))
    assert unchecked.returncode == 0


def test_a_claim_between_two_identical_variants_is_inconclusive_not_pass(tmp_path):
    """Two variants that run the very same load: `a > b` is neither shown nor refuted. The check repeats them up
    to its limit and exits 4 (undecided). By design a verdict here has a chance of at most 5% (about 4% in
    tests/unit/test_decision_rule.py's simulations), so a decided check is run once more: two in a row
    happen by chance once in 400 or more, and mean the rule does not hold its level."""
    scenario = tmp_path / "same.yaml"
    scenario.write_text("name: same\nengine: postgres\nduration: 0.3s\nwarmup: 0.1s\nvariants:\n"
                        "  a:\n    pools:\n      p: {clients: 2, transaction: [SELECT 1]}\n"
                        "  b:\n    pools:\n      p: {clients: 2, transaction: [SELECT 1]}\n"
                        "expect:\n  - 'a: tps > b: tps'\n")
    for attempt in (1, 2):
        checked = concurbench("run", str(scenario), "--check", "--max-repeats", "3", "--out", str(tmp_path / "runs"))
        if checked.returncode == 4 or attempt == 2:
            break
    assert checked.returncode == 4, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert "INCONCLUSIVE" in checked.stdout and "could not be decided" in checked.stderr
    run_dir = Path(checked.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    (claim,) = summary["claims"]
    assert claim["verdict"] == "inconclusive" and "within the noise" in claim["reason"]
    assert "paired by round" in claim["reason"] and "would" in claim["reason"]  # and how many runs would decide it
    assert claim["interval"]["low"] < 1 < claim["interval"]["high"]
    assert sorted(r["repeat"] for r in summary["results"]) == [1, 1, 2, 2, 3, 3]
    assert [r["variant"] for r in summary["results"]] == ["a", "b", "b", "a", "a", "b"]  # A B, B A, A B


def test_a_designed_stall_against_none_is_decided_in_a_quick_run(tmp_path):
    """Readers queue behind a lock held for the first 70% of every window (a stall by design: the window's own
    series is zero, then the full rate) against the same readers without it. The runs agree, so the check
    decides `free > 2 x stalled` (about 3.3x) in a quick run, busy machine or not. The readers pause 2 ms
    between transactions, so that what they measure is the stall rather than a share of two busy cores."""
    scenario = tmp_path / "stall.yaml"
    scenario.write_text("""name: stall
engine: postgres
duration: 1s
warmup: 0.2s
setup:
  - CREATE TABLE items (id int PRIMARY KEY, v int); INSERT INTO items SELECT g, g FROM generate_series(1, 100) g
teardown:
  - DROP TABLE items
x-readers: &readers
  readers: {clients: 4, think: 2ms, params: {id: "uniform(1, 100)"}, transaction: ["SELECT v FROM items WHERE id = :id"]}
variants:
  free:
    pools: *readers
  stalled:
    background:
      - {name: ddl, kind: hold_transaction, sql: "LOCK TABLE items IN ACCESS EXCLUSIVE MODE", release_after: 0.7s}
    pools: *readers
expect:
  - "free: tps > 2 * stalled: tps"
""")
    checked = concurbench("run", str(scenario), "--quick", "--check", "--out", str(tmp_path / "runs"))
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
    run_dir = Path(checked.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    (claim,) = summary["claims"]
    assert claim["verdict"] == "pass" and "paired by round" in claim["reason"], claim["reason"]
    assert 1.2 < claim["ratio"]["value"] < 2.2  # about 3.3x, over the claim's 2
    assert claim["interval"]["low"] > 1


