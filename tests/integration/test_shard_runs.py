"""Shards run for real and merged: `run --shard 1/2` and `2/2` of a small scenario on the embedded server
hold between them exactly the unsharded run's combinations, and `merge` joins them into one run that
report, compare and the claim check read as one; mismatched, overlapping and missing shards are refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from concurbench.provisioners import binaries
from concurbench.results.shards import Shard
from concurbench.results.store import load_run
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario

HERE = Path(__file__).parent
SCENARIO = HERE / "scenarios" / "shard-merge.yaml"
pytestmark = pytest.mark.integration


def keys(run) -> list[tuple]:
    return [(r.server, r.variant, r.point, r.repeat) for r in run.variant_runs]


@pytest.fixture(scope="module")
def runs(server, running_server, tmp_path_factory):
    """Shards 1/2 and 2/2 of `--repeat 2`, the unsharded run, and shard 8/8 (one variant run) of a run with
    other parameters."""
    out = tmp_path_factory.mktemp("shards")

    def run(shard: str | None, **overrides):
        scenario = load_scenario(SCENARIO, overrides=overrides)
        outcome = Runner(scenario, running_server(server[1]), out_dir=out / (shard or "all").replace("/", "-"),
                         repeat=2, processes=1, shard=Shard.parse(shard) if shard else None).run()
        assert outcome.status == "ok", outcome.error
        return outcome.run

    return {"1/2": run("1/2"), "2/2": run("2/2"), "all": run(None), "other": run("8/8", rows="60")}


@pytest.fixture()
def cli(cli_main):
    """`concurbench ARGS...` in this process; standard error on one line."""

    def run(*args) -> tuple[int, str, str]:
        code, out, err = cli_main(*args)
        return code, out, " ".join(err.split())

    return run


def test_the_shards_are_a_partition_of_the_unsharded_run(runs):
    first, second, every = runs["1/2"], runs["2/2"], runs["all"]
    assert len(keys(every)) == 8 == len(set(keys(every)))  # 2 variants x 2 points x 2 repeats
    assert sorted(keys(first) + keys(second)) == sorted(keys(every))
    assert not set(keys(first)) & set(keys(second))
    # with one server, shard i of 2 is repeat i: every variant and point, interleaved as unsharded
    assert {r.repeat for r in first.variant_runs} == {1} and {r.repeat for r in second.variant_runs} == {2}
    assert [(r.variant, r.point) for r in first.variant_runs] == [("reads", 1), ("reads", 2), ("naps", 1), ("naps", 2)]
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["shard"]["index"] == 1 and manifest["shard"]["count"] == 2
    assert manifest["shard"]["plan"] == {"servers": 1, "repeat": 2, "variants": [
        {"variant": "reads", "points": [1, 2]}, {"variant": "naps", "points": [1, 2]}]}
    # a shard does not judge the claims on its share: merge does, on all of it
    assert [c.verdict for c in first.claims] == ["not evaluated", "not evaluated"]
    assert "concurbench merge" in first.claims[0].reason
    assert "Shard: 1/2 of the run" in (first.path / "report.md").read_text()


def test_merge_makes_one_run_that_report_compare_and_the_check_read(runs, tmp_path, cli):
    merged_dir = tmp_path / "merged"
    code, out, err = cli("merge", runs["2/2"].path, runs["1/2"].path, "-o", merged_dir, "--check")
    # the claims are judged on both shards' runs: one holds, one cannot (so the check exits 3, as run --check)
    assert code == 3, err
    assert "check failed: 1 of 2 claims do not hold" in err
    assert out.strip().splitlines()[-1] == str(merged_dir)
    merged = load_run(merged_dir)
    assert sorted(keys(merged)) == sorted(keys(runs["all"])) and len(set(keys(merged))) == 8
    assert [r.repeat for r in merged.variant_runs] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert [(c.verdict, c.reason) for c in merged.claims] == [
        ("pass", "holds exactly: every run measured the same (2 runs a side)"),
        ("fail", "does not hold exactly: every run measured the same (2 runs a side)")]
    assert [(m.index, m.path) for m in merged.merged_from] == [(1, str(runs["1/2"].path)), (2, str(runs["2/2"].path))]
    for name in ("manifest.json", "summary.json", "summary.csv", "report.md", "samples/wait_events.csv"):
        assert (merged_dir / name).is_file(), name
    # nothing measured is lost: each variant run, samples included, is the one its shard stored
    stored = {key: r for shard in ("1/2", "2/2") for key, r in zip(keys(runs[shard]), load_run(runs[shard].path)
                                                                       .variant_runs)}
    assert all(r == stored[key] for key, r in zip(keys(merged), merged.variant_runs))
    assert sum(len(r.samples.get("wait_events", [])) for r in merged.variant_runs) > 0
    code, out, err = cli("report", merged_dir, "--format", "md")
    assert code == 0, err
    assert out.strip() == (merged_dir / "report.md").read_text().strip()
    assert "Merged from shards 1/2" in out and "| PASS |" in out
    code, out, err = cli("compare", runs["all"].path, merged_dir, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert {(r["variant"], r["point"]) for r in rows} == {(v, p) for v in ("reads", "naps") for p in (1, 2)}
    assert all(r["baseline"]["n"] == r["contender"]["n"] == 2 for r in rows if r["metric"] == "tps")


def test_merge_refuses_mismatched_overlapping_and_missing_shards(runs, tmp_path, cli):
    first, other = runs["1/2"], runs["other"]
    code, _, err = cli("merge", first.path, other.path, "-o", tmp_path / "a")
    assert code == 2
    assert (f"{first.path} and {other.path} are not shards of one run: parameters differ: rows=50 and rows=60; "
            f"cut into 2 and 8 shards") in err
    assert len(other.variant_runs) == 1
    twin = tmp_path / "copy-of-shard-1"
    shutil.copytree(first.path, twin)
    code, _, err = cli("merge", first.path, twin, runs["2/2"].path, "-o", tmp_path / "b")
    assert code == 2 and "are both shard 1/2: overlapping shards" in err
    assert str(first.path) in err and str(twin) in err
    code, _, err = cli("merge", first.path, "-o", tmp_path / "c")
    assert code == 2
    version = first.servers[0].version_short
    assert (f"shard 2/2 is missing (4 of 8 combinations: reads@1 repeat 2 on {version}, reads@2 repeat 2 on "
            f"{version}, naps@1 repeat 2 on {version}, naps@2 repeat 2 on {version}); merge every shard, or pass "
            f"--partial to merge this one anyway") in err
    assert not any((tmp_path / d).exists() for d in ("a", "b", "c"))
    # --partial merges what is there; its claims cannot be decided on one run a side
    code, _, err = cli("merge", first.path, "-o", tmp_path / "d", "--partial", "--check")
    assert code == 4, err
    assert "warning: merged without every shard: shard 2/2 is missing" in err
    assert len(load_run(tmp_path / "d").variant_runs) == 4


def test_a_version_matrix_cut_into_one_shard_per_server_merges_and_compares(tmp_path):
    """As the regression workflow does it: shard i of 2 of `--server-version 16,17` is server i alone."""
    for major in ("16", "17"):
        if not binaries.cached_install(binaries.parse_version(major)):
            pytest.skip(f"PostgreSQL {major} is not cached for the binaries target (`concurbench doctor` fetches it)")
    common = ["run", str(SCENARIO), "--target", "binaries", "--server-version", "16,17", "--variant", "reads",
              "--processes", "1"]
    dirs = []
    for shard in ("1/2", "2/2"):
        result = concurbench(*common, "--shard", shard, "--out", str(tmp_path / shard.replace("/", "-")))
        assert result.returncode == 0, result.stderr[-3000:]
        dirs.append(Path(result.stdout.strip().splitlines()[-1]))
    started = [[s["version_num"] // 10000 for s in json.loads((d / "manifest.json").read_text())["servers"]]
               for d in dirs]
    assert started == [[16], [17]]  # a shard starts only the servers it has combinations on
    result = concurbench("merge", *map(str, dirs), "-o", str(tmp_path / "merged"))
    assert result.returncode == 0, result.stderr[-3000:]
    merged = load_run(tmp_path / "merged")
    versions = [s.version_short for s in merged.servers]
    assert [int(v.split(".")[0]) for v in versions] == [16, 17]
    assert sorted(keys(merged)) == sorted((v, "reads", p, 1) for v in versions for p in (1, 2))
    junit = tmp_path / "compare.xml"
    result = concurbench("compare", str(tmp_path / "merged"), "--servers", "16,17", "--format", "md",
                         "--junit", str(junit))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "reads" in result.stdout and versions[0] in result.stdout and versions[1] in result.stdout
    assert "<testcase" in junit.read_text()


def concurbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *args], capture_output=True, text=True,
                          cwd=HERE.parents[1], timeout=300)
