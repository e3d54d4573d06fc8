"""How precisely both event loops wait for a rate's due times, on an injected clock.

The compiled loop's wait is computed by `plan_wait` in _fastloop.c (the function its loop calls, given
the clock's reading): for each of its ways to wait, the wait must never end before the due time nor
later than that way's rounding. The Python loop's is PreciseEpoll's: here over stand-ins for epoll and
select() that move an injected clock by the timeouts they are given, rounded as CPython rounds them
(a float of seconds up to whole nanoseconds, then up to milliseconds for epoll and to microseconds for
select). A due time already past is sent at once, without a wait. Where the kernel refuses a way to
wait (a seccomp filter in a child process stands in for an older kernel), the loop takes the next.
"""

from __future__ import annotations

import math
import os
import platform
import random
import select
import socket
import subprocess
import sys

import pytest

from concurbench.errors import RunError
from concurbench.scenario.model import Pool, Statement
from concurbench.workload import fastloop
from concurbench.workload import pool as pool_mod
from concurbench.workload.waiting import LOOK_S, PRECISION_NS, PreciseEpoll
from test_session_loop import MS, START, Clock, Engine, Poller, session  # the Python loop's stand-ins

US = 1_000
CAP = int(LOOK_S * 1e9)
ROUNDING = {"epoll_pwait2": 0, "timerfd": 0, "epoll_wait": MS - 1}  # the most each way may end after its due time


@pytest.fixture()
def plan():
    if fastloop._fastloop is None:
        pytest.skip("the extension is not built here")
    return fastloop._fastloop.plan_wait


def waits_to_try() -> list[int]:
    """Waits from 1 ns to past the cap: whole and odd milli- and microseconds, and random ones."""
    rng = random.Random(32)
    fixed = [1, 999, US, US + 1, 333_667, MS - 1, MS, MS + 1, 1_500_000, 7 * MS + 3, CAP - 1, CAP, CAP + 1]
    return fixed + [rng.randrange(1, CAP + MS) for _ in range(2000)]


# -- the compiled loop ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", fastloop.WAITS)
def test_the_compiled_loops_wait_ends_at_its_due_time_within_the_waits_rounding(plan, mode):
    index = fastloop.WAITS.index(mode)
    for now in (START, START + 123_457):
        for wait in waits_to_try():
            due = now + wait
            ends_after, pwait2_ns, timer_at, ms = plan(index, now, due)
            if wait >= CAP:  # the loop looks at its parent at least this often, whatever is due
                assert ends_after == CAP and timer_at == 0
                continue
            assert due <= now + ends_after <= due + ROUNDING[mode], (mode, wait, ends_after)
            # and that is what the kernel is asked for
            if mode == "epoll_pwait2":
                assert pwait2_ns == ends_after
            elif mode == "timerfd":
                assert timer_at == due and ms * MS >= wait  # the timer ends it; epoll's own timeout is not sooner
            else:
                assert ms * MS == ends_after


@pytest.mark.parametrize("mode", fastloop.WAITS)
def test_a_due_time_already_past_is_not_waited_for_and_nothing_due_waits_the_longest(plan, mode):
    index = fastloop.WAITS.index(mode)
    for past in (0, 1, 999, MS, 10 * CAP):
        assert plan(index, START, START - past) == (0, 0, 0, 0)
    assert plan(index, START, -1)[0] == CAP  # nothing due: look at the parent again after LOOK_S
    with pytest.raises(ValueError):
        plan(len(fastloop.WAITS), START, START + MS)


