"""The end of a window: stop every session of a worker process at once, within a bound.

When the window closes, a session may still have a statement in flight, often one waiting for a
row lock that another session of the same worker holds. Every session's statement is cancelled,
its answer read and its transaction rolled back, all sessions at once: one session's rollback is
what lets another's blocked statement end, so doing them one by one can wait on itself.

PostgreSQL drops a cancel that reaches a backend between two messages, before it has read the
statement the cancel was meant for; that statement then runs, and may wait on a lock. So a
statement still running RECANCEL_S after its cancel is cancelled again. Nothing here waits for a
statement's answer (only a cancel request is a call of its own): a session that has not ended
within END_BOUND_S has its connection closed (the server ends the transaction itself) and is
reported.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass

from .session import DONE, Session

END_BOUND_S = 5.0  # cancel, drain and roll back every session of a worker, all at once
RECANCEL_S = 0.2  # a statement still running this long after its cancel is cancelled again


@dataclass
class _Ending:
    """One session on its way out: a statement in flight (cancelled, or our ROLLBACK), or none."""

    session: Session
    busy: bool
    cancelled_at: float | None = None  # when the statement in flight was last cancelled; None: our ROLLBACK
    cancels: int = 0

    def cancel(self, now: float) -> None:
        self.session.channel.cancel()
        self.cancelled_at = now
        self.cancels += 1

    def step(self, now: float) -> bool:
        """Advance without blocking; True once no statement is in flight and no transaction is open."""
        channel = self.session.channel
        if self.busy:
            if channel.receive() is None:
                if self.cancelled_at is not None and now - self.cancelled_at >= RECANCEL_S:
                    self.cancel(now)
                return False
            self.busy = False
        if channel.broken() or not channel.in_transaction():
            return True
        channel.send_rollback()
        self.busy, self.cancelled_at = True, None
        return False

    def problem(self, bound_s: float) -> str:
        s = self.session
        what = "its ROLLBACK" if self.cancelled_at is None else f"its statement (cancelled {self.cancels} times)"
        return (f"pool {s.pool.name} session {s.index}: {what} had not ended {bound_s:g} s after the window "
                f"closed; its connection was closed")


def end_sessions(sessions: list[Session], bound_s: float = END_BOUND_S, clock=time.monotonic) -> list[str]:
    """Cancel, drain and roll back every session at once, then close them all; return what did not end."""
    now = clock()
    deadline = now + bound_s
    ending: list[_Ending] = []
    try:
        for session in sessions:
            if session.channel is None or session.conn is None:
                continue
            item = _Ending(session, session.busy())
            if item.busy:
                item.cancel(now)
            ending.append(item)
        while ending:
            now = clock()
            ending = [item for item in ending if not _step(item, now)]
            if not ending or now >= deadline:
                break
            _wait([item.session.fd for item in ending], min(RECANCEL_S, deadline - now))
        return [item.problem(bound_s) for item in ending]
    finally:
        for session in sessions:
            session.state = DONE
            session.close()
            session.settle_stats()


def _step(item: _Ending, now: float) -> bool:
    try:
        return item.step(now)
    except Exception:  # noqa: BLE001 - a connection that fails here is closed next, which ends its transaction
        return True


def _wait(fds: list[int], timeout_s: float) -> None:
    """Until one of the sessions' sockets has something to read, or the timeout."""
    poller = select.poll()
    for fd in fds:
        if fd >= 0:
            poller.register(fd, select.POLLIN)
    poller.poll(max(1, int(timeout_s * 1000)))
