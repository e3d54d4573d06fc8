"""The claims issue 45 gave the SQL Server scenarios, in the articles' terms, read from the scenario files and judged
on what the samplers make of DMV rows written by hand in the shape Microsoft's reference pages give (served by the
stand-in `CannedDmvs`: no SQL Server can run here), a PASS and a FAIL each:

- observer-overhead: the readers' waits do not show the observer (the wait types an Extended Events session or a
  trace leaves stay under a tenth of the readers' wait time); before, no claim said it, and no figure measured it;
- tempdb-gam-contention: on 2022 the GAM page is (almost) never waited for, which now holds when almost no task
  waits at all (before, `gam_share` had no value below 20 task samples, so the claim failed on exactly the result
  the article predicts); and 2022 finishes the same calls sooner than 2019 (7 s against 10 s), a claim across
  server versions that the claim language could not say before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mssql_standin import CannedDmvs, StepClock

from concurbench.check import judge_claims
from concurbench.results.model import PoolResult, VariantRun
from concurbench.running.load import load_scenario
from concurbench.samplers.mssql import TempdbLatches
from concurbench.samplers.mssql_waits import WaitStats
from concurbench.scenario.claims import parse_claim
from concurbench.scenario.model import SamplerSpec
from figured import figured

ROOT = Path(__file__).resolve().parents[2]
WAIT_COLUMNS = ("wait_type", "waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms")
SESSION_COLUMNS = ("session_id", "login_time", "program_name", *WAIT_COLUMNS)
LATCH_COLUMNS = ("wait_type", "resource_description", "tasks")


def claims(file: str, *metrics: str):
    """The scenario's claims whose check reads one of these metrics (parsed and validated by the loader)."""
    scenario = load_scenario(ROOT / "scenarios" / "mssql" / file)
    return [c for c in scenario.expect if any(m in c.text for m in metrics)]


def run(variant: str, server: str, repeat: int, samplers: dict | None = None, elapsed: float = 60.0) -> VariantRun:
    return figured(VariantRun(variant, "main", None, server, repeat, "ok", elapsed,
                              pools={"readers": PoolResult("readers", True, 16)}, samplers=samplers or {}),
                   {"readers": {"transactions": 1000, "tps": 1000 / elapsed}})


# -- observer-overhead: the observer does not show in the readers' waits ------------------------------------------
def waits(readers: list[tuple]) -> dict:
    """mssql_waits' summary of a window in which the readers (pool `readers`) waited as `readers` says, and the
    server as a busy one does (its own background waits, XE_TIMER_EVENT among them, kept as the scenario keeps)."""
    server = [[("SOS_SCHEDULER_YIELD", 0, 0, 0), ("XE_TIMER_EVENT", 0, 0, 0)],
              [("SOS_SCHEDULER_YIELD", 90000, 9000, 9000), ("XE_TIMER_EVENT", 4, 120000, 0)]]
    first = [(51, "2026-01-01T10:00:00", "concurbench:readers", wait, 0, 0, 0) for wait, *_ in readers]
    last = [(51, "2026-01-01T10:00:00", "concurbench:readers", wait, tasks, ms, 0) for wait, tasks, ms in readers]
    conn = CannedDmvs({WaitStats.QUERY: [(WAIT_COLUMNS, rows) for rows in server],
                       WaitStats.SESSIONS: [(SESSION_COLUMNS, first), (SESSION_COLUMNS, last)]})
    sampler = WaitStats(SamplerSpec("mssql_waits", (("keep", ["XE_TIMER_EVENT", "XE_BUFFERMGR_FREEBUF_EVENT",
                                                              "SQLTRACE_FILE_BUFFER"]),)), clock=StepClock(0.0, 120.0))
    sampler.prepare(conn, 16_000_000)
    sampler.read(conn)
    sampler.read(conn)
    return sampler.summarize(None, None, [], 120.0)


