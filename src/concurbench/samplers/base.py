"""The sampler protocol and the thread that drives samplers around a measurement window.

A sampler is either a snapshot (read before and after the window; the result is the difference)
or periodic (read every `interval` during the window; the rows form a time series written to
samples/). Each sampler's connection is its own, and the sessions it counts exclude it.

Snapshot readings are taken when the measurement starts (after the warm-up) and once the window
has ended. A sampler whose figures arrive late (PostgreSQL's statistics, see samplers/pgstats.py)
may wait until they cover the moment (`settle`) before the closing reading and, in a variant
without warm-up, takes its opening reading before the pools' sessions connect (`early_opening`),
after such a wait, so their first transactions cannot reach it. With a warm-up the opening reading
is taken at once: the sessions are busy then, and waiting would only move the cut.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from enum import StrEnum
from typing import Any, Callable, ClassVar, Sequence

from ..figures import Catalogue, Figure, Metric, Place, Scope
from ..util import first_line
from ..scenario.model import SamplerSpec


class SamplerKind(StrEnum):
    """How a sampler reads: before and after the window, or every `interval` during it."""

    SNAPSHOT = "snapshot"
    PERIODIC = "periodic"


SNAPSHOT, PERIODIC = SamplerKind


@dataclass(frozen=True)
class SamplerFailure:
    """A sampler that gave no summary of a variant run, and why (`no reading`: a snapshot it never took)."""

    sampler: str
    reason: str

    def __str__(self) -> str:
        return f"sampler {self.sampler} gave no summary: {self.reason}"

    def as_dict(self) -> dict:
        return {"sampler": self.sampler, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> "SamplerFailure":
        return cls(str(data["sampler"]), str(data["reason"]))


class NoReading(Exception):
    """A sampler's summary cannot be made: it has not read what it needs (the reason is its message)."""


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Sampler:
    """Base class: subclasses set `name`, `kind`, and implement `read` (and `summarize`)."""

    name: ClassVar[str] = ""
    engine: ClassVar[str] = "postgres"  # or "mssql"
    kind: ClassVar[SamplerKind] = SNAPSHOT
    options: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""
    default_interval: ClassVar[float] = 0.1
    early_opening: ClassVar[bool] = False  # without warm-up, the opening reading before the sessions connect
    # what the summary's figures mean, by the names reports give them (`wal.bytes`, `database.deadlocks`);
    # results/catalogue.py gathers them into the metric catalogue
    figures: ClassVar[tuple[Figure, ...]] = ()
    # where its figures stand among a variant run's samplers' (the columns of summary.csv): lower first
    figures_rank: ClassVar[int] = 1

    def __init__(self, spec: SamplerSpec | None = None):
        self.kind = SamplerKind(self.kind)  # a kind declared as its word reads as the type (ValueError for no kind)
        self.spec = spec or SamplerSpec(self.name)
        self.interval = float(self.spec.option("interval") or self.default_interval)

    def prepare(self, conn, version_num: int) -> None:
        """Called once per connection before the window; may check what the server offers."""
        self.version_num = version_num

    def attach(self, connect: Callable[[], Any]) -> None:
        """Called once the window is set (after `prepare`), with a way to open a connection of the sampler's own,
        for work that must not hold up the thread every sampler shares (nothing by default)."""

    def detach(self) -> None:
        """Called once the samplers have read for the last time, before the summaries: end that work, bounded."""

    def read(self, conn) -> Any:
        raise NotImplementedError

    @classmethod
    def flat(cls, summary: dict, transactions: int | None) -> dict[str, Any]:
        """The summary's figures by the names reports give them: `NAME.KEY` for each number in it (a sampler
        whose figures read otherwise says so here); `transactions`: the variant run's, for a figure per
        transaction."""
        return {f"{cls.name}.{key}": value for key, value in summary.items() if is_number(value)}

    @classmethod
    def records(cls, summary: dict, transactions: int | None, place: Place) -> tuple[Metric, ...]:
        """The summary's figures (`flat`) as records of scope sampler at `place`, each with the unit its
        declaration gives."""
        return place.records(cls.flat(summary, transactions), Scope.SAMPLER, _catalogue(cls))

    def unavailable(self) -> dict[str, str]:
        """Figures of the summary this server cannot give, and why (`not available on PostgreSQL 14`);
        asked after `prepare`. They are recorded as the run's unavailable metrics `<name>.<figure>`."""
        return {}

    def settle(self, conn, *, closing: bool, sessions: Sequence[str], clock: Callable[[], int],
               sleep: Callable[[float], None]) -> str | None:
        """Wait (bounded) until what `read` would return covers the moment: everything done before
        the opening reading, or the work of `sessions` (the pools' application names) before the
        closing one. Samplers that read alike inherit one method, which the driver calls once per
        reading for all of them. Returns a note when the figures may be incomplete."""
        return None

    def summarize(self, before: Any, after: Any, rows: list[dict], elapsed_s: float) -> dict:
        raise NotImplementedError


