"""The record of a server's settings in effect (`settings_in_effect` of each manifest server entry) without a server:
written and read back, absent from runs written before it (read as "not recorded", and written again without it),
refused when malformed, and kept bounded and free of secrets (engines/pg_settings.py). Against a real server:
tests/integration/test_settings_in_effect.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from concurbench.engines import pg_settings as ps
from concurbench.results.model import ServerInfo
from concurbench.results.store import load_run, write_run

STORED_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "temp-table-churn"  # written before it


def test_the_record_is_written_and_read_back():
    server = ServerInfo("PostgreSQL 15.18", 150018, "15.18", {}, "dsn", "postgresql://bench@127.0.0.1:5432/",
                        settings_in_effect={"commit_delay": "300", "log_statement": "all"})
    stored = server.as_dict()
    assert stored["settings_in_effect"] == {"commit_delay": "300", "log_statement": "all"}
    assert ServerInfo.from_dict(stored) == server and "settings_in_effect" not in server.extra
    # an engine that cannot tell (SQL Server): nothing written, and "none differ" is not the same as "not recorded"
    assert "settings_in_effect" not in ServerInfo(version_short="2022").as_dict()
    assert ServerInfo.from_dict({**stored, "settings_in_effect": {}}).settings_in_effect == {}


def test_a_run_written_before_the_record_loads_and_is_written_again_without_it(tmp_path):
    assert "settings_in_effect" not in (STORED_RUN / "manifest.json").read_text()
    run = load_run(STORED_RUN)
    assert run.servers and all(s.settings_in_effect is None for s in run.servers)
    copy = tmp_path / "run"
    shutil.copytree(STORED_RUN, copy)
    write_run(run, copy)
    assert all("settings_in_effect" not in s for s in json.loads((copy / "manifest.json").read_text())["servers"])


@pytest.mark.parametrize("bad", [["commit_delay"], {"commit_delay": 300}, "commit_delay=300"])
def test_a_malformed_record_is_a_format_problem_naming_where(bad):
    with pytest.raises(ValueError, match=r"manifest.servers\[0\].settings_in_effect"):
        ServerInfo.from_dict({"version_short": "15", "settings_in_effect": bad}, "manifest.servers[0]")


def test_values_are_recorded_as_pg_settings_holds_them_bounded_and_without_secrets():
    assert ps.with_unit("16384", "8kB") == "16384 8kB" and ps.with_unit("all", None) == "all"
    assert ps._recorded("log_statement", "all") == "all"
    long = ps._recorded("search_path", "x" * 500)
    assert len(long) == ps.VALUE_LIMIT and long.endswith("…")
    for name, value in (("primary_conninfo", "host=a password=Secret-1"), ("archive_command", "aws --key Secret-1"),
                        ("ssl_passphrase_command", "echo Secret-1")):
        recorded = ps._recorded(name, value)
        assert recorded.startswith("sha256:") and "Secret-1" not in recorded
        assert recorded == ps._recorded(name, value) != ps._recorded(name, value + " ")  # a change shows
    assert ps._recorded("archive_command", "") == ""  # unset: nothing to hide
    # the query leaves out the defaults, what the server sets for itself and the harness's session's own
    for source in ("'default'", "'override'", "'client'", "'session'"):
        assert source in ps.IN_EFFECT_SQL
    assert {"port", "unix_socket_directories", "data_directory"} <= set(ps.NOT_IN_EFFECT)
