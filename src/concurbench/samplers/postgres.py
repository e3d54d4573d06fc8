"""PostgreSQL samplers: wait events, database counters, WAL, MultiXact activity."""

from __future__ import annotations

from collections import Counter

from .base import Sampler, numeric_delta


class WaitEvents(Sampler):
    """Counts `wait_event_type:wait_event` over the non-idle sessions at each sample ("CPU" when none)."""

    name = "wait_events"
    kind = "periodic"
    options = ("interval",)
    description = "wait events of every non-idle session but the sampler's own, sampled from pg_stat_activity"
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


class DatabaseCounters(Sampler):
    name = "database"
    kind = "snapshot"
    description = "pg_stat_database deltas for the run's database: commits, rollbacks, deadlocks, rows, blocks"
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


class Wal(Sampler):
    name = "wal"
    kind = "snapshot"
    description = "WAL bytes written (LSN difference) and, where pg_stat_wal exists, records and full-page images"

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


class MultiXact(Sampler):
    """MultiXact IDs created (age of the database's oldest MultiXact) and the SLRU caches' counters.

    `pg_stat_slru` names the caches MultiXactOffset/MultiXactMember before PostgreSQL 17 and
    multixact_offset/multixact_member from 17 on; the query matches both spellings.
    """

    name = "multixact"
    kind = "snapshot"
    description = "MultiXact IDs created, pg_stat_slru counters of the MultiXact caches, pg_multixact size on disk"
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


class TableStats(Sampler):
    """Table and index activity of user tables (all, or those named in `tables`), as deltas.

    idx_tup_read against idx_tup_fetch shows index entries walked per row returned: when dead
    versions cannot be cleaned up, scans read ever more entries for the same rows.
    """

    name = "table_stats"
    kind = "snapshot"
    options = ("tables",)
    description = "pg_stat_user_tables and pg_stat_user_indexes deltas (rows, HOT updates, index entries read)"
    TABLES = ("SELECT coalesce(sum(seq_scan), 0), coalesce(sum(seq_tup_read), 0), coalesce(sum(n_tup_ins), 0), "
              "coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0), coalesce(sum(n_tup_del), 0), "
              "coalesce(sum(n_dead_tup), 0), coalesce(sum(n_live_tup), 0), "
              "coalesce(sum(autovacuum_count + vacuum_count), 0) FROM pg_stat_user_tables {where}")
    INDEXES = ("SELECT coalesce(sum(idx_scan), 0), coalesce(sum(idx_tup_read), 0), coalesce(sum(idx_tup_fetch), 0) "
               "FROM pg_stat_user_indexes {where}")
    TABLE_KEYS = ("seq_scan", "seq_tup_read", "n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del",
                  "n_dead_tup", "n_live_tup", "vacuums")
    INDEX_KEYS = ("idx_scan", "idx_tup_read", "idx_tup_fetch")

    def read(self, conn):
        tables = self.spec.option("tables")
        where, args = ("WHERE relname = ANY(%s)", (list(tables),)) if tables else ("", None)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(self.TABLES.format(where=where), args).fetchone()
        out = {k: int(v) for k, v in zip(self.TABLE_KEYS, row)}
        row = conn.execute(self.INDEXES.format(where=where), args).fetchone()
        out.update({k: int(v) for k, v in zip(self.INDEX_KEYS, row)})
        return out

    def summarize(self, before, after, rows, elapsed_s):
        delta = numeric_delta(before, after)
        # dead and live tuples are states, not counters: report where they ended
        delta["n_dead_tup"] = after["n_dead_tup"]
        delta["n_live_tup"] = after["n_live_tup"]
        fetched = delta.get("idx_tup_fetch") or 0
        delta["index_entries_per_fetch"] = round(delta["idx_tup_read"] / fetched, 2) if fetched else None
        return delta


class Io(Sampler):
    """pg_stat_io (PostgreSQL 16 and later) summed over backend types: reads, writes, extends, hits, fsyncs."""

    name = "io"
    kind = "snapshot"
    description = "pg_stat_io deltas (16+): reads, writes, extends, hits, evictions, fsyncs; absent before 16"
    QUERY = ("SELECT coalesce(sum(reads), 0), coalesce(sum(writes), 0), coalesce(sum(extends), 0), "
             "coalesce(sum(hits), 0), coalesce(sum(evictions), 0), coalesce(sum(fsyncs), 0) FROM pg_stat_io")
    KEYS = ("reads", "writes", "extends", "hits", "evictions", "fsyncs")

    def read(self, conn):
        if self.version_num < 160000:
            return {"unavailable": 1}
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return {k: int(v) for k, v in zip(self.KEYS, conn.execute(self.QUERY).fetchone())}

    def summarize(self, before, after, rows, elapsed_s):
        if "unavailable" in after:
            return {"note": "pg_stat_io exists from PostgreSQL 16"}
        return numeric_delta(before, after)


class Checkpointer(Sampler):
    """Checkpoints and buffers they wrote: pg_stat_checkpointer from 17, pg_stat_bgwriter before."""

    name = "checkpointer"
    kind = "snapshot"
    description = "checkpoints (timed, requested) and buffers written by them; pg_stat_checkpointer (17+) or pg_stat_bgwriter"
    NEW = "SELECT num_timed, num_requested, buffers_written FROM pg_stat_checkpointer"
    OLD = "SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter"

    def read(self, conn):
        conn.execute("SELECT pg_stat_clear_snapshot()")
        query = self.NEW if self.version_num >= 170000 else self.OLD
        timed, requested, written = conn.execute(query).fetchone()
        return {"timed": int(timed), "requested": int(requested), "buffers_written": int(written)}

    def summarize(self, before, after, rows, elapsed_s):
        return numeric_delta(before, after)
