"""The session state machine and the pure-Python worker loop, without a server, on an injected clock.

A stand-in engine answers each statement a fixed time after it was sent (its outcomes scripted per
statement), a stand-in poller reports the sessions whose answers are due and moves the clock to the
next one, so every figure below is exact: which transactions fall in the window, their latencies,
think times, retries, rollbacks and a refused reconnect.
"""

from __future__ import annotations

import pytest

from concurbench.engines.classes import CONNECTION, SERIALIZATION, SUCCESS
from concurbench.scenario.model import Pool, Statement
from concurbench.workload import pool as pool_mod
from concurbench.workload.session import DONE, REFUSED_FOR_NS, ROLLING_BACK, RUNNING, THINKING, Session

MS = 1_000_000
START = 1_000 * MS  # the clock's reading when a test begins


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)


class Channel:
    """A connection that answers `latency_ns` after each send; `script` gives the outcome per send."""

    def __init__(self, clock: Clock, fd: int, latency_ns: int, script: list | None = None):
        self.clock, self.fd, self.latency = clock, fd, latency_ns
        self.script = list(script or [])
        self.sent: list = []
        self.due: int | None = None
        self.answer = None
        self.in_txn = False
        self.closed = False

    def fileno(self) -> int:
        return self.fd

    def send(self, step: int, params) -> None:
        self.sent.append((step, self.clock()))
        self.answer = self.script.pop(0) if self.script else SUCCESS
        # a statement after BEGIN that fails leaves an open, failed transaction (step 0 is BEGIN or autocommit)
        self.in_txn = step > 0 and self.answer is not SUCCESS and self.answer[0] != CONNECTION
        self.due = self.clock() + self.latency

    def send_rollback(self) -> None:
        self.sent.append(("rollback", self.clock()))
        self.answer, self.in_txn, self.due = SUCCESS, False, self.clock() + self.latency

    def receive(self):
        if self.due is None or self.clock() < self.due:
            return None
        self.due, answer = None, self.answer
        return answer

    def in_transaction(self) -> bool:
        return self.in_txn

    def close(self) -> None:
        self.closed = True


class Engine:
    """The engine module's interface as a session uses it; connecting again can be refused."""

    BEGIN, COMMIT = "BEGIN", "COMMIT"

    def __init__(self, clock: Clock, latency_ns: int = MS, scripts: list[list] | None = None,
                 refuse_after_loss: bool = False):
        self.clock, self.latency = clock, latency_ns
        self.scripts = list(scripts or [])
        self.channels: list[Channel] = []
        self.refuse = False
        self.refuse_after_loss = refuse_after_loss  # once a connection is lost, the server takes no new one

    def connect(self, conninfo: str, application_name: str):
        if self.refuse or (self.refuse_after_loss and any(r.closed for r in self.channels)):
            raise ConnectionError('connection failed: FATAL:  sorry, too many clients already')
        return object()

    def init(self, conn, sql: str) -> None:
        pass

    def statement_channel(self, conn, statements, names, protocol):
        channel = Channel(self.clock, 100 + len(self.channels), self.latency,
                        self.scripts.pop(0) if self.scripts else None)
        self.channels.append(channel)
        return channel


def session(engine: Engine, pool: Pool, index: int = 0) -> Session:
    s = Session("host=nowhere", pool, index, seed=1, counter=[0] * 8, slot=index, engine=engine, clock=engine.clock)
    s.connect()
    return s


def one_statement(**kw) -> Pool:
    return Pool("p", 1, (Statement("s", "SELECT 1"),), **kw)


def answer(s: Session, clock: Clock, window) -> None:
    """Move the clock to the session's pending answer and step it."""
    clock.now = s.channel.due
    s.readable(clock(), window)


