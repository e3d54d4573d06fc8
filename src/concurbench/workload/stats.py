"""Per-pool statistics that merge exactly across threads and processes.

Latencies are nanoseconds in HdrHistograms (1 ns to 1 hour, 3 significant digits); sums are kept
apart so means are exact. Per-interval series (transactions, latency sums and failures per 100 ms
of the measurement window, by completion time) merge exactly too. `to_dict`/`from_dict` carry them
between processes and into results.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

HIGHEST_NS = 3_600_000_000_000
BUCKET_NS = 100_000_000  # the series' interval
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
        self.total_ns += int(np.frombuffer(pending, dtype=np.int64).sum())  # sum() would make an int of each
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


def _padded(values: np.ndarray, length: int) -> np.ndarray:
    return values if len(values) >= length else np.concatenate([values, np.zeros(length - len(values), np.int64)])


@dataclass
class Series:
    """Per-interval sums over the window: bucket i covers [origin + i*bucket_ns, origin + (i+1)*bucket_ns).

    count: transactions completed in the bucket; txn_ns: the sum of their latencies;
    statement_ns[name]: the sum of that statement's latencies in those transactions; failed:
    transactions that failed for good in the bucket. Every array has the same length.
    """

    bucket_ns: int = BUCKET_NS
    count: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    txn_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    statement_ns: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.count)

    def extend_to(self, length: int, names=()) -> None:
        """Pad every array to `length` buckets, with a (zero) series for each of `names`."""
        for name in names:
            self.statement_ns.setdefault(name, np.zeros(0, np.int64))
        length = max(length, len(self.count))
        self.count = _padded(self.count, length)
        self.txn_ns = _padded(self.txn_ns, length)
        self.failed = _padded(self.failed, length)
        for name, values in self.statement_ns.items():
            self.statement_ns[name] = _padded(values, length)

    def buckets(self, ends, origin_ns: int) -> np.ndarray:
        index = (np.frombuffer(ends, dtype=np.int64) - origin_ns) // self.bucket_ns
        if index.size and index.min() < 0:
            raise ValueError("a completion time before the start of the series")
        return index

    def add(self, ends, origin_ns: int, txn_ns, statement_ns: dict) -> None:
        """Add transactions: their completion times, latencies and statement latencies (aligned)."""
        index = self.buckets(ends, origin_ns)
        if not index.size:
            return
        self.extend_to(int(index.max()) + 1, statement_ns)
        np.add.at(self.count, index, 1)
        np.add.at(self.txn_ns, index, np.frombuffer(txn_ns, dtype=np.int64))
        for name, values in statement_ns.items():
            np.add.at(self.statement_ns[name], index, np.frombuffer(values, dtype=np.int64))

    def add_failed(self, ends, origin_ns: int) -> None:
        index = self.buckets(ends, origin_ns)
        if index.size:
            self.extend_to(int(index.max()) + 1)
            np.add.at(self.failed, index, 1)

    def merge(self, other: "Series") -> None:
        if other.bucket_ns != self.bucket_ns:
            raise ValueError(f"cannot merge series of {other.bucket_ns} ns buckets into {self.bucket_ns} ns ones")
        self.extend_to(len(other), other.statement_ns)
        length = len(self)
        self.count = self.count + _padded(other.count, length)
        self.txn_ns = self.txn_ns + _padded(other.txn_ns, length)
        self.failed = self.failed + _padded(other.failed, length)
        for name, values in other.statement_ns.items():
            self.statement_ns[name] = self.statement_ns[name] + _padded(values, length)

    def to_dict(self) -> dict:
        return {"bucket_ns": self.bucket_ns, "count": self.count.tolist(), "txn_ns": self.txn_ns.tolist(),
                "statement_ns": {n: v.tolist() for n, v in self.statement_ns.items()},
                "failed": self.failed.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> "Series":
        series = cls(int(data["bucket_ns"]), np.array(data["count"], np.int64), np.array(data["txn_ns"], np.int64),
                     np.array(data.get("failed") or [], np.int64),
                     {n: np.array(v, np.int64) for n, v in data["statement_ns"].items()})
        series.extend_to(0)
        return series


@dataclass
class PoolStats:
    """Everything one pool measured in the window, for any number of sessions.

    The hot loop appends a counted transaction's completion time to `ends` beside its latencies
    (the txn and statement buffers stay aligned with it) and a failed one's to `failed_ends`;
    `flush` turns them into the series, bucketed from `origin_ns` (the window's measure-from).
    """

    pool: str
    sessions: int = 0
    transactions: int = 0
    failed: int = 0
    retries: int = 0
    errors: Counter = field(default_factory=Counter)  # class -> count
    error_messages: Counter = field(default_factory=Counter)  # normalised message -> count
    txn: Latency = field(default_factory=Latency)
    statements: dict[str, Latency] = field(default_factory=dict)
    series: Series = field(default_factory=Series)
    origin_ns: int = 0
    ends: array = field(default_factory=lambda: array("q"))
    failed_ends: array = field(default_factory=lambda: array("q"))
    lag: Latency = field(default_factory=Latency)  # rate-driven pools: first send minus scheduled start
    late: int = 0  # finished more than latency_limit after their scheduled start
    skipped: int = 0  # already later than latency_limit when a session was free: never sent

    def statement(self, name: str) -> Latency:
        lat = self.statements.get(name)
        if lat is None:
            lat = self.statements[name] = Latency()
        return lat

    def merge(self, other: "PoolStats") -> "PoolStats":
        if other.pool != self.pool:
            raise ValueError(f"cannot merge stats of pool {other.pool} into {self.pool}")
        self.flush()
        other.flush()
        self.sessions += other.sessions
        self.transactions += other.transactions
        self.failed += other.failed
        self.retries += other.retries
        self.late += other.late
        self.skipped += other.skipped
        self.lag.merge(other.lag)
        self.errors.update(other.errors)
        self.error_messages.update(other.error_messages)
        self.txn.merge(other.txn)
        for name, lat in other.statements.items():
            self.statement(name).merge(lat)
        self.series.merge(other.series)
        return self

    def flush(self) -> None:
        """Bucket the pending completion times into the series, then the latencies into histograms."""
        ends = self.ends
        if ends:
            n = len(ends)
            pending = {name: lat.pending for name, lat in self.statements.items()}
            if len(self.txn.pending) != n or any(len(p) != n for p in pending.values()):
                raise ValueError(f"pool {self.pool}: {n} completion times but {len(self.txn.pending)} "
                                 f"transaction latencies pending")
            self.series.add(ends, self.origin_ns, self.txn.pending, pending)
            del ends[:]
        if self.failed_ends:
            self.series.add_failed(self.failed_ends, self.origin_ns)
            del self.failed_ends[:]
        if len(self.series.statement_ns) != len(self.statements):
            self.series.extend_to(0, self.statements)
        self.txn.flush()
        self.lag.flush()
        for lat in self.statements.values():
            lat.flush()

    @property
    def statements_executed(self) -> int:
        self.flush()
        return sum(lat.count for lat in self.statements.values())

    def to_dict(self) -> dict:
        self.flush()
        return {"pool": self.pool, "sessions": self.sessions, "transactions": self.transactions,
                "failed": self.failed, "retries": self.retries, "errors": dict(self.errors),
                "error_messages": dict(self.error_messages.most_common(20)), "txn": self.txn.to_dict(),
                "statements": {n: lat.to_dict() for n, lat in self.statements.items()},
                "series": self.series.to_dict(), "lag": self.lag.to_dict(), "late": self.late,
                "skipped": self.skipped}

    @classmethod
    def from_dict(cls, data: dict) -> "PoolStats":
        return cls(pool=data["pool"], sessions=data["sessions"], transactions=data["transactions"],
                   failed=data["failed"], retries=data["retries"], errors=Counter(data["errors"]),
                   error_messages=Counter(data["error_messages"]), txn=Latency.from_dict(data["txn"]),
                   statements={n: Latency.from_dict(d) for n, d in data["statements"].items()},
                   series=Series.from_dict(data["series"]) if data.get("series") else Series(),
                   lag=Latency.from_dict(data["lag"]) if data.get("lag") else Latency(),
                   late=int(data.get("late", 0)), skipped=int(data.get("skipped", 0)))
