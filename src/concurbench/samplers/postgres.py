"""PostgreSQL samplers: wait events, database counters, WAL, MultiXact activity, tables, I/O, checkpoints.

The snapshot samplers read cumulative statistics (pg_stat_*), which reach the views late; they wait
for them to settle before each reading (samplers/pgstats.py). What a major cannot give is named in
`unavailable()` ("not available on PostgreSQL 14"), never left as a gap or a zero.
"""

from __future__ import annotations

from collections import Counter

from ..errors import EngineError
from ..figures import Better, Figure, Kind
from . import pgstats
from .base import PERIODIC, SNAPSHOT, Sampler, numeric_delta

LOWER, NEUTRAL = Better.LOWER, Better.NEUTRAL
COUNT, SIZE, SHARE, DIAGNOSTIC = Kind.COUNT, Kind.SIZE, Kind.SHARE, Kind.DIAGNOSTIC


def not_on(version_num: int, why: str) -> str:
    """The reason a figure is unavailable on this server: `not available on PostgreSQL 14 (why)`."""
    return f"not available on PostgreSQL {version_num // 10000} ({why})"


class CumulativeStats(Sampler):
    """A snapshot sampler of PostgreSQL's cumulative statistics: its readings wait for them to settle."""

    kind = SNAPSHOT
    early_opening = True

    def settle(self, conn, *, closing, sessions, clock, sleep):
        return pgstats.settle(conn, self.version_num, closing=closing, sessions=sessions, clock=clock, sleep=sleep)


WAITS = "waits."  # a wait's share of the sampled sessions: waits.WAIT


class WaitEvents(Sampler):
    """Counts `wait_event_type:wait_event` over the non-idle sessions at each sample ("CPU" when none)."""

    name = "wait_events"
    kind = PERIODIC
    options = ("interval",)
    description = "wait events of every non-idle session but the sampler's own, sampled from pg_stat_activity"
    figures = (Figure("waits.*", "share", NEUTRAL, SHARE, "share of sampled sessions in one wait event (CPU: none)",
                      window=True),
               Figure("wait_events.*", "samples", NEUTRAL, COUNT, "samples taken, sessions seen in them"))
    figures_rank = 2  # each wait's share after the other samplers' figures
    default_interval = 0.1
    QUERY = ("SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) "
             "FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
             "AND state IS NOT NULL AND state <> 'idle' GROUP BY 1")

    def read(self, conn):
        return [{"wait": wait, "sessions": count} for wait, count in conn.execute(self.QUERY).fetchall()]

    def summarize(self, before, after, rows, elapsed_s):
        counts: Counter = Counter()
        samples = len({r["t_s"] for r in rows})
        for row in rows:
            counts[row["wait"]] += row["sessions"]
        total = sum(counts.values())
        return {"samples": samples, "session_samples": total,
                "share": {w: round(c / total, 4) for w, c in counts.most_common()} if total else {},
                "counts": dict(counts.most_common())}

    @classmethod
    def flat(cls, summary, transactions):
        """Each wait's share of the sampled sessions, as `waits.WAIT`."""
        return {f"{WAITS}{wait}": share for wait, share in (summary.get("share") or {}).items()}

    @staticmethod
    def shares(figures: dict) -> dict[str, float]:
        """The waits' shares among a variant run's figures (name -> value), by wait, in the order measured."""
        return {name[len(WAITS):]: value for name, value in figures.items() if name.startswith(WAITS)}


class DatabaseCounters(CumulativeStats):
    name = "database"
    description = "pg_stat_database deltas for the run's database: commits, rollbacks, deadlocks, rows, blocks"
    figures = (Figure("database.deadlocks", "deadlocks", LOWER, COUNT, "deadlocks detected"),
               Figure("database.conflicts", "queries", LOWER, COUNT, "queries cancelled by recovery conflicts"),
               Figure("database.temp_bytes", "B", NEUTRAL, SIZE, "bytes written to temporary files"),
               Figure("database.*", "", NEUTRAL, COUNT, "pg_stat_database counters (commits, rows, blocks)"))
    QUERY = ("SELECT xact_commit, xact_rollback, deadlocks, conflicts, tup_returned, tup_fetched, tup_inserted, "
             "tup_updated, tup_deleted, blks_read, blks_hit, temp_bytes FROM pg_stat_database "
             "WHERE datname = current_database()")

    def read(self, conn):
        conn.execute("SELECT pg_stat_clear_snapshot()")
        cur = conn.execute(self.QUERY)
        row = cur.fetchone()
        return dict(zip([d.name for d in cur.description], row))

    def summarize(self, before, after, rows, elapsed_s):
        return numeric_delta(before, after)