# -- the session alone ---------------------------------------------------------------------------
def test_a_transaction_is_timed_from_its_begin_to_its_last_answer():
    clock = Clock()
    engine = Engine(clock, latency_ns=2 * MS)
    s = session(engine, Pool("p", 1, (Statement("a", "SELECT 1"), Statement("b", "SELECT 2")), atomic=True))
    window = [START, START, START + 1_000 * MS]
    s.open_window(window[1])
    s.begin(clock(), window)
    assert s.state == RUNNING and engine.channels[0].sent == [(0, START)]
    for _ in range(4):  # BEGIN, a, b, COMMIT
        answer(s, clock, window)
    stats = s.settle_stats()
    assert stats.transactions == 1 and s.counted == 1
    assert stats.txn.mean_ms() == 8.0
    assert {name: stats.statement(name).mean_ms() for name in s.names} == {"begin": 2.0, "a": 2.0, "b": 2.0,
                                                                           "commit": 2.0}
    assert s.state == RUNNING and engine.channels[0].sent[-1] == (0, START + 8 * MS)  # the next one has begun


def test_warm_up_transactions_are_not_counted_and_the_window_end_stops_the_session():
    clock = Clock()
    engine = Engine(clock)
    s = session(engine, one_statement())
    window = [START, START + 5 * MS, START + 7 * MS]  # measured from 5 ms to 7 ms
    s.open_window(window[1])
    s.begin(clock(), window)
    while s.state == RUNNING:
        answer(s, clock, window)
    assert s.settle_stats().transactions == 3  # completed at 5, 6 and 7 ms; those at 1 to 4 ms were warm-up
    assert s.state == DONE and clock() == START + 7 * MS


def test_think_time_parks_the_session_until_it_is_due():
    clock = Clock()
    engine = Engine(clock)
    s = session(engine, one_statement(think=0.010))
    window = [START, START, START + 1_000 * MS]
    s.open_window(window[1])
    s.begin(clock(), window)
    answer(s, clock, window)
    assert s.state == THINKING and s.wake_at == START + 11 * MS
    clock.now = s.wake_at
    s.begin(clock(), window)
    assert s.state == RUNNING and engine.channels[0].sent[-1] == (0, START + 11 * MS)


def test_a_serialization_failure_is_rolled_back_and_retried_within_max_tries():
    clock = Clock()
    failure = (SERIALIZATION, "could not serialize access due to concurrent update")
    engine = Engine(clock, scripts=[[SUCCESS, failure, SUCCESS, SUCCESS, SUCCESS]])
    s = session(engine, Pool("p", 1, (Statement("u", "UPDATE t SET v = v + 1"),), atomic=True, max_tries=2))
    window = [START, START, START + 1_000 * MS]
    s.open_window(window[1])
    s.begin(clock(), window)
    answer(s, clock, window)  # BEGIN
    answer(s, clock, window)  # the UPDATE fails inside the transaction
    assert s.state == ROLLING_BACK and engine.channels[0].sent[-1] == ("rollback", START + 2 * MS)
    answer(s, clock, window)  # ROLLBACK answered: the second try begins
    assert s.state == RUNNING and engine.channels[0].sent[-1] == (0, START + 3 * MS)
    answer(s, clock, window)  # BEGIN
    answer(s, clock, window)  # UPDATE
    answer(s, clock, window)  # COMMIT
    stats = s.settle_stats()
    assert (stats.transactions, stats.failed, stats.retries) == (1, 0, 1)
    assert stats.txn.mean_ms() == 6.0  # both tries and the rollback: the client waited for all of them


def test_a_failure_after_the_last_try_counts_once_with_its_class():
    clock = Clock()
    failure = (SERIALIZATION, "could not serialize access due to concurrent update")
    engine = Engine(clock, scripts=[[failure]])
    s = session(engine, one_statement())
    window = [START, START, START + 1_000 * MS]
    s.open_window(window[1])
    s.begin(clock(), window)
    answer(s, clock, window)
    stats = s.settle_stats()
    assert (stats.transactions, stats.failed, stats.errors[SERIALIZATION]) == (0, 1, 1)
    assert s.state == RUNNING  # no think time: the next transaction has begun


