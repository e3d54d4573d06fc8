"""The history store: runs and their points in one SQLite file, or in a PostgreSQL database.

    open_store("history.db")                      # SQLite, the default (created by the first add)
    open_store("postgresql://ci@db.example/perf")  # PostgreSQL: many CI runners may write at once

Every add is one transaction: the run, any series it is the first to measure, and its points go in
together or not at all, and a run already in the store (same id, same digest) changes nothing. Two
writers at once are safe on both: SQLite takes the write lock at the start of the transaction
(BEGIN IMMEDIATE) and waits for it up to a minute; PostgreSQL serialises the writers with an
advisory lock held to the end of the transaction. A gate's check reads and writes in one such
transaction (`atomically`), so two checks at once never both make the same finding. A store URL's
password is used to connect and never shown: messages name the store without it.

A store is made on purpose: a missing file is created by the first add, but an empty file (what a
failed copy leaves) is a store only through `history init` or `--create`, and an SQLite file of another
program, or one whose history tables lack their schema version, is refused and left as it is.

Two copies of a store (the nightly job's and a person's) come together through merge.py, which reads
one store in one consistent view (`reading`) and writes the other in one transaction, with the run
each row id stands for; a relabel's log entry names the runs by run id, so a merge can replay it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..util import first_line
from ..errors import ConfigError
from .level import Level
from ..figures import Better
from .findings import Expectation, Finding, FindingKind, FindingState
from ..scenario.claims import claim_form, claim_of
from .claim_keys import key_claims
from .records import CLAIMS, ClaimKey, PointRecord, RunKind, RunRecord, SeriesKey
from ..results.model import RunStatus
from .schema import SCHEMA_VERSION, create_statements, migration_statements

DEFAULT_STORE = "history.db"
LOCK_KEY = 7_231_004_118  # the PostgreSQL advisory lock that serialises creating and migrating the schema
WAIT_S = 60  # how long an SQLite writer waits for another's transaction to end
SCAN_SHARE = 0.3  # reading at least this share of the series, one scan of the points beats looking each up
_RUN_COLUMNS = ("run_id", "digest", "scenario", "scenario_sha256", "parameters", "quick", "started", "ended",
                "status", "error", "host", "cpu_model", "harness", "commit_id", "dirty", "target", "servers",
                "format_version", "labels", "machine", "settings", "kind", "scenario_file", "added")
_JSON_COLUMNS = ("parameters", "labels", "servers", "machine", "settings")
_FINDING_COLUMNS = ("scenario", "variant", "pool", "clients", "point", "line", "metric", "first_run", "before_run",
                    "change", "p", "before_mean", "before_low", "before_high", "before_n", "after_mean", "state", "found",
                    "reason", "acted", "resolved_run", "kind", "first_low", "first_high", "now_change", "now_run",
                    "min_change", "better", "family", "alpha", "baseline", "confirmation")
_ACTED_COLUMNS = ("state", "reason", "acted", "resolved_run", "now_change", "now_run", "confirmation")
_POINT_COLUMNS = ("status", "mean", "se", "df", "low", "high", "n", "vals", "count", "exposure")
_SERIES_COLUMNS = "s.scenario, s.variant, s.pool, s.clients, s.point, s.server, s.metric, s.form"
_PYTHON_STEPS = {2: key_claims}  # after a migration step's statements: a step in Python (the version it leaves)


@dataclass(frozen=True)
class StoredRun:
    """A run as the store holds it: its row id and record."""

    id: int
    record: RunRecord
    added: str


class StoredPoint(NamedTuple):
    """One point as the store holds it (a named tuple: a show reads hundreds of thousands of them)."""

    run: int  # the run's row id (StoredRun.id)
    status: RunStatus
    mean: float
    se: float | None
    df: float | None
    low: float | None
    high: float | None
    n: int
    vals: str | None  # each repeat's value as JSON (None when not read)
    count: float | None  # a rare event's count and the transactions it is out of (None: not a count)
    exposure: float | None


@dataclass(frozen=True)
class LogEntry:
    """Something done to the store besides adding runs (a relabel, a merge): when, what, and its detail."""

    id: int
    at: str
    action: str
    detail: dict


def is_url(location: str) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def shown(location: str | Path) -> str:
    """A store's name for messages: a URL without its password."""
    text = str(location)
    if not is_url(text):
        return text
    try:
        parts = conninfo_to_dict(text)
    except psycopg.Error:
        return "(a PostgreSQL URL that cannot be parsed)"
    user, host = parts.get("user", ""), parts.get("host", "localhost")
    port, db = parts.get("port", "5432"), parts.get("dbname", parts.get("user", ""))
    return f"postgresql://{user + '@' if user else ''}{host}:{port}/{db}"


