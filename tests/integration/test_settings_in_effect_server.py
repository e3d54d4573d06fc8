"""Every server record of a run says what the server ran with: its settings that were not its defaults, read from
pg_settings when the run started (`settings_in_effect`). On the embedded server with a scenario's own settings: they
are there in pg_settings' form, the built-in defaults, what changes at every start and the harness's own session's
are not, and a setting that may hold a password is there only as a digest."""

from __future__ import annotations

import json

import pytest

import concurbench
from concurbench.api import Target

pytestmark = pytest.mark.integration

SECRET = "Archive-Secret-3141"
SCENARIO = f"""name: in-effect
engine: postgres
duration: 0.2s
warmup: 0s
server:
  settings: {{work_mem: 7MB, commit_delay: 300, commit_siblings: 0, archive_command: "cp %p /nowhere/%f # {SECRET}"}}
variants:
  v:
    pools:
      p: {{clients: 1, transaction: [SELECT 1]}}
"""


def test_a_runs_server_record_holds_the_settings_in_effect_at_its_start(tmp_path):
    path = tmp_path / "in-effect.yaml"
    path.write_text(SCENARIO)
    outcome = concurbench.run(path, target=Target("embedded"), out_dir=tmp_path / "runs")
    assert outcome.error is None, outcome.error
    [server] = json.loads((outcome.run_dir / "manifest.json").read_text())["servers"]
    in_effect = server["settings_in_effect"]
    # the scenario's settings, in pg_settings' own form with its unit, as `settings` records them
    assert in_effect["work_mem"] == "7168 kB" and in_effect["commit_delay"] == "300"
    assert in_effect["commit_siblings"] == "0" and int(in_effect["max_connections"]) > 0
    # never a built-in default, what differs at each start (a free port, the run's directory), nor the harness's
    # own session's settings
    for name in ("seq_page_cost", "port", "unix_socket_directories", "data_directory", "config_file",
                 "application_name", "client_encoding", "transaction_isolation"):
        assert name not in in_effect, name
    assert all(isinstance(v, str) for v in in_effect.values()) and len(in_effect) <= 200
    # a command may carry a password: a digest shows that it is set, and when it changes, never what it holds
    assert in_effect["archive_command"].startswith("sha256:")
    for file in (f for f in outcome.run_dir.rglob("*") if f.is_file()):
        assert SECRET not in file.read_text(errors="replace"), file
    # the run as loaded reads it back
    assert concurbench.load(outcome.run_dir).servers[0].settings_in_effect == in_effect
