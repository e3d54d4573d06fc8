"""How the Python loop waits for a due time: to the microsecond, where select.epoll counts milliseconds.

`select.epoll.poll` takes whole milliseconds (Python rounds a fraction up), so a rate's transactions,
waited for with it, were sent half a millisecond after their due time on average. An epoll descriptor
is itself readable while any socket in its set is, so `PreciseEpoll` makes a wait that ends at a due
time with select() on that one descriptor, whose timeout counts microseconds (Python rounds up to the
next one), and then reads the ready sockets with a poll that does not wait. A wait of no time, or of
the loop's longest (LOOK_S, when nothing is due sooner), stays one epoll call. What it costs: a second
system call when a socket's answer ends a wait for a due time (docs/load-generator.md). select() takes
descriptors below FD_SETSIZE (1,024) only: a worker makes its PreciseEpoll before it connects its
sessions, and one whose descriptor is higher all the same waits in whole milliseconds, as before.

The compiled loop does the same in C with epoll_pwait2's nanoseconds (_fastloop.c).
"""

from __future__ import annotations

import select

LOOK_S = 0.05  # the loop's longest wait: it looks at its parent this often when nothing is due sooner
PRECISION_NS = 1_000  # a wait for a due time ends at most this much after it (the kernel's timer slack aside)


class PreciseEpoll:
    """select.epoll's register, unregister, poll and close, with poll's timeout kept to the microsecond.
    A test gives its own `epoll` (with fileno) and `wait` (select.select's signature) on an injected clock."""

    def __init__(self, epoll=None, wait=select.select):
        self._epoll = epoll if epoll is not None else select.epoll()
        self._own = (self._epoll.fileno(),)
        self._wait = wait
        self.register = self._epoll.register
        self.unregister = self._epoll.unregister

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        """The ready (fd, events), after waiting up to `timeout` seconds for one."""
        if timeout <= 0 or timeout >= LOOK_S or self._own is None:
            return self._epoll.poll(timeout)
        try:
            ready = self._wait(self._own, (), (), timeout)[0]
        except ValueError:  # a descriptor beyond select()'s FD_SETSIZE
            self._own = None
            return self._epoll.poll(timeout)
        return self._epoll.poll(0) if ready else []

    def close(self) -> None:
        self._epoll.close()
