"""The plan of a run: every variant run to come, in the runner's order, with an estimated duration
each; and the clock that turns it into "run i of n", time elapsed and time left.

The runner announces the plan as the progress event `Planned` (progress_events.py) before its
first variant run, and again whenever the plan changes: runs appended (a round of `--check` while
claims are undecided) or dropped (a variant the server cannot run). A shard (`--shard I/N`) plans
only its share. The runs already finished are always the plan's first entries, in order, so a
display counts finished runs (`VariantDone` events) and takes the rest of the list as what is left.

An estimate is the warm-up and the measurement window, plus a little per run (connecting the
sessions, setup and teardown SQL, probes) and a server start or restart where one comes first.
A fixed-count variant's length cannot be known before it runs: FIXED_COUNT_GUESS_S stands in (or its
`duration`, the bound of its run, when that is shorter; a bound of an hour would make the plan say
a day). `PlanClock`
scales the estimates of what is left by how long the finished runs took against theirs, so the time
left corrects itself as the run goes.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable, Collection, Iterable

from ..scenario.model import Variant

RUN_OVERHEAD_S = 0.5  # connect, setup and teardown SQL, probes, collecting the workers' results
CONNECT_S_PER_CLIENT = 0.005
SQL_STEP_S = 0.2
SERVER_START_S = 3.0  # an embedded server from its template; a container or a restart, about as long
RATIO_BOUNDS = (0.5, 4.0)  # how far observed durations may scale the estimates of what is left
FIXED_COUNT_GUESS_S = 10.0  # a fixed-count variant run, before any has finished


@dataclass(frozen=True)
class PlannedRun:
    """One variant run to come: the variant at a sweep point, on the server with this index, one repeat."""

    variant: str
    point: int | None
    server: int
    repeat: int
    estimate_s: float

    def as_dict(self) -> dict:
        return asdict(self)


def estimate_s(variant: Variant, point: int | None) -> float:
    """Seconds one variant run takes, by its scenario."""
    clients = sum(p.clients_at(point) for p in variant.pools)
    steps = len(variant.setup) + len(variant.teardown) + len(variant.probes)
    window = min(variant.duration, FIXED_COUNT_GUESS_S) if variant.fixed_count else variant.duration
    return variant.warmup + window + RUN_OVERHEAD_S + clients * CONNECT_S_PER_CLIENT + steps * SQL_STEP_S


def in_round(items, repeat: int) -> list:
    """The order of a round: as given in odd rounds, reversed in even ones (A B, B A, A B, ...), so that the
    runs a claim pairs by round take the first and the second place equally often: a position effect
    (a cache the previous run warmed, a vacuum it left behind) then adds to the spread between rounds
    rather than to the difference of the pair."""
    items = list(items)
    return items if repeat % 2 else items[::-1]


def plan_runs(variants: Iterable[Variant], servers: int = 1, repeats: Iterable[int] = (1,), *,
              together: bool = False, share: Collection[tuple] | None = None) -> list[PlannedRun]:
    """The variant runs in the order Runner.run takes them: with `together` (repeats or --check over a version
    matrix) every server is up at once and each variant runs on each in turn; otherwise one server after the
    other. With `share` (--shard: its (server, repeat, variant, point)s) only those, and only the servers they
    use start."""
    variants, repeats = list(variants), list(repeats)
    batches = [list(range(servers))] if together else [[i] for i in range(servers)]
    order = [(server, repeat, variant, point) for batch in batches for repeat in repeats
             for variant in in_round(variants, repeat) for server in in_round(batch, repeat)
             for point in in_round(variant.sweep, repeat)]
    if share is not None:
        order = [(server, repeat, v, point) for server, repeat, v, point in order
                 if (server, repeat, v.name, point) in share]
    return _estimated(order, started=set())


def round_runs(variants: Iterable[Variant], servers: list[tuple[int, str]], wanted: dict,
               repeat: int) -> list[PlannedRun]:
    """One more round of `--check`: the points open claims read (`wanted`: (variant, point) -> the server
    versions to run it on), in the order Runner._decide runs them, on servers already up."""
    order = [(position, repeat, variant, point) for variant in in_round(variants, repeat)
             for position, version in in_round(servers, repeat) for point in in_round(variant.sweep, repeat)
             if version in wanted.get((variant.name, point), ())]
    return _estimated(order, started={position for position, _ in servers})


def _estimated(order, started: set[int]) -> list[PlannedRun]:
    """Planned runs with their estimates: a server's first run carries its start, and a variant with settings
    of its own a restart before its first point on a server in a repeat."""
    out: list[PlannedRun] = []
    seen: set[tuple] = set()
    for server, repeat, variant, point in order:
        first = (server, repeat, variant.name) not in seen
        seen.add((server, repeat, variant.name))
        extra = SERVER_START_S if server not in started or (variant.settings and first) else 0.0
        started.add(server)
        out.append(PlannedRun(variant.name, point, server, repeat, round(estimate_s(variant, point) + extra, 2)))
    return out


def without(runs: list[PlannedRun], finished: int, variant: str, server: int) -> list[PlannedRun]:
    """The plan with the runs still to come of `variant` on `server` left out (the server cannot run it)."""
    return runs[:finished] + [r for r in runs[finished:] if not (r.variant == variant and r.server == server)]


class PlanClock:
    """Where a run stands against its plan: run i of n, seconds elapsed, seconds left (an estimate).

    Fed the plan events and the starts and ends of variant runs; the clock is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.runs: list[PlannedRun] = []
        self.finished = 0
        self.finished_at: float | None = None  # when the last run finished
        self.current_since: float | None = None  # when the run in progress began

    def plan(self, runs: Iterable[PlannedRun]) -> None:
        self.runs = list(runs)

    def run_started(self) -> None:
        self.current_since = self.clock()

    def run_finished(self) -> None:
        self.finished += 1
        self.finished_at = self.clock()
        self.current_since = None

    @property
    def total(self) -> int:
        return max(len(self.runs), self.finished)

    @property
    def current(self) -> int:
        """1-based number of the run in progress (or the next one)."""
        return min(self.finished + 1, self.total) if self.total else 0

    def elapsed(self) -> float:
        return self.clock() - self.started

    def ratio(self) -> float:
        """How long the finished runs took against their estimates (1 before any finished)."""
        estimated = sum(r.estimate_s for r in self.runs[:self.finished])
        if not self.finished or self.finished_at is None or estimated <= 0:
            return 1.0
        low, high = RATIO_BOUNDS
        return min(high, max(low, (self.finished_at - self.started) / estimated))

    def left(self) -> float | None:
        """Seconds left by the plan, or None without a plan."""
        if not self.runs:
            return None
        ratio = self.ratio()
        rest = self.runs[self.finished:]
        left = sum(r.estimate_s for r in rest) * ratio
        if rest and self.current_since is not None:
            into = self.clock() - self.current_since
            left -= min(into, rest[0].estimate_s * ratio)
        return max(0.0, left)

    def fraction(self) -> float:
        """Share of the planned time done, for a progress bar."""
        left = self.left()
        if left is None:
            return 0.0
        done = self.elapsed()
        return done / (done + left) if done + left > 0 else 1.0


def clock_text(seconds: float | None) -> str:
    """1:05 or 1:02:05; "?" when unknown."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