def test_the_loop_takes_the_best_wait_that_works_here_and_can_be_told_another(plan, monkeypatch):
    works = fastloop._fastloop.waits()
    assert works and works[-1] == "epoll_wait" and list(works) == [w for w in fastloop.WAITS if w in works]
    monkeypatch.delenv(fastloop.WAIT_ENV, raising=False)
    assert fastloop.wait() == works[0]
    monkeypatch.setenv(fastloop.WAIT_ENV, "epoll_wait")
    assert fastloop.wait() == "epoll_wait" and "waiting with epoll_wait" in fastloop.describe("auto")
    monkeypatch.setenv(fastloop.WAIT_ENV, "sleep")
    with pytest.raises(RuntimeError, match="not a wait of the compiled loop"):
        fastloop.wait()
    if fastloop.unavailable("postgres") is None:
        with pytest.raises(RunError, match="CONCURBENCH_LOOP_WAIT=sleep"):
            fastloop.resolve("auto", "postgres")


# -- the Python loop ------------------------------------------------------------------------------
class Epoll(Poller):
    """select.epoll on the injected clock: the timeout rounded up to whole milliseconds, as CPython does."""

    def __init__(self, clock: Clock, engine: Engine):
        super().__init__(clock, engine)
        self.timeouts: list[float] = []

    def fileno(self) -> int:
        return 3

    def poll(self, timeout: float):
        self.timeouts.append(timeout)
        ns = math.ceil(timeout * 1e9)  # CPython: seconds to nanoseconds, rounded up
        return self.until(self.clock() + -(-ns // MS) * MS)

    def until(self, limit: int):
        """Wait until an answer is due or the clock reaches `limit`; the fds with an answer."""
        live = [r for r in self.engine.channels if r.fd in self.fds and r.due is not None]
        due = min((r.due for r in live), default=None)
        if due is None or due > limit:
            self.clock.now = max(self.clock.now, limit)
            return []
        self.clock.now = max(self.clock.now, due)
        return [(r.fd, select.EPOLLIN) for r in live if r.due <= self.clock.now]


def select_over(epoll: Epoll, calls: list[float]):
    """select() on the epoll descriptor, on the injected clock: the timeout rounded up to whole microseconds."""
    def wait(rlist, wlist, xlist, timeout):
        calls.append(timeout)
        ns = math.ceil(timeout * 1e9)
        return (list(rlist) if epoll.until(epoll.clock() + -(-ns // US) * US) else []), [], []
    return wait


def drive_rate(rate: float, latency_ns: int, precise: bool = True):
    """One session of a pool with fixed arrivals through the Python loop over 100 ms: (its stats, its send
    times, the epoll stand-in, the timeouts select() was given)."""
    clock = Clock()
    engine = Engine(clock, latency_ns=latency_ns)
    s = session(engine, Pool("p", 1, (Statement("s", "SELECT 1"),), rate=rate, arrivals="fixed"))
    epoll, calls = Epoll(clock, engine), []
    poller = PreciseEpoll(epoll, select_over(epoll, calls)) if precise else epoll
    window = [START, START, START + 100 * MS]
    pool_mod._loop([s], window, [0], [0], clock=clock, sleep=clock.sleep, poller=poller)
    return s.settle_stats(), [t for _step, t in engine.channels[0].sent], epoll, calls


def test_the_python_loop_sends_each_arrival_within_a_microsecond_of_its_due_time():
    # 2,997/s fixed: one arrival every 333,667 ns (neither whole micro- nor milliseconds); answers in 0.1 ms
    stats, sends, epoll, calls = drive_rate(2997.0, 100 * US)
    gap = int(1e9 / 2997.0)  # fixed arrivals move by whole nanoseconds
    assert stats.transactions >= 290 and len(calls) >= 290  # each arrival waited for with select()
    assert stats.lag.count == stats.transactions and 0 <= stats.lag.max_ms() * 1e6 <= PRECISION_NS
    for k, sent in enumerate(sends, start=1):  # the k-th arrival is due k gaps after the loop's start
        due = START + k * gap
        assert due <= sent <= due + PRECISION_NS, k
    assert all(t <= 0 or t >= LOOK_S for t in epoll.timeouts)  # epoll itself never rounds a due time
    # what the loop did with epoll's milliseconds alone: up to a millisecond late, half of one on average
    old, _sends, _epoll, _calls = drive_rate(2997.0, 100 * US, precise=False)
    assert old.lag.mean_ms() > 0.3 and old.lag.max_ms() > 0.9


def test_the_python_loop_sends_an_arrival_already_past_at_once():
    # answers take 0.5 ms, arrivals come every 0.4 ms over one session: after the first, each is already due
    # when the previous answer comes, and is sent right then, with no wait (select is asked for the first only)
    stats, sends, epoll, calls = drive_rate(2500.0, 500 * US)
    assert len(calls) == 1 and stats.transactions >= 190
    assert [b - a for a, b in zip(sends, sends[1:])] == [500 * US] * (len(sends) - 1)  # back to back
    assert stats.lag.max_ms() > 0  # late, and timed from the due time


def test_precise_epoll_over_real_sockets_reads_what_is_ready():
    left, right = socket.socketpair()
    poller = PreciseEpoll()
    try:
        poller.register(left.fileno(), select.EPOLLIN)
        assert poller.poll(0.0002) == []  # nothing to read: the wait times out
        right.send(b"x")
        assert poller.poll(0.0002) == [(left.fileno(), select.EPOLLIN)]
        assert poller.poll(0) == poller.poll(LOOK_S) == [(left.fileno(), select.EPOLLIN)]
        poller.unregister(left.fileno())
        assert poller.poll(0) == []
    finally:
        poller.close()
        left.close()
        right.close()


def test_precise_epoll_waits_in_milliseconds_when_select_cannot_take_its_descriptor():
    """A stand-in select that refuses the descriptor, as select() does one beyond FD_SETSIZE."""
    clock = Clock()
    epoll = Epoll(clock, Engine(clock))
    refused = []

    def too_high(rlist, wlist, xlist, timeout):
        refused.append(timeout)
        raise ValueError("filedescriptor out of range in select()")

    poller = PreciseEpoll(epoll, too_high)
    poller.poll(0.0003)
    poller.poll(0.0004)
    assert refused == [0.0003] and epoll.timeouts == [0.0003, 0.0004]  # asked once, then epoll alone
    assert clock() == START + 2 * MS


SECCOMP_CHILD = r"""
import ctypes, struct, sys
blocked = [int(n) for n in sys.argv[1].split(",")]
# a seccomp filter (classic BPF) that makes the blocked system calls fail with ENOSYS, as an older kernel would
code = [(0x20, 0, 0, 4), (0x15, 0, 2 * len(blocked) + 1, 0xC000003E), (0x20, 0, 0, 0)]  # x86_64 only, else allow
for nr in blocked:
    code += [(0x15, 0, 1, nr), (0x06, 0, 0, 0x00050000 | 38)]
code += [(0x06, 0, 0, 0x7FFF0000)]
prog = b"".join(struct.pack("HBBI", *op) for op in code)
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("HxxxxxxQ", len(code), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no new privileges: allowed without them
assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, ctypes.get_errno()
from concurbench.workload import fastloop
print(",".join(fastloop._fastloop.waits()), fastloop.wait())
"""


@pytest.mark.parametrize("blocked, left", [("441", "timerfd,epoll_wait timerfd"),
                                           ("441,283", "epoll_wait epoll_wait")])
def test_a_kernel_that_refuses_epoll_pwait2_or_timerfd_gets_the_next_wait(plan, blocked, left):
    """The kernel itself refuses the calls (a seccomp filter in a child process answers ENOSYS for epoll_pwait2,
    441, and timerfd_create, 283, on x86_64): the loop's probe finds the next way to wait."""
    if platform.machine() != "x86_64":
        pytest.skip("the filter names x86_64's system call numbers")
    env = {k: v for k, v in os.environ.items() if k != fastloop.WAIT_ENV}
    out = subprocess.run([sys.executable, "-c", SECCOMP_CHILD, blocked], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == left
