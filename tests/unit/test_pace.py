"""The schedule of rate-driven and timed pools (workload/schedule.py), on an injected clock.

The schedule is tested twice: through `Pace.take`, which the Python loop asks, and through the
compiled loop's own copy reading `Pace.export` (`_fastloop.arrivals`, the same functions its loop
calls), with the same expectations: fixed and Poisson arrivals, the share of a worker process,
skipping past the latency limit, start and stop offsets and phases; and the two against each other,
which must give the same answers for the same seed, Poisson arrivals too (one generator, one rule).
Without the compiled loop its half skips with the reason, and fails under CI=true. Then the Python
loop end to end with a stand-in server: latency from the due time, lag, late and skipped counts, exactly.
"""

from __future__ import annotations

import heapq
import random
import statistics

import pytest
from needs import need_compiled

from concurbench.scenario.model import Phase, Pool, Statement
from concurbench.workload import fastloop
from concurbench.workload.seam import PACE_HEAD, PACE_SEGMENT
from concurbench.workload.schedule import FAR, Pace, events
from concurbench.workload import pool as pool_mod
from test_session_loop import MS, START, Clock, Engine, Poller, session  # the Python loop's stand-ins

MF = START + 100 * MS  # the measurement window's start; the loop started at START
END = MF + 10_000 * MS


def pool(**kw) -> Pool:
    return Pool("p", kw.pop("clients", 4), (Statement("s", "SELECT 1"),), **kw)


def python_takes(pace: Pace, frees):
    out = [pace.take(index, now, end) for index, _paced, now, end in frees]
    return out, (pace.stats.skipped if pace.stats else 0)


def compiled_takes(pace: Pace, frees):
    return fastloop._fastloop.arrivals(pace.export(), list(frees))


class Counts:
    skipped = 0


@pytest.fixture(params=["python", "compiled"])
def takes(request):
    """Answers of a Pace to sessions becoming free, as each loop computes them: f(pace, frees) -> (answers, skipped)."""
    if request.param == "compiled":
        need_compiled()
        return compiled_takes
    return python_takes


def make(p: Pool, local=(0, 1, 2, 3)) -> Pace:
    return Pace(p, list(local), MF, START, seed=1, stats=Counts())


def free(now: int, index: int = 0, paced: bool = True) -> tuple:
    return (index, int(paced), now, END)


def test_fixed_arrivals_are_evenly_spaced_from_the_loops_start(takes):
    answers, skipped = takes(make(pool(rate=1000.0, arrivals="fixed")), [free(START)] * 3)
    assert answers == [(START + k * MS, START + k * MS) for k in (1, 2, 3)]  # wait until due, then start
    assert skipped == 0


def test_a_worker_carries_its_share_of_the_rate(takes):
    answers, _ = takes(make(pool(rate=1000.0, arrivals="fixed"), local=(1, 3)), [free(START)] * 2)
    assert [due for _when, due in answers] == [START + 2 * MS, START + 4 * MS]  # 2 of 4 sessions: 500/s here


def test_poisson_arrivals_have_exponential_gaps(takes):
    answers, _ = takes(make(pool(rate=1000.0)), [free(START)] * 20_000)
    gaps = [b[1] - a[1] for a, b in zip(answers, answers[1:])]
    mean = statistics.fmean(gaps)
    assert 0.97 * MS < mean < 1.03 * MS
    assert 0.95 < statistics.pstdev(gaps) / mean < 1.05  # an exponential's coefficient of variation is 1
    fixed, _ = takes(make(pool(rate=1000.0, arrivals="fixed")), [free(START)] * 100)
    assert len({b[1] - a[1] for a, b in zip(fixed, fixed[1:])}) == 1


