"""Parsing and validating `expect` claims, and judging them on hand-made repeated results (no server)."""

from __future__ import annotations

import pytest

from concurbench.errors import ConfigError
from concurbench.running.load import load_scenario
from concurbench.results.model import PoolResult, VariantRun
from concurbench.check import check_outcome, judge_claims
from concurbench.scenario.claims import Ref, parse_claim
from figured import figured


def result(variant, point=None, tps=100.0, lock_ms=1.0, server="18.1", elapsed=1.0, extra=None, repeat=1):
    metrics = {"transactions": int(tps * elapsed), "tps": tps, "latency": {"mean_ms": 2.0},
               "statements": {"lock": {"count": 1, "mean_ms": lock_ms}}}
    return figured(VariantRun(variant, "g", point, server=server, elapsed_s=elapsed, repeat=repeat,
                              pools={"p": PoolResult("p", True, point or 1)}, samplers=extra or {}), {"p": metrics})


def repeated(variant, point=None, spread=(0.98, 1.0, 1.02), **kw):
    """Three runs of one variant whose figures differ by about 2% (no within-run series: repeats decide)."""
    tps, lock_ms = kw.pop("tps", 100.0), kw.pop("lock_ms", 1.0)
    return [result(variant, point, tps=tps * f, lock_ms=lock_ms * f, repeat=i + 1, **kw) for i, f in enumerate(spread)]


def test_parse_sides_with_factors_and_numbers():
    form = parse_claim("holder: elapsed_s >= 3 * none: elapsed_s").form
    assert form.op == ">="
    assert form.left.ref == Ref("holder", None, None, "elapsed_s") and form.left.factor == 1.0
    assert form.right.ref == Ref("none", None, None, "elapsed_s") and form.right.factor == 3.0
    form = parse_claim("a@max/pool: waits.Lock:tuple * 0.5 < 0.25").form
    assert form.left.ref == Ref("a", "max", "pool", "waits.Lock:tuple") and form.left.factor == 0.5
    assert form.right.ref is None and form.right.factor == 0.25


def test_a_claims_key_is_its_form_written_one_way_or_its_id():
    key = parse_claim("reuse: elapsed_s < 0.7 * static: elapsed_s").key
    assert key == "reuse: elapsed_s < 0.7 * static: elapsed_s"
    for text in ("reuse:elapsed_s  <  static : elapsed_s*0.70", "reuse: elapsed_s < 7e-1 * static: elapsed_s",
                 "  reuse: elapsed_s < .7 * static: elapsed_s"):
        assert parse_claim(text, "reworded").key == key, text
    assert parse_claim("a@max: tps > 1.0 * b@max: tps").key == "a@max: tps > b@max: tps"
    assert parse_claim("a: failed == 0").key == "a: failed == 0"
    assert parse_claim("a: tps > b: tps").key != parse_claim("a: tps >= b: tps").key
    claim = parse_claim("a: tps > b: tps")
    assert claim.form is claim.form  # parsed once, not rebuilt on each access


@pytest.mark.parametrize("text", ["a: tps", "a: tps > b: tps > c: tps", "a:tps>b:tps", "not a ref < 3"])
def test_malformed_claims_are_rejected(text):
    with pytest.raises(ValueError):
        parse_claim(text)


def test_evaluate_sweep_points_and_factors():
    results = repeated("for_update", 4, lock_ms=1.0) + repeated("for_update", 32, lock_ms=20.0) + \
        repeated("advisory", 4, lock_ms=1.5) + repeated("advisory", 32, lock_ms=9.0)
    verdicts = judge_claims([
        parse_claim("advisory@max: statements.lock.mean_ms < for_update@max: statements.lock.mean_ms"),
        parse_claim("advisory@min: statements.lock.mean_ms < for_update@min: statements.lock.mean_ms"),
        parse_claim("for_update@32: statements.lock.mean_ms >= 2 * advisory@32: statements.lock.mean_ms")], results)
    assert [v.verdict for v in verdicts] == ["pass", "fail", "pass"]
    assert [v.passed for v in verdicts] == [True, False, True]
    assert verdicts[0].left.value == pytest.approx(9.0) and verdicts[0].right.value == pytest.approx(20.0)
    assert verdicts[0].left.low < 9.0 < verdicts[0].left.high and verdicts[0].left.n == 3


def test_missing_metric_or_point_is_not_evaluated_with_a_reason():
    results = [result("a", 4), result("a", 8), result("b")]
    no_point, no_metric = judge_claims([parse_claim("a: tps > 1"), parse_claim("b: tpz > 1")], results)
    assert no_point.verdict == "not evaluated" and "@N" in no_point.reason
    assert no_metric.verdict == "not evaluated" and "did you mean 'tps'" in no_metric.reason


def test_every_server_of_a_matrix_is_checked():
    results = repeated("a", tps=200, server="16.4") + repeated("b", tps=100, server="16.4") + \
        repeated("a", tps=90, server="18.1") + repeated("b", tps=100, server="18.1")
    verdicts = judge_claims([parse_claim("a: tps > b: tps")], results)
    assert [(v.server, v.verdict) for v in verdicts] == [("16.4", "pass"), ("18.1", "fail")]


