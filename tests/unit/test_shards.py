"""Shards and merge without a server: the shard rule (deterministic, complete, disjoint, contiguous) and
the refusals of `merge` on shard run directories built from the model."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from concurbench.errors import ConfigError
from concurbench.running.merge import merge_shards
from concurbench.results.join import join
from concurbench.results.model import (FORMAT_VERSION, ClaimVerdict, PoolResult, Run, ScenarioInfo, ServerInfo, ShardInfo,
                                       VariantRun)
from concurbench.results.shards import Combination, Plan, Shard, shard_number
from concurbench.results.store import load_run, record_variant_run, start_run, write_run
from figured import figured

PLAN = Plan(2, (("a", (1, 2)), ("b", (1, 2))), 2)  # 2 servers x 2 repeats x 2 variants x 2 points = 16
VERSIONS = ("16.4", "17.2")


# The rule -------------------------------------------------------------------------------------------

def test_the_rule_numbers_server_repeat_variant_point_and_cuts_contiguous_blocks():
    every = PLAN.combinations()
    assert every[:5] == [Combination(0, 1, "a", 1), Combination(0, 1, "a", 2), Combination(0, 1, "b", 1),
                         Combination(0, 1, "b", 2), Combination(0, 2, "a", 1)]
    # as many shards as servers: one server a shard
    assert {c.server for c in Shard(1, 2).combinations(PLAN)} == {0}
    assert {c.server for c in Shard(2, 2).combinations(PLAN)} == {1}
    # servers x repeats: one repeat of one server a shard, every variant and point in it
    for index, (server, repeat) in enumerate(itertools.product((0, 1), (1, 2)), 1):
        share = Shard(index, 4).combinations(PLAN)
        assert {(c.server, c.repeat) for c in share} == {(server, repeat)}
        assert sorted((c.variant, c.point) for c in share) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    # 3 of 16: blocks of 6, 5 and 5 in the rule's order
    assert [len(Shard(i, 3).combinations(PLAN)) for i in (1, 2, 3)] == [6, 5, 5]
    assert Shard(2, 3).combinations(PLAN) == every[6:11]


@pytest.mark.parametrize("servers,repeat,points", [(1, 1, (None,)), (1, 2, (1, 2)), (2, 3, (4, 32)),
                                                   (3, 1, (1, 10, 40))])
def test_every_combination_is_in_exactly_one_shard_and_the_rule_is_deterministic(servers, repeat, points):
    plan = Plan(servers, (("x", points), ("y", (None,)), ("z", points)), repeat)
    every = plan.combinations()
    assert len(every) == len(set(every)) == servers * repeat * (2 * len(points) + 1)
    for count in range(1, len(every) + 1):
        shares = [Shard(i, count).combinations(plan) for i in range(1, count + 1)]
        joined = [c for share in shares for c in share]
        assert joined == every  # complete, disjoint, and in order: the shards are contiguous blocks
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        assert shares == [Shard(i, count).combinations(Plan.from_dict(plan.as_dict())) for i in range(1, count + 1)]
    assert [shard_number(k, 10, 4) for k in range(10)] == [1, 1, 1, 2, 2, 3, 3, 3, 4, 4]


def test_shard_text_and_counts_that_cannot_be_refused_with_a_usage_error():
    assert Shard.parse(" 2/3 ") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"
    for text in ("0/2", "3/2", "1", "a/b", "1-2", "-1/2"):
        with pytest.raises(ConfigError, match=r"--shard .*expected I/N"):
            Shard.parse(text)
    with pytest.raises(ConfigError, match=r"--shard 17/17: the run has only 16 combinations .* use at most 16"):
        Shard(17, 17).combinations(PLAN)


def test_run_refuses_shard_with_check_before_touching_anything(cli_main, tmp_path):
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml"
    code, _, err = cli_main("run", scenario, "--shard", "1/2", "--check", "--out", tmp_path)
    assert code == 2
    assert "--shard cannot be used with --check" in err and "concurbench merge" in err and "--check" in err
    code, _, err = cli_main("run", scenario, "--shard", "3/2", "--out", tmp_path)
    assert code == 2 and "--shard 3/2: expected I/N with 1 <= I <= N" in " ".join(err.split())
    assert not any(tmp_path.iterdir())


# Merge ----------------------------------------------------------------------------------------------

def shard_run(root: Path, index: int, count: int = 2, plan: Plan = PLAN, versions=VERSIONS, host="vm",
              write: bool = True, **changes) -> Run:
    """The run directory `run --shard index/count` of PLAN would write (figures made up, shapes real)."""
    share = Shard(index, count).combinations(plan)
    used = sorted({c.server for c in share})
    results = [figured(VariantRun(c.variant, "g", c.point, server=versions[c.server], repeat=c.repeat, elapsed_s=1.0,
                                  pools={"p": PoolResult("p", True, c.point)},
                                  samples={"wait_events": [{"t_s": 0.1, "wait": "CPU", "sessions": c.point}]}),
                       {"p": metrics(100.0 + c.repeat)})
               for c in share]
    run = Run(ScenarioInfo("s", file="/nowhere/s.yaml", sha256="a" * 64, parameters={"rows": 10},
                           variants=["a", "b", "c"]),
              servers=[ServerInfo(f"PostgreSQL {versions[p]}", None, versions[p]) for p in used], target="binaries",
              host={"hostname": host, "cpu_count": 2}, processes=2, repeat=plan.repeat,
              started=f"2026-01-0{index}T00:00:00+00:00", ended=f"2026-01-0{index}T00:10:00+00:00",
              variant_runs=results, shard=ShardInfo(index, count, plan, [versions[p] if p in used else None
                                                                         for p in range(plan.servers)]),
              path=root / f"shard-{index}-of-{count}")
    run = replace(run, **changes)
    if write:
        run.path.mkdir(parents=True, exist_ok=True)
        write_run(run)
    return run


def metrics(tps: float) -> dict:
    return {"sessions": 2, "transactions": 100, "tps": tps, "failed": 0, "retries": 0, "errors": {"deadlock": 0},
            "latency": {"mean_ms": 1.5, "p50_ms": 1.25, "p95_ms": 4.0, "p99_ms": None, "max_ms": 9.5},
            "statements": {"one": {"count": 100, "mean_ms": 1.5, "p50_ms": 1.25, "p95_ms": 4.0, "p99_ms": None,
                                   "max_ms": 9.5}},
            "statements_executed": 100, "error_messages": {}}


def _key(r: VariantRun) -> tuple:
    return r.server, r.variant, r.point, r.repeat


def test_merged_shards_hold_every_combination_once_in_the_rule_order(tmp_path):
    shards = [shard_run(tmp_path, i, 4) for i in (3, 1, 4, 2)]
    assert load_run(shards[0].path).shard == shards[0].shard  # the shard record is written and read back
    outcome = merge_shards([s.path for s in shards], tmp_path / "merged")
    assert outcome.warnings == []
    merged = load_run(tmp_path / "merged")
    every = [(VERSIONS[c.server], c.variant, c.point, c.repeat) for c in PLAN.combinations()]
    assert [_key(r) for r in merged.variant_runs] == every
    assert [s.version_short for s in merged.servers] == list(VERSIONS)
    assert [(m.index, m.count, m.path) for m in merged.merged_from] == [
        (i, 4, str(tmp_path / f"shard-{i}-of-4")) for i in (1, 2, 3, 4)]
    assert merged.shard is None and merged.repeat == 2 and merged.status == "ok"
    assert merged.started.startswith("2026-01-01") and merged.ended.startswith("2026-01-04")
    assert all(r.samples["wait_events"] for r in merged.variant_runs)
    report = (tmp_path / "merged" / "report.md").read_text()
    assert "Merged from shards 1/4 (vm), 2/4 (vm), 3/4 (vm), 4/4 (vm)" in report
    manifest = json.loads((tmp_path / "merged" / "manifest.json").read_text())
    assert [m["index"] for m in manifest["merged_from"]] == [1, 2, 3, 4] and "shard" not in manifest


@pytest.mark.parametrize("change,expected", [
    ({"scenario": ScenarioInfo("s", sha256="b" * 64, parameters={"rows": 10})},
     "the scenario file differs (SHA-256 aaaaaaaaaaaa and bbbbbbbbbbbb)"),
    ({"scenario": ScenarioInfo("other", sha256="a" * 64, parameters={"rows": 10})}, "scenario s and other"),
    ({"scenario": ScenarioInfo("s", sha256="a" * 64, parameters={"rows": 20})},
     "parameters differ: rows=10 and rows=20"),
    ({"scenario": ScenarioInfo("s", sha256="a" * 64, parameters={"rows": 10}, quick=True)},
     "only the second ran with --quick"),
    ({"target": "docker"}, "target binaries and docker"),
])
def test_shards_of_different_runs_are_refused_naming_both_directories_and_the_difference(tmp_path, change,
                                                                                          expected):
    first = shard_run(tmp_path, 1)
    second = shard_run(tmp_path, 2, **change)
    with pytest.raises(ConfigError) as info:
        join([load_run(first.path), load_run(second.path)])
    assert info.value.message == f"{first.path} and {second.path} are not shards of one run: {expected}"


def test_different_format_versions_and_plans_are_refused(tmp_path):
    first = shard_run(tmp_path, 1, write=False)
    for other, expected in [
        (shard_run(tmp_path, 2, write=False, format_version=1), f"format version {FORMAT_VERSION} and 1"),
        (shard_run(tmp_path, 2, plan=replace(PLAN, repeat=3), write=False), "--repeat 2 and 3"),
        (shard_run(tmp_path, 2, 3, write=False), "cut into 2 and 3 shards"),
        (shard_run(tmp_path, 2, plan=replace(PLAN, variants=PLAN.variants[:1]), write=False),
         "variants a, b and a (--variant)"),
    ]:
        with pytest.raises(ConfigError, match="are not shards of one run: ") as info:
            join([first, other])
        assert expected in info.value.message and str(first.path) in info.value.message
    assert FORMAT_VERSION == 3


def test_overlapping_shards_are_refused(tmp_path, cli_main):
    first = shard_run(tmp_path, 1)
    again = shard_run(tmp_path / "copy", 1)
    second = shard_run(tmp_path, 2)
    code, _, err = cli_main("merge", first.path, second.path, again.path, "-o", tmp_path / "m")
    assert code == 2
    assert (f"{first.path} and {again.path} are both shard 1/2: overlapping shards (the same combinations twice)"
            in " ".join(err.split()))
    assert not (tmp_path / "m").exists()
    # a directory that holds what is not its share (edited, or a different rule) is refused too
    stray = shard_run(tmp_path / "stray", 2, write=False)
    stray = replace(stray, variant_runs=stray.variant_runs + [replace(stray.variant_runs[0], server="16.4")],
                    shard=replace(stray.shard, servers=["16.4", "17.2"]))
    with pytest.raises(ConfigError, match=r"a@1 repeat 1 on 16.4 is not in shard 2/2 by the shard rule"):
        join([first, stray])
    twice = replace(stray, variant_runs=stray.variant_runs[:2] + stray.variant_runs[:1])
    with pytest.raises(ConfigError, match=r"both hold a@1 repeat 1 on 17.2: overlapping shards"):
        join([first, twice])


def test_missing_shards_are_named_and_merged_only_when_partial(tmp_path, cli_main):
    shards = [shard_run(tmp_path, i, 4) for i in (1, 3)]
    code, _, err = cli_main("merge", *[s.path for s in shards], "-o", tmp_path / "m")
    err = " ".join(err.split())
    assert code == 2
    assert ("shards 2/4, 4/4 are missing (8 of 16 combinations: a@1 repeat 2 on 16.4, a@2 repeat 2 on 16.4, "
            "b@1 repeat 2 on 16.4, b@2 repeat 2 on 16.4, a@1 repeat 2 on 17.2, a@2 repeat 2 on 17.2 and 2 more); "
            "merge every shard, or pass --partial to merge these 2 anyway") in err
    code, out, err = cli_main("merge", *[s.path for s in shards], "-o", tmp_path / "m", "--partial")
    assert code == 0, err
    assert "warning: merged without every shard: shards 2/4, 4/4 are missing" in " ".join(err.split())
    assert out.strip().splitlines()[-1] == str(tmp_path / "m")
    merged = load_run(tmp_path / "m")
    assert {r.repeat for r in merged.variant_runs} == {1} and len(merged.variant_runs) == 8
    assert "Merged from shards 1/4 (vm), 3/4 (vm); missing 2/4, 4/4" in (tmp_path / "m" / "report.md").read_text()


def test_different_hosts_are_a_warning_and_a_server_run_as_two_versions_is_refused(tmp_path):
    first = shard_run(tmp_path, 1, 4, write=False, host="runner-a")
    rest = [shard_run(tmp_path, i, 4, write=False, host="runner-b") for i in (2, 3, 4)]
    joined = join([first, *rest])
    assert joined.warnings == ["the shards ran on different hosts (runner-a: 1/4; runner-b: 2/4, 3/4, 4/4): figures "
                               "of different shards, and a comparison of servers that ran on different hosts, include "
                               "the difference between the machines"]
    assert joined.run.host["hostname"] == "runner-a, runner-b"
    newer = shard_run(tmp_path, 2, 4, write=False, versions=("16.6", "17.2"))
    with pytest.raises(ConfigError, match=r"ran server 1 of the plan as 16.4 and 16.6: their figures are not of one "
                                          r"server"):
        join([first, newer, *rest[1:]])


def test_a_shard_that_ended_early_is_merged_with_a_warning_and_the_merged_status_is_its(tmp_path):
    first = shard_run(tmp_path, 1, write=False)
    second = shard_run(tmp_path, 2, write=False)
    second = replace(second, status="interrupted", error="interrupted: the run was stopped",
                     variant_runs=second.variant_runs[:5])
    joined = join([first, second])
    assert joined.run.status == "interrupted"
    assert joined.run.error == "shard 2/2: interrupted: the run was stopped"
    assert joined.warnings == [f"shard 2/2 ({second.path}) ended interrupted and lacks 3 of its 8 combinations: "
                               f"a@2 repeat 2 on 17.2, b@1 repeat 2 on 17.2, b@2 repeat 2 on 17.2"]


def test_merge_refusals_of_what_is_not_a_shard_an_output_in_use_and_a_missing_scenario(tmp_path):
    plain = replace(shard_run(tmp_path, 1, write=False), shard=None)
    with pytest.raises(ConfigError, match=r"not a shard \(the run was made without --shard\)"):
        join([plain])
    shards = [shard_run(tmp_path, i) for i in (1, 2)]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"-o .*taken: exists and is not an empty directory"):
        merge_shards([s.path for s in shards], taken)
    # claims to judge, but the scenario file is not where the shards ran it
    with_claims = [shard_run(tmp_path / "c", i, claims=[]) for i in (1, 2)]
    for s in with_claims:
        write_run(replace(s, claims=[ClaimVerdict("a: tps > b: tps", "not evaluated", reason="shard")]))
    with pytest.raises(ConfigError, match=r"its file /nowhere/s.yaml is not here; pass --scenario FILE"):
        merge_shards([s.path for s in with_claims], tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_a_shard_in_progress_is_refused_and_a_killed_one_merged_with_what_its_journal_kept(tmp_path):
    """The running manifest of a shard says which shard it is (the runner writes ShardInfo from the start), so
    its journal's variant runs merge like a finished shard's; the merged status is `killed`, the worst."""
    first = shard_run(tmp_path, 1)
    second = shard_run(tmp_path, 2, write=False)
    second.path.mkdir(parents=True)
    start_run(replace(second, variant_runs=[]), planned=len(second.variant_runs))
    for result in second.variant_runs[:5]:
        assert record_variant_run(second.path, result) is None
    with pytest.raises(ConfigError, match=rf"{second.path}: shard 2/2 is still running \(pid {os.getpid()}\); "
                                          r"5 of 8 variant runs finished so far; merge it once it has ended"):
        join([load_run(first.path), load_run(second.path)])
    manifest = json.loads((second.path / "manifest.json").read_text())
    manifest["owner"]["pid"] = _dead_pid()
    (second.path / "manifest.json").write_text(json.dumps(manifest))
    joined = join([load_run(first.path), load_run(second.path)])
    assert joined.run.status == "killed" and len(joined.run.variant_runs) == 8 + 5
    assert joined.warnings == [f"shard 2/2 ({second.path}) ended killed and lacks 3 of its 8 combinations: "
                               f"a@2 repeat 2 on 17.2, b@1 repeat 2 on 17.2, b@2 repeat 2 on 17.2"]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
