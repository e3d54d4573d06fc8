"""Parsing and evaluating `expect` claims, on hand-made results (no server)."""

from __future__ import annotations

import pytest

from concurbench.errors import ConfigError
from concurbench.scenario import load_scenario
from concurbench.scenario.claims import Ref, evaluate, parse_claim


def result(variant, point=None, tps=100.0, lock_ms=1.0, server="18.1", elapsed=1.0, extra=None):
    metrics = {"transactions": int(tps * elapsed), "tps": tps, "latency": {"mean_ms": 2.0},
               "statements": {"lock": {"count": 1, "mean_ms": lock_ms}}}
    return {"variant": variant, "point": point, "server": server, "elapsed_s": elapsed,
            "pools": {"p": {"measure": True, "clients": point or 1, "metrics": metrics}},
            "samplers": extra or {}}


def test_parse_sides_with_factors_and_numbers():
    claim = parse_claim("holder: elapsed_s >= 3 * none: elapsed_s")
    assert claim.op == ">="
    assert claim.left.ref == Ref("holder", None, None, "elapsed_s") and claim.left.factor == 1.0
    assert claim.right.ref == Ref("none", None, None, "elapsed_s") and claim.right.factor == 3.0
    claim = parse_claim("a@max/pool: waits.Lock:tuple * 0.5 < 0.25")
    assert claim.left.ref == Ref("a", "max", "pool", "waits.Lock:tuple") and claim.left.factor == 0.5
    assert claim.right.ref is None and claim.right.factor == 0.25


@pytest.mark.parametrize("text", ["a: tps", "a: tps > b: tps > c: tps", "a:tps>b:tps", "not a ref < 3"])
def test_malformed_claims_are_rejected(text):
    with pytest.raises(ValueError):
        parse_claim(text)


def test_evaluate_sweep_points_and_factors():
    results = [result("for_update", 4, lock_ms=1.0), result("for_update", 32, lock_ms=20.0),
               result("advisory", 4, lock_ms=1.5), result("advisory", 32, lock_ms=9.0)]
    verdicts = evaluate([parse_claim("advisory@max: statements.lock.mean_ms < for_update@max: statements.lock.mean_ms"),
                         parse_claim("advisory@min: statements.lock.mean_ms < for_update@min: statements.lock.mean_ms"),
                         parse_claim("for_update@32: statements.lock.mean_ms >= 2 * advisory@32: statements.lock.mean_ms")],
                        results)
    assert [v.passed for v in verdicts] == [True, False, True]
    assert verdicts[0].left == 9.0 and verdicts[0].right == 20.0


def test_missing_metric_or_point_fails_with_a_reason():
    results = [result("a", 4), result("a", 8), result("b")]
    no_point, no_metric = evaluate([parse_claim("a: tps > 1"), parse_claim("b: tpz > 1")], results)
    assert not no_point.passed and "@N" in no_point.error
    assert not no_metric.passed and "did you mean 'tps'" in no_metric.error


def test_every_server_of_a_matrix_is_checked():
    results = [result("a", tps=200, server="16.4"), result("b", tps=100, server="16.4"),
               result("a", tps=90, server="18.1"), result("b", tps=100, server="18.1")]
    verdicts = evaluate([parse_claim("a: tps > b: tps")], results)
    assert [(v.server, v.passed) for v in verdicts] == [("16.4", True), ("18.1", False)]


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


def test_a_claim_about_some_servers_is_not_evaluated_on_the_others():
    results = [result("a", tps=200, server="2019-CU32"), result("b", tps=100, server="2019-CU32"),
               result("a", tps=90, server="2022-CU18"), result("b", tps=100, server="2022-CU18")]
    claim = parse_claim("a: tps > b: tps").__class__(**{**parse_claim("a: tps > b: tps").__dict__,
                                                        "servers": ("2019",)})
    verdicts = evaluate([claim], results)
    assert [(v.server, v.passed) for v in verdicts] == [("2019-CU32", True), ("2022-CU18", None)]
    assert "2019 only" in verdicts[1].error


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


def test_a_claim_reading_a_run_that_did_not_end_ok_is_not_evaluated():
    results = [result("a", 4, tps=200), {**result("a", 8, tps=50), "status": "incomplete"},
               {**result("b", tps=100), "status": "interrupted"}, result("c", tps=10)]
    at_max, at_min, both, fine = evaluate([parse_claim("a@max: tps > c: tps"), parse_claim("a@min: tps > c: tps"),
                                           parse_claim("a@8: tps > b: tps"), parse_claim("c: tps < 20")], results)
    assert at_max.passed is None and at_max.error == "not evaluated: the run of a@8 is incomplete"
    assert at_min.passed is True  # the other sweep point ended ok
    assert both.passed is None and both.error == "not evaluated: the run of a@8 is incomplete, b is interrupted"
    assert fine.passed is True