@pytest.mark.parametrize("readers, verdict", [
    ([("SOS_SCHEDULER_YIELD", 80000, 8000), ("PAGEIOLATCH_SH", 40, 120)], "pass"),  # 100% CPU, as the article's
    ([("XE_BUFFERMGR_FREEBUF_EVENT", 8773, 17078), ("SOS_SCHEDULER_YIELD", 80000, 8000)], "fail"),  # buffers full
    ([("SQLTRACE_FILE_BUFFER", 357, 3511), ("SOS_SCHEDULER_YIELD", 80000, 8000)], "fail"),  # a trace on a slow disk
])
def test_the_readers_waits_do_not_show_the_observer(readers, verdict):
    found = claims("observer-overhead.yaml", "observer_share")
    assert [c.form.left.ref.variant for c in found] == ["xe_ring_buffer", "xe_event_file", "sql_trace_file"]
    summary = waits(readers)
    assert summary["observer_share"] > 0.5  # server-wide, XE_TIMER_EVENT's sleep is most of the time in every arm
    runs = [run(c.form.left.ref.variant, "2022-CU15", r, {"mssql_waits": summary}) for c in found for r in (1, 2)]
    verdicts = judge_claims(list(found), runs)
    assert [v.verdict for v in verdicts] == [verdict] * 3, [v.reason for v in verdicts]


# -- tempdb-gam-contention: almost no GAM waits on 2022, and sooner than 2019 -------------------------------------
def latches(polls: list[list[tuple]]) -> dict:
    conn = CannedDmvs({TempdbLatches.QUERY: [(LATCH_COLUMNS, p) for p in polls],
                       TempdbLatches.WAIT_STATS: (WAIT_COLUMNS, [])})
    sampler = TempdbLatches(SamplerSpec("tempdb_latches", (("resolve_pages", False),)))
    sampler.prepare(conn, 16_000_000)
    rows = [{"t_s": 0.1 * (i + 1), **row} for i in range(len(polls)) for row in sampler.read(conn)]
    return sampler.summarize(None, None, rows, 0.1 * len(polls))


@pytest.mark.parametrize("polls, verdict", [
    ([[("PAGELATCH_UP", "2:1:2", 2)], [], [], []], "pass"),  # 2 GAM tasks in 4 samples: almost none
    ([[]] * 40, "pass"),  # no task waited at all: 2022's latch-free GAM
    ([[("PAGELATCH_UP", "2:1:2", 25), ("PAGELATCH_EX", "2:1:1", 5)]] * 4, "fail"),  # the 2019 queue on the GAM
])
def test_on_2022_the_gam_page_is_almost_never_waited_for(polls, verdict):
    (claim,) = claims("tempdb-gam-contention.yaml", "gam_floor_share")
    summary = latches(polls)
    if not summary["task_samples"]:
        assert summary["gam_share"] is None  # what the old claim read: no value, so it failed
    runs = [run("dynamic_memopt", "2022-CU15", r, {"tempdb_latches": summary}) for r in (1, 2)]
    (judged,) = [v for v in judge_claims([claim], runs) if v.server == "2022-CU15"]
    assert judged.verdict == verdict, judged.reason


@pytest.mark.parametrize("seconds_2019, seconds_2022, verdict", [(10.0, 7.0, "pass"), (9.0, 13.0, "fail")])
def test_on_2022_the_same_calls_finish_sooner_than_on_2019(seconds_2019, seconds_2022, verdict):
    (claim,) = claims("tempdb-gam-contention.yaml", "on 2019: elapsed_s")
    assert claim.form.right.ref.server == "2019" and claim.servers == ("2022",)
    runs = [run("dynamic_memopt", server, r, elapsed=seconds + 0.1 * r)
            for server, seconds in (("2019-CU27", seconds_2019), ("2022-CU15", seconds_2022)) for r in (1, 2, 3)]
    verdicts = {v.server: v for v in judge_claims([claim], runs)}
    assert verdicts["2022-CU15"].verdict == verdict, verdicts["2022-CU15"].reason
    assert verdicts["2019-CU27"].verdict == "not evaluated"  # the claim is about 2022


def test_a_side_on_a_server_the_run_lacks_is_not_evaluated_and_the_form_keeps_its_server():
    claim = parse_claim("dynamic_memopt: elapsed_s < dynamic_memopt on 2019: elapsed_s")
    (judged,) = judge_claims([claim], [run("dynamic_memopt", "2022-CU15", r) for r in (1, 2)])
    assert judged.verdict == "not evaluated" and "names server 2019, and this run has none" in judged.reason
    assert str(claim.form.right.ref) == "dynamic_memopt on 2019: elapsed_s"
    from concurbench.scenario.claims import claim_form, claim_of
    assert claim_of(claim_form(claim.form)) == claim.form