def test_a_refused_reconnect_backs_off_and_remembers_since_when():
    clock = Clock()
    engine = Engine(clock, scripts=[[(CONNECTION, "server closed the connection unexpectedly")]])
    s = session(engine, one_statement())
    window = [START, START, START + 10_000 * MS]
    s.open_window(window[1])
    s.begin(clock(), window)
    engine.refuse = True
    answer(s, clock, window)  # the connection is lost: counted, then a pause before connecting again
    assert s.state == THINKING and s.wake_at == START + 101 * MS and engine.channels[0].closed
    clock.now = s.wake_at
    s.begin(clock(), window)  # connecting again is refused
    assert s.state == THINKING and s.refused_since == START + 101 * MS and "too many clients" in s.refusal
    stats = s.settle_stats()
    assert stats.failed == 2 and stats.errors[CONNECTION] == 2


# -- the worker loop -----------------------------------------------------------------------------
class Poller:
    """epoll over the stand-in channels: reports those with an answer due, moving the clock to the first."""

    def __init__(self, clock: Clock, engine: Engine):
        self.clock, self.engine = clock, engine
        self.fds: set[int] = set()

    def register(self, fd: int, mask: int) -> None:
        self.fds.add(fd)

    def unregister(self, fd: int) -> None:
        if fd not in self.fds:
            raise OSError("not registered")
        self.fds.discard(fd)

    def poll(self, timeout: float):
        live = [r for r in self.engine.channels if r.fd in self.fds and r.due is not None]
        due = min((r.due for r in live), default=None)
        limit = self.clock() + int(timeout * 1e9)
        if due is None or due > limit:
            self.clock.now = limit
            return []
        self.clock.now = max(self.clock.now, due)
        return [(r.fd, 1) for r in live if r.due <= self.clock.now]

    def close(self) -> None:
        pass


def drive(pool: Pool, sessions: int, window_ms: tuple[int, int], engine_kw: dict | None = None):
    clock = Clock()
    engine = Engine(clock, **(engine_kw or {}))
    members = [session(engine, pool, i) for i in range(sessions)]
    window = [START, START + window_ms[0] * MS, START + window_ms[1] * MS]
    status, finished = [0] * sessions, [0] * sessions
    stopped = pool_mod._loop(members, window, status, finished, clock=clock, sleep=clock.sleep,
                             poller=Poller(clock, engine))
    return stopped, [m.settle_stats().transactions for m in members], clock, window, engine


@pytest.mark.parametrize("think, expected", [(0.0, 101), (0.004, 20)])
def test_the_loop_counts_exactly_the_transactions_that_end_inside_the_window(think, expected):
    # 1 ms a transaction (plus the think time): completions at 1, 2, 3 ... ms after the start, or at
    # 1, 6, 11 ... ms with 4 ms of thinking; counted from 10 ms to 110 ms, both ends included
    stopped, counts, clock, _window, _engine = drive(one_statement(think=think), 2, (10, 110))
    assert stopped is None
    assert counts == [expected, expected]
    assert clock() >= START + 110 * MS


def test_the_loop_ends_the_window_for_everyone_when_reconnects_are_refused_too_long():
    lost = (CONNECTION, "terminating connection due to administrator command")
    stopped, counts, clock, window, engine = drive(one_statement(), 1, (0, 10_000),
                                                   {"scripts": [[SUCCESS, SUCCESS, lost]], "refuse_after_loss": True})
    assert counts == [2]
    assert stopped is not None and stopped.startswith("stopped early: the server refused new connections")
    # the connection was lost at 3 ms; the first refused reconnect came 100 ms later, and the loop looks
    # every 200 ms: the window ends at the first look a second or more after that
    assert START + 103 * MS + REFUSED_FOR_NS <= window[2] < START + 103 * MS + REFUSED_FOR_NS + 200 * MS
    assert window[2] < START + 10_000 * MS