def test_poisson_arrivals_keep_each_phases_rate_up_to_its_end(takes):
    # the Python Pace draws arrivals in batches: a segment needs several (600 arrivals), and the draw that
    # reaches a segment's end must end its arrivals (drawing again there would add some just before the end,
    # half as many again in 2 ms phases that expect 2 each)
    long = pool(start_after=0.0, phases=(Phase(0.3, rate=2000.0), Phase(0.3, rate=100.0)))
    short = pool(start_after=0.0, phases=tuple(Phase(0.002, rate=1000.0) for _ in range(20)))
    firsts = seconds = shorts = 0
    for seed in range(1, 41):
        answers, _ = takes(Pace(long, [0, 1, 2, 3], MF, START, seed=seed), [free(MF)] * 800)
        dues = [due - MF for _when, due in answers if due < FAR]
        assert dues == sorted(dues) and dues[-1] < 600 * MS and len(dues) < 800
        firsts += sum(1 for due in dues if due < 300 * MS)
        seconds += sum(1 for due in dues if due >= 300 * MS)
        answers, _ = takes(Pace(short, [0, 1, 2, 3], MF, START, seed=seed), [free(MF)] * 120)
        shorts += sum(1 for _when, due in answers if due < FAR)
    # expected 40 x 600 (sd 155), 40 x 30 (sd 35), 40 x 40 (sd 40)
    assert 0.97 < firsts / 24_000 < 1.03 and 0.85 < seconds / 1200 < 1.15 and 0.88 < shorts / 1600 < 1.12


def test_a_free_client_that_is_behind_starts_at_once_and_skips_what_is_past_the_limit(takes):
    pace = make(pool(rate=1000.0, arrivals="fixed", latency_limit=0.005))
    # arrivals every 1 ms from START; a client free at START + 20 ms: due times more than 5 ms ago are skipped
    answers, skipped = takes(pace, [free(START + 20 * MS), free(START + 20 * MS)])
    assert answers == [(START + 20 * MS, START + 15 * MS), (START + 20 * MS, START + 16 * MS)]
    assert skipped == 0  # all of them were due before the window: warm-up is not counted
    late_start = make(pool(rate=1000.0, arrivals="fixed", latency_limit=0.005))
    answers, skipped = takes(late_start, [free(MF + 20 * MS)])
    assert answers == [(MF + 20 * MS, MF + 15 * MS)] and skipped == 15  # MF ... MF + 14 ms


def test_start_after_and_stop_after_gate_a_closed_pool(takes):
    pace = make(pool(start_after=0.01, stop_after=0.02))
    answers, _ = takes(pace, [free(START, paced=False), free(MF + 15 * MS, paced=False),
                              free(MF + 25 * MS, paced=False)])
    assert answers == [(MF + 10 * MS, -1), (MF + 15 * MS, MF + 15 * MS), (FAR, -1)]


def test_rate_phases_change_the_spacing_and_the_pool_stops_after_the_last(takes):
    pace = make(pool(start_after=0.0, arrivals="fixed", phases=(Phase(0.01, rate=200.0), Phase(0.01, rate=1000.0))))
    answers, _ = takes(pace, [free(MF)] * 16)
    dues = [due - MF for _when, due in answers]
    # 200/s: one at 5 ms (the next would fall on the boundary); 1000/s from 10 ms: 11 ... 19 ms; then none
    assert dues == [5 * MS] + [(10 + k) * MS for k in range(1, 10)] + [FAR - MF] * 6


def test_client_phases_hold_the_sessions_beyond_the_active_count(takes):
    pace = make(pool(phases=(Phase(0.01, clients=1), Phase(0.01, clients=4))))
    answers, _ = takes(pace, [free(MF, index=2, paced=False), free(MF, index=0, paced=False),
                              free(MF + 20 * MS, index=0, paced=False)])
    assert answers == [(MF + 10 * MS, -1), (MF, MF), (FAR, -1)]


def test_an_arrival_due_where_its_session_is_not_active_goes_to_one_that_is(takes):
    # 200/s fixed over 2 clients, then over 1 from 50 ms: the 10th arrival (55 ms) is not the second session's
    pace = make(pool(clients=2, start_after=0.0, arrivals="fixed",
                     phases=(Phase(0.05, rate=200.0), Phase(0.05, rate=200.0, clients=1))), local=(0, 1))
    answers, _ = takes(pace, [free(MF)] * 9 + [free(MF + 46 * MS, index=1), free(MF + 46 * MS, index=0)])
    assert [due - MF for _when, due in answers[:9]] == [5 * k * MS for k in range(1, 10)]
    assert answers[9:] == [(FAR, -1), (MF + 55 * MS, MF + 55 * MS)]


