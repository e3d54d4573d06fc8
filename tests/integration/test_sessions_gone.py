"""A variant's setup, and the probes after a warm-up pass, wait until the sessions before them have left the
server: a closed session's backend may still be ending (dropping its temp tables), and what the next step
sets up or probes must not meet it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from concurbench.engines import postgres as pg
from concurbench.running.load import load_scenario
from concurbench.running.variant_runs import VariantRuns
from concurbench.workload.session import application_name

pytestmark = pytest.mark.integration
SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "postgres" / "temp-table-churn.yaml"


def test_sessions_are_counted_by_their_application_name(server, admin):
    name = application_name("lingering")
    assert pg.sessions_named(admin, [name]) == 0
    with psycopg.connect(server[1].conninfo, application_name=name):
        assert pg.sessions_named(admin, [name, "concurbench:other"]) == 1
    deadline = time.monotonic() + 5
    while pg.sessions_named(admin, [name]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pg.sessions_named(admin, [name]) == 0


def test_the_next_step_waits_for_a_pool_session_that_is_still_there(server, admin):
    runs = VariantRuns(load_scenario(SCENARIO, quick=True), pg, progress=None, processes=1)
    lingering = psycopg.connect(server[1].conninfo, application_name=application_name("callers"))
    threading.Timer(0.4, lingering.close).start()
    started = time.monotonic()
    runs._sessions_gone(admin)
    assert time.monotonic() - started >= 0.35
    assert pg.sessions_named(admin, [application_name("callers")]) == 0
    started = time.monotonic()
    runs._sessions_gone(admin)  # nothing left: no wait
    assert time.monotonic() - started < 0.2
