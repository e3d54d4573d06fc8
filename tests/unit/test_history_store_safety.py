"""A store made on purpose and bad input refused with the store as it was (no server): an empty file (what a
failed copy leaves) refused by add, check and show, taken by `history init` and `add --create`; another
program's SQLite file and a store whose history_meta has no version refused and left byte for byte; init
on a store already there changes nothing; labels with a control character, an empty key or `=` in the key
refused wherever labels are given; a manifest without `started` and a summary with `"tps": "fast"` refused
by `history add`. Each refusal: exit 2, one paragraph naming the file or label and the field."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from concurbench.cli.history import add_runs
from concurbench.errors import ConfigError
from concurbench.history.records import PointRecord, RunRecord, SeriesKey
from concurbench.history.store import open_store

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn"
SCENARIO = ROOT / "scenarios" / "postgres" / "row-lock-vs-advisory.yaml"


def one_paragraph(err: str) -> str:
    """The error as the CLI printed it: one paragraph, no traceback."""
    text = err.strip()
    assert text.startswith("error:") and "\n" not in text and "Traceback" not in text, err
    return text


def a_store(path: Path) -> bytes:
    """A store of one run (made from a record), and its bytes."""
    rec = RunRecord("20261201T010000Z-demo", "d1", "demo", "sha", {}, False, "2026-12-01T01:00:00",
                    "2026-12-01T01:10:00", "ok", None, "ci", "cpu", "0.1.0", "a" * 40, False, "binaries", ["16.9"], 2)
    with open_store(path, create=True) as s:
        s.add(rec, [PointRecord(rec.run_id, SeriesKey("demo", "v", "p", 4, -1, "16.9", "tps"), "ok", 100.0, None,
                                None, None, None, 1, (100.0,))])
    return path.read_bytes()


def run_dir(tmp_path: Path, name: str = "20261201T020000Z-temp-table-churn") -> Path:
    out = tmp_path / "runs" / name
    shutil.copytree(FIXTURE_RUN, out)
    return out


def test_an_empty_file_is_refused_by_add_check_and_show_and_taken_by_init_and_add_create(tmp_path, cli_main):
    store = tmp_path / "history.db"
    store.write_bytes(b"")
    run = run_dir(tmp_path)
    for args in (("add", run), ("check",), ("show",)):
        code, out, err = cli_main("history", *args, "--store", store)
        assert code == 2, (args, out, err)
        text = one_paragraph(err)
        assert "is an empty file, not a history store" in text and f"history init {store}" in text
        assert "--create" in text and "nothing was written" in text
        assert store.read_bytes() == b""
    code, out, err = cli_main("history", "init", store)
    assert code == 0 and "made an empty history store" in out
    code, out, err = cli_main("history", "show", "--store", store)
    assert code == 0, err
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    code, out, err = cli_main("history", "add", run, "--store", other, "--create")
    assert code == 0 and f"added: {run.name}" in out, err


def test_init_makes_a_missing_store_and_leaves_one_already_there_as_it_is(tmp_path, cli_main):
    store = tmp_path / "new.db"
    code, out, err = cli_main("history", "init", store)
    assert code == 0 and "made an empty history store" in out
    with open_store(store) as s:
        assert s.count_runs() == 0
    held = tmp_path / "held.db"
    before = a_store(held)
    code, out, err = cli_main("history", "init", held)
    assert code == 0 and "is a history store already (1 run); nothing was changed" in out
    assert held.read_bytes() == before
    older = tmp_path / "v2.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "history" / "schema-v2.db", older)
    code, out, err = cli_main("history", "init", older)
    assert code == 0 and "brought from schema version 2 to" in out, err


def test_a_foreign_sqlite_file_is_refused_by_every_command_and_left_byte_for_byte(tmp_path, cli_main):
    foreign = tmp_path / "notes.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        conn.execute("INSERT INTO notes (text) VALUES ('keep me')")
    conn.close()
    before = foreign.read_bytes()
    run = run_dir(tmp_path)
    mine = tmp_path / "mine.db"
    a_store(mine)
    for args in (("init", foreign), ("add", run, "--store", foreign), ("add", run, "--store", foreign, "--create"),
                 ("show", "--store", foreign), ("check", "--store", foreign), ("merge", mine, "--store", foreign),
                 ("merge", foreign, "--store", mine)):
        code, out, err = cli_main("history", *args)
        assert code == 2, (args, out, err)
        text = one_paragraph(err)
        assert "is an SQLite database of another program (its tables: notes)" in text and "nothing was written" in text
        assert foreign.read_bytes() == before, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.db", "notes.db", "runs"]  # no journal left


def test_a_store_with_history_meta_but_no_version_is_refused_as_damaged(tmp_path, cli_main):
    """What concurbench before schema 3 answered: `internal error: KeyError: 0` (exit 1)."""
    damaged = tmp_path / "damaged.db"
    a_store(damaged)
    with sqlite3.connect(damaged) as conn:
        conn.execute("DELETE FROM history_meta")
    conn.close()
    before = damaged.read_bytes()
    run = run_dir(tmp_path)
    for args in (("init", damaged), ("add", run, "--store", damaged), ("show", "--store", damaged),
                 ("check", "--store", damaged), ("ack", "F1", "--reason", "x", "--store", damaged)):
        code, out, err = cli_main("history", *args)
        assert code == 2, (args, out, err)
        text = one_paragraph(err)
        assert "is damaged" in text and "no schema version" in text and "nothing was written" in text
        assert damaged.read_bytes() == before, args


BAD_LABELS = [("branch=main\nnight=3", "control character ('\\n')"), ("ci\trun=5", "control character ('\\t')"),
              ("=main", "KEY=VALUE"), (" =main", "KEY=VALUE"), ("note=a\x1b[31mred", "control character ('\\x1b')")]


@pytest.mark.parametrize("label,words", BAD_LABELS)
def test_a_bad_label_is_refused_by_history_add_with_nothing_written(tmp_path, cli_main, label, words):
    store = tmp_path / "history.db"
    before = a_store(store)
    code, out, err = cli_main("history", "add", run_dir(tmp_path), "--store", store, "--label", label)
    assert code == 2, (out, err)
    text = one_paragraph(err)
    assert "--label" in text and words in text
    assert store.read_bytes() == before


@pytest.mark.parametrize("label,words", BAD_LABELS[:3])
def test_a_bad_label_is_refused_by_run_and_claims_before_anything_runs(tmp_path, cli_main, label, words):
    for args in (("run", SCENARIO, "--quick", "--out", tmp_path / "runs", "--history", tmp_path / "h.db"),
                 ("claims", SCENARIO, "--quick", "--out", tmp_path / "runs", "--history", tmp_path / "h.db",
                  "-o", tmp_path / "claims.md")):
        code, out, err = cli_main(*args, "--label", label)
        assert code == 2, (args, out, err)
        assert "--label" in one_paragraph(err) and words in err
        assert not (tmp_path / "runs").exists() and not (tmp_path / "h.db").exists()


def test_a_key_holding_an_equals_sign_is_refused_by_the_library_too(tmp_path):
    store = tmp_path / "history.db"
    before = a_store(store)
    with pytest.raises(ConfigError, match="a key may not hold '='"):
        add_runs(str(store), [run_dir(tmp_path)], {"track=x": "main"})
    with pytest.raises(ConfigError, match="the key is empty"):
        add_runs(str(store), [run_dir(tmp_path, "other")], {"": "main"})
    assert store.read_bytes() == before


def no_started(run: Path) -> str:
    """What concurbench before schema 3 did: added it, sorted before every run of the history."""
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["started"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    return f"{run / 'manifest.json'}: started: missing"


def tps_as_text(run: Path) -> str:
    """What concurbench before schema 3 did: dropped the point, so the series lost tonight's run silently."""
    summary = json.loads((run / "summary.json").read_text())
    summary["results"][0]["pools"]["callers"]["metrics"]["tps"] = "fast"
    (run / "summary.json").write_text(json.dumps(summary))
    return f"run {run.name}: summary.json: variant dynamic (18.6), pool callers: tps: 'fast' is not a number"


@pytest.mark.parametrize("damage", [no_started, tps_as_text])
def test_a_run_directory_with_a_field_missing_or_not_a_number_is_refused_by_history_add(tmp_path, cli_main, damage):
    store = tmp_path / "history.db"
    before = a_store(store)
    run = run_dir(tmp_path)
    words = damage(run)
    code, out, err = cli_main("history", "add", run, "--store", store)
    assert code == 2, (out, err)
    assert words in one_paragraph(err)
    assert store.read_bytes() == before