def test_a_skip_past_the_limit_into_a_phase_without_the_session_hands_the_arrival_back(takes):
    # 1000/s fixed over 2 clients, then over 1 from 50 ms, limit 0.2 ms: session 1, free at 49.5 ms with the
    # arrivals of 2 ... 49 ms still queued, skips them all; the next (51 ms) is due where it is not active
    pace = make(pool(clients=2, start_after=0.0, arrivals="fixed", latency_limit=0.0002,
                     phases=(Phase(0.05, rate=1000.0), Phase(0.05, rate=1000.0, clients=1))), local=(0, 1))
    half = MS // 2
    answers, skipped = takes(pace, [free(MF), free(MF + 49 * MS + half, index=1), free(MF + 49 * MS + half)])
    assert answers == [(MF + MS, MF + MS), (FAR, -1), (MF + 51 * MS, MF + 51 * MS)]
    assert skipped == 48  # 2 ... 49 ms, inside the window


STALL = (MF + 30 * MS, MF + 60 * MS)  # the server answers nothing: every arrival due in it is late by its end


def drive(pace: Pace, local: tuple, service_ns: int, seed: int) -> tuple[list[tuple], list[tuple]]:
    """Sessions of `local` driven by the Python loop's take as a loop drives them, and its answers: a session is
    free first at START, then when its transaction ends (an exponential service time of mean `service_ns`, or
    the STALL's end when it would end inside it), or when the pace said to ask again; up to MF + 200 ms."""
    draw = random.Random(seed)
    heap = [(START, index) for index in local]
    frees, answers = [], []
    while heap and heap[0][0] < MF + 200 * MS and len(frees) < 4000:
        now, index = heapq.heappop(heap)
        frees.append(free(now, index))
        answers.append(pace.take(index, now, END))
        when, due = answers[-1]
        if when < FAR:
            if due >= 0:  # a transaction, from `when` on
                when += int(draw.expovariate(1 / service_ns))
                when = STALL[1] if STALL[0] <= when < STALL[1] else when
            heapq.heappush(heap, (when, index))
    return frees, answers


TIMELINES = {  # name: (the pool's keywords at a rate, the local sessions)
    "steady": (lambda rate: dict(clients=4, rate=rate), (0, 1, 2, 3)),
    "a share, a limit": (lambda rate: dict(clients=4, rate=rate, latency_limit=0.002), (1, 3)),
    "start, stop": (lambda rate: dict(clients=3, rate=rate, start_after=0.004, stop_after=0.09), (0, 1, 2)),
    "phases, a limit": (lambda rate: dict(clients=6, start_after=0.003, latency_limit=0.003, phases=(
        Phase(0.02, rate=rate), Phase(0.015, rate=3 * rate, clients=2), Phase(0.03, rate=rate / 2, clients=5),
        Phase(0.01, clients=6), Phase(0.02, rate=2 * rate, clients=1))), (0, 2, 4)),
}


@pytest.mark.parametrize("arrivals", ["poisson", "fixed"])
@pytest.mark.parametrize("rate", [400.0, 3000.0, 25_000.0])
def test_both_loops_take_the_same_arrivals_for_the_same_seed(arrivals, rate):
    """One generator and one rule: Pace.take and the compiled loop's take (reading Pace.export) give the same
    (when, due) answers and skipped counts, free for free, to sessions driven as a loop drives them, over a steady
    rate, a worker's share of it, a start and a stop, phases of rate and clients, and latency limits that skip the
    arrivals a stall made late."""
    need_compiled()
    for name, (keywords, local) in TIMELINES.items():
        p = pool(**keywords(rate), arrivals=arrivals)
        for seed in (1, 2):
            python = Pace(p, list(local), MF, START, seed=seed, stats=Counts())
            frees, answers = drive(python, local, service_ns=int(0.5e9 / rate), seed=seed)
            compiled = fastloop._fastloop.arrivals(Pace(p, list(local), MF, START, seed=seed).export(), frees)
            assert (answers, python.stats.skipped) == compiled, (name, seed)
            # the case is what it says: arrivals taken, Poisson gaps that vary, the limit met, the gates
            dues = [due for _when, due in answers if 0 <= due < FAR]
            gaps = {b - a for a, b in zip(dues, dues[1:])}
            assert len(dues) >= 15 and (len(gaps) > 0.9 * len(dues) if arrivals == "poisson" else len(gaps) <= 16)
            assert (python.stats.skipped > 0) == bool(p.latency_limit), (name, seed)
            assert any(due < 0 for _when, due in answers) == (p.start_after is not None), (name, seed)
            assert any(when >= FAR for when, _due in answers) == (p.start_after is not None), (name, seed)