def open_store(location: str | Path | None = None, *, create: bool = False, init: bool = False) -> "HistoryStore":
    """The store at a path or PostgreSQL URL (default history.db here). Without `create`, a missing store
    is a ConfigError; with it, the first add creates the tables; `init` (made on purpose) also takes an
    empty file. A store of a newer schema is refused; an older one is migrated."""
    location = str(location or DEFAULT_STORE)
    create = create or init
    store = _PostgresStore(location) if is_url(location) else _SqliteStore(location, create, init)
    try:
        store.ready(create)
    except BaseException:
        store.close()
        raise
    return store


def init_store(location: str | Path) -> tuple[bool, int, int | None]:
    """`history init`: make an empty store on purpose (a missing or empty file, a database without the history
    tables). Returns (made, runs, migrated from): on a store already there, nothing is made and its runs are
    counted (an older schema is migrated, as any command does, and its version returned); another program's
    file is a ConfigError, left as it is."""
    with open_store(location, init=True) as store:
        return store.created, store.count_runs(), store.migrated_from


class LogAction(StrEnum):
    """What a log entry of the store records."""

    RELABEL = "relabel"  # runs given other labels (its detail's `labels`: run id -> the labels given)
    MERGE = "merge"  # another copy of the store merged into this one (merge.py)


