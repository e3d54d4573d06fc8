"""The coordinator's side of a variant run's load on a cluster: ClusterLoad has LoadGenerator's face (run()
returns a PoolRunResult), so the variant run's samplers and background sessions see one load.

It deals the sessions over the hosts (deal.py), sends each host its share (share.py), waits until every host
has connected its sessions, then sets the window's start LEAD_NS ahead on its own wall clock; each host
starts at that moment on its own clock (its offset corrected). While the window runs it sums the hosts'
progress and watches them: a host the scheduler loses, or whose share fails, is named, and the others go on
to the end of the window; the variant run is then incomplete (its figures leave out that host's sessions,
and claims are not judged on it). Every wait is bounded; what a host still runs when its results are overdue
is cancelled.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from urllib.parse import urlparse
from typing import Callable

from ..errors import RunError
from ..scenario.model import Pool
from ..workload.events import merged as merged_events
from ..workload.lag import behind
from ..workload.pool import MEASURE, REPORT_GRACE_S, WARMUP, LoadProgress, PoolRunResult, WindowListener
from ..workload.schedule import events
from ..workload.window_end import END_BOUND_S
from . import breakdown
from .deal import deal
from .hosts import Cluster
from .share import FAILED, READY, TICK, Said, ShareSpec, run_share

LEAD_NS = 300_000_000  # the start is set this far ahead: time for every host to hear it
COLLECT_MARGIN_S = 10.0  # beyond a host's own bounds, the wait for its results (the engine's round trips)


class ClusterLoad:
    """Runs a set of pools (clients resolved) once over a cluster's hosts; LoadGenerator's arguments."""

    def __init__(self, cluster: Cluster, conninfo: str, pools: list[Pool], *, warmup: float, duration: float,
                 seed: int = 1, processes: int | None = None, connect_timeout: float = 60.0,
                 progress: Callable[[LoadProgress], None] | None = None,
                 listeners: list[WindowListener] | None = None, tick: float = 0.5, engine: str = "postgres",
                 loop: str = "auto"):
        self.cluster = cluster
        self.conninfo = conninfo
        self.pools = pools
        self.warmup, self.duration, self.seed = warmup, duration, seed
        self.processes = processes
        self.connect_timeout = connect_timeout
        self.progress = progress or (lambda info: None)
        self.listeners = listeners or []
        self.tick = tick
        self.engine = engine
        self.loop = loop
        self.fixed = all(p.transactions is not None for p in pools if p.measure)
        self.total = sum(p.clients or 0 for p in pools)
        self.lost: dict[str, str] = {}  # host -> why it sent no results
        self.failed: dict[str, str] = {}  # host -> why its share could not run (its sessions did not connect)
        self.counts: dict[str, int] = {}  # host -> transactions so far
        self.start_at = 0  # the window's start on the coordinator's wall clock

    def run(self) -> PoolRunResult:
        from distributed import Event, Queue, Variable

        client = self.cluster.client
        unreachable(self.conninfo, self.cluster.hosts)
        key = f"concurbench-{uuid.uuid4().hex[:12]}"
        hosts = {h.name: h for h in self.cluster.hosts}
        shares = deal(self.pools, {h.name: h.weight for h in self.cluster.hosts})
        up, start, stop = Queue(f"{key}-up", client=client), Variable(f"{key}-start", client=client), \
            Event(f"{key}-stop", client=client)
        start_wait = self.connect_timeout + self.total * 0.05 + 30
        futures = {name: client.submit(
            run_share, ShareSpec(key, name, self.conninfo, self.engine, self.pools, share, self.warmup,
                                 self.duration, self.seed, self.processes, self.loop, hosts[name].offset_ns,
                                 start_wait, self.connect_timeout),
            key=f"{key}-{name}", workers=[hosts[name].address], allow_other_workers=False, pure=False, retries=0)
            for name, share in shares.items()}
        measure_from = end = 0
        interrupted = False
        failure: BaseException | None = None
        try:
            self._await_ready(up, futures, start_wait + COLLECT_MARGIN_S)
            self.start_at = time.time_ns() + LEAD_NS
            start.set(self.start_at)
            begin = time.perf_counter_ns() + (self.start_at - time.time_ns())
            measure_from = begin + int(self.warmup * 1e9)
            planned = None if self.fixed else measure_from + int(self.duration * 1e9)
            for listener in self.listeners:
                listener.window_set(measure_from, planned)
            measuring = {name for name, share in shares.items() if any(share.get(p.name) for p in self.pools
                                                                        if p.measure)}
            end = self._watch(up, futures, measure_from, planned, measuring, stop)
        except KeyboardInterrupt:
            interrupted = True
            end = time.perf_counter_ns()
            self._stop(stop)
        except BaseException as exc:  # noqa: BLE001 - raised again below, once the hosts are collected
            self._stop(stop)
            failure = exc
        finally:
            if measure_from and end:
                for listener in self.listeners:
                    listener.measurement_ended(end)
            reports = self._collect(futures, min(end or time.perf_counter_ns(), time.perf_counter_ns()))
            self._stop(stop)
            for thing in (up.close, start.delete, stop.clear):
                with contextlib.suppress(Exception):
                    thing()
        if failure is not None:
            raise failure
        return self._result(shares, hosts, reports, measure_from, end, interrupted)

    @staticmethod
    def _stop(stop) -> None:
        with contextlib.suppress(Exception):
            stop.set()

    def _messages(self, up) -> list[dict]:
        try:
            return list(up.get(timeout=0.05, batch=True))
        except Exception:  # noqa: BLE001 - nothing this time (the engine's timeout); asked again at the next tick
            return []

    def _note(self, message: dict, ready: set[str]) -> None:
        host, kind = message["host"], Said(message["kind"])
        if kind is READY:
            ready.add(host)
        elif kind is TICK:
            self.counts[host] = int(message["transactions"])
        elif kind is FAILED:
            self.failed[host] = message["problem"]

    def _await_ready(self, up, futures: dict, wait_s: float) -> None:
        """Until every host has connected its sessions; RunError naming the host that could not, or is gone."""
        ready: set[str] = set()
        deadline = time.monotonic() + wait_s
        while set(futures) - ready:
            for message in self._messages(up):
                self._note(message, ready)
            if self.failed:
                host, why = next(iter(self.failed.items()))
                raise RunError(f"load host {host}: {why}")
            gone = self._gone(futures)
            if gone:
                host, why = next(iter(gone.items()))
                raise RunError(f"load host {host} {why} before its sessions connected")
            if time.monotonic() > deadline:
                late = sorted(set(futures) - ready)
                raise RunError(f"load hosts {', '.join(late)} did not connect their sessions within {wait_s:g} s")
            time.sleep(0.05)

    def _gone(self, futures: dict) -> dict[str, str]:
        """Hosts the scheduler no longer has, or whose share ended in an error, each with why (none twice)."""
        out = {}
        try:
            alive = self.cluster.alive()
        except Exception:  # noqa: BLE001 - the scheduler did not answer this time; asked again at the next tick
            alive = None
        for name, future in futures.items():
            if name in self.lost:
                continue
            if alive is not None and self.cluster.host(name).address not in alive:
                out[name] = "was lost (the cluster no longer has it)"
            elif future.done() and (error := future.exception(timeout=5)) is not None:
                out[name] = f"failed: {_first_line(error)}"
        return out

    def _watch(self, up, futures: dict, measure_from: int, planned: int | None, measuring: set[str], stop) -> int:
        """Progress until the window ends (or every host with measured sessions is done with its set number of
        transactions: then the others, which run only background pools, are stopped); the end."""
        last_count, last_t = 0, time.perf_counter_ns()
        while True:
            time.sleep(self.tick)
            for message in self._messages(up):
                self._note(message, set())
            now = time.perf_counter_ns()
            for name, why in self._gone(futures).items():
                self.lost[name] = f"{why} {max(0.0, (now - measure_from) / 1e9):.1f} s into the window"
            count = sum(self.counts.values())
            if now >= measure_from:
                rate = (count - last_count) / max((now - last_t) / 1e9, 1e-9)
                self.progress(LoadProgress(MEASURE, (now - measure_from) / 1e9, count, rate))
            else:
                self.progress(LoadProgress(WARMUP, (now - measure_from) / 1e9, 0, 0.0))
            last_count, last_t = count, now
            running = {name for name, f in futures.items() if name not in self.lost and not f.done()}
            if planned is not None and now >= planned:
                return planned
            if not running or (planned is None and not running & measuring):
                self._stop(stop)
                return now

    def _collect(self, futures: dict, end_ns: int) -> dict[str, dict]:
        """Every host's report; a host that sends none within its bounds is named in `lost` and its share
        cancelled."""
        deadline = end_ns / 1e9 + END_BOUND_S + REPORT_GRACE_S + COLLECT_MARGIN_S
        reports: dict[str, dict] = {}
        waiting = {name: f for name, f in futures.items() if name not in self.lost}
        while waiting:
            for name, future in list(waiting.items()):
                if future.done() and future.exception(timeout=5) is None:
                    report = future.result(timeout=5)
                    del waiting[name]
                    if "failed" in report:
                        self.failed[name] = report["failed"]
                    else:
                        reports[name] = report
            for name, why in self._gone(waiting).items():
                self.lost[name] = why
                waiting.pop(name, None)
            if waiting and time.perf_counter() > deadline:
                for name in waiting:
                    self.lost[name] = (f"sent no results within {END_BOUND_S + REPORT_GRACE_S + COLLECT_MARGIN_S:g} s "
                                       f"of the window's end")
                break
            if waiting:
                time.sleep(0.05)
        for name, future in futures.items():
            if name not in reports:
                with contextlib.suppress(Exception):
                    future.cancel()
        return reports

    def _result(self, shares: dict, hosts: dict, reports: dict[str, dict], measure_from: int, end: int,
                interrupted: bool) -> PoolRunResult:
        merge = breakdown.merge(self.pools, reports)
        elapsed = max([r["elapsed_s"] for r in reports.values()] or
                      [max(0.0, (end - measure_from) / 1e9) if measure_from and end else 0.0])
        rows = []
        for name, share in shares.items():
            host = hosts[name]
            sessions = sum(len(i) for i in share.values())
            why = self.lost.get(name) or self.failed.get(name)
            rows.append(breakdown.host_row(host, sessions, self.pools, reports.get(name), elapsed, why))
            if name not in reports:  # what the host would have started: its worker processes count as missing
                merge.workers += max(1, min(self.processes or host.cpus, sessions))
        messages = [*merge.messages]
        messages += [w for w in (behind(p, merge.pools[p.name], elapsed) for p in self.pools) if w]
        messages += [f"load host {name} {why}: the figures leave out its "
                     f"{sum(len(i) for i in shares[name].values())} sessions" for name, why in self.lost.items()]
        messages += [f"load host {name}: {why}" for name, why in self.failed.items() if name not in self.lost]
        if merge.stopped:
            messages.append(merge.stopped)
        timeline = merged_events(*(events(p, elapsed) for p in self.pools))
        result = PoolRunResult(merge.pools, elapsed, interrupted or merge.interrupted, worker_cpu_s=merge.worker_cpu_s,
                               worker_wall_s=merge.worker_wall_s, worker_wait_s=merge.worker_wait_s,
                               messages=messages, loop=merge.loop, workers=merge.workers, reported=merge.reported,
                               stopped=merge.stopped, events=timeline, hosts=rows)
        return result


def unreachable(conninfo: str, hosts: list) -> None:
    """RunError when the server listens on loopback and a host is on another machine (its address is not one
    of this machine's loopback addresses): its sessions could not reach the server."""
    from psycopg.conninfo import conninfo_to_dict

    server = str(conninfo_to_dict(conninfo).get("host") or "")
    far = [h for h in hosts if not _loopback(urlparse(h.address).hostname or "")]
    if _loopback(server) and far:
        raise RunError(f"the server listens on {server}, which load host {far[0].name} at {far[0].address} cannot "
                       f"reach: give the hosts a server they can reach (--target dsn with its network address; "
                       f"docs/distributed.md)")


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.") or host.startswith("/")


def _first_line(exc: BaseException | None) -> str:
    text = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error"
    return text.splitlines()[0]


class ClusterLoads:
    """Makes a ClusterLoad for each variant run (VariantRuns' `load`), on one connected cluster."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def __call__(self, conninfo: str, pools: list[Pool], **options) -> ClusterLoad:
        return ClusterLoad(self.cluster, conninfo, pools, **options)

    def manifest(self) -> list[dict]:
        """The manifest's `load_hosts`."""
        return self.cluster.manifest()