@pytest.mark.parametrize("arrivals", ["poisson", "fixed"])
def test_both_loops_draw_each_gap_to_its_last_bit(arrivals):
    """At a mean gap of 2**52 ns (a rate of 2.2e-7/s) the last bit of a gap is worth about a nanosecond (one from
    2**52 ns on), so a difference in how a loop computes a gap (its uniforms, log1p against log(1 - u), or numpy's
    SIMD log1p, which differs from the C library's in the last bit for some 7% of uniforms on AVX-512) shows in
    the arrivals, where at the test above's rates it would hardly ever move one: both loops give the same 400."""
    need_compiled()
    p = pool(clients=1, rate=1e9 / 2.0 ** 52, arrivals=arrivals)
    frees = [free(START)] * 400
    for seed in (1, 2, 3):
        python, compiled = (Pace(p, [0], MF, START, seed=seed, stats=Counts()) for _ in range(2))
        answers, _ = python_takes(python, frees)
        assert answers[-1][1] > 300 * 2 ** 52 and answers[-1][1] < FAR
        assert (answers, 0) == compiled_takes(compiled, frees)


def test_the_compiled_loop_reads_the_exported_schedule_and_refuses_another_layout():
    pace = make(pool(rate=1000.0, arrivals="fixed", latency_limit=0.005, start_after=0.0,
                     phases=(Phase(0.01, rate=200.0), Phase(0.01, clients=2))))
    exported = pace.export()
    n = len(pace.segs)
    assert len(exported) == PACE_HEAD.size + n * PACE_SEGMENT.size == 40 + 32 * n
    head = PACE_HEAD.read(exported, exact=False)
    assert (head["layout"], head["n_segs"], head["fixed"], head["limit"], head["measure_from"]) == (
        PACE_HEAD.version, n, 1, 5 * MS, MF)
    segs = [PACE_SEGMENT.unpack(exported, PACE_HEAD.size + i * PACE_SEGMENT.size) for i in range(n)]
    assert [(g["start"], g["end"], g["per_ns"], g["clients"]) for g in segs] == [tuple(seg) for seg in pace.segs]
    assert pace.take(0, START, END) == (MF, -1)  # the pool starts with the window: wait for it
    assert pace.take(0, MF, END) == (MF + 5 * MS, MF + 5 * MS)
    with pytest.raises(RuntimeError, match="before its first arrival"):
        pace.export()  # the compiled loop starts the stream from the first segment
    need_compiled()
    arrivals = fastloop._fastloop.arrivals
    assert arrivals(exported, [free(MF)]) == ([(MF + 5 * MS, MF + 5 * MS)], 0)
    other = PACE_HEAD.pack(**{**head, "layout": PACE_HEAD.version + 1}) + exported[PACE_HEAD.size:]
    with pytest.raises(ValueError, match=f"layout {PACE_HEAD.version + 1}; this build reads layout {PACE_HEAD.version}"):
        arrivals(other, [free(MF)])
    with pytest.raises(ValueError, match="does not hold its"):
        arrivals(exported[:-8], [free(MF)])
    with pytest.raises(TypeError):
        arrivals(make(pool(rate=1000.0)), [free(MF)])  # a Pace itself: no attributes are read by name