def test_claims_validated_against_the_scenario(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nengine: postgres\nsweep: [2, 4]\nvariants:\n"
                    "  a:\n    pools:\n      p: {clients: sweep, transaction: [SELECT 1]}\n"
                    "expect:\n  - 'a@3: tps > 1'\n  - {check: 'b: tps > 1'}\n  - {check: 'a@max/q: tps > 1'}\n"
                    "  - 'a@max: tps'\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    messages = [(p.line, p.path, p.message) for p in info.value.problems]
    assert messages[0][:2] == (9, "expect[0]") and "does not run at 3 clients" in messages[0][2]
    assert messages[1][:2] == (10, "expect[1]") and "no variant named 'b'" in messages[1][2]
    assert messages[2][:2] == (11, "expect[2]") and "no pool 'q'" in messages[2][2]
    assert messages[3][:2] == (12, "expect[3]") and "compares two sides" in messages[3][2]


def test_a_claims_id_is_its_key_and_two_claims_of_one_key_are_refused(tmp_path):
    path = tmp_path / "s.yaml"
    head = ("name: s\nengine: postgres\nvariants:\n  a:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n"
            "  b:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\nexpect:\n")
    path.write_text(head + "  - {check: 'a: tps > 1.1 * b: tps', id: a-faster}\n  - 'b: tps  <  a: tps'\n")
    first, second = load_scenario(path).expect
    assert (first.key, second.key) == ("a-faster", "b: tps < a: tps")
    verdicts = judge_claims(list(load_scenario(path).expect), repeated("a", tps=200) + repeated("b", tps=100))
    assert [v.key for v in verdicts] == ["a-faster", "b: tps < a: tps"]
    path.write_text(head + "  - 'a: tps > b: tps'\n  - {check: 'a:tps > b: tps * 1.0', claim: reworded}\n"
                           "  - {check: 'a: tps > 2 * b: tps', id: ''}\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    messages = [(p.line, p.path, p.message) for p in info.value.problems]
    assert messages[0][:2] == (12, "expect[1]") and "claim 1 has the key 'a: tps > b: tps' already" in messages[0][2]
    assert messages[1][:2] == (13, "expect[2].id") and "short name" in messages[1][2]


def test_a_claim_about_some_servers_is_not_evaluated_on_the_others_and_does_not_count():
    results = repeated("a", tps=200, server="2019-CU32") + repeated("b", tps=100, server="2019-CU32") + \
        repeated("a", tps=90, server="2022-CU18") + repeated("b", tps=100, server="2022-CU18")
    claim = parse_claim("a: tps > b: tps").__class__(**{**parse_claim("a: tps > b: tps").__dict__,
                                                        "servers": ("2019",)})
    verdicts = judge_claims([claim], results)
    assert [(v.server, v.verdict) for v in verdicts] == [("2019-CU32", "pass"), ("2022-CU18", "not evaluated")]
    assert verdicts[1].reason == "not evaluated: the claim is about 2019 only"
    assert check_outcome(verdicts) == (0, 0)  # left out on purpose: not an undecided claim


def test_server_versions_match_by_their_head():
    from concurbench.scenario.claims import server_matches

    assert server_matches("2022-CU18", "2022") and server_matches("16.4", "16") and server_matches("16.4", "16.4")
    assert not server_matches("2022-CU18", "202") and not server_matches("16.4", "1")


def test_published_figures_are_read_on_their_server():
    from concurbench.report.tables import measured_value

    results = [result("a", tps=200, server="2019-CU32"), result("a", tps=90, server="2022-CU18")]
    assert measured_value(results, "a", "tps", server="2022")[0] == 90
    assert measured_value(results, "a", "tps", server="2019")[0] == 200
    assert measured_value(results, "a", "tps")[0] == 200


def test_claims_on_an_incomplete_run_or_an_unavailable_metric_are_not_evaluated():
    from dataclasses import replace

    incomplete = [replace(r, status="incomplete", messages=["1 of 2 worker processes sent no results"])
                  for r in repeated("a", tps=200)]
    no_io = [replace(r, unavailable={"io.reads": "pg_stat_io exists from PostgreSQL 16"}) for r in repeated("b")]
    v_incomplete, v_unavailable, v_ok = judge_claims(
        [parse_claim("a: tps > b: tps"), parse_claim("b: io.reads > 0"), parse_claim("b: tps > 50")],
        incomplete + no_io)
    assert v_incomplete.verdict == "not evaluated" and "a (18.1) is incomplete" in v_incomplete.reason
    assert "sent no results" in v_incomplete.reason
    assert v_unavailable.verdict == "not evaluated"
    assert "unavailable: pg_stat_io exists from PostgreSQL 16" in v_unavailable.reason
    assert v_ok.verdict == "pass"