class Wal(CumulativeStats):
    name = "wal"
    description = "WAL bytes written (LSN difference) and, where pg_stat_wal exists, records and full-page images"
    figures = (Figure("wal.bytes_per_txn", "B", LOWER, DIAGNOSTIC, "WAL bytes per committed transaction"),
               Figure("wal.bytes", "B", NEUTRAL, SIZE, "WAL bytes written in the window"),
               Figure("wal.*", "", NEUTRAL, COUNT, "WAL records and full-page images"))
    figures_rank = 0  # WAL first, beside the pools' figures it is a share of

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        self.has_stat_wal = version_num >= 140000

    def read(self, conn):
        out = {"lsn_bytes": int(conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").fetchone()[0])}
        if self.has_stat_wal:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            # wal_records, wal_fpi and wal_buffers_full exist from 14 through 18 (18 moved the
            # write and sync timings to pg_stat_io), so these columns read alike on every major
            records, fpi, full = conn.execute("SELECT wal_records, wal_fpi, wal_buffers_full FROM pg_stat_wal").fetchone()
            out.update(records=int(records), fpi=int(fpi), buffers_full=int(full))
        return out

    def summarize(self, before, after, rows, elapsed_s):
        delta = numeric_delta(before, after)
        return {"bytes": delta.get("lsn_bytes"), "records": delta.get("records"), "fpi": delta.get("fpi"),
                "buffers_full": delta.get("buffers_full")}

    @classmethod
    def flat(cls, summary, transactions):
        """WAL bytes, and per committed transaction of the variant run; records and full-page images where
        pg_stat_wal gave them."""
        if summary.get("bytes") is None:
            return {}
        out = {"wal.bytes": summary["bytes"],
               "wal.bytes_per_txn": round(summary["bytes"] / transactions, 1) if transactions else None}
        if summary.get("records") is not None:
            out.update({"wal.records": summary["records"], "wal.fpi": summary.get("fpi")})
        return out


class MultiXact(CumulativeStats):
    """MultiXact IDs created (age of the database's oldest MultiXact) and the SLRU caches' counters.

    `pg_stat_slru` names the caches MultiXactOffset/MultiXactMember before PostgreSQL 17 and
    multixact_offset/multixact_member from 17 on; the query matches both spellings.
    """

    name = "multixact"
    description = "MultiXact IDs created, pg_stat_slru counters of the MultiXact caches, pg_multixact size on disk"
    figures = (Figure("multixact.disk_bytes_*", "B", NEUTRAL, SIZE, "pg_multixact's size on disk, its growth"),
               Figure("multixact.*", "", NEUTRAL, COUNT, "MultiXact IDs created, SLRU cache counters"))
    SLRU = ("SELECT CASE WHEN lower(replace(name, '_', '')) = 'multixactoffset' THEN 'offset' ELSE 'member' END, "
            "blks_zeroed, blks_hit, blks_read, blks_written FROM pg_stat_slru "
            "WHERE lower(replace(name, '_', '')) IN ('multixactoffset', 'multixactmember')")
    SIZE = ("SELECT coalesce(sum((pg_stat_file('pg_multixact/' || d || '/' || f)).size), 0) "
            "FROM unnest(ARRAY['members', 'offsets']) AS d, LATERAL pg_ls_dir('pg_multixact/' || d) AS f")

    def prepare(self, conn, version_num):
        super().prepare(conn, version_num)
        try:
            conn.execute(self.SIZE).fetchone()
            self.can_size = True
        except Exception:  # noqa: BLE001 - needs superuser or pg_read_server_files
            conn.rollback()
            self.can_size = False

    def unavailable(self):
        why = "reading pg_multixact's files needs superuser or pg_read_server_files"
        return {} if self.can_size else {"disk_bytes_after": why, "disk_bytes_growth": why}

    def read(self, conn):
        conn.execute("SELECT pg_stat_clear_snapshot()")
        out = {"mxid_age": int(conn.execute("SELECT mxid_age(datminmxid) FROM pg_database "
                                            "WHERE datname = current_database()").fetchone()[0])}
        for kind, zeroed, hit, read, written in conn.execute(self.SLRU).fetchall():
            out.update({f"{kind}_zeroed": zeroed, f"{kind}_hit": hit, f"{kind}_read": read,
                        f"{kind}_written": written})
        if self.can_size:
            out["disk_bytes"] = int(conn.execute(self.SIZE).fetchone()[0])
        return out

    def summarize(self, before, after, rows, elapsed_s):
        delta = numeric_delta(before, after)
        out = {"created": delta.pop("mxid_age", None)}
        out.update({f"slru_{k}": v for k, v in delta.items() if k != "disk_bytes"})
        if "disk_bytes" in after:
            out["disk_bytes_after"] = after["disk_bytes"]
            out["disk_bytes_growth"] = delta.get("disk_bytes")
        return out


class TableStats(CumulativeStats):
    """Table and index activity of user tables (all, or those named in `tables`), as deltas.

    idx_tup_read against idx_tup_fetch shows index entries walked per row returned: when dead
    versions cannot be cleaned up, scans read ever more entries for the same rows.
    """

    name = "table_stats"
    options = ("tables",)
    description = "pg_stat_user_tables and pg_stat_user_indexes deltas (rows, HOT updates, index entries read)"
    figures = (Figure("table_stats.index_entries_per_fetch", "entries", LOWER, DIAGNOSTIC,
                      "index entries walked per row fetched"),
               Figure("table_stats.n_*_tup", "rows", NEUTRAL, SIZE, "live and dead rows at the end"),
               Figure("table_stats.*", "", NEUTRAL, COUNT, "table and index activity"))
    # one statement, so tables and indexes come from one statistics snapshot (before 15 a snapshot
    # lasts a transaction, and each statement here is one)
    QUERY = ("SELECT * FROM (SELECT coalesce(sum(seq_scan), 0), coalesce(sum(seq_tup_read), 0), "
             "coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0), "
             "coalesce(sum(n_tup_del), 0), coalesce(sum(n_dead_tup), 0), coalesce(sum(n_live_tup), 0), "
             "coalesce(sum(autovacuum_count + vacuum_count), 0) FROM pg_stat_user_tables {where}) t, "
             "(SELECT coalesce(sum(idx_scan), 0), coalesce(sum(idx_tup_read), 0), coalesce(sum(idx_tup_fetch), 0) "
             "FROM pg_stat_user_indexes {where}) i")
    TABLE_KEYS = ("seq_scan", "seq_tup_read", "n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del",
                  "n_dead_tup", "n_live_tup", "vacuums")
    INDEX_KEYS = ("idx_scan", "idx_tup_read", "idx_tup_fetch")
    FOUND = "SELECT DISTINCT relname FROM pg_stat_user_tables WHERE relname = ANY(%s)"

    def prepare(self, conn, version_num):
        """A table named in `tables` that pg_stat_user_tables does not list (a typo, or a table the setup has
        not created yet) is an error: its figures would be silent zeros."""
        super().prepare(conn, version_num)
        tables = list(self.spec.option("tables") or [])
        if tables:
            found = {r[0] for r in conn.execute(self.FOUND, (tables,)).fetchall()}
            missing = [t for t in tables if t not in found]
            if missing:
                raise EngineError(f"table_stats: no user table named {', '.join(missing)} in this database "
                                  f"(pg_stat_user_tables lists tables by their name, without the schema)")

    def read(self, conn):
        tables = self.spec.option("tables")
        where, args = ("WHERE relname = ANY(%(tables)s)", {"tables": list(tables)}) if tables else ("", None)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(self.QUERY.format(where=where), args).fetchone()
        return {k: int(v) for k, v in zip(self.TABLE_KEYS + self.INDEX_KEYS, row)}

    def summarize(self, before, after, rows, elapsed_s):
        delta = numeric_delta(before, after)
        # dead and live tuples are states, not counters: report where they ended
        delta["n_dead_tup"] = after["n_dead_tup"]
        delta["n_live_tup"] = after["n_live_tup"]
        fetched = delta.get("idx_tup_fetch") or 0
        delta["index_entries_per_fetch"] = round(delta["idx_tup_read"] / fetched, 2) if fetched else None
        return delta


class Io(CumulativeStats):
    """pg_stat_io (PostgreSQL 16 and later) summed over backend types: reads, writes, extends, hits, fsyncs."""

    name = "io"
    description = "pg_stat_io deltas (16+): reads, writes, extends, hits, evictions, fsyncs; absent before 16"
    figures = (Figure("io.*", "", NEUTRAL, COUNT, "pg_stat_io operations"),)
    QUERY = ("SELECT coalesce(sum(reads), 0), coalesce(sum(writes), 0), coalesce(sum(extends), 0), "
             "coalesce(sum(hits), 0), coalesce(sum(evictions), 0), coalesce(sum(fsyncs), 0) FROM pg_stat_io")
    KEYS = ("reads", "writes", "extends", "hits", "evictions", "fsyncs")

    def unavailable(self):
        return {k: not_on(self.version_num, "pg_stat_io is new in 16") for k in self.KEYS} \
            if self.version_num < 160000 else {}

    def read(self, conn):
        if self.version_num < 160000:
            return {}
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return {k: int(v) for k, v in zip(self.KEYS, conn.execute(self.QUERY).fetchone())}

    def summarize(self, before, after, rows, elapsed_s):
        if self.version_num < 160000:
            return {"note": "pg_stat_io exists from PostgreSQL 16"}
        return numeric_delta(before, after)


class Checkpointer(CumulativeStats):
    """Checkpoints and buffers they wrote: pg_stat_checkpointer from 17, pg_stat_bgwriter before."""

    name = "checkpointer"
    description = "checkpoints (timed, requested) and buffers written by them; pg_stat_checkpointer (17+) or pg_stat_bgwriter"
    figures = (Figure("checkpointer.*", "", NEUTRAL, COUNT, "checkpoints and the buffers they wrote"),)
    NEW = "SELECT num_timed, num_requested, buffers_written FROM pg_stat_checkpointer"
    OLD = "SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter"

    def read(self, conn):
        conn.execute("SELECT pg_stat_clear_snapshot()")
        query = self.NEW if self.version_num >= 170000 else self.OLD
        timed, requested, written = conn.execute(query).fetchone()
        return {"timed": int(timed), "requested": int(requested), "buffers_written": int(written)}

    def summarize(self, before, after, rows, elapsed_s):
        return numeric_delta(before, after)