def test_events_name_every_change_of_the_timeline():
    p = pool(rate=100.0, start_after=0.5, phases=(Phase(0.5, rate=200.0), Phase(0.25, clients=2)))
    assert [e.as_dict() for e in events(p, 2.0)] == [
        {"t_s": 0.5, "source": "pool:p", "kind": "phase", "detail": "phase 1: rate 200/s"},
        {"t_s": 1.0, "source": "pool:p", "kind": "phase", "detail": "phase 2: rate 200/s, clients 2"},
        {"t_s": 1.25, "source": "pool:p", "kind": "stop", "detail": "stopped"}]
    assert events(p, 0.9) == events(p, 2.0)[:1]  # only what happened inside the window
    assert events(pool(rate=100.0), 2.0) == []


# -- the Python loop, end to end on the injected clock -------------------------------------------
def test_the_loop_times_rate_transactions_from_their_due_time_and_counts_late_and_skipped():
    # one client at 15 ms a transaction, 100/s due (every 10 ms from the start), limit 20 ms, window 0-100 ms:
    # due 10 20 30 40 50 (60 skipped: 25 ms late at 85) 70; started 10 25 40 55 70 85; ended 25 ... 100
    clock = Clock()
    engine = Engine(clock, latency_ns=15 * MS)
    p = Pool("p", 1, (Statement("s", "SELECT 1"),), rate=100.0, arrivals="fixed", latency_limit=0.02)
    s = session(engine, p)
    window = [START, START, START + 100 * MS]
    pool_mod._loop([s], window, [0], [0], clock=clock, sleep=clock.sleep, poller=Poller(clock, engine))
    stats = s.settle_stats()
    assert [t - START for _step, t in engine.channels[0].sent] == [k * MS for k in (10, 25, 40, 55, 70, 85)]
    assert stats.transactions == 6 and stats.skipped == 1
    assert stats.late == 4  # 25, 30, 35 and 30 ms from their due times, against a 20 ms limit
    assert stats.txn.total_ns == (15 + 20 + 25 + 30 + 35 + 30) * MS  # a closed loop would time each at 15 ms
    assert stats.lag.count == 6 and stats.lag.total_ns == (0 + 5 + 10 + 15 + 20 + 15) * MS


def test_a_rate_session_that_finishes_before_its_next_arrival_waits_for_it_and_is_timed_from_it():
    # one client at 3 ms a transaction, 100/s due every 10 ms: each answer comes before the next arrival, so the
    # session waits for it (and is not late): sent at 10, 20, ... 90 ms, each timed 3 ms with no lag
    clock = Clock()
    engine = Engine(clock, latency_ns=3 * MS)
    s = session(engine, Pool("p", 1, (Statement("s", "SELECT 1"),), rate=100.0, arrivals="fixed"))
    window = [START, START, START + 100 * MS]
    pool_mod._loop([s], window, [0], [0], clock=clock, sleep=clock.sleep, poller=Poller(clock, engine))
    stats = s.settle_stats()
    assert [t - START for _step, t in engine.channels[0].sent] == [k * 10 * MS for k in range(1, 10)]
    assert stats.transactions == 9 and stats.txn.total_ns == 9 * 3 * MS
    assert stats.lag.count == 9 and stats.lag.total_ns == 0 and stats.late == 0 and stats.skipped == 0


def test_a_closed_pool_with_a_start_and_stop_runs_only_between_them():
    clock = Clock()
    engine = Engine(clock, latency_ns=MS)
    s = session(engine, Pool("p", 1, (Statement("s", "SELECT 1"),), start_after=0.02, stop_after=0.05))
    window = [START, START + 10 * MS, START + 100 * MS]
    pool_mod._loop([s], window, [0], [0], clock=clock, sleep=clock.sleep, poller=Poller(clock, engine))
    sent = [t - START for _step, t in engine.channels[0].sent]
    assert sent[0] == 30 * MS and sent[-1] == 59 * MS and len(sent) == 30  # from 10 + 20 ms to 10 + 50 ms
    assert s.settle_stats().lag.count == 0  # no rate: no lag


