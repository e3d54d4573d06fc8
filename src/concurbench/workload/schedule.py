"""When a timed pool's sessions start their transactions: its timeline, and the arrivals of its rate.

A pool's timeline is a list of segments `(from_ns, rate, clients)`, `from_ns` counted from the
measurement window's start: from then on (until the next segment) the pool offers `rate`
transactions per second (None: closed loop) over its first `clients` sessions; `clients == 0`
means stopped. The events of the results are the segments' changes.

In a worker process one `Pace` per pool hands its local sessions their next transaction, as a
pgbench thread does with -R: a session that is free takes the next arrival of the shared stream
(its *due* time) and waits for it; one that is already too late by `latency_limit` is skipped,
never sent. A session takes only an arrival due where it is active: one due in a later segment
that leaves it out goes back to the stream. Arrivals are Poisson (exponential gaps) or fixed; each
worker carries the share of the rate that its active sessions make of the pool's.

`Pace` is the one owner of that rule. The Python loop asks `Pace.take` for every transaction; it
draws a segment's arrivals BATCH at a time with numpy into a list (`queue`), so the common case (an
arrival drawn ahead, in the segment that holds `now` and the session) is a pop() at the top of
`take`. The compiled loop does not read a Pace's attributes: it reads the schedule `Pace.export`
gives, versioned structs of the seam (seam.PACE_HEAD and seam.PACE_SEGMENT), and takes arrivals by
the same rule, one at a time in C (`_fastloop.arrivals` is that schedule alone, for tests).

Both loops draw from one generator by one algorithm, so for the same seed they send the same arrivals:
the Pace's stream is splitmix64 from the seed it draws once (and exports), whose n-th uniform is a
function of seed + n * GOLDEN alone, so Python computes BATCH of them at once and C one at a time;
a uniform is the top 53 bits times 2**-53, a Poisson gap `-log1p(-u) / per_ns` with the C library's
log1p (math.log1p here: numpy's log1p may be a SIMD one, e.g. Intel's SVML on AVX-512, which differs
from it in the last bit), and each gap drawn uses one uniform, the one that crosses a segment's end too.
"""

from __future__ import annotations

import math
import random

import numpy as np

from ..scenario.model import Pool
from .events import Event
from .seam import PACE_HEAD, PACE_SEGMENT
from .session import FAR_FUTURE as FAR  # no arrival, or never again
NEVER = -FAR  # a segment that holds since before the window
BATCH = 256  # arrivals drawn at once (numpy), so a transaction's share is a list's pop()

# splitmix64, as _fastloop.c's uniform(): the n-th output (from 1) of a stream is mix(seed + n * GOLDEN), in
# uint64 arithmetic that wraps around (numpy's does, silently, on arrays)
GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_AHEAD = np.arange(1, BATCH + 1, dtype=np.uint64) * np.uint64(GOLDEN)  # n * GOLDEN for a batch's n
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31 = (np.uint64(n) for n in (11, 27, 30, 31))


def uniforms(state: int) -> np.ndarray:
    """The next BATCH uniforms in [0, 1) of the stream at `state` (its seed + GOLDEN * the uniforms drawn)."""
    z = _AHEAD + np.uint64(state)
    z ^= z >> _S30
    z *= _MIX1
    z ^= z >> _S27
    z *= _MIX2
    z ^= z >> _S31
    z >>= _S11
    return z.astype(np.float64) * 2.0 ** -53  # below 2**53: exact, as in C


def segments(pool: Pool) -> list[tuple[int, float | None, int]]:
    """The pool's timeline; `clients` must already be resolved (resolve_clients)."""
    return [(start, rate, clients) for start, rate, clients, _kind, _detail in _timeline(pool)]


