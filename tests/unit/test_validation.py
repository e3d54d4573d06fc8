"""Scenario validation: every broken file under fixtures/broken reports file:line:col, field and reason.

Also the `quick` overrides, `--param` overrides, the shipped scenario and `concurbench validate`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from concurbench.cli.main import cli
from concurbench.errors import ConfigError
from concurbench.running.load import load_scenario
from concurbench.util import parse_duration

HERE = Path(__file__).parent
BROKEN = HERE / "fixtures" / "broken"
REPO = HERE.parent.parent
REAL = REPO / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml"

# file -> problems that must be among those reported: (line, column, field path, message fragment)
EXPECTED = {
    "unknown_top_key.yaml": [
        (4, 1, "varaints", "unknown key 'varaints' (did you mean 'variants'?)"),
        (2, 1, "variants", "is required but missing"),
    ],
    "unknown_pool_key.yaml": [
        (8, 9, "variants.a.pools.p.transacton", "unknown key 'transacton' (did you mean 'transaction'?)"),
        (7, 9, "variants.a.pools.p.transaction", "is required but missing"),
    ],
    "clients_not_integer.yaml": [
        (7, 18, "variants.for_update.pools.lockers.clients", "must be a positive integer or 'sweep', got 'many'"),
    ],
    "sweep_missing.yaml": [
        (7, 7, "variants.a.pools", "'clients: sweep' but neither the variant nor the scenario has a 'sweep'"),
    ],
    "bad_distribution_name.yaml": [
        (9, 16, "variants.a.pools.p.params.aid", "unknown distribution 'zipfan' (did you mean 'zipfian'?)"),
    ],
    "zipfian_s_out_of_range.yaml": [
        (8, 23, "variants.a.pools.p.params.aid", "needs 1.001 <= s <= 1000 (as pgbench), got 0.5"),
    ],
    "bad_duration.yaml": [
        (6, 13, "variants.a.warmup", "must be a duration such as 30s"),
    ],
    "unknown_sampler.yaml": [
        (3, 17, "samplers[1]", "unknown sampler 'wait_event' (did you mean 'wait_events'?)"),
    ],
    "baseline_missing_variant.yaml": [
        (4, 10, "baseline.locks", "no variant named 'for_updat' (did you mean 'for_update'?)"),
    ],
    "published_missing_variant.yaml": [
        (7, 17, "source.published[1].variant", "no variant named 'advisry' (did you mean 'advisory'?)"),
    ],
    "missing_engine.yaml": [
        (1, 1, "engine", "is required but missing"),
    ],
    "unknown_param_ref.yaml": [
        (9, 18, "variants.a.pools.p.clients", "unknown parameter '${lokers}' (did you mean 'lockers'?)"),
    ],
    "missing_setup_file.yaml": [
        (5, 11, "setup[1].file", "no file 'sql/does-not-exist.sql'"),
    ],
    "invalid_yaml.yaml": [
        (9, 3, "", "not valid YAML"),
    ],
    "bad_isolation.yaml": [
        (11, 20, "variants.a.background[0].isolation",
         "unknown isolation level 'serialisable' (did you mean 'serializable'?)"),
    ],
    "bad_timeline.yaml": [
        (11, 42, "variants.a.background[0].at", "must be a duration such as 30s, 500ms, 2m or a number of seconds, "
                                                "got '-1s'"),
        (12, 59, "variants.a.background[1].start_after", "3 s is beyond the measurement window (2 s)"),
        (13, 80, "variants.a.background[2].stop_after", "0.5 s is not after start_after (1 s)"),
        (14, 47, "variants.a.background[3].at", "does not apply to kind hold_transaction (only to statement)"),
        (15, 46, "variants.a.background[4].stop_after", "give stop_after or release_after, not both"),
        (16, 40, "variants.a.background[5].start_after", "does not apply to kind statement (only to hold_transaction)"),
        (17, 9, "variants.a.background[6].at", "a statement needs 'at'"),
        (17, 9, "variants.a.background[6].sql", "a statement needs its 'sql'"),
    ],
    "several_problems.yaml": [
        (2, 9, "engine", "unknown engine 'postgre' (did you mean 'postgres'?)"),
        (5, 15, "variants.a.duration", "got 'soon'"),
        (8, 18, "variants.a.pools.p.clients", "got 0"),
        (9, 19, "variants.a.pools.p.protocol", "got 'prepard' (did you mean 'prepared'?)"),
        (15, 16, "variants.b.pools.q.think", "got 'forever'"),
    ],
}


def problems_of(path: Path, **kwargs):
    with pytest.raises(ConfigError) as info:
        load_scenario(path, **kwargs)
    return info.value


def has_problem(problems, line, column, path, fragment) -> bool:
    return any(p.line == line and p.column == column and p.path == path and fragment in p.message
               for p in problems)


def test_every_fixture_has_expectations():
    on_disk = {p.name for p in BROKEN.glob("*.yaml")}
    assert len(on_disk) >= 10
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_reports_position_path_and_reason(name):
    path = BROKEN / name
    error = problems_of(path)
    assert error.problems, "a ConfigError from a scenario file must list its problems"
    for line, column, field, fragment in EXPECTED[name]:
        assert has_problem(error.problems, line, column, field, fragment), (
            f"expected {line}:{column} {field}: ...{fragment}... among:\n" + "\n".join(map(str, error.problems)))
    for problem in error.problems:
        assert problem.file == str(path)
        assert problem.line >= 1 and problem.column >= 1
    # The message carries every problem as file:line:col.
    for line, column, _field, _fragment in EXPECTED[name]:
        assert f"{path}:{line}:{column}:" in error.message


def test_several_problems_are_all_reported():
    error = problems_of(BROKEN / "several_problems.yaml")
    assert len(error.problems) == 5
    assert error.message.startswith(f"{BROKEN / 'several_problems.yaml'}: 5 problems in the scenario")


def test_invalid_yaml_is_the_only_problem():
    error = problems_of(BROKEN / "invalid_yaml.yaml")
    assert len(error.problems) == 1
    assert error.cause is not None


def test_top_level_duration_problem_position_and_message():
    error = problems_of(BROKEN / "bad_duration.yaml")
    top = [p for p in error.problems if p.line == 3]
    assert len(top) == 1
    assert top[0].column == 11
    assert "got '10 parsecs'" in top[0].message


def test_top_level_duration_problem_path():
    error = problems_of(BROKEN / "bad_duration.yaml")
    top = [p for p in error.problems if p.line == 3]
    assert [p.path for p in top] == ["duration"]


def test_missing_engine_reported_once():
    error = problems_of(BROKEN / "missing_engine.yaml")
    assert [(p.path, p.message) for p in error.problems] == [("engine", "is required but missing")]


def test_missing_file_is_a_config_error(tmp_path):
    error = problems_of(tmp_path / "nope.yaml")
    assert "cannot read the scenario file" in error.message


def test_top_level_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    error = problems_of(path)
    assert "must be a mapping at the top level, got a list" in error.problems[0].message


# -- overrides and quick ---------------------------------------------------------

MINI = """\
name: mini
engine: postgres
duration: 10s
warmup: 2s
sweep: [1, 8]
parameters:
  lockers: 10
  hot: 100
