"""`concurbench history` on real runs against the shared embedded server.

Eight runs of a small scenario (tests/integration/scenarios/history-step.yaml), the sixth to eighth with
--param rows=20, added by `run --history` to an SQLite store and by `history add` to a PostgreSQL one:
`show` and `check` must find the step in WAL per transaction at the sixth run, say that the scenario's
parameters changed there, and find nothing in the counts that stay the same; the stores must survive
two writers at once and refuse bad input without a traceback or a half-written add.

A nightly series replayed as a CI job runs it (tests/integration/scenarios/history-nightly.yaml): one
run a night through `run --history`, then `check --run` on it, a server setting (commit_delay) making
every commit slower from the sixth night, acknowledged, then set back: green, red until acknowledged,
green, and the finding resolved once the metric is back. A store of the previous schema in PostgreSQL
is migrated, and a run whose add fails makes `run --history` exit 6.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from concurbench.cli.main import main

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "history-step.yaml"
NIGHTLY = HERE / "scenarios" / "history-nightly.yaml"
PASSWORD = "Hist-pw-4471-secret"
RUNS, STEP_AT = 8, 5  # runs 0-4 insert one row a transaction, runs 5-7 twenty (a finding needs 5 runs before it)
DELAY_US = 4000  # commit_delay of the slow nights: every commit 4 ms later


def cli(*args) -> subprocess.CompletedProcess:
    """`concurbench ARGS...` run in this process, as the command's main() runs it, returned as a finished process
    would be. The file makes some sixty of these, and a process of its own for each paid the imports every time;
    the writers that must be processes at once (two adding to one store) are started as processes, and so is
    the run whose whole standard error, its workers' included, must hold no traceback (command())."""
    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["concurbench", *map(str, args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exited:
        code = exited.code or 0
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess(["concurbench", *map(str, args)], code, out.getvalue(), err.getvalue())


def command(*args) -> subprocess.CompletedProcess:
    """`concurbench ARGS...` as a process of its own, where what its worker processes print counts too."""
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def history(server, tmp_path_factory):
    """The eight run directories and the SQLite store `run --history` added them to."""
    folder = tmp_path_factory.mktemp("history")
    store = folder / "history.db"
    dirs = []
    for i in range(RUNS):
        rows = 1 if i < STEP_AT else 20
        done = cli("run", SCENARIO, "--target", "dsn", "--dsn", server[1].conninfo, "--param", f"rows={rows}",
                   "--out", folder / "runs", "--history", store, "--label", f"night={i}")
        assert done.returncode == 0, done.stderr
        assert "history: added" in done.stderr
        dirs.append(Path(done.stdout.strip().splitlines()[-1]))
    return folder, store, dirs


def _show_json(store, *more) -> dict:
    done = cli("history", "show", "--store", store, "--format", "json", *more)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_show_finds_the_step_at_the_run_where_the_parameter_changed(history):
    folder, store, dirs = history
    shown = _show_json(store)
    wal = [c for c in shown["change_points"] if c["metric"] == "wal.bytes_per_txn" or
           any(m["metric"] == "wal.bytes_per_txn" for m in c["metrics"])]
    assert len(wal) == 1, shown["change_points"]
    change = wal[0]
    assert change["run"] == dirs[STEP_AT].name
    assert change["before_run"]["run"] == dirs[STEP_AT - 1].name
    assert change["status"] == "confirmed" and change["scenario_changed"] is True
    moved = {m["metric"]: m for m in change["metrics"]}
    assert moved["wal.bytes_per_txn"]["change"] > 3  # twenty rows a transaction instead of one
    assert moved["wal.bytes_per_txn"]["way"] == "worse"
    assert change["before_run"]["labels"] == {"night": str(STEP_AT - 1)}
    flat = {"transactions", "statements.insert.count", "statements_executed", "failed", "errors.deadlock"}
    assert not [c for c in shown["change_points"] for m in c["metrics"] if m["metric"] in flat]
    series = {(s["pool"], s["metric"]): s for s in shown["series"]}
    points = series[("", "wal.bytes_per_txn")]["points"]
    assert [p["run"] for p in points] == [d.name for d in dirs]
    assert [p["scenario_changed"] for p in points] == [i == STEP_AT for i in range(RUNS)]


def test_check_fails_on_the_regression_with_junit_and_a_summary(history, tmp_path):
    folder, store, dirs = history
    junit, summary = tmp_path / "history.xml", tmp_path / "summary.md"

    def check(*args):
        copy = tmp_path / f"check-{len(list(tmp_path.glob('check-*')))}.db"  # each check keeps its findings
        shutil.copy(store, copy)
        return cli("history", "check", "--store", copy, "--run", dirs[-1].name, *args)

    done = check("--metric", "wal.*", "--junit", junit, "--summary", summary)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "wal.bytes_per_txn" in done.stdout and "Regression" in done.stdout and f"from run {dirs[STEP_AT].name}" \
        in done.stdout
    assert 'failures="1"' in junit.read_text() and "<failure" in junit.read_text()
    assert "wal.bytes_per_txn" in summary.read_text()
    # the flat counts alone: nothing to fail on
    done = check("--metric", "transactions", "--metric", "statements.*.count")
    assert done.returncode == 0, done.stdout
    # told that more WAL is better, the same change is no regression (full-page images alone left
    # out: how many a run writes depends on when the server's last checkpoint was, so they may fall)
    done = check("--metric", "wal.bytes*", "--metric", "wal.records", "--direction", "wal.*=higher")
    assert done.returncode == 0, done.stdout


def test_the_report_forms_and_charts(history, tmp_path):
    folder, store, dirs = history
    for fmt in ("table", "md", "csv", "html"):
        done = cli("history", "show", "--store", store, "--metric", "wal.bytes_per_txn", "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert "wal.bytes_per_txn" in done.stdout
    html = cli("history", "show", "--store", store, "--metric", "wal.*", "--format", "html").stdout
    assert html.count("<svg") >= 1 and "confirmed" in html
    done = cli("history", "show", "--store", store, "--metric", "wal.bytes_per_txn", "--plots", tmp_path / "charts")
    assert done.returncode == 0, done.stderr
    assert sorted(p.suffix for p in (tmp_path / "charts").iterdir()) == [".png", ".svg"]


def test_adding_a_run_again_changes_nothing(history, tmp_path):
    folder, store, dirs = history
    copy = tmp_path / "again.db"
    shutil.copy(store, copy)
    before = copy.read_bytes()
    done = cli("history", "add", *dirs[:2], "--store", copy)
    assert done.returncode == 0 and done.stdout.count("already held") == 2
    assert copy.read_bytes() == before


def test_two_processes_adding_at_once_to_sqlite(history, tmp_path):
    folder, store, dirs = history
    target = tmp_path / "together.db"
    procs = [subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "history", "add", *map(str, part),
                               "--store", str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for part in (dirs[:4], dirs[3:])]  # run 3 in both
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    said = "".join(o for o, _ in outs)
    assert said.count(f"added: {dirs[3].name}") == 1 and said.count(f"already held: {dirs[3].name}") == 1
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT count(*) FROM history_runs").fetchone()[0] == RUNS


@pytest.fixture(scope="module")
def pg_store(server):
    """A database on the embedded server with a role that owns it, and one that may not create tables."""
    conninfo = server[1].conninfo
    parts = conninfo_to_dict(conninfo)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for db in ("history_store", "history_locked"):
            conn.execute(f"DROP DATABASE IF EXISTS {db}")
        for role in ("history_writer", "history_reader"):
            conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE history_writer LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE ROLE history_reader LOGIN PASSWORD '{PASSWORD}'")
        conn.execute("CREATE DATABASE history_store OWNER history_writer")
        conn.execute("CREATE DATABASE history_locked")  # owned by the superuser: no CREATE on public for others

    def url(role: str, db: str) -> str:
        return f"postgresql://{role}:{PASSWORD}@{parts.get('host', '127.0.0.1')}:{parts['port']}/{db}"

    yield url
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for db in ("history_store", "history_locked"):
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        for role in ("history_writer", "history_reader"):
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_postgresql_store_takes_two_writers_at_once_and_finds_the_same_step(history, pg_store):
    folder, store, dirs = history
    url = pg_store("history_writer", "history_store")
    procs = [subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "history", "add", *map(str, part),
                               "--store", url, "--label", "ci=pg"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for part in (dirs[:4], dirs[2:])]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert PASSWORD not in "".join(o + e for o, e in outs)
    shown = _show_json(url, "--metric", "wal.bytes_per_txn")
    assert [c["run"] for c in shown["change_points"]] == [dirs[STEP_AT].name]
    assert len(shown["runs"]) == RUNS
    assert PASSWORD not in json.dumps(shown)


def test_a_role_that_may_not_create_the_tables_is_told_so_and_nothing_is_written(history, pg_store, server):
    folder, store, dirs = history
    done = cli("history", "add", dirs[0], "--store", pg_store("history_reader", "history_locked"))
    assert done.returncode == 2
    assert "may not create the history tables" in done.stderr and "GRANT CREATE" in done.stderr
    assert PASSWORD not in done.stderr + done.stdout and "Traceback" not in done.stderr
    conninfo = server[1].conninfo.replace("dbname=concurbench", "dbname=history_locked")
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT to_regclass('history_meta')").fetchone()[0] is None


def test_a_url_that_does_not_connect_names_the_store_without_its_password():
    done = cli("history", "show", "--store", f"postgresql://someone:{PASSWORD}@127.0.0.1:1/nowhere")
    assert done.returncode == 2
    assert "postgresql://someone@127.0.0.1:1/nowhere" in done.stderr and "cannot connect" in done.stderr
    assert PASSWORD not in done.stderr + done.stdout


def test_bad_run_directories_are_refused_before_anything_is_added(history, tmp_path):
    folder, store, dirs = history
    target = tmp_path / "bad.db"
    newer = tmp_path / "newer"
    shutil.copytree(dirs[0], newer)
    manifest = json.loads((newer / "manifest.json").read_text())
    manifest["format_version"] = 99
    (newer / "manifest.json").write_text(json.dumps(manifest))
    broken = tmp_path / "broken"
    shutil.copytree(dirs[1], broken)
    (broken / "summary.json").write_text('{"format_version": 2, "results": [')
    cases = [(tmp_path, "not a run directory"), (newer, "newer"), (broken, "summary.json")]
    for bad, words in cases:
        done = cli("history", "add", dirs[2], bad, "--store", target)
        assert done.returncode == 2, (bad, done.stdout, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr
    assert not target.exists()  # every run is read before the store is opened


def test_a_failed_add_leaves_the_store_as_it_was(history, tmp_path):
    folder, store, dirs = history
    target = tmp_path / "guarded.db"
    assert cli("history", "add", dirs[0], "--store", target).returncode == 0
    with sqlite3.connect(target) as conn:  # the database refuses the points of one metric
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON history_points WHEN NEW.series = "
                     "(SELECT max(id) FROM history_series) BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
        before = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("history_runs", "history_series", "history_points")]
    done = cli("history", "add", dirs[1], "--store", target)
    assert done.returncode == 2 and "refused by the test" in done.stderr
    with sqlite3.connect(target) as conn:
        after = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("history_runs", "history_series", "history_points")]
    assert after == before


def test_a_store_of_a_newer_schema_is_refused(history, tmp_path):
    folder, store, dirs = history
    newer = tmp_path / "newer.db"
    shutil.copy(store, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE history_meta SET value = '99' WHERE key = 'schema_version'")
    for args in (("show",), ("add", dirs[0])):
        done = cli("history", *args, "--store", newer)
        assert done.returncode == 2 and "schema version 99" in done.stderr and "upgrade concurbench" in done.stderr


def test_a_nightly_series_is_red_from_the_regression_until_acknowledged_and_green_when_fixed(server, tmp_path):
    """Twelve nights of a CI job: five flat, four with every commit 4 ms slower, three with the setting back.
    Each night one `run --history` and a `check --run` of that run. The first red night is checked twice
    (still red: nothing turns green by itself), then acknowledged."""
    store = tmp_path / "nightly.db"
    plan = ["flat"] * 5 + ["slow"] * 4 + ["fixed"] * 3
    reds, acked = [], False
    for night, kind in enumerate(plan):
        done = cli("run", NIGHTLY, "--target", "dsn", "--dsn", server[1].conninfo, "--param",
                   f"commit_delay={DELAY_US if kind == 'slow' else 0}", "--out", tmp_path / "runs", "--history", store,
                   "--label", f"night={night}")
        assert done.returncode == 0, done.stderr
        run_id = Path(done.stdout.strip().splitlines()[-1]).name
        check = cli("history", "check", "--store", store, "--run", run_id)
        assert check.returncode in (0, 5), check.stdout + check.stderr
        reds.append(check.returncode == 5)
        if reds[-1] and not acked:
            assert check.stdout.count("- from run ") == 1  # one cause, however many metrics moved
            assert cli("history", "check", "--store", store, "--run", run_id).returncode == 5
            findings = _show_json(store)["findings"]
            slow = sorted(d.name for d in (tmp_path / "runs").iterdir())[5:]
            # at the first slow night; on a machine busy with other work, a slow night made busy is on a line
            # of its own for speed figures, and the quiet line's step is at its first quiet slow night
            assert {f["first_run"] for f in findings} <= set(slow), (findings, slow)
            table = cli("history", "show", "--store", store).stdout
            assert table.index("Open findings") < table.index("Change points")
            new = [f["id"] for f in findings if f["state"] == "new"]
            done = cli("history", "ack", *new, "--reason", "commit_delay set on the server on purpose", "--store",
                       store)
            assert done.returncode == 0, done.stderr
            acked = True
    assert reds[:5] == [False] * 5, reds  # flat: green
    assert reds[5:9] in ([False, True, False, False], [False, False, True, False]), reds  # red by the 2nd or 3rd
    assert reds[9:] == [False] * 3, reds  # fixed: green
    assert {f["state"] for f in _show_json(store)["findings"]} <= {"acknowledged", "resolved"}


def test_a_postgresql_store_of_the_previous_schema_is_migrated(history, pg_store, server):
    """Version 1 keyed a series without its client count: migrated when opened (the old unique key dropped
    whatever it was named), a series differing only in clients then goes in."""
    from concurbench.history import schema
    url = pg_store("history_writer", "history_store")
    conninfo = server[1].conninfo.replace("dbname=concurbench", "dbname=history_store")
    old = schema._CORE.format(serial="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION",
                              where=schema._WHERE, **schema._NONE).replace("UNIQUE (scenario, variant, pool, clients, point",
                                                           "UNIQUE (scenario, variant, pool, point")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS history_log, history_expectations, history_findings, history_points, "
                     "history_series, history_runs, history_meta CASCADE")
        conn.execute("SET ROLE history_writer")
        for statement in [s for s in old.split(";") if s.strip()]:
            conn.execute(statement)
        conn.execute("INSERT INTO history_meta VALUES ('schema_version', '1')")
    folder, store, dirs = history
    done = cli("history", "add", dirs[0], "--store", url)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT value FROM history_meta").fetchone() == (str(schema.SCHEMA_VERSION),)
        (unique,) = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'u' AND "
                                 "conrelid = 'history_series'::regclass").fetchone()
        assert "clients" in unique
        assert conn.execute("SELECT to_regclass('history_findings')").fetchone()[0] is not None
        conn.execute("DROP TABLE history_log, history_expectations, history_findings, history_points, history_series, "
                     "history_runs, history_meta CASCADE")
        conn.commit()


def test_a_run_whose_add_fails_exits_6_and_says_so(server, tmp_path):
    not_a_store = tmp_path / "a-directory"
    not_a_store.mkdir()
    done = command("run", NIGHTLY, "--target", "dsn", "--dsn", server[1].conninfo, "--out", tmp_path / "runs",
                   "--history", not_a_store)
    assert done.returncode == 6, done.stderr
    assert "the run was not added" in done.stderr and "is a directory" in done.stderr and "Traceback" not in done.stderr
    assert Path(done.stdout.strip().splitlines()[-1]).is_dir()  # the run itself is kept