def events(pool: Pool, elapsed_s: float) -> list[Event]:
    """The timeline's changes inside the window (`elapsed_s` long): source `pool:<name>`, kind start, stop or
    phase."""
    return [Event(max(start, 0) / 1e9, f"pool:{pool.name}", kind, detail)
            for start, _rate, _clients, kind, detail in _timeline(pool)
            if kind and start / 1e9 <= elapsed_s + 1e-9]


def _timeline(pool: Pool) -> list[tuple[int, float | None, int, str, str]]:
    """Segments with the event that begins each ("" when none is worth keeping)."""
    def what(rate, clients) -> str:
        return f"rate {rate:g}/s" if rate is not None else f"clients {clients}"

    clients = pool.clients or 0
    begin = NEVER if pool.start_after is None else int(pool.start_after * 1e9)
    out: list[tuple[int, float | None, int, str, str]] = []
    if begin != NEVER:
        out.append((NEVER, None, 0, "", ""))
        if not pool.phases:
            out.append((begin, pool.rate, clients, "start", what(pool.rate, clients)))
    elif not pool.phases:
        out.append((NEVER, pool.rate, clients, "", ""))
    rate, active, t = pool.rate, clients, max(begin, 0)
    for i, phase in enumerate(pool.phases):
        rate = phase.rate if phase.rate is not None else rate
        active = phase.clients if phase.clients is not None else active
        detail = what(rate, active) + (f", clients {active}" if rate is not None and phase.clients is not None else "")
        out.append((begin if i == 0 else t, rate, active, "phase", f"phase {i + 1}: {detail}"))
        t += int(phase.duration * 1e9)
    stop = int(pool.stop_after * 1e9) if pool.stop_after is not None else (t if pool.phases else None)
    if stop is not None:
        out = [seg for seg in out if seg[0] < stop] + [(stop, None, 0, "stop", "stopped")]
    return out


