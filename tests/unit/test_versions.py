"""`versions:` conditions: parsing, matching, validation with file, line and field, and the scenario
as it runs on one server (Scenario.on_server). No server."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from concurbench.errors import ConfigError
from concurbench.results.model import PoolResult, VariantRun
from concurbench.running.load import load_scenario
from concurbench.check import judge_claims
from concurbench.scenario.versions import parse_versions, version_parts
from figured import figured

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, yes, no", [
    (">=15", ["15.0", "15.9", "16.4", "18.6"], ["14.23", "14"]),
    ("<15", ["14.23", "14.0"], ["15.0", "18.6"]),
    ("14", ["14.0", "14.23"], ["15.1", "140"]),
    (14, ["14.23"], ["15.1"]),
    ("<=15", ["15.19", "14.2"], ["16.0"]),
    (">15", ["16.0"], ["15.19"]),
    ("!=16", ["15.3", "17.1"], ["16.4"]),
    (">=15, <18", ["15.1", "17.11"], ["14.23", "18.0"]),
    (">=16.4", ["16.4", "16.10", "17.0"], ["16.3", "15.99"]),
    (">=2022", ["2022-CU18", "2025"], ["2019-CU30"]),
])
def test_conditions_match_by_as_many_parts_as_they_name(text, yes, no):
    spec = parse_versions(text)
    assert all(spec.matches(version_parts(v)) for v in yes), yes
    assert not any(spec.matches(version_parts(v)) for v in no), no


def test_server_versions_are_read_from_their_leading_numbers():
    assert version_parts("14.23") == (14, 23)
    assert version_parts("18beta1") == (18,)
    assert version_parts("2022-CU18") == (2022,)
    assert version_parts("?") is None


@pytest.mark.parametrize("value", [">= fifteen", "15-17", "", ">=15,", "=>15", True, [15], {"min": 15}, 15.5])
def test_malformed_conditions_are_refused_with_examples(value):
    with pytest.raises(ValueError, match=r"version|\">=15\""):
        parse_versions(value)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(dedent(text))
    return path


SCENARIO = """\
    name: versions
    engine: postgres
    setup:
      - CREATE TABLE t (id int)
      - {sql: "SELECT pg_stat_force_next_flush()", versions: ">=15"}
      - {sql: "SELECT pg_sleep(0.6)", versions: "<15"}
    teardown:
      - {sql: DROP TABLE t, versions: ">=14"}
    probes:
      - {name: io, sql: "SELECT sum(reads) AS reads FROM pg_stat_io", versions: ">=16"}
      - {name: always, sql: "SELECT 1 AS one"}
    variants:
      a:
        setup:
          - {sql: "SELECT 15", versions: "15"}
        pools:
          p:
            clients: 1
            transaction:
              - {name: plain, sql: "SELECT 1"}
              - {name: newer, sql: "SELECT 2", versions: ">=17"}
    expect:
      - {check: "a: probes.io.after.reads >= 0", versions: ">=16"}
      - {check: "a: tps > 0"}
