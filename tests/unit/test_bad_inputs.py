"""Every failure a user can cause is classified: the corpus in tests/fixtures/bad, through the command line.

Each case checks the exit code (2: usage or input error), that the message names the file (and where a
scenario file is wrong, its line and column), and that no traceback or "internal error" comes out. The
`run` cases fail before any server is started (an unusable --out is found first).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from concurbench.cli.exits import EXIT_USAGE
from concurbench.cli.main import main
from concurbench.util import suggest

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "fixtures" / "bad"
S, R = BAD / "scenarios", BAD / "runs"


def invoke(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """Run the command line in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["concurbench", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def clean(err: str) -> None:
    assert "Traceback" not in err and "internal error" not in err, err


SCENARIO_CASES = [
    ("not_utf8.yaml", f"{S / 'not_utf8.yaml'}:3:6: the scenario file is not UTF-8 text (byte 0xe9"),
    ("nul_byte.yaml", f"{S / 'nul_byte.yaml'}:2:13: not valid YAML: the character #x0000 is not allowed"),
    ("unterminated_quote.yaml", f"{S / 'unterminated_quote.yaml'}:1:7: not valid YAML: the quoted string that "
                                f"starts here is never closed"),
    ("unclosed_flow.yaml", f"{S / 'unclosed_flow.yaml'}:7:1: not valid YAML: expected ',' or '}}', but got "
                           f"'<stream end>' (while parsing a flow mapping at 6:10)"),
    ("sql_not_utf8.yaml", f"{S / 'sql' / 'latin1.sql'}:1:27: the SQL file is not UTF-8 text"),
    ("too_many_clients.yaml", "too_many_clients.yaml:9:18: variants.v.pools.p.clients: 100,000 clients make 100,001 "
                              "connections"),
    ("over_max_connections.yaml", "over_max_connections.yaml:13:26: variants.swept.pools.lockers.clients: 14 clients "
                                  "(sweep point 12) make 16 connections"),
]


# Should the guards ever let it through, `run` of 100,000 clients must not reach a server: it goes to a
# dsn target where nothing listens (there only the open-file and memory guards apply).
NOWHERE = ["--target", "dsn", "--dsn", "host=127.0.0.1 port=9 connect_timeout=2"]
RUN_EXPECTED = {"too_many_clients.yaml": "too_many_clients.yaml:9:18: variants.v.pools.p.clients: 100,000 clients over"}


@pytest.mark.parametrize("name,expected", SCENARIO_CASES, ids=[c[0] for c in SCENARIO_CASES])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bad_scenario_is_exit_2_at_its_line(name, expected, command, capsys, monkeypatch, tmp_path):
    args = [command, S / name]
    if command == "run":
        args += ["--out", tmp_path / "runs", *(NOWHERE if name in RUN_EXPECTED else [])]
        expected = RUN_EXPECTED.get(name, expected)
    code, _out, err = invoke(capsys, monkeypatch, *args)
    assert code == EXIT_USAGE, err
    assert expected in err
    clean(err)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "no run directory"


def test_the_guards_name_every_limit(capsys, monkeypatch):
    code, _out, err = invoke(capsys, monkeypatch, "validate", S / "too_many_clients.yaml")
    assert code == EXIT_USAGE
    assert "max_connections is 100 (the server's default)" in err
    assert "open files, and a process may open" in err and "(ulimit -n)" in err
    assert "of memory" in err and "available on this machine" in err


def test_a_scenario_that_is_a_directory_or_missing(capsys, monkeypatch, tmp_path):
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    for path, why in ((folder, "Is a directory"), (tmp_path / "missing.yaml", "No such file")):
        code, _out, err = invoke(capsys, monkeypatch, "validate", path)
        assert code == EXIT_USAGE and f"{path}: cannot read the scenario file: {why}" in err, err
        clean(err)


@contextlib.contextmanager
def read_only_dir(tmp_path: Path):
    """A directory no one may write into: a read-only tmpfs as root (root ignores permissions), else mode 555;
    None as root where no file system can be mounted."""
    path = tmp_path / "read-only"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:  # (a container without the right to mount) the other cases still run
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_unusable_out_paths_are_usage_errors_naming_the_path(capsys, monkeypatch, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    cases = [(Path("/proc/nope"), "/proc/nope: cannot create a run directory there: "),
             (a_file / "sub", f"{a_file / 'sub'}: cannot create a run directory there: {a_file} is a file"),
             (Path("/sys/kernel/nope"), "/sys/kernel/nope: cannot create a run directory there: ")]
    with read_only_dir(tmp_path) as read_only:
        if read_only is not None:
            cases.append((read_only, f"{read_only}: cannot create a run directory there: "))
        for out, expected in cases:
            code, _out, err = invoke(capsys, monkeypatch, "run", S / "ok.yaml", "--out", out)
            assert code == EXIT_USAGE, (out, err)
            assert expected in err, err
            clean(err)


def test_a_variant_the_scenario_lacks_is_exit_2_with_a_suggestion(capsys, monkeypatch, tmp_path):
    code, _out, err = invoke(capsys, monkeypatch, "run", S / "ok.yaml", "--variant", "vv", "--out", tmp_path)
    assert code == EXIT_USAGE and "--variant vv:" in err and "no variant named 'vv' (did you mean 'v'?)" in err, err
    assert not any(tmp_path.iterdir())
    clean(err)


RUN_CASES = [
    ("format_999", "format_999/manifest.json: format version 999 is newer than this concurbench reads (3)"),
    ("summary_format_999", "summary_format_999/summary.json: format version 999 is newer than this concurbench "
                           "reads (3)"),
    ("versions_differ", "versions_differ: manifest.json is format version 1 but summary.json is 2"),
    ("no_format_version", "no_format_version/manifest.json: no format version"),
    ("truncated_manifest", "truncated_manifest/manifest.json: not valid JSON"),
    ("truncated_summary", "truncated_summary/summary.json: not valid JSON"),
    ("manifest_not_object", "manifest_not_object/manifest.json: not a concurbench run file"),
    ("no_summary", "no_summary: not a run directory (no summary.json)"),
    ("result_without_pools", "result_without_pools/summary.json: results[0]: lacks pools"),
    ("samples_not_utf8", "samples_not_utf8/samples/wait_events.csv: cannot read it"),
]


@pytest.mark.parametrize("name,expected", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_report_and_compare_refuse_a_bad_run_directory_naming_the_file(name, expected, capsys, monkeypatch):
    for args in (("report", R / name), ("compare", R / "ok", R / name), ("compare", R / name, R / "ok")):
        code, _out, err = invoke(capsys, monkeypatch, *args)
        assert code == EXIT_USAGE, (args, err)
        assert expected in err, err
        clean(err)


def test_results_lists_every_directory_and_says_why_one_is_unreadable(capsys, monkeypatch):
    code, out, err = invoke(capsys, monkeypatch, "results", R)
    assert code == 0, err
    for name, expected in RUN_CASES:
        assert f"unreadable: {R / name}" in out and expected in out, name
    assert f"killed: {R / 'killed'}: pid 999999999 ended without finishing the run; 1 of 3 variant runs finished" in out
    assert "variant-runs.jsonl:2: cut short" in out
    clean(err)


def test_a_killed_run_is_reported_with_what_finished(capsys, monkeypatch):
    code, out, err = invoke(capsys, monkeypatch, "report", R / "killed")
    assert code == 0, err
    assert "Status: killed" in out and "1 of 3 variant runs finished" in out
    assert "│ v " in out  # the finished variant run's row
    clean(err)


def test_a_did_you_mean_never_suggests_the_word_itself():
    assert suggest("tps", ["tps", "tpx"]) == " (did you mean 'tpx'?)"
    assert suggest("tps", ["tps"]) == ""


@pytest.mark.timeout(60)  # walked naively, the aliases take hours; walked once each, a fraction of a second
def test_nested_yaml_aliases_are_walked_once(capsys, monkeypatch):
    code, out, err = invoke(capsys, monkeypatch, "validate", S / "alias_bomb.yaml")
    assert code == 0 and "ok: " in out, err
