"""Per-pool statistics that merge exactly across threads and processes.

Latencies are nanoseconds in HdrHistograms (1 ns to 1 hour, 3 significant digits); sums are kept
apart so means are exact. `to_dict`/`from_dict` carry them between processes and into results.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

HIGHEST_NS = 3_600_000_000_000
PERCENTILES = (50.0, 95.0, 99.0)
# Fewer samples than this make a percentile a guess; reports say so instead of printing it.
MIN_SAMPLES_FOR = {50.0: 1, 95.0: 20, 99.0: 100, 99.9: 1000}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_NS, 3)


def record_many(hist: HdrHistogram, values) -> None:
    """Add a batch of values to an HdrHistogram at once (its own index arithmetic, vectorised).

    One Python call per value would cost about a microsecond each in the measuring process.
    """
    arr = np.clip(np.frombuffer(values, dtype=np.int64), 1, HIGHEST_NS)
    unit = hist.unit_magnitude
    half_mag = hist.sub_bucket_half_count_magnitude
    _, bits = np.frexp((arr | hist.sub_bucket_mask).astype(np.float64))  # bit length of value | mask
    bucket = bits.astype(np.int64) - unit - (half_mag + 1)
    sub_bucket = arr >> (bucket + unit)
    index = ((bucket + 1) << half_mag) + sub_bucket - hist.sub_bucket_half_count
    counts = np.ctypeslib.as_array(hist.counts)
    counts += np.bincount(index, minlength=hist.counts_len)[: hist.counts_len].astype(np.uint64)
    hist.total_count += int(arr.size)
    hist.min_value = min(hist.min_value, int(arr.min()))
    hist.max_value = max(hist.max_value, int(arr.max()))


@dataclass
class Latency:
    """One latency series: histogram plus exact count and sum.

    `record` only appends to a buffer (cheap enough for the hot loop); `flush` moves the buffer
    into the histogram. Readers call `flush` first (merge and to_dict do it themselves).
    """

    hist: HdrHistogram = field(default_factory=new_histogram)
    count: int = 0
    total_ns: int = 0
    pending: array = field(default_factory=lambda: array("q"))

    def record(self, ns: int) -> None:
        self.pending.append(ns)

    def flush(self) -> None:
        pending = self.pending
        if not pending:
            return
        self.count += len(pending)
        self.total_ns += sum(pending)
        record_many(self.hist, pending)
        del pending[:]

    def merge(self, other: "Latency") -> None:
        self.flush()
        other.flush()
        if other.count:
            self.hist.add(other.hist)
        self.count += other.count
        self.total_ns += other.total_ns

    def mean_ms(self) -> float | None:
        self.flush()
        return self.total_ns / self.count / 1e6 if self.count else None

    def percentile_ms(self, pct: float) -> float | None:
        self.flush()
        if self.count < MIN_SAMPLES_FOR.get(pct, 1):
            return None
        return self.hist.get_value_at_percentile(pct) / 1e6

    def max_ms(self) -> float | None:
        self.flush()
        return self.hist.get_max_value() / 1e6 if self.count else None

    def to_dict(self) -> dict:
        self.flush()
        return {"count": self.count, "total_ns": self.total_ns,
                "hist": self.hist.encode().decode() if self.count else ""}

    @classmethod
    def from_dict(cls, data: dict) -> "Latency":
        hist = HdrHistogram.decode(data["hist"].encode()) if data.get("hist") else new_histogram()
        return cls(hist, int(data["count"]), int(data["total_ns"]))


@dataclass
class PoolStats:
    """Everything one pool measured in the window, for any number of sessions."""

    pool: str
    sessions: int = 0
    transactions: int = 0
    failed: int = 0
    retries: int = 0
    errors: Counter = field(default_factory=Counter)  # class -> count
    error_messages: Counter = field(default_factory=Counter)  # normalised message -> count
    txn: Latency = field(default_factory=Latency)
    statements: dict[str, Latency] = field(default_factory=dict)

    def statement(self, name: str) -> Latency:
        lat = self.statements.get(name)
        if lat is None:
            lat = self.statements[name] = Latency()
        return lat

    def merge(self, other: "PoolStats") -> "PoolStats":
        if other.pool != self.pool:
            raise ValueError(f"cannot merge stats of pool {other.pool} into {self.pool}")
        self.sessions += other.sessions
        self.transactions += other.transactions
        self.failed += other.failed
        self.retries += other.retries
        self.errors.update(other.errors)
        self.error_messages.update(other.error_messages)
        self.txn.merge(other.txn)
        for name, lat in other.statements.items():
            self.statement(name).merge(lat)
        return self

    def flush(self) -> None:
        self.txn.flush()
        for lat in self.statements.values():
            lat.flush()

    @property
    def statements_executed(self) -> int:
        self.flush()
        return sum(lat.count for lat in self.statements.values())

    def to_dict(self) -> dict:
        return {"pool": self.pool, "sessions": self.sessions, "transactions": self.transactions,
                "failed": self.failed, "retries": self.retries, "errors": dict(self.errors),
                "error_messages": dict(self.error_messages.most_common(20)), "txn": self.txn.to_dict(),
                "statements": {n: lat.to_dict() for n, lat in self.statements.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> "PoolStats":
        return cls(pool=data["pool"], sessions=data["sessions"], transactions=data["transactions"],
                   failed=data["failed"], retries=data["retries"], errors=Counter(data["errors"]),
                   error_messages=Counter(data["error_messages"]), txn=Latency.from_dict(data["txn"]),
                   statements={n: Latency.from_dict(d) for n, d in data["statements"].items()})
