"""Two copies of a history store merged (history/merge.py, `history merge`), on SQLite stores made here from
records: the runs each lacks with their points, one finding per change in the furthest state with both
reasons, one expectation per commit and release, the log replayed so a relabel reaches the other copy,
row ids that differ between the copies, a run id held with other files refused with nothing written, and
a second merge that changes nothing. tests/integration/test_history_merge_pg.py does the same between
SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from history_copies import LINE, add, by_run_id, finding, night, points, row

from concurbench.errors import ConfigError
from concurbench.history.findings import Expectation, FindingState
from concurbench.history.merge import merge
from concurbench.history.store import LogAction, open_store


def test_each_copy_gains_the_runs_it_lacked_with_their_points_and_a_second_merge_changes_nothing(tmp_path):
    base, mine, theirs = tmp_path / "base.db", tmp_path / "mine.db", tmp_path / "theirs.db"
    add(base, *range(6))
    shutil.copy(base, mine)
    shutil.copy(base, theirs)
    add(mine, 6)
    add(theirs, 7, level=900.0)
    with open_store(theirs) as source, open_store(mine) as target:
        done = merge(source, target)
        assert (done.runs, done.points) == (1, 2)
        assert [r.record.run_id for r in target.runs()] == [night(i).run_id for i in range(8)]
        added = {r.record.run_id: r for r in target.runs()}[night(7).run_id]
        held = {r.record.run_id: r for r in source.runs()}[night(7).run_id]
        assert added.record == held.record and added.added == held.added  # when it first went in, kept
        got = target.run_points({added.id: added.record.run_id})[added.record.run_id]
        assert sorted(got, key=repr) == sorted(points(night(7), 900.0), key=repr)  # counts and exposures included
        assert [e.action for e in target.logs()] == [LogAction.MERGE.value]
    before = mine.read_bytes()
    with open_store(theirs) as source, open_store(mine) as target:
        again = merge(source, target)
    assert not again.anything and again.log_entries == 0
    assert mine.read_bytes() == before
    # and the other way: theirs gains night 6 and the merge's log entry, then both hold the same
    with open_store(mine) as source, open_store(theirs) as target:
        merge(source, target)
        assert {r.record.run_id for r in target.runs()} == {night(i).run_id for i in range(8)}
    with open_store(theirs) as a, open_store(mine) as b:
        back = merge(a, b)  # the log entry of that merge alone, which is not logged again: the copies settle
        assert not back.anything and back.log_entries == 1
        assert merge(b, a).log_entries == 0 and merge(a, b).log_entries == 0
        assert [e.action for e in a.logs()] == [e.action for e in b.logs()] == [LogAction.MERGE.value] * 2


def test_a_run_id_held_with_other_files_is_refused_and_nothing_is_written(tmp_path, cli_main):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    add(mine, 0, 1)
    add(theirs, 2)
    with open_store(theirs) as s:
        rec = night(1, digest="other files")
        s.add(rec, points(rec))
    before = mine.read_bytes()
    with open_store(theirs) as source, open_store(mine) as target:
        with pytest.raises(ConfigError, match=f"different runs under the same run id .{night(1).run_id}"):
            merge(source, target)
    assert mine.read_bytes() == before  # night 2 did not come in either
    code, out, err = cli_main("history", "merge", theirs, "--store", mine)
    assert code == 2 and "nothing was written" in err and "Traceback" not in err
    assert mine.read_bytes() == before


def test_findings_are_one_per_change_in_the_furthest_state_with_both_reasons_and_runs_mapped_by_run_id(tmp_path):
    """The two copies hold their runs under different row ids (nights added in another order), so every
    reference must go through the run id."""
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    add(mine, *range(12))
    add(theirs, *reversed(range(12)))
    other = LINE._replace(variant="w")
    with open_store(mine) as a, open_store(theirs) as b:
        assert [row(a, i) for i in range(12)] != [row(b, i) for i in range(12)]
    with open_store(mine) as s:
        s.save_findings([
            finding(s, 6, low=5, high=7),  # the same change: theirs starts one run later, within this interval
            finding(s, 9, state=FindingState.ACKNOWLEDGED, reason="known: vacuum settings", acted="2026-12-03T08:00"),
            finding(s, 10, key=other, state=FindingState.ACKNOWLEDGED, reason="mine", acted="2026-12-04T08:00"),
        ], [])
    with open_store(theirs) as s:
        s.save_findings([
            finding(s, 7, low=7, high=8, state=FindingState.ACKNOWLEDGED, reason="commit_delay on purpose",
                    acted="2026-12-03T09:00", now=11),
            replace(finding(s, 9, state=FindingState.RESOLVED, acted="2026-12-05T01:00"), resolved_run=row(s, 11)),
            finding(s, 10, key=other, state=FindingState.ACKNOWLEDGED, reason="theirs", acted="2026-12-04T09:00"),
            finding(s, 3),  # a change mine never saw
        ], [])
    with open_store(theirs) as source, open_store(mine) as target:
        done = merge(source, target)
        assert (done.runs, done.findings_added, done.findings_changed) == (0, 1, 3)
        got = by_run_id(target)
    assert len(got) == 4
    first, ninth, tenth, third = got
    assert first["state"] is FindingState.ACKNOWLEDGED and first["reason"] == "commit_delay on purpose"
    assert (first["first_run"], first["first_low"], first["first_high"]) == \
        (night(6).run_id, night(5).run_id, night(7).run_id)  # mine's place kept
    assert (first["now_run"], first["now_change"]) == (night(11).run_id, -0.2)  # theirs sized it later
    assert ninth["state"] is FindingState.RESOLVED and ninth["resolved_run"] == night(11).run_id
    assert ninth["reason"] == "known: vacuum settings"  # resolved wins, the acknowledgement's reason is kept
    assert tenth["state"] is FindingState.ACKNOWLEDGED and tenth["acted"] == "2026-12-04T09:00"
    assert tenth["reason"] == "theirs; mine"  # the later act first, both kept
    assert third["first_run"] == night(3).run_id and third["before_run"] == night(2).run_id
    before = mine.read_bytes()
    with open_store(theirs) as source, open_store(mine) as target:
        assert not merge(source, target).anything
    assert mine.read_bytes() == before
    with open_store(mine) as source, open_store(theirs) as target:  # and back: the same states and reasons
        merge(source, target)
        back = by_run_id(target)

    def states(findings):
        return sorted((f["key"], f["state"], f["reason"], f["acted"], f["resolved_run"]) for f in findings)

    assert len(back) == 4 and states(back) == states(got)


def test_findings_that_do_not_overlap_stay_two(tmp_path):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    add(mine, *range(12))
    shutil.copy(mine, theirs)
    with open_store(mine) as s:
        s.save_findings([finding(s, 5, low=4, high=6)], [])
    with open_store(theirs) as s:
        s.save_findings([finding(s, 8, low=7, high=9)], [])
    with open_store(theirs) as source, open_store(mine) as target:
        assert merge(source, target).findings_added == 1
        assert [f["first_run"] for f in by_run_id(target)] == [night(5).run_id, night(8).run_id]


def test_expectations_are_one_per_commit_and_release(tmp_path):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    add(mine, 0)
    shutil.copy(mine, theirs)
    with open_store(mine) as s:
        s.keep_expectations([Expectation(None, "", "16.14", "fsyncs more", "2026-12-01T00:00")], [])
    with open_store(theirs) as s:
        s.keep_expectations([Expectation(None, "", "16.14", "16.14 fsyncs more", "2026-12-01T01:00",
                                         lapsed="2026-12-06T00:00"),
                             Expectation(None, "abcdef1", "", "new index", "2026-12-02T00:00")], [])
    with open_store(theirs) as source, open_store(mine) as target:
        assert merge(source, target).expectations == 2
        got = {(e.commit, e.release): e for e in target.expectations()}
    assert len(got) == 2
    assert got[("", "16.14")].reason == "16.14 fsyncs more" and got[("", "16.14")].lapsed == "2026-12-06T00:00"
    assert got[("", "16.14")].added == "2026-12-01T00:00"  # mine's, kept
    assert got[("abcdef1", "")].reason == "new index"


def test_a_relabel_made_on_one_copy_reaches_the_other_unless_it_relabelled_later(tmp_path):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    add(mine, 0, 1, 2)
    shutil.copy(mine, theirs)
    with open_store(theirs) as s:
        ids = [row(s, i) for i in (0, 1)]
        s.relabel(ids, {r: {"track": "main"} for r in ids}, (LogAction.RELABEL.value, {"set": {"track": "main"}}))
    with open_store(mine) as s:  # later, mine gave night 1 another track
        s.log(LogAction.RELABEL.value, {"labels": {night(1).run_id: {"track": "old"}}}, "2999-01-01T00:00:00")
        s.set_labels({row(s, 1): {"track": "old"}})
    with open_store(theirs) as source, open_store(mine) as target:
        done = merge(source, target)
        assert (done.relabelled, done.log_entries) == (1, 1)
        labels = {r.record.run_id: r.record.labels for r in target.runs()}
        assert labels[night(0).run_id] == {"track": "main"} and labels[night(1).run_id] == {"track": "old"}
        assert labels[night(2).run_id] == {"night": "2"}
        assert [e.action for e in target.logs()] == ["relabel", "relabel", "merge"]
    before = mine.read_bytes()
    with open_store(theirs) as source, open_store(mine) as target:
        assert merge(source, target).log_entries == 0
    assert mine.read_bytes() == before


def test_history_merge_says_what_came_in(tmp_path, cli_main):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    add(mine, 0)
    add(theirs, 1, 2)
    code, out, err = cli_main("history", "merge", theirs, "--store", mine)
    assert code == 0, err
    assert "2 run(s) (4 figures)" in out
    code, out, err = cli_main("history", "merge", theirs, "--store", mine)
    assert code == 0 and "nothing to merge" in out
    code, out, err = cli_main("history", "merge", tmp_path / "none.db", "--store", mine)
    assert code == 2 and "does not exist" in err
