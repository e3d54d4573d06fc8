"""benchmarks/history_replay.py without a server: the job-queue plan's nights as issue 46 gives them, the plan file a
replay writes and `--rejudge` reads back (night order, and each bad plan refused in one paragraph naming the file),
and the figures of a night's row taken from a stored run directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STORED_RUN = ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn"
BENCHMARK = "history_replay"


@pytest.fixture(scope="module")
def replay(benchmark_script):
    return benchmark_script


def test_the_job_queue_plan_is_the_issues_36_nights(replay):
    nights = replay.job_queue_nights()
    assert [n.night for n in nights] == list(range(1, 37))
    assert [n.night for n in nights if n.neighbour] == [1, 2, 3, 9, 10, 11]
    assert [n.night for n in nights if n.server == {"log_statement": "all"}] == list(range(19, 27))
    assert [n.night for n in nights if n.server == {"commit_delay": "300", "commit_siblings": "0"}] == \
        list(range(27, 37))
    quiet = [n.night for n in nights if not n.neighbour and not n.server]
    assert quiet == [4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18]
    assert [n.night for n in replay.chosen(nights, "1-3,19,27")] == [1, 2, 3, 19, 27]
    for bad in ("x", "0-2", "37"):
        with pytest.raises(replay.PlanError, match="--nights"):
            replay.chosen(nights, bad)


def a_replay(replay, out: Path, order: list[int]) -> list:
    """A replay's folder whose nights, written in `order`, each hold a copy of a stored run."""
    nights = []
    for n in order:
        run_id = f"20261129T0{n:02d}000Z-temp-table-churn"
        shutil.copytree(STORED_RUN, out / "runs" / run_id)
        nights.append(replay.Night(n, "-" if n % 2 else "busy neighbour (1 CPU)", neighbour=not n % 2,
                                   labels={"branch": "main", "night": str(n)}, run_id=run_id,
                                   run_dir=f"runs/{run_id}", run_exit=0, check_exit=0))
    replay.write_plan(out, {"plan": "job-queue", "ack_first": False}, nights)
    return nights


def test_rejudge_reads_the_nights_back_in_night_order(replay, tmp_path):
    written = a_replay(replay, tmp_path, [2, 3, 1])
    meta, nights = replay.read_plan(tmp_path)
    assert meta == {"plan": "job-queue", "ack_first": False}
    assert [n.night for n in nights] == [1, 2, 3]
    assert sorted(nights, key=lambda n: n.night) == sorted(written, key=lambda n: n.night)  # nothing lost on the way
    assert not (tmp_path / "plan.json.partial").exists()


@pytest.mark.parametrize("damage, said", [
    (lambda p: p.unlink(), "cannot read the replay's plan"),
    (lambda p: p.write_text('{"nights": [\n  {"night": 1,}\n]}'), "line 2: not JSON"),
    (lambda p: p.write_text('{"nights": {}}'), "a list `nights`"),
    (lambda p: p.write_text('{"nights": [{"injected": "-"}]}'), "nights[0]: expected an object with a whole number"),
    (lambda p: p.write_text(p.read_text().replace('"night": 2', '"night": 1')), "night 1 is recorded more than once"),
    (lambda p: shutil.rmtree(p.parent / "runs" / "20261129T002000Z-temp-table-churn"),
     "night 2: its run directory"),
])
def test_a_bad_plan_is_refused_naming_the_file(replay, tmp_path, damage, said):
    a_replay(replay, tmp_path, [1, 2])
    damage(tmp_path / "plan.json")
    with pytest.raises(replay.PlanError) as error:
        replay.read_plan(tmp_path)
    assert str(error.value).startswith(str(tmp_path / "plan.json")) and said in str(error.value)
    assert replay.main(["--rejudge", str(tmp_path)]) == 2  # one paragraph, exit 2, no traceback


def test_a_nights_row_comes_from_its_stored_run(replay, tmp_path):
    shown = replay.figures(STORED_RUN, {"commit_delay"})
    assert shown["tps"] and all(v > 0 for v in shown["tps"].values())
    assert shown["recorded"] is False and shown["settings"] == {}  # written before settings_in_effect
    night = replay.Night(4, "-", check_exit=5, causes=["from run X [F1]: a/b tps -20.0%"])
    table = replay.Table({"commit_delay"})
    row = table.row(night, shown)
    assert row.startswith("| 4 | - | ") and row.endswith("| not recorded | 5 | from run X [F1]: a/b tps -20.0% |")
    assert len(table.columns) == len(shown["tps"])