def numeric_delta(before: dict, after: dict) -> dict:
    out = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, (int, float)) and isinstance(old, (int, float)):
            out[key] = value - old
    return out


@lru_cache(maxsize=None)
def _catalogue(cls: type[Sampler]) -> Catalogue:
    return Catalogue(cls.figures)


def sampler_records(classes: dict[str, type[Sampler]], summaries: dict[str, dict], transactions: int | None,
                    place: Place) -> tuple[Metric, ...]:
    """The records of samplers' summaries (name -> summary; `classes`: name -> its class), in the order of their
    `figures_rank` (WAL's first, wait shares last)."""
    ranked = sorted(((classes[name], summary) for name, summary in summaries.items() if isinstance(summary, dict)),
                    key=lambda pair: pair[0].figures_rank)
    return tuple(m for cls, summary in ranked for m in cls.records(summary, transactions, place))


class SamplerDriver:
    """Runs a list of samplers in one thread on one connection, following the pool's window.

    The clock and the sleep are injectable so the schedule can be tested without waiting.
    """

    def __init__(self, samplers: list[Sampler], connect: Callable[[], Any], version_num: int, *,
                 sessions: Sequence[str] = (), warmup: float | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns, sleep: Callable[[float], None] = time.sleep):
        self.samplers = samplers
        self.connect = connect
        self.version_num = version_num
        self.sessions = list(sessions)  # application names of the window's sessions
        self.early = warmup == 0  # no warm-up: `early_opening` samplers read before the sessions connect
        self.clock = clock
        self.sleep = sleep
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}
        self.rows: dict[str, list[dict]] = {s.name: [] for s in samplers}
        self.errors: list[str] = []
        self.unavailable: dict[str, str] = {}  # `<sampler>.<figure>` -> why this server cannot give it
        self._measure_from = 0
        self._end = threading.Event()
        self._thread: threading.Thread | None = None
        self.conn = None
        self._reconnected = False  # the connection is made again once per variant run when its backend is gone
        self._attached: list[Sampler] = []  # samplers given a way to connect on their own (attach), until close
        self._given_up = False

    # WindowListener -----------------------------------------------------------
    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        self._measure_from = measure_from_ns
        if self.conn is not None:
            for sampler in self.samplers:
                self._attached.append(sampler)
                try:
                    sampler.attach(self.connect)
                except Exception as exc:  # noqa: BLE001 - the sampler reads without its own work
                    self.errors.append(f"sampler {sampler.name}: {first_line(exc)}")
        self._thread = threading.Thread(target=self._loop, name="concurbench-samplers", daemon=True)
        self._thread.start()

    def measurement_ended(self, end_ns: int) -> None:
        self._end.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    # ------------------------------------------------------------------------
    def open(self) -> None:
        if not self.samplers:
            return
        self.conn = self.connect()
        for sampler in self.samplers:
            sampler.prepare(self.conn, self.version_num)
            self.unavailable.update({f"{sampler.name}.{k}": why for k, why in sampler.unavailable().items()})
        if self.early:
            self._snapshots([s for s in self.samplers if s.kind is SNAPSHOT and s.early_opening], self.before,
                            closing=False)

    def close(self) -> None:
        attached, self._attached = self._attached, []
        for sampler in attached:  # their own work ends before the summaries are made
            try:
                sampler.detach()
            except Exception as exc:  # noqa: BLE001 - reported; the readings taken stand
                self.errors.append(f"sampler {sampler.name}: {first_line(exc)}")
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.conn = None

    def _safe(self, sampler: Sampler):
        if self._given_up:
            return None
        try:
            return sampler.read(self.conn)
        except Exception as exc:  # noqa: BLE001 - a failing sampler must not stop the measurement
            if self._lost() and self._reconnect(first_line(exc)):
                try:
                    return sampler.read(self.conn)
                except Exception as again:  # noqa: BLE001
                    exc = again
            self.errors.append(f"sampler {sampler.name}: {first_line(exc)}")
            try:
                self.conn.rollback()
            except Exception:  # noqa: BLE001
                pass
            return None

    def _lost(self) -> bool:
        """The connection's backend is gone (terminated, the server restarted): psycopg says so."""
        return bool(getattr(self.conn, "broken", False) or getattr(self.conn, "closed", False))

    def _reconnect(self, lost: str) -> bool:
        """Connect again, once per variant run; after a second loss the samplers stop reading."""
        if self._reconnected:
            if not self._given_up:
                self.errors.append(f"samplers: the connection was lost again ({lost}); no more readings")
            self._given_up = True
            return False
        self._reconnected = True
        self.close()
        try:
            self.conn = self.connect()
            for sampler in self.samplers:
                sampler.prepare(self.conn, self.version_num)
        except Exception as exc:  # noqa: BLE001 - reported, and the measurement goes on without readings
            self.errors.append(f"samplers: the connection was lost ({lost}) and could not be made again: "
                               f"{first_line(exc)}; no more readings")
            self._given_up = True
            return False
        self.errors.append(f"samplers: the connection was lost ({lost}) and made again")
        return True

    def _snapshots(self, snapshot: list[Sampler], into: dict, *, closing: bool, settle: bool = True) -> None:
        """These snapshot samplers' readings, once the figures have settled (each distinct settle once)."""
        settled = set()
        for s in snapshot if settle and not self._given_up else ():
            if type(s).settle in settled:
                continue
            settled.add(type(s).settle)
            try:
                note = s.settle(self.conn, closing=closing, sessions=self.sessions, clock=self.clock,
                                sleep=self.sleep)
            except Exception as exc:  # noqa: BLE001 - the readings are still taken, with a note
                note = first_line(exc)
                try:
                    self.conn.rollback()
                except Exception:  # noqa: BLE001
                    pass
            if note:
                self.errors.append(f"sampler {s.name}: {'closing' if closing else 'opening'} reading: {note}")
        for s in snapshot:
            into[s.name] = self._safe(s)

    def _loop(self) -> None:
        if not self.samplers or self.conn is None:
            return
        wait = (self._measure_from - self.clock()) / 1e9
        if wait > 0 and self._end.wait(wait):
            return
        self._snapshots([s for s in self.samplers if s.kind is SNAPSHOT and s.name not in self.before], self.before,
                        closing=False, settle=False)
        periodic = [s for s in self.samplers if s.kind is PERIODIC]
        due = {s.name: self.clock() for s in periodic}
        while periodic and not self._end.is_set():
            now = self.clock()
            for s in periodic:
                if now >= due[s.name]:
                    rows = self._safe(s)
                    t = (now - self._measure_from) / 1e9
                    for row in rows or []:
                        self.rows[s.name].append({"t_s": round(t, 3), **row})
                    due[s.name] = now + int(s.interval * 1e9)
            next_due = min(due.values())
            self._end.wait(max(0.0, (next_due - self.clock()) / 1e9))
        self._end.wait()
        end = self.clock()
        for s in periodic:  # one reading at the end (unless one was just taken): a short window still gets two
            last = due[s.name] - int(s.interval * 1e9)
            if end - last > 0.1 * s.interval * 1e9:
                for row in self._safe(s) or []:
                    self.rows[s.name].append({"t_s": round((end - self._measure_from) / 1e9, 3), **row})
        self._snapshots([s for s in self.samplers if s.kind is SNAPSHOT], self.after, closing=True)

    def summaries(self, elapsed_s: float) -> tuple[dict[str, dict], list[SamplerFailure]]:
        """Each sampler's summary, and a SamplerFailure for each that could not make one."""
        out, failed = {}, []
        for s in self.samplers:
            if s.kind is SNAPSHOT and (self.before.get(s.name) is None or self.after.get(s.name) is None):
                failed.append(SamplerFailure(s.name, "no reading"))
                continue
            try:
                out[s.name] = s.summarize(self.before.get(s.name), self.after.get(s.name), self.rows[s.name],
                                          elapsed_s)
            except Exception as exc:  # noqa: BLE001 - the run keeps its other figures, and says which is missing
                failed.append(SamplerFailure(s.name, first_line(exc) or type(exc).__name__))
        return out, failed

    def records(self, summaries: dict[str, dict], transactions: int | None, place: Place) -> tuple[Metric, ...]:
        """The summaries' figures as records, made here where they were measured (`sampler_records`)."""
        return sampler_records({type(s).name: type(s) for s in self.samplers}, summaries, transactions, place)