class Pace:
    """A pool's timeline and arrivals in one worker process, in absolute perf_counter nanoseconds."""

    def __init__(self, pool: Pool, local: list[int], measure_from: int, loop_start: int, seed: int, stats=None):
        self.paced = pool.paced
        self.fixed = pool.arrivals == "fixed"
        self.limit = int(pool.latency_limit * 1e9) if pool.latency_limit else 0
        self.measure_from = measure_from
        self.stats = stats  # counts the skipped transactions (PoolStats), when given
        # the stream of uniforms both loops draw from (export() hands its seed to the compiled loop)
        self.seed = random.Random(f"{seed}:{pool.name}:pace:{min(local) if local else 0}").getrandbits(64)
        self._state = self.seed  # the seed + GOLDEN * the uniforms drawn, modulo 2**64
        self.segs = []  # (from, to, local rate per ns or 0, active clients)
        segs = segments(pool)
        for k, (start, rate, clients) in enumerate(segs):
            start = max(start + measure_from, loop_start) if start != NEVER else loop_start
            end = segs[k + 1][0] + measure_from if k + 1 < len(segs) else FAR
            mine = sum(1 for i in local if i < clients)
            per_ns = rate * mine / clients / 1e9 if rate and clients else 0.0
            self.segs.append((start, max(end, start), per_ns, clients))
        self.k = 0  # the arrivals' segment
        self.trigger = self.segs[0][0]  # the stream's last arrival drawn (or where it starts)
        self.queue: list[int] = []  # arrivals drawn ahead, all in segment k, the next one last (pop())
        self.lo = self.hi = self.active = 0  # segment k's [from, to) and active clients, while the queue holds any
        self._crossed = False  # the draw after the queue's last arrival crossed segment k's end

    def export(self) -> bytes:
        """The schedule for the compiled loop, before any arrival was taken (seam.PACE_HEAD, then a
        seam.PACE_SEGMENT a segment): from it the loop takes the arrivals `take` would give. A change of how
        arrivals are drawn changes PACE_HEAD's version."""
        if self.queue or self.k or self.trigger != self.segs[0][0] or self._state != self.seed:
            raise RuntimeError("a Pace is exported only before its first arrival is taken")
        head = PACE_HEAD.pack(n_segs=len(self.segs), fixed=int(self.fixed), limit=self.limit,
                              measure_from=self.measure_from, seed=self.seed)
        return head + b"".join(PACE_SEGMENT.pack(start=start, end=end, per_ns=per_ns, clients=clients)
                               for start, end, per_ns, clients in self.segs)

    def gate(self, index: int, now: int) -> int:
        """When session `index` may start: `now` if it is active now, else its next active time (FAR: never)."""
        for start, end, _rate, clients in self.segs:
            if end <= now:
                continue
            if index < clients:
                return max(start, now)
        return FAR

    def arrival(self) -> int:
        """The next arrival of the stream (FAR: none)."""
        queue = self.queue
        if queue:
            return queue.pop()
        t = self.trigger
        segs = self.segs
        while self.k < len(segs):
            start, end, per_ns, _clients = segs[self.k]
            if t < start:
                t = start
            if per_ns > 0 and not self._crossed:
                queue, self._crossed = self._batch(t, end, per_ns)
                if queue:
                    self.trigger = queue[0]
                    self.queue = queue
                    self.lo, self.hi, _per_ns, self.active = segs[self.k]
                    return queue.pop()
            self.k += 1
            self._crossed = False
            t = end
        self.trigger = FAR
        return FAR

    def _batch(self, t: int, end: int, per_ns: float) -> tuple[list[int], bool]:
        """The next BATCH arrivals after `t` that fall before `end`, the next one last, and whether the draw
        after them crossed `end` (the segment has no more). A gap is drawn as a float and the arrival moves
        by its whole nanoseconds; the gap that would reach `end` ends the segment's arrivals. The C's
        pace_arrival draws one gap at a time with the same uniforms, operations and roundings."""
        if self.fixed:
            gaps = np.full(BATCH, 1.0 / per_ns)
        else:  # exponential gaps (Poisson arrivals), with the C library's log1p
            gaps = -np.fromiter(map(math.log1p, (-uniforms(self._state)).tolist()), np.float64, BATCH) / per_ns
        steps = gaps.astype(np.int64)
        dues = t + np.cumsum(steps)
        inside = (dues - steps) + gaps < end
        cut = BATCH if inside.all() else int(inside.argmin())
        if not self.fixed:  # the uniforms used: the gaps inside, and the one that crossed the end
            self._state = (self._state + GOLDEN * min(cut + 1, BATCH)) & _MASK
        return dues[cut - 1::-1].tolist() if cut else [], cut < BATCH

    def take(self, index: int, now: int, window_end: int) -> tuple[int, int]:
        """Session `index` is free at `now`: (when to start, due time); due is -1 when it has no transaction
        (it waits until `when`, then asks again; FAR: never again). The rule of both loops."""
        queue = self.queue
        if queue and self.lo <= now < self.hi and index < self.active:
            # the common case, as the rest of take would find it: the session is active now and the next
            # arrival is drawn ahead, in this segment (so it is active then too)
            due = queue.pop()
            if not self.limit or now - due <= self.limit:
                return (due if due > now else now), due
        else:
            when = self.gate(index, now)
            if when != now or not self.paced:
                return when, (-1 if when != now else now)
            due = self.arrival()
        if self.limit:
            due = self._skip(due, now, window_end)
        if now < due < FAR:
            active_at = self.gate(index, due)
            if active_at != due:
                # due where this session is not active (a later segment with fewer clients): back to the
                # stream, for an active session; this one asks again when it is active
                self.queue.append(due)
                return active_at, -1
        return (due if due > now else now), due

    def _skip(self, due: int, now: int, window_end: int) -> int:
        """The first arrival from `due` on that is not later than latency_limit; the skipped ones are counted
        when due inside the window."""
        while due < FAR and now - due > self.limit:
            if self.stats is not None and self.measure_from <= due <= window_end:
                self.stats.skipped += 1
            due = self.arrival()
        return due
