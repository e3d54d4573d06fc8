"""A history's statuses are RunStatus members: a point's and a run's, as made from a run and as read back from the
store (a claim's point not evaluated is RunStatus.NOT_EVALUATED, stored as the words it always was)."""

from __future__ import annotations

import pytest

from concurbench.history.records import CLAIMS, NO_POINT, PointRecord, SeriesKey
from concurbench.history.store import open_store
from concurbench.results.model import RunStatus
from history_copies import night


def point(run_id: str, status, metric: str = "tps", variant: str = "v") -> PointRecord:
    return PointRecord(run_id, SeriesKey("demo", variant, "workers", 4, NO_POINT, "16.9", metric), status, 1000.0,
                       20.0, 2.0, None, None, 3, (980.0, 1000.0, 1020.0))


def test_a_point_and_a_run_record_hold_their_status_as_a_member():
    assert point("r", "ok").status is RunStatus.OK
    assert point("r", "interrupted").status is RunStatus.INTERRUPTED
    assert point("r", "not evaluated").status is RunStatus.NOT_EVALUATED
    assert night(1).status is RunStatus.OK
    with pytest.raises(ValueError):
        point("r", "fine")


def test_the_store_reads_statuses_back_as_members(tmp_path):
    rec = night(1)
    made = [point(rec.run_id, RunStatus.INCOMPLETE),
            point(rec.run_id, RunStatus.NOT_EVALUATED, metric="a-wins", variant=CLAIMS)]
    with open_store(tmp_path / "h.db", create=True) as store:
        store.add(rec, made)
    with open_store(tmp_path / "h.db") as store:
        (stored_run,) = store.runs()
        assert stored_run.record.status is RunStatus.OK
        back = store.run_points({stored_run.id: rec.run_id})[rec.run_id]
        assert sorted((p.key.metric, p.status) for p in back) == [("a-wins", RunStatus.NOT_EVALUATED),
                                                                   ("tps", RunStatus.INCOMPLETE)]
        assert all(type(p.status) is RunStatus for p in back)
        stored = store.points(list(store.series()))
        assert {type(p.status) for points in stored.values() for p in points} == {RunStatus}
        assert {p.status for points in stored.values() for p in points} == {RunStatus.INCOMPLETE,
                                                                            RunStatus.NOT_EVALUATED}
