"""The warm-up pass (`warmup_transactions`, issue 34) in a real run on the embedded PostgreSQL, with real worker
processes: the pass's transactions reach the server but no figure of the variant run, and the variant run
records the pass and whether the server had just been started."""

from __future__ import annotations

import pytest

from concurbench.running.progress_events import Recorder, WarmPass
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario

pytestmark = pytest.mark.integration

SCENARIO = """\
name: warm-pass
engine: postgres
setup:
  - CREATE TABLE warm_rows (n int)
teardown:
  - DROP TABLE warm_rows
warmup: 0s
duration: 30s
warmup_transactions: 3
variants:
  first:
    pools:
      writers: {clients: 2, transactions: 5, transaction: ["INSERT INTO warm_rows VALUES (1)"]}
    probes: [{name: rows, when: [after], sql: SELECT count(*) AS n FROM warm_rows}]
  second:
    warmup_transactions: 4
    pools:
      writers: {clients: 2, transactions: 5, transaction: ["INSERT INTO warm_rows VALUES (2)"]}
    probes: [{name: rows, when: [after], sql: SELECT count(*) AS n FROM warm_rows WHERE n = 2}]
"""


def test_the_pass_runs_before_each_variant_unmeasured_and_is_recorded(server, running_server, tmp_path):
    path = tmp_path / "warm.yaml"
    path.write_text(SCENARIO)
    events = Recorder()
    out = Runner(load_scenario(path), running_server(server[1]), out_dir=tmp_path / "runs", progress=events).run()
    assert out.status == "ok", out.error
    first, second = out.results
    assert first.own("writers")["transactions"] == 10 == second.own("writers")["transactions"]
    assert first.probes["rows"]["after"][0]["n"] == 2 * 3 + 2 * 5  # the pass's rows are on the server
    assert second.probes["rows"]["after"][0]["n"] == 2 * 4 + 2 * 5
    assert {k: getattr(first.warmup_pass, k) for k in ("transactions_per_client", "transactions", "failed", "after_restart",
                                              "status")} == {"transactions_per_client": 3, "transactions": 6,
                                                             "failed": 0, "after_restart": True, "status": "ok"}
    assert second.warmup_pass.transactions == 8 and second.warmup_pass.after_restart is False
    assert [e.variant for e in events.of(WarmPass)] == ["first", "second"]
    stored = (out.run_dir / "summary.json").read_text()
    assert '"warmup_pass"' in stored