variants:
  a:
    pools:
      p:
        clients: sweep
        params: {aid: "zipfian(1, ${hot}, 1.1)"}
        transaction: ["SELECT :aid"]
      bg:
        clients: ${lockers}
        measure: false
        transaction: ["SELECT 1"]
quick:
  duration: 1s
  sweep: [2]
  parameters: {lockers: 3}
"""


@pytest.fixture
def mini(tmp_path) -> Path:
    path = tmp_path / "mini.yaml"
    path.write_text(MINI)
    return path


def test_unknown_param_override_suggests(mini):
    with pytest.raises(ConfigError) as info:
        load_scenario(mini, overrides={"lokers": "3"})
    assert "--param lokers" in info.value.message
    assert "(did you mean 'lockers'?)" in info.value.message
    assert "it has: lockers, hot" in info.value.message


def test_param_override_is_applied_and_typed(mini):
    s = load_scenario(mini, overrides={"lockers": "7", "hot": "50"})
    assert dict(s.parameters) == {"lockers": 7, "hot": 50}
    pools = {p.name: p for p in s.variant("a").pools}
    assert pools["bg"].clients == 7
    assert dict(pools["p"].params)["aid"].args == (1, 50, 1.1)


def test_quick_applies_quick_overrides(mini):
    s = load_scenario(mini, quick=True)
    v = s.variant("a")
    assert s.quick is True
    assert v.duration == 1.0
    assert v.warmup == 2.0  # not overridden
    assert v.sweep == (2,)
    assert dict(s.parameters) == {"lockers": 3, "hot": 100}  # merged, not replaced
    assert {p.name: p.clients for p in v.pools}["bg"] == 3


def test_without_quick_the_quick_section_is_ignored(mini):
    s = load_scenario(mini, quick=False)
    v = s.variant("a")
    assert s.quick is False
    assert v.duration == 10.0
    assert v.sweep == (1, 8)
    assert dict(s.parameters) == {"lockers": 10, "hot": 100}
    assert {p.name: p.clients for p in v.pools}["bg"] == 10


def test_param_override_beats_quick(mini):
    s = load_scenario(mini, quick=True, overrides={"lockers": "5"})
    assert dict(s.parameters)["lockers"] == 5


def test_unknown_key_in_quick_section(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text(MINI + "  duraton: 2s\n")
    error = problems_of(path)
    assert has_problem(error.problems, 24, 3, "quick.duraton", "(did you mean 'duration'?)")


# -- the shipped scenario --------------------------------------------------------

def test_real_scenario_loads():
    s = load_scenario(REAL)
    assert s.name == "row-lock-vs-advisory"
    assert s.engine == "postgres"
    assert [v.name for v in s.variants] == ["for_update", "advisory", "bystander_alone",
                                            "bystander_beside_for_update", "bystander_beside_advisory",
                                            "for_share_1", "for_share_many"]
    assert dict(s.baselines) == {"locks": "for_update", "bystander": "bystander_alone",
                                 "multixact": "for_share_1"}
    assert s.variant("for_update").sweep == (1, 10, 40, 90)
    assert s.variant("for_update").duration == 10.0
    assert s.variant("bystander_alone").sweep == (None,)
    # the YAML merge key brings the bystanders pool beside the background lockers
    beside = {p.name: p for p in s.variant("bystander_beside_for_update").pools}
    assert set(beside) == {"bystanders", "lockers"}
    assert beside["bystanders"].clients == 40 and beside["bystanders"].measure
    assert beside["lockers"].clients == 10 and not beside["lockers"].measure
    # the setup file is read and its ${accounts} substituted
    assert s.setup[0].origin == "sql/postgres/row-lock-setup.sql"
    assert "generate_series(1, 100000)" in s.setup[0].sql
    assert "${" not in s.setup[0].sql
    assert len(s.source.published) == 6
    assert [x.name for x in s.variant("advisory").samplers] == ["wait_events", "database", "wal", "multixact"]


def test_real_scenario_loads_quick():
    # the expected values come from the file's own `quick:` section, so tuning it does not break this
    quick = YAML(typ="safe").load(REAL.read_text())["quick"]
    full = load_scenario(REAL)
    s = load_scenario(REAL, quick=True)
    assert s.quick
    v = s.variant("for_update")
    assert v.sweep == tuple(quick["sweep"]) != full.variant("for_update").sweep
    assert v.duration == parse_duration(quick["duration"])
    assert v.warmup == parse_duration(quick["warmup"])
    assert v.duration < full.variant("for_update").duration
    params = dict(s.parameters)
    for key, value in quick.get("parameters", {}).items():
        assert params[key] == value
    assert params["accounts"] == dict(full.parameters)["accounts"]  # untouched by quick
    assert s.variant("bystander_alone").pools[0].clients == params["bystanders"]
    assert max(v.sweep) == max(full.variant("for_update").sweep)  # quick shortens windows, not the contention


# -- the CLI ---------------------------------------------------------------------

def test_cli_validate_broken_file_exits_2_with_position():
    path = BROKEN / "clients_not_integer.yaml"
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:7:18:" in result.output
    assert "variants.for_update.pools.lockers.clients" in result.output


def test_cli_validate_invalid_yaml_exits_2_with_line():
    path = BROKEN / "invalid_yaml.yaml"
    result = CliRunner().invoke(cli, ["validate", str(path), str(REAL)])
    assert result.exit_code == 2
    assert f"{path}:9:3:" in result.output
    assert f"ok: {REAL}" in result.output  # the good file is still checked


def test_cli_validate_good_file_exits_0():
    result = CliRunner().invoke(cli, ["validate", "--quick", str(REAL)])
    assert result.exit_code == 0, result.output
    assert "7 variants" in result.output


def test_several_statements_in_one_need_the_simple_protocol(tmp_path):
    path = tmp_path / "multi.yaml"
    path.write_text("name: multi\nengine: postgres\nvariants:\n  v:\n    pools:\n"
                    "      p: {clients: 1, transaction: [\"SELECT 1; SELECT 2\"]}\n"
                    "      q: {clients: 1, protocol: simple, transaction: [\"SELECT 1; SELECT 2\"]}\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert [(p.line, p.path) for p in info.value.problems] == [(6, "variants.v.pools.p.transaction[0]")]
    assert "holds 2 statements" in info.value.problems[0].message


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_scenario_validates_full_and_quick(path):
    for quick in (False, True):
        scenario = load_scenario(path, quick=quick)
        assert scenario.engine == path.parent.name
        assert scenario.variants and scenario.expect


def test_sql_server_scenario_keys_reach_the_model():
    scenario = load_scenario(REPO / "scenarios" / "mssql" / "rcsi-ghost-churn.yaml", quick=True)
    assert scenario.versions == ("2019", "2022", "2025")
    assert dict(scenario.database)["delayed_durability"] == "forced"
    assert dict(scenario.database)["recovery"] == "simple"
    tf = scenario.variant("rcsi_tf7006")
    assert dict(tf.settings)["trace_flags"] == "7006"
    assert any(c.servers for c in scenario.expect)
    assert any(p.server for p in scenario.source.published)


def test_a_sampler_missing_a_required_option_is_reported_at_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nengine: mssql\nsamplers: [index_physical_stats]\nvariants:\n"
                    "  a:\n    pools:\n      p: {clients: 1, transaction: [\"SELECT 1\"]}\n")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    problem = caught.value.problems[0]
    assert (problem.line, problem.path) == (3, "samplers[0]") and "needs the option `table`" in problem.message


def test_sql_server_images_pinned_per_version_reach_the_model(tmp_path):
    path = tmp_path / "pinned.yaml"
    path.write_text('name: pinned\nengine: mssql\nserver:\n  versions: ["2019", "2022"]\n  images:\n'
                    '    "2019": mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04\n'
                    '    2022: registry.lab:5000/mssql/server:2022-CU14@sha256:' + "a" * 64 + "\n"
                    'variants:\n  a:\n    pools:\n      p: {clients: 1, transaction: ["SELECT 1"]}\n')
    scenario = load_scenario(path)
    assert dict(scenario.images) == {
        "2019": "mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04",
        "2022": "registry.lab:5000/mssql/server:2022-CU14@sha256:" + "a" * 64}
    assert "images" not in dict(scenario.settings)


@pytest.mark.parametrize("images, line, column, field, fragment", [
    ('  images:\n    "2019": "mssql server 2019"\n', 5, 13, "server.images.2019", "must be a Docker image reference"),
    ('  images:\n    latest: mcr.microsoft.com/mssql/server:2022-latest\n', 5, 5, "server.images.latest",
     "must be a server version"),
    ('  images: mcr.microsoft.com/mssql/server:2019-latest\n', 4, 11, "server.images",
     "must map server versions to Docker images"),
])
def test_bad_pinned_images_are_reported_with_file_line_and_field(tmp_path, images, line, column, field, fragment):
    path = tmp_path / "pinned.yaml"
    path.write_text('name: pinned\nengine: mssql\nserver:\n' + images +
                    'variants:\n  a:\n    pools:\n      p: {clients: 1, transaction: ["SELECT 1"]}\n')
    error = problems_of(path)
    assert has_problem(error.problems, line, column, field, fragment), "\n".join(map(str, error.problems))
    assert f"{path}:{line}:{column}:" in error.message


def test_a_variant_may_not_pin_images(tmp_path):
    path = tmp_path / "pinned.yaml"
    path.write_text('name: pinned\nengine: mssql\nvariants:\n  a:\n    server:\n      images: {"2019": "x:1"}\n'
                    '    pools:\n      p: {clients: 1, transaction: ["SELECT 1"]}\n')
    error = problems_of(path)
    assert has_problem(error.problems, 6, 7, "variants.a.server.images", "unknown key 'images'")


def test_timed_statement_is_postgres_only(tmp_path):
    path = tmp_path / "mssql-statement.yaml"
    path.write_text("name: s\nengine: mssql\nvariants:\n  a:\n    pools: {p: {clients: 1, transaction: [SELECT 1]}}\n"
                    "    background:\n      - {kind: statement, at: 1s, sql: SELECT 1}\n")
    error = problems_of(path)
    assert has_problem(error.problems, 7, 16, "variants.a.background[0].kind", "kind statement is PostgreSQL-only")


def test_timeline_keys_reach_the_model(tmp_path):
    path = tmp_path / "timeline.yaml"
    path.write_text("name: s\nengine: postgres\nduration: 2s\nvariants:\n  a:\n"
                    "    pools: {p: {clients: 1, transaction: [SELECT 1]}}\n    background:\n"
                    "      - {name: h, kind: hold_transaction, start_after: 250ms, stop_after: 1.5s}\n"
                    "      - {name: ddl, kind: statement, at: 0.5s, sql: [\"SET lock_timeout = '1s'\", SELECT 1]}\n")
    hold, ddl = load_scenario(path).variants[0].background
    assert (hold.start_after, hold.release_after, hold.at) == (0.25, 1.5, None)
    assert (ddl.kind, ddl.at, ddl.sql) == ("statement", 0.5, ("SET lock_timeout = '1s'", "SELECT 1"))


@pytest.mark.parametrize("body, where, words", [
    ("engine: postgres\nvariants:\n  v:\n    pools:\n      p: {clients: 1, transaction: \"select 1; select 2\"}\n",
     ":6:36: variants.v.pools.p.transaction[0]", "holds 2 statements"),
    ("engine: postgres\nsetup:\n  - file: [a, b]\nvariants:\n  v:\n    pools:\n      p: {clients: 1, transaction: x}\n",
     ":4:11: setup[0].file", "must be a file name, got a list"),
    ("engine: mssql\nsamplers: {mssql_waits: {top: many}}\nvariants:\n  v:\n    pools:\n"
     "      p: {clients: 1, transaction: x}\n", ":3:12: samplers.mssql_waits", "value of the wrong kind"),
])
def test_odd_values_are_problems_with_their_place_not_internal_errors(tmp_path, body, where, words):
    """A transaction of one string holding two statements, a `file:` that is a list, a sampler option of the
    wrong kind: each once ended in an internal error."""
    path = tmp_path / "odd.yaml"
    path.write_text("name: odd\n" + body)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert f"{path}{where}" in caught.value.message and words in caught.value.message
