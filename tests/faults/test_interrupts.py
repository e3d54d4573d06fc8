"""Ctrl-C in each phase of a run: exit 130, the run directory says interrupted and keeps every variant run
measured before, and nothing is left: no process, no session or open transaction on the server.

A phase that waits on the server (setup, a variant's teardown, the scenario's teardown) is made long with
pg_sleep, and the test waits until the server shows that statement running before it presses Ctrl-C.
"""

from __future__ import annotations

import pytest

from concurbench.cli.exits import EXIT_INTERRUPTED
from faultkit import dsn, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

BASE = """name: ctrl-c
engine: postgres
duration: {duration}
warmup: {warmup}
setup: {setup}
teardown: {teardown}
variants:
  first:
    duration: 0.5s
    pools:
      p: {{clients: 2, transaction: [SELECT 1]}}
  second:
    teardown: {variant_teardown}
    pools:
      p: {{clients: 2, transaction: [SELECT 1]}}
"""


def scenario(duration="60s", warmup="0s", setup="SELECT 1", teardown="SELECT 1", variant_teardown="SELECT 1"):
    return BASE.format(duration=duration, warmup=warmup, setup=setup, teardown=teardown,
                       variant_teardown=variant_teardown)


def sleeping(server) -> bool:
    """The harness's admin connection is inside a pg_sleep on the server."""
    return bool(server.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'concurbench:admin' "
                             "AND state = 'active' AND query LIKE '%%pg_sleep(600)%%'"))


# phase -> (scenario, how to know the run is in it, variant runs kept, the last one's status)
PHASES = {
    "setup": (scenario(setup="SELECT pg_sleep(600)"), sleeping, []),
    "warm-up": (scenario(warmup="60s"), r"  first: warm-up", [("first", "interrupted")]),
    "measurement": (scenario(), r"  second: .* tps now", [("first", "ok"), ("second", "interrupted")]),
    "variant teardown": (scenario(duration="1s", variant_teardown="SELECT pg_sleep(600)"), sleeping,
                         [("first", "ok"), ("second", "interrupted")]),
    "scenario teardown": (scenario(duration="1s", teardown="SELECT pg_sleep(600)"), sleeping,
                          [("first", "ok"), ("second", "ok")]),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_ctrl_c_in_a_phase_of_a_dsn_run(phase, server, launch):
    text, ready, kept = PHASES[phase]
    run = launch(text, *dsn(server))
    if callable(ready):
        assert wait_until(lambda: ready(server) or run.proc.poll() is not None, 60) and run.proc.poll() is None, \
            run.stderr[-2000:]
    else:
        run.wait_for(ready)
    run.interrupt()
    assert run.finish(timeout=60) == EXIT_INTERRUPTED, run.stderr[-2000:]
    assert "interrupted" in run.stderr
    assert run.manifest()["status"] == "interrupted"
    results = [(r["variant"], r["status"]) for r in run.summary()["results"]]
    assert results == kept
    for r in run.summary()["results"]:
        if r["variant"] == "second" or r["status"] == "ok":
            assert r["pools"]["p"]["metrics"]["transactions"] > 0
    server.assert_nothing_left()  # the pg_sleep was cancelled, every session closed


def test_ctrl_c_while_the_server_starts(launch):
    run = launch(scenario())
    run.wait_for(r"starting the embedded server")
    run.interrupt()
    assert run.finish(timeout=60) == EXIT_INTERRUPTED, run.stderr[-2000:]
    assert run.manifest()["status"] == "interrupted"
    assert not list((launch.home / "servers").glob("*/data")), "the server's directory is removed"
    # and no process of the run is left (the launch fixture checks: the server's processes carry the tag)