"""


def test_on_server_leaves_out_what_the_version_does_not_meet(tmp_path):
    scenario = load_scenario(write(tmp_path, SCENARIO))
    on14 = scenario.on_server("14.23")
    assert [s.sql for s in on14.setup] == ["CREATE TABLE t (id int)", "SELECT pg_sleep(0.6)"]
    assert [s.sql for s in on14.teardown] == ["DROP TABLE t"]
    (variant,) = on14.variants
    assert [p.name for p in variant.probes] == ["always"]
    assert variant.setup == ()
    assert [s.name for s in variant.pools[0].transaction] == ["plain"]

    on17 = scenario.on_server("17.11")
    assert [s.sql for s in on17.setup] == ["CREATE TABLE t (id int)", "SELECT pg_stat_force_next_flush()"]
    assert [p.name for p in on17.variants[0].probes] == ["io", "always"]
    assert [s.name for s in on17.variants[0].pools[0].transaction] == ["plain", "newer"]
    assert [s.sql for s in scenario.on_server("15.4").variants[0].setup] == ["SELECT 15"]
    assert scenario.on_server("14.23").name == scenario.name and scenario.variants[0].setup  # the original stays whole


def test_a_scenario_without_conditions_is_the_same_on_every_server():
    scenario = load_scenario(REPO / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml")
    assert scenario.on_server("14.23") is scenario
    assert scenario.on_server("?") is scenario


def test_a_pool_left_with_no_statement_or_an_unreadable_version_is_a_clear_error(tmp_path):
    text = SCENARIO.replace('{name: plain, sql: "SELECT 1"}', '{name: plain, sql: "SELECT 1", versions: ">=16"}')
    scenario = load_scenario(write(tmp_path, text))
    with pytest.raises(ConfigError, match=r"variants\.a\.pools\.p\.transaction: no statement is for server 14\.23"):
        scenario.on_server("14.23")
    with pytest.raises(ConfigError, match="server's version 'devel' does not start with a number"):
        scenario.on_server("devel")


def test_bad_conditions_are_reported_with_file_line_and_field(tmp_path):
    text = (SCENARIO.replace('versions: "<15"', 'versions: "< fifteen"')
            .replace('{name: newer, sql: "SELECT 2", versions: ">=17"}', '{name: newer, sql: "SELECT 2", versions: [17]}')
            .replace('versions: ">=16"}\n      - {name: always', 'versions: "16+"}\n      - {name: always')
            .replace('{check: "a: probes.io.after.reads >= 0", versions: ">=16"}',
                     '{check: "a: probes.io.after.reads >= 0", version: ">=16"}'))
    with pytest.raises(ConfigError) as err:
        load_scenario(write(tmp_path, text))
    problems = {(p.line, p.path): p.message for p in err.value.problems}
    assert "'< fifteen' is not a version comparison" in problems[(6, "setup[2].versions")]
    assert "got a list" in problems[(21, "variants.a.pools.p.transaction[1].versions")]
    assert "'16+' is not a version comparison" in problems[(10, "probes[0].versions")]
    assert "unknown key 'version' (did you mean 'versions'?)" in problems[(23, "expect[0].version")]
    assert str(err.value).count(str(tmp_path / "s.yaml")) >= 5  # the head line and every problem name the file


def test_a_claim_with_a_condition_is_not_evaluated_on_other_versions(tmp_path):
    scenario = load_scenario(write(tmp_path, SCENARIO))
    runs = [figured(VariantRun("a", "main", None, server=server, elapsed_s=1.0, repeat=repeat,
                               pools={"p": PoolResult("p", True, 1)},
                               probes={"io": {"after": [{"reads": 3}]}} if server != "14.23" else {}),
                    {"p": {"tps": 10.0, "transactions": 10}})
            for server in ("14.23", "16.4") for repeat in (1, 2)]  # two runs that agree: exact figures
    verdicts = judge_claims(list(scenario.expect), runs)
    assert [(v.server, v.claim[:8], v.verdict) for v in verdicts] == [
        ("14.23", "a: probe", "not evaluated"), ("14.23", "a: tps >", "pass"),
        ("16.4", "a: probe", "pass"), ("16.4", "a: tps >", "pass")]
    assert verdicts[0].reason == "not evaluated: the claim is about versions >=16 only"


def test_the_shipped_temp_table_scenario_flushes_by_version():
    scenario = load_scenario(REPO / "scenarios" / "postgres" / "temp-table-churn.yaml", quick=True)
    for version, wanted, left_out in (("14.23", "pg_sleep", "pg_stat_force_next_flush"),
                                      ("18.6", "pg_stat_force_next_flush", "pg_sleep")):
        for variant in scenario.on_server(version).variants:
            sql = " ".join(step.sql for step in variant.setup)
            assert wanted in sql and left_out not in sql, (version, variant.name)
