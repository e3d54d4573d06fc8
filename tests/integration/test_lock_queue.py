"""The lock-queue scenario in its quick form on the embedded server, twice each for the ALTER that
waits and the ALTER with a lock timeout (the no-DDL baseline is left out to keep the test short):
no claim is contradicted, those the runs settle exactly hold, the readers stall from the ALTER's
start to the holder's commit only when the ALTER waits, and summary.json keeps the timeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "postgres" / "lock-queue.yaml"
VARIANTS = ["no_timeout", "lock_timeout"]
SLACK = 0.25  # seconds: timer threads and the lock queue add milliseconds, not tenths
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def outcome(server, running_server, tmp_path_factory):
    scenario = load_scenario(SCENARIO, quick=True)
    return Runner(scenario, running_server(server[1]), out_dir=tmp_path_factory.mktemp("runs"), variants=VARIANTS,
                  repeat=2).run()


@pytest.fixture(scope="module")
def stored(outcome) -> dict[tuple[str, int], dict]:
    results = json.loads((outcome.run_dir / "summary.json").read_text())["results"]
    return {(r["variant"], r["repeat"]): r for r in results}


def events(result: dict) -> list[tuple[str, str, float]]:
    return [(e["source"], e["kind"], e["t_s"]) for e in result["events"]]


def test_no_claim_is_contradicted_and_the_settled_ones_hold(outcome):
    assert outcome.status == "ok", outcome.error
    judged = {c.claim: c for c in outcome.claims if "no_ddl" not in c.claim}
    assert len(judged) == 8
    failed = [f"{c.claim}: {c.left} vs {c.right} {c.reason}" for c in judged.values() if c.verdict == "fail"]
    assert failed == []
    # the same in every run (the ALTER's outcome), or more than zero against exactly zero
    for claim in ("no_timeout: probes.ddl.after.column_added == 1", "lock_timeout: probes.ddl.after.column_added == 0",
                  "no_timeout: late > lock_timeout: late", "no_timeout: skipped > lock_timeout: skipped"):
        assert judged[claim].verdict == "pass", (claim, judged[claim].reason)


@pytest.mark.parametrize("repeat", [1, 2])
def test_the_alter_waits_for_the_holder_and_the_readers_wait_for_the_alter(stored, repeat):
    result = stored[("no_timeout", repeat)]
    timeline = events(result)
    assert [(s, k) for s, k, _ in timeline] == [
        ("background:holder", "start"), ("background:alter", "statement_start"),
        ("background:holder", "release"), ("background:alter", "statement_end")]
    assert timeline[0][2] < 0, "the holder began in the warm-up"
    assert timeline[1][2] == pytest.approx(1.0, abs=SLACK)
    assert timeline[2][2] == pytest.approx(3.0, abs=SLACK) and timeline[3][2] == pytest.approx(3.0, abs=SLACK)
    assert "Lock:relation" in result["events"][3]["detail"]
    alter = next(b for b in result["background"] if b["name"] == "alter")
    assert alter["outcome"] == "finished"
    readers = result["pools"]["readers"]
    counts = readers["stats"]["series"]["count"]
    assert sum(counts[3:9]) > 0, "the readers ran before the ALTER"
    assert sum(counts[12:28]) == 0, "no reader finished while the ALTER waited"
    assert sum(counts[32:]) > 0, "the readers ran again after the holder committed"
    metrics = readers["metrics"]
    assert metrics["latency"]["max_ms"] > 1500  # from when the lookup was due: the whole 2 s stall
    assert metrics["late"] > 0 and metrics["skipped"] > 0


@pytest.mark.parametrize("repeat", [1, 2])
def test_with_a_lock_timeout_the_alter_fails_and_the_readers_go_on(stored, repeat):
    result = stored[("lock_timeout", repeat)]
    timeline = events(result)
    assert [(s, k) for s, k, _ in timeline] == [
        ("background:holder", "start"), ("background:alter", "statement_start"),
        ("background:alter", "statement_failed"), ("background:holder", "release")]
    assert timeline[2][2] - timeline[1][2] == pytest.approx(0.1, abs=SLACK)
    assert "lock timeout" in result["events"][2]["detail"]
    alter = next(b for b in result["background"] if b["name"] == "alter")
    assert alter["outcome"] == "failed" and "lock timeout" in alter["server_error"]
    readers = result["pools"]["readers"]
    assert sum(readers["stats"]["series"]["count"][14:28]) > 0, "the readers ran while the holder was still open"
    metrics = readers["metrics"]
    assert metrics["latency"]["max_ms"] < 1000
    assert metrics["late"] == 0 and metrics["skipped"] == 0
