"""The order in which a variant run's measurement ends: the samplers take their last reading before an
Extended Events session is stopped and counted, so that work (reading large .xel files on the
event_file arms) stays outside the counters' span.

A real run on the embedded PostgreSQL (real worker pools, the real sampler driver and wait_events
sampler); the background part is the real XEventSession class talking to a stand-in for SQL Server
(no SQL Server can run here), put in place of the scenario's held transaction.
"""

from __future__ import annotations

import time

import pytest

from concurbench.running import variant_runs
from concurbench.background.mssql import XEventSession
from concurbench.running.runner import Runner
from concurbench.samplers.postgres import WaitEvents
from concurbench.running.load import load_scenario

pytestmark = pytest.mark.integration

SCENARIO = """
name: window-order
engine: postgres
duration: 1s
warmup: 0.2s
samplers:
  wait_events: {interval: 50ms}
variants:
  observed:
    background:
      - {name: xe, kind: hold_transaction, sql: "SELECT 1"}
    pools:
      readers:
        clients: 2
        transaction:
          - {name: one, sql: "SELECT 1"}
"""


class StandInXeServer:
    """Stand-in for SQL Server: just enough of the event-session statements for one session, with the
    time each STOP ran."""

    def __init__(self, events: list):
        self.events = events
        self.defined = self.running = False

    def connect(self, conninfo, application_name=None):
        return self

    def close(self):
        pass

    def execute(self, sql, *params):
        if sql.startswith("ALTER EVENT SESSION") and sql.endswith("STATE = STOP"):
            self.events.append(("observer stopped", time.perf_counter_ns()))
            self.running = False
        elif sql.startswith("ALTER EVENT SESSION") and sql.endswith("STATE = START"):
            self.running = True
        elif sql.startswith("CREATE EVENT SESSION"):
            self.defined = True
        elif sql.startswith("DROP EVENT SESSION"):
            self.defined = False
        rows = {"sys.server_event_sessions": [(int(self.defined),)], "COUNT(*) AS n FROM sys.dm_xe_sessions":
                [(int(self.running),)], "dropped_event_count": [(0, 0)],
                "LEFT(t.target_data": [('<RingBufferTarget totalEventsProcessed="7" eventCount="7" droppedCount="0">',)]}
        return Cursor(next((r for key, r in rows.items() if key in sql), []))


class Cursor:
    def __init__(self, rows):
        self.rows = list(rows)

    def fetchone(self):
        return self.rows.pop(0) if self.rows else None


def test_samplers_read_last_then_the_observer_stops(server, running_server, tmp_path, monkeypatch):
    events: list = []
    xe_server = StandInXeServer(events)
    read = WaitEvents.read

    def recorded_read(self, conn):
        rows = read(self, conn)
        events.append(("sampler read", time.perf_counter_ns()))
        return rows

    monkeypatch.setattr(WaitEvents, "read", recorded_read)
    monkeypatch.setattr(variant_runs, "make_background",
                        lambda spec, conninfo, engine, **_: XEventSession(spec, conninfo, connect=xe_server.connect))
    path = tmp_path / "window-order.yaml"
    path.write_text(SCENARIO)
    outcome = Runner(load_scenario(path), running_server(server[1]), out_dir=tmp_path).run()
    assert outcome.status == "ok", outcome.error
    kinds = [kind for kind, _ in sorted(events, key=lambda e: e[1])]
    assert "observer stopped" in kinds and kinds.count("sampler read") >= 2
    assert kinds[-1] == "observer stopped", kinds[-5:]  # the samplers' last reading came first
    assert outcome.results[0].background[0]["events"] == 7
