"""The Verdict and Cause enums and a claim's identity: what the check counts (by cause, never by a reason's
words), what the stored JSON holds, and run directories written before `left_out`, `cause`, `claim_id` and
`form` existed read the same (no server)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from concurbench.check import check_outcome, judge_claims
from concurbench.check.evaluate import Skip, left_out
from concurbench.errors import ConfigError
from concurbench.results.migrate import migrate
from concurbench.results.model import FORMAT_VERSION, Cause, ClaimVerdict, PoolResult, Run, ScenarioInfo, VariantRun
from concurbench.results.store import load_run, write_run
from concurbench.scenario.claims import parse_claim
from concurbench.stats import Verdict
from figured import figured


def result(variant: str, tps: float, repeat: int, server: str) -> VariantRun:
    metrics = {"transactions": int(tps), "tps": tps, "latency": {"mean_ms": 2.0}}
    return figured(VariantRun(variant, "g", None, server=server, elapsed_s=1.0, repeat=repeat,
                              pools={"p": PoolResult("p", True, 1)}), {"p": metrics})


def every_kind() -> list[ClaimVerdict]:
    """Verdicts of each kind the check tells apart, judged on two servers: decided, left out on purpose (quick
    runs, a server the claim is not about, a variant not chosen) and not evaluated for want of data."""
    runs = [result(v, tps * f, i + 1, server) for server in ("2019-CU32", "2022-CU18")
            for v, tps in (("a", 200.0), ("b", 100.0)) for i, f in enumerate((0.98, 1.0, 1.02))]
    about = replace(parse_claim("a: tps > b: tps"), servers=("2019",))
    quick = replace(parse_claim("b: tps > a: tps"), skip_quick="too short")
    claims = [about, quick, parse_claim("a: tps > c: tps"), parse_claim("a: tps > d: tps")]
    return judge_claims(claims, runs, quick=True,
                    skipped={"c": left_out(), "d": Skip(Cause.NOT_RUN, "not run: the run was interrupted first")})


def test_verdicts_are_members_and_the_left_out_ones_do_not_count_as_undecided():
    verdicts = every_kind()
    assert all(type(v.verdict) is Verdict for v in verdicts)
    kinds = [(v.server, v.verdict, v.left_out) for v in verdicts]
    assert kinds == [("2019-CU32", Verdict.PASS, False), ("2019-CU32", Verdict.NOT_EVALUATED, True),
                     ("2019-CU32", Verdict.NOT_EVALUATED, True), ("2019-CU32", Verdict.NOT_EVALUATED, False),
                     ("2022-CU18", Verdict.NOT_EVALUATED, True), ("2022-CU18", Verdict.NOT_EVALUATED, True),
                     ("2022-CU18", Verdict.NOT_EVALUATED, True), ("2022-CU18", Verdict.NOT_EVALUATED, False)]
    assert check_outcome(verdicts) == (0, 2)  # the interrupted variant's claim, on each server


def test_the_check_reads_the_cause_not_the_reason():
    quick = "not evaluated in quick runs: too short"
    assert check_outcome([ClaimVerdict("a: tps > 1", "not evaluated", reason=quick, cause=Cause.NOT_RUN)]) == (0, 1)
    assert check_outcome([ClaimVerdict("a: tps > 1", "not evaluated", reason="anything", cause=Cause.QUICK)]) == (0, 0)


def test_each_verdict_carries_its_claims_place_and_parsed_form():
    verdicts = every_kind()
    assert [v.claim_id for v in verdicts] == [0, 1, 2, 3] * 2
    assert [v.cause for v in verdicts[:4]] == [Cause.TESTED, Cause.QUICK, Cause.NOT_CHOSEN, Cause.NOT_RUN]
    assert verdicts[0].form.op == ">" and [str(r) for r in verdicts[0].form.refs()] == ["a: tps", "b: tps"]


def test_a_word_becomes_its_member_and_an_unknown_word_is_refused():
    assert ClaimVerdict("a: tps > 1", "pass").verdict is Verdict.PASS
    assert ClaimVerdict("a: tps > 1", "pass").passed is True
    with pytest.raises(ValueError):
        ClaimVerdict("a: tps > 1", "maybe")


def stored_run(path, verdicts: list[ClaimVerdict]) -> Run:
    scenario = ScenarioInfo("s", "S", "/x/s.yaml", "a" * 64, True, {}, "mssql", ["a", "b"], 7, {})
    return Run(scenario, claims=verdicts, path=path)


def test_the_stored_json_keeps_the_words_and_reads_back_the_same(tmp_path):
    run = stored_run(tmp_path, every_kind())
    write_run(run)
    text = (tmp_path / "summary.json").read_text()
    claims = json.loads(text)["claims"]
    assert [c["verdict"] for c in claims] == ["pass"] + ["not evaluated"] * 7
    assert [c["left_out"] for c in claims] == [v.left_out for v in run.claims]
    assert "Verdict" not in text
    assert load_run(tmp_path) == run


def test_a_directory_written_before_left_out_and_the_claims_identity_reads_the_same(tmp_path):
    """Format 2 as written before `left_out`, `cause`, `claim_id` and `form`: the check told left-out claims by the
    start of their reason, and the reasons a run gives today start the same way, so the migrated fields match the
    ones written now (and a reader of before, which ignores the keys, tells the same claims apart)."""
    run = stored_run(tmp_path, every_kind())
    write_run(run)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for claim in summary["claims"]:
        for key in ("left_out", "cause", "claim_id", "form"):
            del claim[key]
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    loaded = load_run(tmp_path)
    assert loaded == run and loaded.format_version == FORMAT_VERSION == 3
    assert check_outcome(loaded.claims) == check_outcome(run.claims) == (0, 2)


def test_migrate_keeps_a_stored_cause_and_leaves_documents_that_have_it_alone():
    summary = {"format_version": 2, "results": [],
               "claims": [{"claim": "x", "verdict": "not evaluated", "reason": "not evaluated in quick runs: x",
                           "left_out": False, "cause": "not run", "claim_id": 0, "form": None}]}
    assert migrate({}, summary, 2)[1] is summary


@pytest.mark.parametrize("key, value, says", [("cause", "maybe", "'maybe' is not one of tested"),
                                             ("form", {"op": "<"}, "not a claim's sides and operator")])
def test_a_cause_or_form_that_is_not_one_is_named(tmp_path, key, value, says):
    write_run(stored_run(tmp_path, every_kind()))
    summary = json.loads((tmp_path / "summary.json").read_text())
    summary["claims"][2][key] = value
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match=rf"summary.json: claims\[2\].{key}: {says}"):
        load_run(tmp_path)
