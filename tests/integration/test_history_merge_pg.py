"""`history init` and `history merge` with a PostgreSQL store on the shared embedded server: init makes the
tables in a database without them and then only counts the runs; a store whose history_meta lacks its
version is refused; an SQLite copy merged into PostgreSQL and a PostgreSQL one into SQLite bring the runs
each lacks, one finding per change in the furthest state, the expectations and a relabel, with row ids
that differ; a second merge changes nothing; a run id held with other files is refused with nothing
written. The stores are made from records (tests/history_copies.py), so the tests take seconds."""

from __future__ import annotations

import shutil
import subprocess
import sys

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from history_copies import add, by_run_id, finding, night, points, row

from concurbench.errors import ConfigError
from concurbench.history.findings import Expectation, FindingState
from concurbench.history.merge import merge
from concurbench.history.store import LogAction, open_store

pytestmark = pytest.mark.integration
TABLES = ("history_meta", "history_runs", "history_series", "history_points", "history_findings",
          "history_expectations", "history_log")


@pytest.fixture()
def pg_url(server):
    """A fresh database on the embedded server, as a store URL; dropped afterwards."""
    conninfo = server[1].conninfo
    parts = conninfo_to_dict(conninfo)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS history_merge WITH (FORCE)")
        conn.execute("CREATE DATABASE history_merge")
    yield f"postgresql://{parts['user']}@{parts.get('host', '127.0.0.1')}:{parts['port']}/history_merge"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS history_merge WITH (FORCE)")


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def contents(url: str) -> dict[str, list]:
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}


def test_init_makes_the_tables_once_and_a_store_without_its_version_is_refused(pg_url):
    done = cli("history", "init", pg_url)
    assert done.returncode == 0 and "made an empty history store" in done.stdout, done.stderr
    add(pg_url, 0, 1)
    before = contents(pg_url)
    done = cli("history", "init", pg_url)
    assert done.returncode == 0 and "is a history store already (2 runs); nothing was changed" in done.stdout
    assert contents(pg_url) == before
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM history_meta")
    before = contents(pg_url)
    for args in (("init", pg_url), ("show", "--store", pg_url), ("check", "--store", pg_url)):
        done = cli("history", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "is damaged" in done.stderr and "Traceback" not in done.stderr
    assert contents(pg_url) == before


def test_sqlite_and_postgresql_copies_merged_both_ways(pg_url, tmp_path):
    """The PostgreSQL copy was filled in another order (other row ids); each copy has a night, a finding
    state, an expectation or a relabel the other lacks."""
    lite = tmp_path / "lite.db"
    add(lite, *range(10))
    add(pg_url, *reversed(range(9)))
    with open_store(lite) as s:
        s.save_findings([finding(s, 6, low=5, high=7, state=FindingState.ACKNOWLEDGED, reason="expected",
                                 acted="2026-12-02T08:00"), finding(s, 3)], [])
        s.keep_expectations([Expectation(None, "", "16.14", "fsyncs more", "2026-12-01T00:00")], [])
        s.relabel([row(s, 2)], {row(s, 2): {"track": "main"}}, (LogAction.RELABEL.value, {}))
    with open_store(pg_url) as s:
        s.save_findings([finding(s, 7, low=6, high=8)], [])
    with open_store(lite) as source, open_store(pg_url) as target:
        done = merge(source, target)
        assert (done.runs, done.findings_added, done.findings_changed, done.expectations, done.relabelled) == \
            (1, 1, 1, 1, 1)
        got = by_run_id(target)
        assert [(f["first_run"], f["state"], f["reason"]) for f in got] == [
            (night(7).run_id, FindingState.ACKNOWLEDGED, "expected"), (night(3).run_id, FindingState.NEW, None)]
        assert got[1]["before_run"] == night(2).run_id
        assert {r.record.run_id: r.record.labels for r in target.runs()}[night(2).run_id] == {"track": "main"}
        held = target.run_points({row(target, 9): night(9).run_id})[night(9).run_id]
        assert sorted(held, key=repr) == sorted(points(night(9)), key=repr)
    before = contents(pg_url)
    assert cli("history", "merge", lite, "--store", pg_url).stdout.startswith("nothing to merge")
    assert contents(pg_url) == before
    # and back into SQLite: it gains the merge's log entry and nothing else
    copy = tmp_path / "copy.db"
    shutil.copy(lite, copy)
    with open_store(pg_url) as source, open_store(copy) as target:
        back = merge(source, target)
        assert not back.anything and back.log_entries == 1
        assert len(target.findings()) == 2


def test_a_run_id_held_with_other_files_is_refused_with_nothing_written_in_postgresql(pg_url, tmp_path):
    lite = tmp_path / "lite.db"
    add(lite, 0, 5)
    with open_store(lite) as s:
        rec = night(1, digest="other")
        s.add(rec, points(rec))
    add(pg_url, 1, 2)
    before = contents(pg_url)
    with open_store(lite) as source, open_store(pg_url) as target:
        with pytest.raises(ConfigError, match="different runs under the same run id"):
            merge(source, target)
    assert contents(pg_url) == before
    done = cli("history", "merge", pg_url, "--store", lite)  # the other way: SQLite as it was
    assert done.returncode == 2 and "nothing was written" in done.stderr
    with open_store(lite) as s:
        assert s.count_runs() == 3