class HistoryStore:
    dialect = ""

    def __init__(self, location: str):
        self.location = location
        self.name = shown(location)
        self.conn = None
        self._inside = False  # within a transaction: reads do not end it
        self.created = False  # the tables were made when the store was opened
        self.migrated_from: int | None = None  # the older schema version it was brought from when opened

    # -- the dialect's part
    def _begin(self) -> None:
        raise NotImplementedError

    def _has_tables(self) -> bool:
        raise NotImplementedError

    def _begin_read(self) -> None:
        raise NotImplementedError

    def _sql(self, text: str) -> str:
        return text

    def _problem(self, exc: Exception, doing: str) -> ConfigError:
        return ConfigError(f"history store {self.name}: {doing} failed: {first_line(exc)}")

    # -- shared
    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _execute(self, sql: str, params=()):
        cur = self.conn.cursor()
        cur.execute(self._sql(sql), params)
        return cur

    def _transaction(self, work, doing: str):
        """Run work() in one transaction: committed when it returns, rolled back when anything is raised.
        Within one already (`atomically`), work() joins it."""
        if self._inside:
            return work()
        try:
            self._begin()
            self._inside = True
            try:
                out = work()
            except BaseException:
                self.conn.rollback()
                raise
            finally:
                self._inside = False
            self.conn.commit()
            return out
        except ConfigError:
            raise
        except (sqlite3.Error, psycopg.Error) as exc:
            raise self._problem(exc, doing) from None

    def atomically(self, work, doing: str = "checking the history"):
        """work() with every read and write in one transaction that holds the store's write lock from its
        start (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock): a second writer waits, then sees all
        of it. The gate's analysis and the findings it writes are one such transaction."""
        return self._transaction(work, doing)

    def reading(self, work, doing: str = "reading the store"):
        """work() with its reads in one transaction that writes nothing: one consistent view of a store others
        may be writing (a merge reads its source so)."""
        if self._inside:
            return work()
        try:
            self._begin_read()
            self._inside = True
            try:
                return work()
            finally:
                self._inside = False
                self.conn.rollback()
        except (sqlite3.Error, psycopg.Error) as exc:
            raise self._problem(exc, doing) from None

    def ready(self, create: bool) -> None:
        """Check the schema's version: create the tables (with `create`), migrate an older one, refuse a newer one."""
        self._transaction(lambda: self._ready(create), "opening the store")

    def _ready(self, create: bool) -> None:
        if not self._has_tables():
            if not create:
                raise ConfigError(f"history store {self.name} holds no history yet: add runs first with "
                                  f"`concurbench history add RUN_DIR... --store {self.name}`")
            for statement in create_statements(self.dialect):
                self._execute(statement)
            self._execute("INSERT INTO history_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.created = True
            return
        row = self._execute("SELECT value FROM history_meta WHERE key = 'schema_version'").fetchone()
        if row is None or not str(row[0]).isdigit():
            raise ConfigError(f"history store {self.name} is damaged: it has the history's tables but no schema version "
                              f"in history_meta, so nothing can say how to read it; nothing was written (restore the "
                              f"store from a copy, such as the branch or artifact the nightly job keeps)")
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise ConfigError(f"history store {self.name} has schema version {version}, newer than this concurbench "
                              f"reads (up to {SCHEMA_VERSION}): upgrade concurbench (pip install -U concurbench)")
        for step in range(version, SCHEMA_VERSION):
            for statement in migration_statements(self.dialect, step):
                self._execute(statement)
            if step in _PYTHON_STEPS:
                _PYTHON_STEPS[step](self._execute)
        if version < SCHEMA_VERSION:
            self._execute("UPDATE history_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            self._migrated()
            self.migrated_from = version

    def _migrated(self) -> None:
        """A check of the migrated tables before the migration commits (the dialect's)."""

    def schema_version(self) -> int:
        row = self._execute("SELECT value FROM history_meta WHERE key = 'schema_version'").fetchone()
        self.conn.rollback()
        return int(row[0])

    def add(self, record: RunRecord, points: list[PointRecord], added: str | None = None) -> bool:
        """Add one run with its points in one transaction: True when added, False when it was there already.
        `added`: when it first went into a store (a merge keeps the other copy's; now by default)."""
        return self._transaction(lambda: self._add(record, points, added), f"adding run {record.run_id}")

    def _add(self, record: RunRecord, points: list[PointRecord], added: str | None = None) -> bool:
        if self._known(record):
            return False
        values = [_column(record, c) for c in _RUN_COLUMNS[:-1]] + [added or datetime.now(timezone.utc).isoformat()]
        marks = ", ".join("?" * len(_RUN_COLUMNS))
        row = self._execute(f"INSERT INTO history_runs ({', '.join(_RUN_COLUMNS)}) VALUES ({marks}) "
                            f"ON CONFLICT (run_id) DO NOTHING RETURNING id", values).fetchone()
        if row is None:  # another writer added the same run id meanwhile
            if self._known(record):
                return False
            raise ConfigError(f"history store {self.name}: run {record.run_id} could not be added")
        run = int(row[0])
        keys = sorted({p.key for p in points})
        self._executemany("INSERT INTO history_series (scenario, variant, pool, clients, point, server, metric) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", keys)
        # a claim's series keeps the form of its latest run (an `id:` may name a check rewritten since)
        self._executemany("UPDATE history_series SET form = ? WHERE scenario = ? AND variant = ? AND pool = ? AND "
                          "clients = ? AND point = ? AND server = ? AND metric = ?",
                          [(_form_text(k.metric), *k) for k in keys if _form_text(k.metric) is not None])
        ids = {}
        for sid, *key in self._execute("SELECT id, scenario, variant, pool, clients, point, server, metric "
                                       "FROM history_series WHERE scenario = ?", (record.scenario,)).fetchall():
            ids[SeriesKey(*key)] = int(sid)
        self._executemany(f"INSERT INTO history_points (run, series, {', '.join(_POINT_COLUMNS)}) "
                          f"VALUES ({', '.join('?' * (len(_POINT_COLUMNS) + 2))})",
                          [(run, ids[p.key], p.status, p.mean, p.se, p.df, p.low, p.high, p.n,
                            json.dumps(list(p.values)), p.count, p.exposure) for p in points])
        return True

    def _known(self, record: RunRecord) -> bool:
        row = self._execute("SELECT digest FROM history_runs WHERE run_id = ?", (record.run_id,)).fetchone()
        if row is None:
            return False
        if row[0] != record.digest:
            raise ConfigError(f"history store {self.name} already holds a different run named {record.run_id} "
                              f"(its files differ from the one given): run ids are run directory names, so "
                              f"rename the directory to add both")
        return True

    def _executemany(self, sql: str, rows: list) -> None:
        if rows:
            self.conn.cursor().executemany(self._sql(sql), rows)

    def runs(self, scenario: str | None = None) -> list[StoredRun]:
        where, params = ("WHERE scenario = ?", (scenario,)) if scenario else ("", ())
        rows = self._read(f"SELECT id, {', '.join(_RUN_COLUMNS)} FROM history_runs {where} ORDER BY started, id",
                          params, "reading runs")
        return [StoredRun(int(r[0]), _record(r[1:]), r[-1]) for r in rows]

    def count_runs(self) -> int:
        return int(self._read("SELECT count(*) FROM history_runs", (), "counting runs")[0][0])

    def run_points(self, runs: dict[int, str]) -> dict[str, list[PointRecord]]:
        """The points of these runs (row id -> run id) as records, by run id."""
        out: dict[str, list[PointRecord]] = {run_id: [] for run_id in runs.values()}
        ids = sorted(runs)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            columns = ", ".join("p." + c for c in _POINT_COLUMNS)
            rows = self._read(f"SELECT p.run, {_SERIES_COLUMNS}, "
                              f"{columns} FROM history_points p JOIN history_series s ON s.id = p.series "
                              f"WHERE p.run IN ({', '.join('?' * len(chunk))})", chunk, "reading points")
            for run, *key, status, mean, se, df, low, high, n, vals, count, exposure in rows:
                out[runs[int(run)]].append(PointRecord(
                    runs[int(run)], _series_key(key), _status(status), mean, se, df, low, high, int(n),
                    tuple(json.loads(vals)), count, exposure))
        return out

    def series(self, scenario: str | None = None) -> dict[int, SeriesKey]:
        where, params = ("WHERE scenario = ?", (scenario,)) if scenario else ("", ())
        rows = self._read(f"SELECT s.id, {_SERIES_COLUMNS} FROM history_series s {where}", params, "reading series")
        return {int(r[0]): _series_key(r[1:]) for r in rows}

    def points(self, series: list[int], *, values: bool = True,
               scenario: str | None = None) -> dict[int, list[StoredPoint]]:
        """The points of these series (of `scenario`, when given), by series id (`vals` None without `values`)."""
        columns = (f"p.series, p.run, p.status, p.mean, p.se, p.df, p.low, p.high, p.n, "
                   f"{'p.vals' if values else 'NULL'}, p.count, p.exposure")
        out: dict[int, list[StoredPoint]] = {s: [] for s in series}
        if len(series) >= SCAN_SHARE * max(1, self._count_series(scenario)):  # most of them: one scan is faster
            where, params = ("JOIN history_series s ON s.id = p.series WHERE s.scenario = ?", (scenario,)) \
                if scenario else ("", ())
            for row in self._read(f"SELECT {columns} FROM history_points p {where}", params, "reading points"):
                bucket = out.get(row[0])
                if bucket is not None:
                    bucket.append(_stored_point(row))
            return out
        for start in range(0, len(series), 500):
            chunk = series[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self._read(f"SELECT {columns} FROM history_points p WHERE p.series IN ({marks})", chunk,
                                  "reading points"):
                out[row[0]].append(_stored_point(row))
        return out

    # -- findings and expectations
    def findings(self, scenario: str | None = None) -> list[Finding]:
        """Every finding (of one scenario), oldest first."""
        where, params = ("WHERE scenario = ?", (scenario,)) if scenario else ("", ())
        rows = self._read(f"SELECT id, {', '.join(_FINDING_COLUMNS)} FROM history_findings {where} ORDER BY id",
                          params, "reading findings")
        return [_finding(r) for r in rows]

    def finding(self, number: int) -> Finding | None:
        rows = self._read(f"SELECT id, {', '.join(_FINDING_COLUMNS)} FROM history_findings WHERE id = ?", (number,),
                          "reading a finding")
        return _finding(rows[0]) if rows else None

    def save_findings(self, new: list[Finding], changed: list[Finding]) -> list[Finding]:
        """In one transaction: add the new findings, and write the state of the changed ones. Returns the new
        ones with their ids."""
        return self._transaction(lambda: self._save_findings(new, changed), "writing findings")

    def _save_findings(self, new: list[Finding], changed: list[Finding]) -> list[Finding]:
        out = []
        marks = ", ".join("?" * len(_FINDING_COLUMNS))
        for f in new:
            row = self._execute(f"INSERT INTO history_findings ({', '.join(_FINDING_COLUMNS)}) VALUES ({marks}) "
                                f"RETURNING id", _finding_row(f)).fetchone()
            out.append(_with_id(f, int(row[0])))
        for f in changed:
            self._execute(f"UPDATE history_findings SET {', '.join(c + ' = ?' for c in _ACTED_COLUMNS)} WHERE id = ?",
                          (*[_finding_value(f, c) for c in _ACTED_COLUMNS], f.id))
        return out

    def expectations(self) -> list[Expectation]:
        rows = self._read("SELECT id, commit_id, release, reason, added, lapsed FROM history_expectations ORDER BY id",
                          (), "reading expectations")
        return [Expectation(int(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def keep_expectations(self, new: list[Expectation], changed: list[Expectation]) -> None:
        """In one transaction: add these expectations as they are (when added, and lapsed), and write the reason
        and lapse of the changed ones."""
        def work():
            self._executemany("INSERT INTO history_expectations (commit_id, release, reason, added, lapsed) "
                              "VALUES (?, ?, ?, ?, ?)",
                              [(e.commit, e.release, e.reason, e.added, e.lapsed) for e in new])
            self._executemany("UPDATE history_expectations SET reason = ?, lapsed = ? WHERE id = ?",
                              [(e.reason, e.lapsed, e.id) for e in changed])
        self._transaction(work, "writing expectations")

    def lapse(self, expectations: list[Expectation]) -> None:
        """Keep when each of these expectations' windows lapsed."""
        self._transaction(lambda: self._executemany("UPDATE history_expectations SET lapsed = ? WHERE id = ?",
                                                    [(e.lapsed, e.id) for e in expectations]), "writing expectations")

    # -- labels and the log
    def relabel(self, runs: list[int], labels: dict[int, dict[str, str]], entry: tuple[str, dict]) -> None:
        """Give these runs (row ids) these labels, and log it, in one transaction. The entry's detail gains
        `labels`, each run's new labels by run id: what a merge replays on another copy of the store."""
        def work():
            self.set_labels({r: labels[r] for r in runs})
            ids = {int(r[0]): r[1] for r in self._read("SELECT id, run_id FROM history_runs", (), "reading runs")}
            action, detail = entry
            self._log(action, {**detail, "labels": {ids[r]: labels[r] for r in runs}})
        self._transaction(work, "relabelling runs")

    def set_labels(self, labels: dict[int, dict[str, str]]) -> None:
        """Give runs (row ids) these labels, logging nothing (a merge replays a logged relabel so)."""
        self._transaction(lambda: self._executemany("UPDATE history_runs SET labels = ? WHERE id = ?", [
            (json.dumps(value, sort_keys=True), run) for run, value in labels.items()]), "relabelling runs")

    def log(self, action: str, detail: dict, at: str | None = None) -> None:
        """Keep a log entry (`at`: when it was done, now by default; a merge keeps the other copy's)."""
        self._transaction(lambda: self._log(action, detail, at), "writing the log")

    def _log(self, action: str, detail: dict, at: str | None = None) -> None:
        self._execute("INSERT INTO history_log (at, action, detail) VALUES (?, ?, ?)",
                      (at or datetime.now(timezone.utc).isoformat(timespec="seconds"), action,
                       json.dumps(detail, sort_keys=True)))

    def logs(self) -> list[LogEntry]:
        rows = self._read("SELECT id, at, action, detail FROM history_log ORDER BY id", (), "reading the log")
        return [LogEntry(int(r[0]), r[1], r[2], json.loads(r[3])) for r in rows]

    def expect(self, expectation: Expectation, acknowledged: list[Finding]) -> None:
        """Keep an announced change, and acknowledge the findings it covers, in one transaction."""
        def work():
            self._execute("INSERT INTO history_expectations (commit_id, release, reason, added) VALUES (?, ?, ?, ?)",
                          (expectation.commit, expectation.release, expectation.reason, expectation.added))
            self._save_findings([], acknowledged)
        self._transaction(work, "writing an expectation")

    def _count_series(self, scenario: str | None) -> int:
        where, params = ("WHERE scenario = ?", (scenario,)) if scenario else ("", ())
        return int(self._read(f"SELECT count(*) FROM history_series {where}", params, "counting series")[0][0])

    def _read(self, sql: str, params, doing: str) -> list[tuple]:
        try:
            rows = self._execute(sql, params).fetchall()
            if not self._inside:
                self.conn.rollback()  # end the read transaction (PostgreSQL opens one)
            return rows
        except (sqlite3.Error, psycopg.Error) as exc:
            raise self._problem(exc, doing) from None


class _SqliteStore(HistoryStore):
    dialect = "sqlite"

    def __init__(self, location: str, create: bool, init: bool = False):
        super().__init__(location)
        path = Path(location)
        if path.is_dir():
            raise ConfigError(f"history store {location} is a directory: give a file name (history.db) or a "
                              f"postgresql:// URL")
        if not path.exists() and not create:
            raise ConfigError(f"history store {location} does not exist: add runs first with `concurbench history "
                              f"add RUN_DIR... --store {location}`")
        if not path.exists() and create:
            self.created = _made_whole(path)
        if path.is_file() and path.stat().st_size == 0 and not init:
            raise ConfigError(f"history store {location} is an empty file, not a history store (a failed copy or "
                              f"fetch leaves one); nothing was written. Fetch the store again, or, to start a new "
                              f"history in it on purpose, run `concurbench history init {location}` (or pass --create "
                              f"to `history add`)")
        try:
            self.conn = sqlite3.connect(path, timeout=WAIT_S, isolation_level=None)
            self.conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise ConfigError(f"history store {location} cannot be opened: {first_line(exc)}") from None

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def _begin_read(self) -> None:
        self.conn.execute("BEGIN")

    def ready(self, create: bool) -> None:
        """As the store's, with foreign keys off meanwhile: a migration makes a referenced table again (SQLite
        cannot switch them inside a transaction), and checks them itself before it commits."""
        self.conn.execute("PRAGMA foreign_keys = OFF")
        try:
            super().ready(create)
        finally:
            self.conn.execute("PRAGMA foreign_keys = ON")

    def _migrated(self) -> None:
        broken = self._execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise ConfigError(f"history store {self.name}: migrating it would break {len(broken)} reference(s) "
                              f"between its tables; it was left as it was")

    def _has_tables(self) -> bool:
        tables = [r[0] for r in self._execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                              "'sqlite_%' ORDER BY name").fetchall()]
        if "history_meta" in tables:
            return True
        if tables:
            shown_ = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
            raise ConfigError(f"history store {self.name} is an SQLite database of another program (its tables: "
                              f"{shown_}), not a history store; nothing was written: give the history store's path, "
                              f"or a new file name to start one")
        return False

    def _problem(self, exc: Exception, doing: str) -> ConfigError:
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
            return ConfigError(f"history store {self.name} is not an SQLite database (is it the right file?)")
        return super()._problem(exc, doing)

    def _read(self, sql: str, params, doing: str) -> list[tuple]:
        try:
            return self._execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._problem(exc, doing) from None

    def schema_version(self) -> int:
        return int(self._execute("SELECT value FROM history_meta WHERE key = 'schema_version'").fetchone()[0])


class _PostgresStore(HistoryStore):
    dialect = "postgresql"

    def __init__(self, location: str):
        super().__init__(location)
        try:
            self.conn = psycopg.connect(location, autocommit=False, connect_timeout=10,
                                        application_name="concurbench:history")
        except psycopg.Error as exc:
            raise ConfigError(f"history store {self.name}: cannot connect ({_without(first_line(exc), location)}); "
                              f"check the URL, that the server runs and accepts this role, and pass the password "
                              f"in the URL or PGPASSWORD") from None

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def _begin(self) -> None:
        self._execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,))

    def _begin_read(self) -> None:
        self._execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def _has_tables(self) -> bool:
        return self._execute("SELECT to_regclass('history_meta')").fetchone()[0] is not None

    def _problem(self, exc: Exception, doing: str) -> ConfigError:
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return ConfigError(f"history store {self.name}: {doing} failed: the role may not "
                               f"{'create the history tables' if doing == 'opening the store' else 'write them'} "
                               f"({first_line(exc)}); grant it CREATE on the schema (GRANT CREATE ON SCHEMA public "
                               f"TO role) or let a role that may add the first run")
        return ConfigError(f"history store {self.name}: {doing} failed: {_without(first_line(exc), self.location)}")


def _made_whole(path: Path) -> bool:
    """A new SQLite store made beside `path` with its tables, then linked into place in one step: no other
    writer ever sees it empty (an empty file is what a failed fetch leaves, and is refused). When another
    writer made the store first, theirs is kept (False)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in create_statements("sqlite"):
                conn.execute(statement)
            conn.execute("INSERT INTO history_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        finally:
            conn.close()
        try:
            os.link(temp, path)
            return True
        except FileExistsError:
            return False
    except (sqlite3.Error, OSError) as exc:
        raise ConfigError(f"history store {path} cannot be created: {first_line(exc)}") from None
    finally:
        temp.unlink(missing_ok=True)


def _finding_value(f: Finding, column: str):
    """A finding's value for one column of history_findings."""
    k = f.key
    where = {"scenario": k.scenario, "variant": k.variant, "pool": k.pool, "clients": k.clients, "point": k.point,
             "line": k.server, "metric": k.metric, "before_mean": f.before.mean, "before_low": f.before.low,
             "before_high": f.before.high, "before_n": f.before.n}
    if column in where:
        return where[column]
    value = getattr(f, column)
    if column == "confirmation":
        return None if value is None else json.dumps(value, sort_keys=True)
    if column in ("state", "kind", "better"):
        return None if value is None else value.value
    return value


def _finding_row(f: Finding) -> tuple:
    return tuple(_finding_value(f, c) for c in _FINDING_COLUMNS)


def _finding(row: tuple) -> Finding:
    d = dict(zip(_FINDING_COLUMNS, row[1:]))
    key = SeriesKey(d["scenario"], d["variant"], d["pool"], int(d["clients"]), int(d["point"]), d["line"], d["metric"])

    def run(column: str) -> int | None:
        return None if d[column] is None else int(d[column])

    return Finding(int(row[0]), key, int(d["first_run"]), int(d["before_run"]), d["change"], float(d["p"]),
                   Level(float(d["before_mean"]), d["before_low"], d["before_high"], int(d["before_n"])),
                   float(d["after_mean"]), FindingState(d["state"]), d["found"], d["reason"], d["acted"],
                   run("resolved_run"), FindingKind(d["kind"] or FindingKind.CHANGE), run("first_low"),
                   run("first_high"), d["now_change"], run("now_run"), d["min_change"],
                   None if d["better"] is None else Better(d["better"]), d["family"] or "", d["alpha"], d["baseline"],
                   None if d["confirmation"] is None else json.loads(d["confirmation"]))


def _with_id(f: Finding, number: int) -> Finding:
    return replace(f, id=number)


def _column(record: RunRecord, column: str):
    value = getattr(record, "commit" if column == "commit_id" else column)
    if column in _JSON_COLUMNS:
        return json.dumps(value, sort_keys=True)
    if column == "kind":
        return value.value
    if column in ("quick", "dirty"):
        return None if value is None else int(bool(value))
    return value


_STATUSES = {s.value: s for s in RunStatus}  # a stored word -> its member, looked up fast (a show reads many)


def _status(word: str) -> RunStatus:
    """A point's stored status as its member (ValueError for a word no RunStatus has: a damaged store)."""
    return _STATUSES.get(word) or RunStatus(word)


def _stored_point(row) -> StoredPoint:
    """A row of (series, run, status, ...) as the point it stores."""
    return StoredPoint(row[1], _status(row[2]), *row[3:])


def _series_key(row) -> SeriesKey:
    """A series' key from its row (_SERIES_COLUMNS): a claim's metric is its ClaimKey, with the form stored."""
    scenario, variant, pool, clients, point, server, metric, form = row
    if variant == CLAIMS:
        metric = ClaimKey(metric, None if form is None else claim_of(json.loads(form)))
    return SeriesKey(scenario, variant, pool, int(clients), int(point), server, metric)


def _form_text(metric: str) -> str | None:
    """A claim's form as its series stores it (JSON), where its key carries one."""
    if isinstance(metric, ClaimKey) and metric.form is not None:
        return json.dumps(claim_form(metric.form), sort_keys=True)
    return None


def _record(row: tuple) -> RunRecord:
    data = dict(zip(_RUN_COLUMNS, row))
    values = {}
    for f in fields(RunRecord):
        value = data["commit_id" if f.name == "commit" else f.name]
        if f.name in _JSON_COLUMNS:
            value = json.loads(value)
        elif f.name == "kind":
            value = RunKind(value)
        elif f.name in ("quick",):
            value = bool(value)
        elif f.name == "dirty":
            value = None if value is None else bool(value)
        values[f.name] = value
    return RunRecord(**values)


def _without(text: str, url: str) -> str:
    """The text with the URL's password taken out, should a driver ever quote it."""
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        return text
    return text.replace(password, "***") if password else text
