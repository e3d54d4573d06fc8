"""What a load host runs for a variant run: its share of the pools' sessions (deal.py), through the same
LoadGenerator as a run on one machine, with a gate that takes the window's start from the coordinator.

The host and the coordinator speak through the engine's named objects, one set per variant run (`key`):
the host puts `ready`, `tick` (its transactions so far) and `failed` messages on the queue `<key>-up`;
the coordinator sets the variable `<key>-start` to the window's start on its wall clock, and the event
`<key>-stop` to end the window early. The host turns the start into its own clock with its measured
offset, so every host's window starts at the same moment. Every wait here is bounded.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from enum import StrEnum

from ..errors import RunError
from ..workload.pool import LoadGenerator, LoadProgress

class Said(StrEnum):
    """What a host's message to the coordinator says: its sessions are connected, its count so far, or its share
    could not run."""

    READY = "ready"
    TICK = "tick"
    FAILED = "failed"


READY, TICK, FAILED = Said.READY, Said.TICK, Said.FAILED


@dataclass(frozen=True)
class ShareSpec:
    """A host's share of one variant run's load, as the coordinator sends it."""

    key: str  # the variant run's names on the engine: <key>-up, <key>-start, <key>-stop
    host: str
    conninfo: str
    engine: str
    pools: list  # the variant's pools, every one with its whole client count
    share: dict  # pool -> the session indexes this host runs
    warmup: float
    duration: float
    seed: int
    processes: int | None
    loop: str
    offset_ns: int  # this host's wall clock minus the coordinator's
    start_wait_s: float  # the longest wait for the start once this host's sessions are connected
    connect_timeout: float = 60.0


class HostGate:
    """The coordinator's start and stop for one host's LoadGenerator (pool.Gate)."""

    def __init__(self, spec: ShareSpec, *, queue=None, start=None, stop=None, clock=time.perf_counter_ns,
                 wall=time.time_ns):
        from distributed import Event, Queue, Variable

        self.spec = spec
        self.queue = queue if queue is not None else Queue(f"{spec.key}-up")
        self.start = start if start is not None else Variable(f"{spec.key}-start")
        self.stop = stop if stop is not None else Event(f"{spec.key}-stop")
        self.clock, self.wall = clock, wall
        self.start_perf_ns = 0  # the window's start on this host's perf_counter (CLOCK_MONOTONIC)
        self.start_wall_ns = 0  # ... and on its wall clock
        self.late_ns = 0  # how late the start reached this host (0: in time)

    def say(self, kind: Said, **detail) -> None:
        self.queue.put({"host": self.spec.host, "kind": str(kind), **detail}, timeout=10)

    def start_ns(self) -> int:
        self.say(READY)
        deadline = time.monotonic() + self.spec.start_wait_s
        while True:
            try:
                at = int(self.start.get(timeout=0.5))
                break
            except TimeoutError:
                if self.stop.wait(timeout=0):
                    raise RunError(f"load host {self.spec.host}: the coordinator stopped the variant run before "
                                   f"its window") from None
                if time.monotonic() > deadline:
                    raise RunError(f"load host {self.spec.host}: no start from the coordinator within "
                                   f"{self.spec.start_wait_s:g} s of its sessions connecting") from None
        mine = at + self.spec.offset_ns  # the start on this host's wall clock
        now_perf, now_wall = self.clock(), self.wall()
        ahead = mine - now_wall
        self.late_ns = max(0, -ahead)
        self.start_perf_ns = now_perf + max(ahead, 1_000_000)
        self.start_wall_ns = now_wall + max(ahead, 1_000_000)
        return self.start_perf_ns

    def stop_now(self) -> bool:
        with contextlib.suppress(Exception):  # a scheduler that does not answer: the window ends as planned
            return bool(self.stop.wait(timeout=0))
        return False

    def progress(self, load: LoadProgress) -> None:
        with contextlib.suppress(Exception):
            self.say(TICK, transactions=load.transactions)


def run_share(spec: ShareSpec) -> dict:
    """Run on a host: its share of the load, from connecting to the statistics (what the coordinator merges)."""
    gate = HostGate(spec)
    load = LoadGenerator(spec.conninfo, spec.pools, warmup=spec.warmup, duration=spec.duration, seed=spec.seed,
                         processes=spec.processes, engine=spec.engine, loop=spec.loop, share=spec.share, gate=gate,
                         progress=gate.progress, connect_timeout=spec.connect_timeout)
    try:
        result = load.run()
    except RunError as exc:
        with contextlib.suppress(Exception):
            gate.say(FAILED, problem=exc.message)
        return {"host": spec.host, "failed": exc.message}
    return {"host": spec.host, "pools": {name: stats.to_dict() for name, stats in result.pools.items()},
            "elapsed_s": result.elapsed_s, "interrupted": result.interrupted, "worker_cpu_s": result.worker_cpu_s,
            "worker_wall_s": result.worker_wall_s, "worker_wait_s": result.worker_wait_s,
            "messages": result.messages, "loop": result.loop, "workers": result.workers, "reported": result.reported,
            "stopped": result.stopped, "start_wall_ns": gate.start_wall_ns, "start_perf_ns": gate.start_perf_ns,
            "late_ns": gate.late_ns, "cpus": os.cpu_count() or 1}
