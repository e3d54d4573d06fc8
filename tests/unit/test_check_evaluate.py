"""Claims judged on variant runs built here (no server): estimates per side, verdicts, reasons, the plan."""

from __future__ import annotations

import random
from dataclasses import replace
import re

import pytest

from concurbench import stats
from concurbench.check import CheckPolicy, Sequential, check_outcome, judge_claims
from concurbench.check.evaluate import Skip, left_out
from concurbench.results.model import Cause
from concurbench.check.rounds import claim_points
from concurbench.results.model import PoolResult, VariantRun
from concurbench.scenario.claims import parse_claim
from figured import figured

BUCKETS = 20  # a 2 s window of 100 ms intervals


def _series(rng: random.Random, tps: float, latency_ms: float, stall: float = 0.0) -> dict:
    """Per-100 ms counts and latency sums; with `stall`, nothing completes in that share of the window first."""
    counts = [0 if i < stall * BUCKETS else max(1, int(rng.gauss(tps / 10, tps / 100))) for i in range(BUCKETS)]
    sums = [int(c * rng.gauss(latency_ms, latency_ms / 10) * 1e6) for c in counts]
    return {"bucket_ns": 100_000_000, "count": counts, "txn_ns": sums, "failed": [0] * BUCKETS,
            "statement_ns": {"lock": [s // 2 for s in sums]}}


def run(variant: str, repeat: int, *, tps: float = 1000.0, latency_ms: float = 5.0, seed: int = 0,
        point=None, extra: dict | None = None, status: str = "ok", samplers: dict | None = None,
        unavailable: dict | None = None, p95: float | None = 7.0, stall: float = 0.0) -> VariantRun:
    rng = random.Random(f"{variant}:{repeat}:{seed}")
    series = _series(rng, tps, latency_ms, stall)
    txns = sum(series["count"])
    metrics = {"transactions": txns, "tps": txns / 2.0, "failed": 0,
               "latency": {"mean_ms": sum(series["txn_ns"]) / txns / 1e6, "p95_ms": p95},
               "statements": {"lock": {"mean_ms": sum(series["statement_ns"]["lock"]) / txns / 1e6}}}
    metrics.update(extra or {})
    pool = PoolResult("main", True, 8, {"series": series})
    return figured(VariantRun(variant, "g", point, "18.6", repeat, status, 2.0, pools={"main": pool},
                              samplers=samplers or {}, unavailable=unavailable or {},
                              messages=["1 of 2 worker processes sent no results"] if status == "incomplete" else []),
                   {"main": metrics})


def judge(texts: list[str], runs: list[VariantRun], **kw):
    return judge_claims([parse_claim(t) for t in texts], runs, **kw)


def test_a_large_difference_passes_after_two_runs_each():
    runs = [run("fast", r, tps=3000) for r in (1, 2)] + [run("slow", r, tps=1000) for r in (1, 2)]
    (v,) = judge(["fast: tps > slow: tps"], runs)
    assert v.verdict == "pass", v.reason
    assert v.left.low < v.left.value < v.left.high
    assert 2.5 < v.ratio.value < 3.5 and v.ratio.low < v.ratio.value < v.ratio.high
    assert "holds at 95%" in v.reason and v.p_value < 0.05


def test_a_claim_false_on_purpose_fails():
    runs = [run("fast", r, tps=3000) for r in (1, 2, 3)] + [run("slow", r, tps=1000) for r in (1, 2, 3)]
    (v,) = judge(["slow: tps > fast: tps"], runs)
    assert v.verdict == "fail"
    assert "the opposite holds" in v.reason


def test_runs_of_the_same_load_are_inconclusive_not_pass():
    """Equal loads: neither `a > b` nor its opposite is shown (here a's three runs measured 3-4% slower latencies
    than b's, which three runs cannot tell from noise)."""
    runs = [run("a", r, seed=1) for r in (1, 2, 3)] + [run("b", r, seed=2) for r in (1, 2, 3)]
    verdicts = judge(["a: tps > b: tps", "a: latency.mean_ms < b: latency.mean_ms"], runs)
    assert [v.verdict for v in verdicts] == ["inconclusive", "inconclusive"]
    assert "within the noise" in verdicts[0].reason and "paired by round" in verdicts[0].reason
    assert "more than 100 runs a side would be needed" in verdicts[0].reason


def test_a_designed_stall_against_no_stall_decides_when_the_runs_agree():
    """Readers that queue for half of every window against readers that do not: the stalled window's own spread
    is huge (zero, then the full rate), but its runs agree, and the runs are what the verdict uses."""
    rng = random.Random(4)
    runs = []
    for r in (1, 2, 3, 4, 5):
        drift = rng.gauss(1, 0.05)
        runs.append(run("free", r, tps=80_000 * drift * rng.gauss(1, 0.03)))
        runs.append(run("stalled", r, tps=56_000 * drift * rng.gauss(1, 0.03), stall=0.5))
    (v,) = judge(["free: tps > 1.5 * stalled: tps"], runs)
    assert v.verdict == "pass", v.reason
    assert "5 runs a side; paired by round" in v.reason
    assert 1.7 < v.ratio.value < 2.1 and v.interval.low > 1 and v.interval.confidence == pytest.approx(0.95)  # 2.6-3.2x
    (single,) = judge(["stalled: tps > 0"], [runs[1]])
    assert "window not steady: the level changes 50% into the window" in single.left.method
    assert single.left.low is None


def test_the_interval_shown_is_the_one_the_verdict_used():
    """At the claim's level (Holm over claims, spending over looks) the interval excludes the claim's boundary
    exactly when the verdict decides; the 95% interval beside it may not."""
    rng = random.Random(12)
    runs = []
    for r in (1, 2, 3):
        runs.append(run("a", r, tps=1000 * (1.1 + rng.gauss(0, 0.03))))
        runs.append(run("b", r, tps=1000 * (1 + rng.gauss(0, 0.03))))
    texts = ["a: tps > b: tps", "a: tps > 1.3 * b: tps", "a: tps > 1050", "a: tps < 1300"]
    for v in judge(texts, runs):
        interval = v.interval
        assert interval.confidence == pytest.approx(1 - v.level)
        boundary = 1.0 if interval.method == "left / right" else 0.0
        assert (interval.low > boundary or interval.high < boundary) == (v.verdict != "inconclusive"), v


def test_rounds_that_do_not_line_up_are_compared_unpaired_and_the_reason_says_so():
    runs = [run("a", r, tps=3000) for r in (1, 2, 3)] + [run("b", r, tps=1000) for r in (1, 3)]
    (v,) = judge(["a: tps > b: tps"], runs)
    assert v.verdict == "pass" and "unpaired: the sides ran in different rounds (1, 2, 3 against 1, 3)" in v.reason


def test_an_open_claim_says_how_many_runs_would_decide_it():
    runs = [run("a", r, tps=t) for r, t in ((1, 1090), (2, 1040), (3, 1190))] + \
        [run("b", r, tps=t) for r, t in ((1, 1000), (2, 1030), (3, 1040))]  # about 1.08x, the rounds 1-14% apart
    (v,) = judge(["a: tps > b: tps"], runs)
    assert v.verdict == "inconclusive"
    more = re.search(r"about (\d+) runs a side \((\d+) more\) would decide it", v.reason)
    assert more and int(more.group(1)) == int(more.group(2)) + 3 and 4 <= int(more.group(1)) <= 30, v.reason


def test_an_early_look_at_a_tiny_level_shows_an_unbounded_interval_and_does_not_overflow():
    """Two runs a side that disagree, among many claims, at the first look: one degree of freedom at a level of
    a few in 100,000 gives a t quantile in the tens of thousands, whose ratio no float holds."""
    from concurbench.check.evaluate import Look
    from concurbench.report.tables import _verdict_interval

    runs = [run("a", 1, tps=1000), run("a", 2, tps=30000), run("b", 1, tps=3000), run("b", 2, tps=1000)]
    verdicts = judge(["a: tps > b: tps"] * 30, runs, look=Look(1, 2, 5))
    v = verdicts[0]
    assert v.verdict == "inconclusive" and v.interval.high is None and v.interval.low >= 0
    assert _verdict_interval(v.interval).startswith("[") and ", ∞] at 99.99" in _verdict_interval(v.interval)


def test_one_run_decides_nothing_but_shows_its_window_interval():
    runs = [run("fast", 1, tps=3000), run("slow", 1, tps=1000)]
    (v,) = judge(["fast: tps > slow: tps"], runs)
    assert v.verdict == "inconclusive"
    assert "ran 1 time" in v.reason and "--check" in v.reason
    assert v.left.low is not None and v.left.method == "within run"


def test_two_zeros_are_inconclusive():
    runs = [run("a", r, extra={"multixact": {"created": 0}}) for r in (1, 2)] + \
        [run("b", r, extra={"multixact": {"created": 0}}) for r in (1, 2)]
    (v,) = judge(["a: multixact.created <= 0.2 * b: multixact.created"], runs)
    assert v.verdict == "inconclusive"
    assert "both sides are zero" in v.reason


def test_an_exact_zero_against_a_number_decides():
    runs = [run("one", r, extra={"multixact": {"created": 0}}) for r in (1, 2)]
    verdicts = judge(["one: multixact.created == 0", "one: multixact.created > 0"], runs)
    assert [v.verdict for v in verdicts] == ["pass", "fail"]


def test_positive_in_every_run_against_zero_decides_however_much_the_runs_differ():
    runs = [run("a", r, extra={"multixact": {"created": c}}) for r, c in ((1, 3), (2, 4_000))] + \
        [run("b", r, extra={"multixact": {"created": 0}}) for r in (1, 2)]
    verdicts = judge(["a: multixact.created > 0", "a: multixact.created > b: multixact.created",
                      "b: multixact.created >= a: multixact.created"], runs)
    assert [v.verdict for v in verdicts] == ["pass", "pass", "fail"]
    assert "every run measured more than 0" in verdicts[0].reason and verdicts[0].ratio is None
    spread = [run("c", r, extra={"multixact": {"created": c}}) for r, c in ((1, 0), (2, 4_000))]
    (v,) = judge(["c: multixact.created > 0"], spread)
    assert v.verdict == "inconclusive"  # a run that saw nothing: back to the test, which the spread defeats


def test_too_few_transactions_for_a_percentile_is_inconclusive():
    runs = [run("a", r, p95=None) for r in (1, 2)]
    (v,) = judge(["a: latency.p95_ms < 100"], runs)
    assert v.verdict == "inconclusive"
    assert v.reason.startswith("too few observations") and "p95" in v.reason


def test_a_wait_that_was_never_sampled_is_inconclusive():
    summary, rows = {"wait_events": {"share": {"CPU": 1.0}}}, [{"t_s": 0.1, "wait": "CPU", "sessions": 2}]
    runs = [replace(run(v, r, samplers=summary), samples={"wait_events": rows}) for v in ("a", "b") for r in (1, 2)]
    (v,) = judge(["a: waits.Lock:tuple > b: waits.Lock:tuple"], runs)
    assert v.verdict == "inconclusive"


def test_same_run_figures_are_compared_run_by_run():
    """Catalog rows deleted against transactions: a steady ratio decides even though both move a lot between runs."""
    runs = []
    for r, scale in ((1, 1.0), (2, 1.6)):
        vr = run("dynamic", r, tps=1000 * scale)
        txns = vr.own("main")["transactions"]
        runs.append(figured(replace(vr, probes={"catalogs": {"after": [{"n_tup_del": 14 * txns}]}}),
                            {"main": vr.own("main")}))
    (v,) = judge(["dynamic: probes.catalogs.after.n_tup_del >= 10 * dynamic: transactions"], runs)
    assert v.verdict == "pass", v.reason
    assert v.ratio.value == pytest.approx(1.4)


def test_incomplete_runs_and_unavailable_metrics_are_not_evaluated():
    runs = [run("a", 1, status="incomplete"), run("b", 1), run("b", 2),
            run("c", 1, unavailable={"table_stats.idx_fetch": "not available on PostgreSQL 14"}), run("c", 2)]
    verdicts = judge(["a: tps > b: tps", "c: table_stats.idx_fetch > 0"], runs)
    assert [v.verdict for v in verdicts] == ["not evaluated", "not evaluated"]
    assert "incomplete" in verdicts[0].reason
    assert "not available on PostgreSQL 14" in verdicts[1].reason


def test_claims_left_out_of_quick_runs_say_why():
    claim = parse_claim("a: tps > b: tps")
    from dataclasses import replace

    claim = replace(claim, skip_quick="the effect is too small for 2 s windows")
    runs = [run(v, r) for v in ("a", "b") for r in (1, 2)]
    (v,) = judge_claims([claim], runs, quick=True)
    assert v.verdict == "not evaluated" and "too small" in v.reason
    (v,) = judge_claims([claim], runs, quick=False)
    assert v.verdict != "not evaluated"


def test_claims_on_variants_not_run_are_not_evaluated_and_only_the_unchosen_ones_leave_the_exit_code_alone():
    runs = [run("a", r) for r in (1, 2)]
    texts = ["a: tps > b: tps", "a: tps > c: tps", "a: tps > 0"]
    verdicts = judge(texts, runs, skipped={"b": left_out(), "c": Skip(Cause.NOT_RUN, "not run: the run was interrupted first")})
    assert [v.verdict for v in verdicts] == ["not evaluated", "not evaluated", "pass"]
    assert verdicts[0].reason == "not evaluated: left out with --variant (b)"
    assert "interrupted" in verdicts[1].reason
    assert check_outcome(verdicts) == (0, 1)  # the interrupted one is undecided; the one not chosen is not


def test_a_missing_metric_is_named_without_suggesting_itself():
    runs = [run("a", r) for r in (1, 2)]
    (v,) = judge(["a: tpz > 10"], runs)
    assert v.verdict == "not evaluated"
    assert "'tpz'" in v.reason and "did you mean 'tps'" in v.reason


def test_holm_makes_the_family_stricter_than_one_claim_alone():
    rng = random.Random(9)
    runs = []
    for r in (1, 2, 3):
        runs.append(run("a", r, tps=1000 * (1.12 + rng.gauss(0, 0.02))))
        runs.append(run("b", r, tps=1000 * (1 + rng.gauss(0, 0.02))))
    alone = judge(["a: tps > b: tps"], runs)[0]
    open_ones = ["a: tps > 1.12 * b: tps", "b: tps > 0.893 * a: tps"]  # both about where the runs put them
    many = judge(["a: tps > b: tps"] + open_ones, runs)
    assert many[0].p_value == pytest.approx(alone.p_value)
    assert alone.level == stats.ALPHA and many[0].level == pytest.approx(stats.ALPHA / 3)
    assert "Holm over 3 claims" in many[0].reason


def test_earlier_verdicts_stand():
    runs = [run("fast", r, tps=3000) for r in (1, 2)] + [run("slow", r, tps=1000) for r in (1, 2)]
    (first,) = judge(["fast: tps > slow: tps"], runs)
    later = [run("fast", 3, tps=1000), run("slow", 3, tps=3000)]
    (again,) = judge(["fast: tps > slow: tps"], runs + later, decided={(first.claim_id, first.server): first})
    assert again is first


def test_the_plan_runs_only_what_open_claims_read(tmp_path):
    from concurbench.running.load import load_scenario

    scenario = load_scenario(_scenario(tmp_path), quick=False)
    runs = [run("a", 1, point=4), run("a", 1, point=32), run("b", 1, point=4), run("b", 1, point=32),
            run("c", 1), run("a", 2, point=32), run("b", 2, point=32), run("c", 2)]
    runs = [r for r in runs]
    seq = Sequential(scenario, CheckPolicy(max_repeats=4), first=1)
    assert seq.looks == 3  # after 2, 3 and 4 runs a side
    assert sum(seq.look(k).level_for(1) for k in (1, 2, 3)) == pytest.approx(stats.ALPHA)
    assert seq.look(4).level_for(1) == 0.0  # a look beyond the plan spends nothing
    verdicts = seq.judge(runs)
    wanted = seq.wanted(verdicts, runs)
    assert set(wanted) <= {("a", 32), ("b", 32), ("c", None)}
    assert claim_points(scenario.expect[0], runs) == [("a", 32), ("b", 32)]


def _scenario(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("""
name: s
engine: postgres
duration: 1s
sweep: [4, 32]
variants:
  a: {pools: {main: {clients: sweep, transaction: ["SELECT 1"]}}}
  b: {pools: {main: {clients: sweep, transaction: ["SELECT 1"]}}}
  c: {pools: {main: {clients: 2, transaction: ["SELECT 1"]}}}
expect:
  - check: "a@max: tps > b@max: tps"
  - check: "c: tps > 0"
""")
    return path


def test_the_check_says_what_to_run_next_and_why_it_stops(tmp_path):
    """The round loop is the check's (check/rounds.py): after one run a side it asks for every point a claim reads
    once more, without a look; then it looks and asks only for what open claims read; it stops when no open claim
    could take more runs (decided, or at --max-repeats), or when the next round would pass the time budget. A variant no longer running is not asked."""
    from concurbench.check.rounds import Stop
    from concurbench.running.load import load_scenario

    scenario = load_scenario(_scenario(tmp_path), quick=False)
    everything = {"a", "b", "c"}
    seq = Sequential(scenario, CheckPolicy(max_repeats=3), first=1)
    runs = [run(v, 1, point=p) for v in "ab" for p in (4, 32)] + [run("c", 1)]
    step = seq.next_round(runs, skipped={}, busy=False, servers=["18.6"], running=everything)
    assert (step.repeat, step.stop, step.taken, seq.looks_taken) == (2, None, None, 0)
    assert step.wanted == {("a", 32): {"18.6"}, ("b", 32): {"18.6"}, ("c", None): {"18.6"}}
    runs += [run("a", 2, point=32, tps=1010), run("b", 2, point=32), run("c", 2)]
    step = seq.next_round(runs, skipped={}, busy=False, servers=["18.6"], running=everything)
    assert step.stop is None and step.repeat == 3 and step.taken.look == 1 and step.taken.open == 1
    assert set(step.wanted) == {("a", 32), ("b", 32)}  # `c: tps > 0` is decided
    runs += [run("a", 3, point=32, tps=990), run("b", 3, point=32)]
    step = seq.next_round(runs, skipped={}, busy=False, servers=["18.6"], running=everything)
    assert step.stop is Stop.SETTLED and step.wanted == {} and (step.taken.look, step.taken.open) == (2, 1)
    assert seq.final(runs, {}) is seq.verdicts  # the last look saw every run

    decided = Sequential(scenario, CheckPolicy(max_repeats=3), first=2)
    fast = [run("a", r, point=32, tps=3000) for r in (1, 2)] + [run("b", r, point=32) for r in (1, 2)] + \
        [run("c", r) for r in (1, 2)]
    assert decided.next_round(fast, skipped={}, busy=False, servers=["18.6"], running=everything).stop is Stop.SETTLED

    now = [0.0]
    poor = Sequential(scenario, CheckPolicy(max_repeats=5, budget_s=10.0), first=2, clock=lambda: now[0])
    for r in runs:
        poor.record(r, 6.0)  # a round of a@32 and b@32 costs 12 s
    step = poor.next_round(runs[:-2], skipped={}, busy=False, servers=["18.6"], running=everything)
    assert step.stop is Stop.BUDGET and step.wanted == {}
    left = Sequential(scenario, CheckPolicy(max_repeats=3), first=1)
    step = left.next_round(runs[:5], skipped={}, busy=False, servers=["18.6"], running={"a", "b"})
    assert set(step.wanted) == {("a", 32), ("b", 32)}