def test_a_rate_pools_metrics_carry_lag_late_and_skipped_and_compare_wants_them_lower():
    from concurbench.figures import Better
    from concurbench.results.catalogue import CATALOGUE
    from concurbench.results.metrics import nested, pool_figures
    from concurbench.workload.stats import PoolStats

    stats = PoolStats("p", transactions=2, late=1, skipped=3)
    stats.lag.pending.extend([2 * MS, 4 * MS])
    metrics = nested(pool_figures(stats, 1.0))
    assert metrics["lag"]["mean_ms"] == 3.0 and metrics["late"] == 1 and metrics["skipped"] == 3
    assert "lag" not in nested(pool_figures(PoolStats("closed", transactions=2), 1.0))  # a closed loop has none
    assert PoolStats.from_dict(stats.to_dict()).skipped == 3
    assert {CATALOGUE.better(m) for m in ("lag.p99_ms", "late", "skipped", "late_per_txn")} == {Better.LOWER}


def test_a_rate_pools_sessions_take_arrivals_in_turn_and_only_while_active():
    # two sessions at 1 ms a transaction, 200/s due every 5 ms; the second phase keeps one client active:
    # phase 1 (0-50 ms) sends at 5 ... 45 ms over both sessions, phase 2 (50-100 ms) at 55 ... 95 ms over the first
    clock = Clock()
    engine = Engine(clock, latency_ns=MS)
    p = Pool("p", 2, (Statement("s", "SELECT 1"),), arrivals="fixed", start_after=0.0,
             phases=(Phase(0.05, rate=200.0), Phase(0.05, rate=200.0, clients=1)))
    sessions = [session(engine, p, 0), session(engine, p, 1)]
    window = [START, START, START + 100 * MS]
    pool_mod._loop(sessions, window, [0, 0], [0, 0], clock=clock, sleep=clock.sleep, poller=Poller(clock, engine))
    sent = {i: [(t - START) // MS for _step, t in engine.channels[i].sent] for i in (0, 1)}
    assert sorted(sent[0] + sent[1]) == [5 * k for k in range(1, 10)] + [55 + 5 * k for k in range(9)]
    assert sent[0] and sent[1] and all(t < 50 for t in sent[1])
    assert all(s.settle_stats().lag.total_ns == 0 for s in sessions)


def test_the_python_loop_hands_back_an_arrival_its_session_skipped_to_where_it_is_not_active():
    # as test_a_skip_past_the_limit_... above, end to end: two sessions at 48.5 ms a transaction, 1000/s fixed,
    # the second phase (from 50 ms) keeps one client. Session 1 takes the arrival of 1 ms, answers at 49.5 ms,
    # skips 2 ... 49 ms (all past the 0.2 ms limit but the one session 0 took) and stops: 51 ms is session 0's
    clock = Clock()
    engine = Engine(clock, latency_ns=48 * MS + MS // 2)
    p = Pool("p", 2, (Statement("s", "SELECT 1"),), arrivals="fixed", start_after=0.0, latency_limit=0.0002,
             phases=(Phase(0.05, rate=1000.0), Phase(0.05, rate=1000.0, clients=1)))
    second, first = session(engine, p, 1), session(engine, p, 0)  # the second begins first: it takes 1 ms
    window = [START, START, START + 100 * MS]
    pool_mod._loop([second, first], window, [0, 0], [0, 0], clock=clock, sleep=clock.sleep,
                   poller=Poller(clock, engine))
    sent = [[t - START for _step, t in channel.sent] for channel in engine.channels]
    assert sent == [[MS], [2 * MS, 51 * MS]]  # session 1 did not wait for 51 ms to send it itself
    ones, zeros = second.settle_stats(), first.settle_stats()
    # the pool's Pace counts skips in its first session's stats: 3 ... 49 ms, then 52 ... 99 ms (session 0 at 99.5)
    assert (ones.transactions, ones.late, ones.skipped) == (1, 1, 47 + 48)
    assert (zeros.transactions, zeros.late, zeros.skipped) == (2, 2, 0)
